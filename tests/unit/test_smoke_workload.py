"""The in-image smoke workload: its helpers without torch here, the whole file in a container.

The engine tests build (once per machine, cached by tag) a Debian 12 image with the CPU
torch wheel from the local wheelhouse, and a thin image on top holding the current
workload file, tagged by its content hash.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_smoke_workload_integration.py.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest


from accel_images.smoke import workload
from accel_images.smoke.workload import ArgumentError

WORKLOAD_FILE = Path(workload.__file__)
# Debian 12's python3 is 3.11; the wheel is torch 2.13.0+cpu for CPython 3.11.
IMAGE_EXPECTATIONS = ["--expect-torch", "2.13.0", "--expect-python", "3.11", "--expect-build", "cpu"]


# -- arguments ------------------------------------------------------------------------------

def test_parse_args_accepts_the_full_contract():
    args = workload.parse_args(["--expect-torch", "2.13.0", "--expect-python", "3.11",
                                "--expect-build", "cuda:13.0", "--require-accelerator"])
    assert (args.expect_torch, args.expect_python, args.expect_build) == ("2.13.0", "3.11", "cuda:13.0")
    assert args.require_accelerator is True
    assert workload.parse_args([]).require_accelerator is False


@pytest.mark.parametrize("argv, message", [
    (["--expect-torch", "latest"], "--expect-torch 'latest'"),
    (["--expect-python", "3"], "--expect-python '3'"),
    (["--expect-build", "tpu:1.0"], "kind must be one of"),
    (["--expect-build", "cpu:1.0"], "cpu takes no version"),
    (["--expect-build", "cuda"], "needs a version"),
    (["--expect-build", "rocm:seven"], "needs a version"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_parse_args_rejects_bad_values(argv, message):
    with pytest.raises(ArgumentError, match=message):
        workload.parse_args(argv)


@pytest.mark.parametrize("text, expected", [
    ("cpu", ("cpu", None)), ("cuda:13.0", ("cuda", "13.0")), ("rocm:7.2", ("rocm", "7.2")),
    ("xpu:2026.1", ("xpu", "2026.1")), ("gaudi:1.24.1", ("gaudi", "1.24.1")),
])
def test_parse_expected_build(text, expected):
    assert workload.parse_expected_build(text) == expected


# -- versions -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("2.13.0+cpu", (2, 13, 0)), ("7.2.26015-fc0010cf6a", (7, 2, 26015)), ("13.0", (13, 0)),
    ("v1.24.1", (1, 24, 1)), ("", None), (None, None), ("unknown", None),
])
def test_release_tuple(text, expected):
    assert workload.release_tuple(text) == expected


def test_versions_compare_as_integers_not_strings():
    assert not workload.same_release("7.14.0", "7.1", parts=2)
    assert workload.same_release("7.1.1", "7.1", parts=2)
    assert workload.same_release("2.13", "2.13.0")
    assert not workload.same_release(None, "2.13.0")


@pytest.mark.parametrize("actual, expected, problem", [
    ("2.13.0+cpu", "2.13.0", None),
    ("2.13.0", "2.13.0", None),
    ("2.13.0+cu130", "2.13", None),
    ("2.13.1+cpu", "2.13.0", "torch is 2.13.1+cpu, image promises 2.13.0"),
    ("2.13.0", "2.13.0.1", "torch is 2.13.0, image promises 2.13.0.1"),
])
def test_torch_mismatch_ignores_the_local_label(actual, expected, problem):
    assert workload.torch_mismatch(actual, expected) == problem


def test_python_mismatch_compares_major_minor():
    assert workload.python_mismatch("3.11.2", "3.11") is None
    assert workload.python_mismatch("3.1.0", "3.11") == "Python is 3.1.0, image promises 3.11"


@pytest.mark.parametrize("raw, release", [
    ("20250101", "2025.1.1"), ("20260100", "2026.1.0"), ("2026.1", "2026.1"), (None, None), ("", None)])
def test_xpu_release_reads_the_sycl_compiler_version(raw, release):
    assert workload.xpu_release(raw) == release


def build(kind, **values):
    return {"kind": kind, "cuda": None, "hip": None, "xpu": None, "gaudi": None, "local": None, **values}


@pytest.mark.parametrize("reported, kind, stack, problems", [
    (build("cpu", local="cpu"), "cpu", None, []),
    (build("cpu"), "cpu", None, []),
    (build("cuda", cuda="13.0", local="cu130"), "cuda", "13.0", []),
    (build("cuda", cuda="12.6"), "cuda", "13.0", ["torch reports CUDA 12.6, image promises CUDA 13.0"]),
    (build("cuda", cuda="13.0"), "cpu", None, ["torch is built for CUDA 13.0, image promises CPU"]),
    (build("cpu", local="cpu"), "cuda", "13.0", ["torch is built for CPU, image promises CUDA 13.0"]),
    (build("rocm", hip="7.2.26015-fc0010cf6a"), "rocm", "7.2", []),
    (build("rocm", hip="7.2.1"), "rocm", "7.2.4", []),  # the HIP version is per ROCm minor
    (build("rocm", hip="6.4.43483"), "rocm", "7.2", ["torch reports ROCm 6.4.43483, image promises ROCm 7.2"]),
    (build("xpu", xpu="20260100"), "xpu", "2026.1", []),
    (build("xpu", xpu="20250301"), "xpu", "2026.1", ["torch reports XPU 2025.3.1, image promises XPU 2026.1"]),
    (build("xpu"), "xpu", "2026.1", []),  # not reported: recorded, not judged
    (build("gaudi", gaudi="1.24.1.1007"), "gaudi", "1.24.1", []),
    (build("unknown", local="weird"), "cpu", None,
     ["torch is built for an unrecognised stack (+weird), image promises CPU"]),
    (build("gaudi", gaudi="1.23.0.600"), "gaudi", "1.24.1",
     ["torch reports Gaudi 1.23.0.600, image promises Gaudi 1.24.1"]),
])
def test_build_mismatches(reported, kind, stack, problems):
    assert workload.build_mismatches(reported, kind, stack) == problems


# -- backend detection with a stand-in torch -----------------------------------------------------

class FakeAccelerator:
    """torch.cuda / torch.xpu / torch.hpu as far as detection uses them."""

    def __init__(self, count: int = 0, name: str = "", warning: str | None = None) -> None:
        self.count, self.name, self.warning = count, name, warning

    def is_available(self) -> bool:
        if self.warning:
            import warnings
            warnings.warn(self.warning, UserWarning, stacklevel=1)
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def get_device_name(self, index: int) -> str:
        return self.name


def fake_torch(version: str = "2.13.0+cpu", cuda=None, hip=None, xpu=None, *,
               cuda_devices: FakeAccelerator | None = None, xpu_devices: FakeAccelerator | None = None,
               hpu_devices: FakeAccelerator | None = None):
    from types import SimpleNamespace

    torch = SimpleNamespace(__version__=version, version=SimpleNamespace(cuda=cuda, hip=hip, xpu=xpu),
                            cuda=cuda_devices or FakeAccelerator(), xpu=xpu_devices or FakeAccelerator())
    if hpu_devices is not None:
        torch.hpu = hpu_devices
    return torch


GAUDI_PLUGIN = workload.GaudiPlugin("1.24.1.1007", lambda: None)


@pytest.mark.parametrize("torch, gaudi, kind", [
    (fake_torch("2.13.0+cpu"), None, "cpu"),
    (fake_torch("2.13.0+cu130", cuda="13.0"), None, "cuda"),
    (fake_torch("2.13.0+rocm7.2", cuda=None, hip="7.2.26015"), None, "rocm"),
    (fake_torch("2.13.0+xpu", xpu="20250301"), None, "xpu"),
    (fake_torch("2.13.0+xpu"), None, "xpu"),
    (fake_torch("2.11.0"), GAUDI_PLUGIN, "gaudi"),
    (fake_torch("2.13.0+weird"), None, "unknown"),
])
def test_build_info_names_the_build(torch, gaudi, kind):
    info = workload.build_info(torch, gaudi)
    assert info["kind"] == kind
    assert info["gaudi"] == (gaudi.version if gaudi else None)


@pytest.mark.parametrize("torch, gaudi, backend, device_type", [
    (fake_torch(cuda="13.0", cuda_devices=FakeAccelerator(2, "NVIDIA H100")), None, "cuda", "cuda"),
    (fake_torch(hip="7.2.1", cuda_devices=FakeAccelerator(1, "AMD Instinct MI300X")), None, "rocm", "cuda"),
    (fake_torch(xpu_devices=FakeAccelerator(1, "Intel Arc B580")), None, "xpu", "xpu"),
    (fake_torch(hpu_devices=FakeAccelerator(8, "GAUDI3")), GAUDI_PLUGIN, "hpu", "hpu"),
    (fake_torch(hpu_devices=FakeAccelerator(8, "GAUDI3")), None, "cpu", "cpu"),  # no plugin: no hpu
    (fake_torch(cuda="13.0"), None, "cpu", "cpu"),
])
def test_find_device(torch, gaudi, backend, device_type):
    device = workload.find_device(torch, gaudi)
    assert (device.backend, device.type) == (backend, device_type)


def test_accelerator_check_keeps_torchs_warning_about_an_unusable_gpu():
    torch = fake_torch(cuda="13.0", cuda_devices=FakeAccelerator(
        warning="CUDA initialization: The NVIDIA driver on your system is too old (found version 12040)."))
    device, check = workload.accelerator_check(torch, None, required=True)
    assert device.backend == "cpu"
    assert check["ok"] is False
    assert "--require-accelerator" in check["detail"] and "driver on your system is too old" in check["detail"]
    _, relaxed = workload.accelerator_check(torch, None, required=False)
    assert relaxed["ok"] is True and "ran in CPU mode" in relaxed["detail"]


def test_accelerator_check_turns_a_raising_driver_into_a_failed_check():
    class Broken(FakeAccelerator):
        def get_device_name(self, index: int) -> str:
            raise RuntimeError("HIP error: invalid device function")

    torch = fake_torch(hip="7.2.1", cuda_devices=Broken(1))
    device, check = workload.accelerator_check(torch, None, required=False)
    assert device.backend == "cpu"
    assert check["ok"] is False and "invalid device function" in check["detail"]


# -- the report without torch -----------------------------------------------------------------

def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def test_bad_arguments_still_print_the_report(capsys):
    assert workload.main(["--expect-build", "tpu:1"]) == workload.EXIT_BAD_ARGUMENTS
    report = last_json(capsys.readouterr().out)
    assert report["ok"] is False and report["schema"] == 1
    assert [(c["name"], c["ok"]) for c in report["checks"]] == [("arguments", False)]


def test_missing_torch_is_a_failed_check_not_a_traceback(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    assert workload.main(IMAGE_EXPECTATIONS) == workload.EXIT_CHECK_FAILED
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    report = last_json(captured.out)
    assert set(report) == {"schema", "ok", "torch", "python", "build", "backend", "device",
                           "device_name", "device_count", "accelerator_present", "expect", "checks", "nonce"}
    assert report["checks"][0]["name"] == "import_torch" and report["checks"][0]["ok"] is False
    assert report["expect"] == {"torch": "2.13.0", "python": "3.11", "build": "cpu",
                                "require_accelerator": False}


def test_non_finite_numbers_become_null_so_the_line_stays_strict_json(capsys):
    report = workload.empty_report(None)
    report["checks"].append(workload._check("mlp_training", False, "diverged", 1.0,
                                            {"last_loss": float("nan"), "first": float("inf")}))
    workload._emit(report)
    line = capsys.readouterr().out.strip()
    assert json.loads(line)["checks"][0]["numbers"] == {"last_loss": None, "first": None}


# -- the file itself ------------------------------------------------------------------------

def test_workload_uses_only_the_standard_library_and_torch():
    tree = ast.parse(WORKLOAD_FILE.read_text(), feature_version=(3, 10))  # parses as Python 3.10
    # numpy and the companions are what the developer checks exercise, imported inside them
    allowed = set(sys.stdlib_module_names) | {"__future__", "torch", "habana_frameworks", "numpy", *workload.COMPANIONS}
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported - allowed == set()
    top_level = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import)
                 for alias in node.names}
    assert not top_level & {"torch", "habana_frameworks", "numpy", *workload.COMPANIONS}


def test_a_failed_pip_build_is_reported_by_its_cause_not_pips_closing_line():
    said = ("Processing /tmp/x\n  Installing build dependencies: started\n"
            "  ERROR: Could not find a version that satisfies the requirement setuptools>=61 (from versions: none)\n"
            "  ERROR: No matching distribution found for setuptools>=61\n"
            "  error: subprocess-exited-with-error\n\n  \u00d7 pip subprocess to install build dependencies did not run\n")
    assert workload._first_error(said) == "ERROR: No matching distribution found for setuptools>=61"
