"""Launching the smoke workload: the container options and command, with a fake engine, then
once for real on the cached CPU torch image.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_launcher.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_images.vendors import device_options
from accel_images.smoke.integrity import Recorded
from accel_images.smoke.launcher import inventory_of, run_smoke

from test_smoke_workload_integration import smoke_engine, smoke_image  # noqa: F401 - shared engine fixtures
from test_launcher import CPU, CUDA13


@pytest.mark.engine
def test_real_run_on_the_cached_torch_image(smoke_engine, smoke_image):
    info = smoke_engine.inspect_image(smoke_image)
    inventory = inventory_of(smoke_engine, info, CPU.python)   # what a build of it would have recorded
    recorded = Recorded(info.id, inventory.interpreter, inventory.files, info.layers)
    passed = run_smoke(smoke_engine, smoke_image, CPU, recorded=recorded,
                       vendor_options=device_options("cpu", Path("/")),
                       require_accelerator=False, timeout_s=300, mem_limit="2g")
    assert passed.ok, passed.summary()
    assert passed.ran_on == "cpu" and not passed.cpu_fallback
    assert passed.timings["mlp_training"] > 0
    promised_cuda = run_smoke(smoke_engine, smoke_image, CUDA13, recorded=recorded, vendor_options=None,
                              require_accelerator=False)
    assert not promised_cuda.ok
    assert "torch is built for CPU, image promises CUDA 13.0" in promised_cuda.failures
