"""The builder-side verdict on smoke output: recorded and hand-written JSON lines."""

from __future__ import annotations

import copy
import json

import pytest

from accel_images.smoke.judge import Expectation, SmokeResult, judge, last_json_object

CPU = Expectation(vendor="cpu", torch="2.13.0", stack=None, python="3.11")
CUDA13 = Expectation(vendor="cuda", torch="2.13.0", stack="13.0", python="3.12")
ROCM72 = Expectation(vendor="rocm", torch="2.13.0", stack="7.2", python="3.12")
XPU = Expectation(vendor="xpu", torch="2.13.0", stack="2025.3", python="3.12")
GAUDI = Expectation(vendor="gaudi", torch="2.11.0", stack="1.24.1", python="3.12")

# Recorded from `smoke.py --expect-torch 2.13.0 --expect-python 3.11 --expect-build cpu`
# in a Debian 12 container with torch 2.13.0+cpu.
RECORDED_CPU = json.loads(
    '{"accelerator_present": false, "backend": "cpu", "build": {"cuda": null, "gaudi": null, '
    '"hip": null, "kind": "cpu", "local": "cpu", "xpu": null}, "checks": [{"detail": "torch '
    '2.13.0+cpu", "ms": 1066.556, "name": "import_torch", "numbers": {}, "ok": true}, {"detail": '
    '"torch 2.13.0+cpu", "ms": null, "name": "torch_version", "numbers": {}, "ok": true}, '
    '{"detail": "Python 3.11.2", "ms": null, "name": "python_version", "numbers": {}, "ok": '
    'true}, {"detail": "torch is built for CPU", "ms": null, "name": "build", "numbers": {}, "ok": '
    'true}, {"detail": "no accelerator usable by torch; ran in CPU mode", "ms": 0.134, "name": '
    '"accelerator", "numbers": {}, "ok": true}, {"detail": "192x192 float32: relative error '
    '2.46e-07 (limit 2e-03)", "ms": 5.037, "name": "matmul_float32", "numbers": '
    '{"relative_error": 2.458889721221465e-07, "size": 192, "tolerance": 0.002}, "ok": true}, '
    '{"detail": "192x192 bfloat16: relative error 1.66e-03 (limit 3e-02)", "ms": 2.874, "name": '
    '"matmul_bfloat16", "numbers": {"relative_error": 0.001656455303923184, "size": 192, '
    '"tolerance": 0.03}, "ok": true}, {"detail": "30 SGD steps: loss 0.9445 -> 0.1161 (must reach'
    ' <= 0.5 x first)", "ms": 8.108, "name": "mlp_training", "numbers": {"first_loss": '
    '0.9445390701293945, "last_loss": 0.11609138548374176, "steps": 30}, "ok": true}, {"detail": '
    '"4.2 MB device->host: 0 wrong elements", "ms": 12.02, "name": "device_to_host", "numbers": '
    '{"copy_ms": 0.006, "megabytes": 4.194304, "wrong_elements": 0}, "ok": true}], "device": '
    '"cpu", "device_count": 1, "device_name": "AMD EPYC", "expect": {"build": "cpu", "python": '
    '"3.11", "require_accelerator": false, "torch": "2.13.0"}, "ok": true, "python": "3.11.2", '
    '"schema": 1, "torch": "2.13.0+cpu"}'
)


def report(*, torch: str = "2.13.0+cpu", python: str = "3.11.2", build: dict | None = None,
           backend: str = "cpu", checks: list | None = None, ok: bool | None = None) -> dict:
    """A schema-1 report derived from the recorded one."""
    data = copy.deepcopy(RECORDED_CPU)
    data.update(torch=torch, python=python, backend=backend,
                device="cpu" if backend == "cpu" else ("hpu" if backend == "hpu" else backend))
    data["build"] = build or data["build"]
    if checks is not None:
        data["checks"] = checks
    data["ok"] = all(c["ok"] for c in data["checks"]) if ok is None else ok
    data["accelerator_present"] = backend != "cpu"
    return data


def cuda_build(version: str) -> dict:
    return {"kind": "cuda", "cuda": version, "hip": None, "xpu": None, "gaudi": None,
            "local": "cu" + version.replace(".", "")}


def line(data: dict) -> str:
    return json.dumps(data)


def test_recorded_cpu_run_passes():
    result = judge(CPU, "some warning\n" + line(RECORDED_CPU) + "\n", 0, require_accelerator=False)
    assert result.ok, result.failures
    assert result.ran_on == "cpu"
    assert result.cpu_fallback is False
    assert result.failures == ()
    assert [check.name for check in result.checks][-4:] == [
        "matmul_float32", "matmul_bfloat16", "mlp_training", "device_to_host"]
    assert result.timings["mlp_training"] == pytest.approx(8.108)
    assert result.raw["torch"] == "2.13.0+cpu"
    assert result.output_tail == ""


