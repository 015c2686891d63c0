"""`make image` builds one image (the newest the filters match), `make images` all of them.

The Makefile is read with `make -n`: what it would run.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_make_image_integration.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from accel_images.kb import compat
from accel_images.host.choosing import load_expansion
from accel_images.plan.variants import newest_per_vendor, select
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = load_expansion(str(FROZEN_MATRIX), compat.load_kb()).variants


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
