"""Launching the smoke workload: the container options and command, with a fake engine, then
once for real on the cached CPU torch image.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_launcher_integration.py.
"""

from __future__ import annotations

import json
import posixpath


from accel_images.vendors import device_options
from accel_images.builder.engine import RunResult
from accel_images.smoke.judge import Expectation
from accel_images.smoke.launcher import NO_RECORD, SMOKE_LABEL, Launch, container_options, run_smoke, smoke_command

import fakeimage
from fakeimage import FakeEngine, honest_record

from test_smoke_judge import RECORDED_CPU, cuda_build, report

CPU = Expectation(vendor="cpu", torch="2.13.0", stack=None, python="3.11")
CUDA13 = Expectation(vendor="cuda", torch="2.13.0", stack="13.0", python="3.11")
RECORDED = honest_record()


def answer(data: dict | None, exit_code: int = 0, *, stderr: str = "", timed_out: bool = False) -> FakeEngine:
    """An honest image (tests/fakeimage.py) whose workload prints `data` (with the run's nonce)."""
    stdout = "" if data is None else json.dumps(data) + "\n"
    return FakeEngine(RunResult(exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=timed_out))


LAUNCH = Launch(nonce="ab" * 16, mount_dir="/run/accel-images-smoke-0123456789abcdef")


def test_command_carries_the_expectation():
    assert smoke_command(CUDA13, require_accelerator=True, launch=LAUNCH) == [
        "-I", "/run/accel-images-smoke-0123456789abcdef/smoke.py", "--expect-torch", "2.13.0",
        "--expect-python", "3.11", "--expect-build", "cuda:13.0", "--nonce", "ab" * 16, "--require-accelerator"]
    assert "--require-accelerator" not in smoke_command(CPU, require_accelerator=False, launch=LAUNCH)


def test_cpu_mode_options_are_locked_down():
    assert container_options(None, mem_limit="4g") == {
        "network_disabled": True, "cap_drop": ["ALL"], "cap_add": [],
        "security_opt": ["no-new-privileges"], "mem_limit": "4g", "pids_limit": 1024,
    }


def test_device_needs_are_merged_into_the_safety_settings(tmp_path):
    gaudi = container_options(device_options("gaudi", tmp_path), mem_limit="8g")
    assert gaudi["cap_drop"] == ["ALL"] and gaudi["cap_add"] == ["SYS_NICE"]
    assert gaudi["runtime"] == "habana" and gaudi["ipc_mode"] == "host"
    assert gaudi["network_disabled"] is True
    rocm = container_options(device_options("rocm", tmp_path), mem_limit="8g")
    assert rocm["security_opt"] == ["no-new-privileges", "seccomp=unconfined"]
    assert rocm["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert rocm["cap_add"] == []
    cuda = container_options(device_options("cuda", tmp_path), mem_limit="8g")
    assert cuda["device_requests"][0]["Capabilities"] == [["gpu"]]


def test_run_smoke_passes_expectation_options_timeout_and_labels():
    engine = answer(RECORDED_CPU)
    result = run_smoke(engine, "img:1", CPU, recorded=RECORDED, vendor_options=None, require_accelerator=False,
                       timeout_s=120, mem_limit="2g")
    assert result.ok, result.failures
    (call,) = engine.calls
    assert call["image"] == engine.info.id  # the ID: the name cannot move between the checks and the run
    nonce = call["command"][call["command"].index("--nonce") + 1]
    mount_dir = posixpath.dirname(call["command"][1])
    assert call["command"] == smoke_command(CPU, require_accelerator=False, launch=Launch(nonce, mount_dir))
    assert call["options"]["entrypoint"] == ["/opt/venv/bin/python"]
    assert call["timeout_s"] == 120
    assert call["options"]["mem_limit"] == "2g"
    assert call["labels"][SMOKE_LABEL] == "true"
    assert call["labels"][f"{SMOKE_LABEL}.image"] == "img:1"


def test_the_smoke_result_carries_the_images_facts_read_from_outside():
    """The facts file the build wrote (accel_images/smoke/facts.py) travels with the verdict into the smoke
    record and the catalogue; an image built before facts existed simply has none."""
    engine = answer(RECORDED_CPU)
    result = run_smoke(engine, "img:1", CPU, recorded=RECORDED, vendor_options=None, require_accelerator=False)
    assert result.facts is not None and result.facts.torch == "2.13.0+cpu" and result.facts.backend == "cpu"
    del engine.files[fakeimage.FACTS_PATH]
    again = run_smoke(engine, "img:1", CPU, recorded=RECORDED, vendor_options=None, require_accelerator=False)
    assert again.ok and again.facts is None


def test_gpu_image_without_device_options_runs_in_cpu_mode_and_says_so():
    data = report(torch="2.13.0+cu130", build=cuda_build("13.0"), backend="cpu")
    engine = answer(data)
    result = run_smoke(engine, "img:cuda", CUDA13, recorded=RECORDED, vendor_options=None, require_accelerator=False)
    assert result.ok, result.failures
    assert result.cpu_fallback and result.ran_on == "cpu"
    assert "device_requests" not in engine.calls[0]["options"]


def test_required_accelerator_missing_fails(tmp_path):
    data = report(torch="2.13.0+cu130", build=cuda_build("13.0"), backend="cpu")
    result = run_smoke(answer(data), "img:cuda", CUDA13, recorded=RECORDED, vendor_options=device_options("cuda", tmp_path),
                       require_accelerator=True)
    assert not result.ok
    assert "no cuda accelerator was usable: the workload ran on the CPU" in result.failures


def test_timeout_is_reported_with_its_limit():
    result = run_smoke(answer(None, exit_code=137, timed_out=True), "img:1", CPU, recorded=RECORDED,
                       vendor_options=None, require_accelerator=False, timeout_s=42)
    assert not result.ok
    assert result.failures[0] == "smoke workload timed out after 42 s"


def test_crash_without_json_keeps_the_stderr_tail():
    result = run_smoke(answer(None, exit_code=1, stderr="OSError: libtorch_cpu.so: cannot open"),
                       "img:1", CPU, recorded=RECORDED, vendor_options=None, require_accelerator=False)
    assert not result.ok and result.ran_on is None
    assert "libtorch_cpu.so" in result.failures[0]


def test_an_image_without_a_build_record_is_refused_and_never_run():
    """Not built here (or its record lost): the checks that need no record cannot see byte code or the
    standard library, so the workload does not run at all."""
    engine = answer(RECORDED_CPU)
    result = run_smoke(engine, "img:1", CPU, recorded=None, vendor_options=None, require_accelerator=False)
    assert not result.ok and engine.calls == []
    assert result.failures == (f"refused before the run: {NO_RECORD}",)


def test_run_smoke_says_each_phase_as_it_starts():
    """`smoke IMAGE` ran silent for about half a minute: the checks from outside, then the workload."""
    heard: list[str] = []
    result = run_smoke(answer(RECORDED_CPU), "img:1", CPU, recorded=RECORDED, vendor_options=None, require_accelerator=False,
                       timeout_s=120, status=heard.append)
    assert result.ok, result.failures
    assert heard == ["checking the image's interpreter and torch from outside (file hashes, nothing runs)",
                     "running the workload on the CPU: versions, a matrix product, training steps, a device copy"
                     " (about half a minute on a CPU; at most 120 s)"]
