"""`make image` builds one image (the newest the filters match), `make images` all of them.

The Makefile is read with `make -n`: what it would run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from faultproxy import free_port

from accel_images import compat
from accel_images.choosing import load_expansion
from accel_images.variant import newest_per_vendor, select

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = load_expansion(str(ROOT / "matrix.yaml"), compat.load_kb()).variants


def make_n(*args: str) -> str:
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    done = subprocess.run(["make", "-n", *args, "PIP_FIND_LINKS="], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return " ".join(done.stdout.split()) + " "


def test_make_image_asks_for_one_image_and_make_images_for_all() -> None:
    assert " build --vendor auto --newest " in make_n("image")
    assert " --vendor rocm --torch 2.13 --newest " in make_n("image", "VENDOR=rocm", "TORCH=2.13")
    assert "--newest" not in make_n("images") and " build --vendor auto " in make_n("images")


@pytest.mark.parametrize("vendor, tag", [
    ("cpu", "2.15.0-cpu-py3.12-ubuntu24.04"), ("cuda", "2.15.0-cuda13.2-py3.12-ubuntu24.04"),
    ("rocm", "2.14.1-rocm7.14-py3.12-ubuntu24.04"), ("xpu", "2.14.1-xpu2026.1-py3.12-ubuntu24.04"),
    ("gaudi", "2.11.0-gaudi1.24.1-py3.12-ubuntu24.04-devel"),    # Gaudi images come as devel only
])
def test_the_one_image_is_the_newest_runtime_one(vendor: str, tag: str) -> None:
    [one] = newest_per_vendor(select(VARIANTS, {"vendor": vendor}))
    assert one.tag == tag
    devel = newest_per_vendor(select(VARIANTS, {"vendor": vendor, "flavor": "devel"}))
    assert len(devel) == 1 and devel[0].flavor == "devel"


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
    assert len(summary) == 1 and summary[0].startswith("FAILED 4 variants: pull of ")
    assert f"registry {mirror} unreachable (connection refused)" in summary[0]
    assert "--registry-mirror" in summary[0] and "HOST[/PATH]" in result.stdout