def test_cuda13_image_whose_torch_reports_cuda_12_6_fails_naming_both():
    data = report(torch="2.13.0+cu126", python="3.12.3", build=cuda_build("12.6"), backend="cuda")
    result = judge(CUDA13, line(data), 0, require_accelerator=True)
    assert not result.ok
    assert "torch reports CUDA 12.6, image promises CUDA 13.0" in result.failures
    assert "12.6" in result.summary() and "13.0" in result.summary()


def test_matching_cuda_build_on_gpu_passes():
    data = report(torch="2.13.0+cu130", python="3.12.3", build=cuda_build("13.0"), backend="cuda")
    result = judge(CUDA13, line(data), 0, require_accelerator=True)
    assert result.ok, result.failures
    assert result.ran_on == "cuda" and not result.cpu_fallback


def test_cuda_image_on_cpu_host_passes_in_cpu_mode_and_says_so():
    data = report(torch="2.13.0+cu130", python="3.12.3", build=cuda_build("13.0"), backend="cpu")
    result = judge(CUDA13, line(data), 0, require_accelerator=False)
    assert result.ok, result.failures
    assert result.cpu_fallback is True
    assert "CPU mode" in result.summary()


def test_cuda_image_on_cpu_host_fails_when_accelerator_required():
    # The in-image verdict says ok (it was not told to require one): the builder still fails it.
    data = report(torch="2.13.0+cu130", python="3.12.3", build=cuda_build("13.0"), backend="cpu")
    result = judge(CUDA13, line(data), 0, require_accelerator=True)
    assert not result.ok
    assert any("ran on the CPU" in failure for failure in result.failures)


def test_builder_rechecks_torch_version_even_when_image_says_ok():
    data = report(torch="2.12.1+cpu")
    assert data["ok"] is True
    result = judge(CPU, line(data), 0, require_accelerator=False)
    assert result.failures == ("torch is 2.12.1+cpu, image promises 2.13.0",)


def test_in_image_failure_repeating_the_builder_recheck_is_reported_once():
    data = report(torch="2.12.1+cpu")
    data["checks"][1].update(ok=False, detail="torch is 2.12.1+cpu, image promises 2.13.0")
    result = judge(CPU, line(data), 1, require_accelerator=False)
    assert result.failures == ("torch is 2.12.1+cpu, image promises 2.13.0",)


def test_python_minor_must_match():
    result = judge(CPU, line(report(python="3.12.1")), 0, require_accelerator=False)
    assert result.failures == ("Python is 3.12.1, image promises 3.11",)


def test_cpu_image_with_a_cuda_torch_fails():
    result = judge(CPU, line(report(torch="2.13.0+cu130", build=cuda_build("13.0"))), 0,
                   require_accelerator=False)
    assert result.failures == ("torch is built for CUDA 13.0, image promises CPU",)


def test_rocm_hip_version_must_start_with_rocm_major_minor():
    hip = {"kind": "rocm", "cuda": None, "hip": "7.2.26015-fc0010cf6a", "xpu": None, "gaudi": None,
           "local": "rocm7.2"}
    good = judge(ROCM72, line(report(torch="2.13.0+rocm7.2", python="3.12.3", build=hip,
                                     backend="rocm")), 0, require_accelerator=True)
    assert good.ok, good.failures
    assert good.ran_on == "rocm"
    wrong = dict(hip, hip="7.14.0-abc")
    bad = judge(ROCM72, line(report(torch="2.13.0+rocm7.2", python="3.12.3", build=wrong,
                                    backend="rocm")), 0, require_accelerator=True)
    assert bad.failures == ("torch reports ROCm 7.14.0-abc, image promises ROCm 7.2",)


def test_xpu_compares_sycl_compiler_year_and_minor_and_tolerates_missing_version():
    build = {"kind": "xpu", "cuda": None, "hip": None, "xpu": "20250301", "gaudi": None, "local": "xpu"}
    ok = judge(XPU, line(report(torch="2.13.0+xpu", python="3.12.3", build=build, backend="xpu")),
               0, require_accelerator=True)
    assert ok.ok, ok.failures
    older = dict(build, xpu="20250101")
    bad = judge(XPU, line(report(torch="2.13.0+xpu", python="3.12.3", build=older, backend="xpu")),
                0, require_accelerator=True)
    assert bad.failures == ("torch reports XPU 2025.1.1, image promises XPU 2025.3",)
    unknown = dict(build, xpu=None)
    assert judge(XPU, line(report(torch="2.13.0+xpu", python="3.12.3", build=unknown, backend="xpu")),
                 0, require_accelerator=True).ok


