"""`make image` builds one image (the newest the filters match), `make images` all of them.

The Makefile is read with `make -n`: what it would run.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_make_image.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from faultproxy import free_port
from test_make_image import ROOT



@pytest.mark.engine
def test_an_unreachable_base_registry_is_one_grouped_line_naming_the_mirror_option(tmp_path: Path) -> None:
    """Every variant fails the same way, as behind a blocked Docker Hub; the table's causes hold the
    hint's `HOST[/PATH]`, which must reach the terminal as text, not as rich markup."""
    mirror = f"127.0.0.1:{free_port()}"
    result = subprocess.run([sys.executable, "-m", "accel_images", "build", "--vendor", "cpu", "--os", "ubuntu24.04",
                             "--torch", "2.14", "--no-smoke", "--registry-mirror", f"docker.io={mirror}", "-q",
                             "--state-dir", str(tmp_path / "state")], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, check=False)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 4, result.stderr
    summary = [line for line in result.stderr.splitlines() if line.startswith("FAILED ")]
    # the first contact is the read of the base's index (one manifest per platform), before any pull
    assert len(summary) == 1 and summary[0].startswith(f"FAILED 4 variants: registry {mirror} unreachable (connection"
                                                       " refused) while reading library/ubuntu:24.04"), summary
    # the mapping that pointed there, not an impossible `--registry-mirror 127.0.0.1:PORT=HOST`
    assert summary[0].endswith(f"(the --registry-mirror docker.io={mirror} points there: start that mirror or correct"
                               " the mapping)"), summary[0]
    assert "HOST[/PATH]" not in result.stderr + result.stdout and "unreachable" in result.stdout


@pytest.mark.engine
@pytest.mark.registry
def test_make_image_on_a_mirrored_machine_answers_in_make_variables(wheelhouse: Path, registry: str) -> None:
    """The mirror holds Debian only: the newest CPU image's base (ubuntu:24.04) is not there, and the way
    out is said as the make line is typed, `OS=debian12`, `REGISTRY_MIRROR=`, never `--os`. With the CI
    wheelhouse too, the first answer is the torch it lacks, found before any pull or build step."""
    def make_image(*variables: str) -> tuple[int, list[str], str]:
        done = subprocess.run(["make", "-s", "-o", ".venv/bin/accel-images", "image", "VENDOR=cpu", *variables],
                              cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
        return done.returncode, [line for line in done.stderr.splitlines() if line.startswith("FAILED ")], done.stderr

    code, failed, said = make_image(f"REGISTRY_MIRROR=docker.io={registry}")
    assert code == 2 and len(failed) == 1 and "not found in mirror" in failed[0], said  # make's status for a recipe
    assert "OS=debian12 (debian:bookworm-slim)" in failed[0] and "drop that REGISTRY_MIRROR=" in failed[0]
    assert "--os" not in said and "--registry-mirror" not in said
    code, failed, said = make_image(f"REGISTRY_MIRROR=docker.io={registry}", f"WHEELHOUSE={wheelhouse}")
    assert code == 2 and len(failed) == 1, said
    assert f"WHEELHOUSE: wheelhouse {wheelhouse} has no torch 2.15.0+cpu for Python 3.12 (it has 2.13.0+cpu for" \
           " cp311)" in failed[0] and "(TORCH=…, PYTHON=…)" in failed[0], said
    assert "--pip-find-links" not in said and "--torch" not in said