def test_gaudi_plugin_release_and_hpu_backend():
    build = {"kind": "gaudi", "cuda": None, "hip": None, "xpu": None, "gaudi": "1.24.1.1007",
             "local": "hpu.1.24.1"}
    data = report(torch="2.11.0+hpu.1.24.1", python="3.12.3", build=build, backend="hpu")
    result = judge(GAUDI, line(data), 0, require_accelerator=True)
    assert result.ok, result.failures
    assert result.ran_on == "hpu"
    older = judge(GAUDI, line(report(torch="2.11.0", python="3.12.3",
                                     build=dict(build, gaudi="1.24.0.900"), backend="hpu")),
                  0, require_accelerator=True)
    assert older.failures == ("torch reports Gaudi 1.24.0.900, image promises Gaudi 1.24.1",)


def test_image_running_on_another_vendors_device_fails():
    data = report(torch="2.13.0+cu130", python="3.12.3", build=cuda_build("13.0"), backend="xpu")
    result = judge(CUDA13, line(data), 0, require_accelerator=False)
    assert result.failures == ("a cuda image ran on xpu",)


def test_failed_check_is_named_with_its_numbers():
    data = report()
    mlp = next(c for c in data["checks"] if c["name"] == "mlp_training")
    mlp.update(ok=False, detail="30 SGD steps: loss 0.9445 -> 0.9001 (must reach <= 0.5 x first)")
    data["ok"] = False
    result = judge(CPU, line(data) + "\n", 1, require_accelerator=False)
    assert result.failures == (
        "check mlp_training failed: 30 SGD steps: loss 0.9445 -> 0.9001 (must reach <= 0.5 x first)",)
    assert not next(c for c in result.checks if c.name == "mlp_training").ok
    assert result.output_tail  # kept for the report because the run failed


@pytest.mark.parametrize("stdout", ["", "Segmentation fault\n", "{not json\n", "[1, 2]\n", "null\n"])
def test_no_json_fails_with_exit_code_and_output_tail(stdout):
    result = judge(CPU, stdout, 139, require_accelerator=False, stderr="ImportError: libcuda.so.1")
    assert not result.ok
    assert result.ran_on is None
    assert len(result.failures) == 1
    assert "no JSON result" in result.failures[0] and "exit code 139" in result.failures[0]
    assert "libcuda.so.1" in result.failures[0]
    assert "libcuda.so.1" in result.output_tail


def test_nonzero_exit_with_all_checks_passing_fails():
    result = judge(CPU, line(RECORDED_CPU), 137, require_accelerator=False)
    assert result.failures == ("smoke workload exited with code 137",)


def test_not_ok_json_without_failed_check_fails():
    result = judge(CPU, line(report(ok=False)), 0, require_accelerator=False)
    assert result.failures == ("smoke workload reports failure without a failed check",)


def test_empty_checks_and_unknown_schema_fail():
    data = report(checks=[])
    data["schema"] = 2
    failures = judge(CPU, line(data), 0, require_accelerator=False).failures
    assert "smoke JSON has schema 2, expected 1" in failures
    assert "smoke JSON lists no checks" in failures


def test_missing_fields_fail_readably():
    data = {"schema": 1, "ok": True, "checks": [{"name": "x", "ok": True}]}
    failures = judge(CPU, line(data), 0, require_accelerator=False).failures
    assert "smoke JSON has no torch version, image promises 2.13.0" in failures
    assert "smoke JSON has no build information" in failures
    assert "smoke JSON does not say which device it ran on" in failures


def test_timeout_is_a_failure_even_with_a_report():
    result = judge(CPU, line(RECORDED_CPU), -1, require_accelerator=False, timed_out_after_s=300)
    assert "smoke workload timed out after 300 s" in result.failures
    assert not result.ok


def test_last_json_object_prefers_the_last_object_line():
    text = '{"schema": 1, "first": true}\nnoise\n{"schema": 1, "second": true}\ntrailing text\n'
    assert last_json_object(text) == {"schema": 1, "second": True}
    assert last_json_object("no json here") is None


def test_results_are_frozen_and_hashable():
    result = judge(CPU, line(RECORDED_CPU), 0, require_accelerator=False)
    assert isinstance(result, SmokeResult)
    with pytest.raises(AttributeError):
        result.ok = False  # type: ignore[misc]
    assert hash(result) == hash(judge(CPU, line(RECORDED_CPU), 0, require_accelerator=False))


def test_expectation_builds_the_workload_arguments():
    assert CUDA13.workload_args() == ["--expect-torch", "2.13.0", "--expect-python", "3.12",
                                      "--expect-build", "cuda:13.0"]
    assert CPU.expect_build() == "cpu"
