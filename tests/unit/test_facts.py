"""The in-image facts script (accel_images/smoke/facts.py), its schema, and the value that reads it.

The script runs inside every image with the image's torch; here it is handed fake torch modules
that answer as each vendor's build does (or lacks the API), and the real CUDA wheel's answer is a
recorded fixture: tests/data/facts/torch-2.15.0-cu132-x86_64.json is the script's output for torch
2.15.0 installed from the package index (tests/integration/test_facts_wheel.py makes it again).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from accel_images.model.imagefacts import SCHEMA_FILE, FactsError, ImageFacts
from accel_images.smoke import facts as script

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"
CUDA_215 = DATA / "torch-2.15.0-cu132-x86_64.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text())
DISTS = {"numpy": "2.4.6", "pip": "24.0", "torch": "2.15.0+cu132", "torchvision": "0.29.2", "typing-extensions": "4.16.0"}


def fake_torch(version: str, *, cuda: str | None = None, hip: str | None = None, xpu: str | None = None,
               flags: str | None = None, xpu_archs: list[str] | None = None, cudnn: int | None = None,
               nccl: Any = None) -> SimpleNamespace:
    """A torch module as far as the script reads it; an API it lacks raises AttributeError."""
    torch_c = SimpleNamespace()
    if flags is not None:
        torch_c._cuda_getArchFlags = lambda: flags
    return SimpleNamespace(
        __version__=version, version=SimpleNamespace(cuda=cuda, hip=hip, xpu=xpu), _C=torch_c,
        backends=SimpleNamespace(cudnn=SimpleNamespace(version=lambda: cudnn)),
        cuda=SimpleNamespace(nccl=SimpleNamespace(version=lambda: nccl), get_arch_list=lambda: []),
        xpu=SimpleNamespace(get_arch_list=lambda: xpu_archs or []))


def valid(document: dict[str, Any]) -> dict[str, Any]:
    jsonschema.validate(document, SCHEMA)
    return document


def test_the_recorded_cuda_wheel_facts_are_schema_1_with_its_measured_values() -> None:
    # measured from torch 2.15.0 of the package index: _cuda_getArchFlags() "sm_75 ... sm_120" (no
    # compute_XX: SASS only, cuobjdump finds no PTX), cudnn.version() 92600, nccl.version() (2, 30, 7),
    # cuda-toolkit 13.2.2 installed by its Requires-Dist
    document = valid(json.loads(CUDA_215.read_text()))
    assert document["torch"] == {"version": "2.15.0+cu132", "public": "2.15.0", "local": "cu132"}
    assert document["backend"] == "cuda"
    assert document["archs"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"] and document["ptx"] == []
    assert {k: v for k, v in document["toolkit"].items() if v} == {"cuda": "13.2", "cudnn": "9.26.0", "nccl": "2.30.7"}
    assert document["distributions"]["cuda-toolkit"] == "13.2.2"
    assert document["companions"] == {"numpy": "2.4.6", "torchaudio": "2.11.1", "torchvision": "0.29.2"}


def test_a_cuda_build_splits_sass_from_ptx() -> None:
    torch = fake_torch("2.9.0+cu126", cuda="12.6", flags="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90 compute_90",
                       cudnn=91002, nccl=(2, 27, 3))
    document = valid(script.collect(torch, DISTS))
    assert document["archs"] == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert document["ptx"] == ["compute_90"]
    assert document["toolkit"] == {"cuda": "12.6", "hip": None, "xpu": None, "cudnn": "9.10.2", "nccl": "2.27.3",
                                   "gaudi": None}


def test_a_rocm_build_reports_its_gfx_targets_and_no_cudnn() -> None:
    torch = fake_torch("2.13.0+rocm7.2", hip="7.2.41134-0", flags="gfx90a gfx942 gfx1100", nccl=(2, 26, 6))
    document = valid(script.collect(torch, DISTS))
    assert (document["backend"], document["archs"], document["ptx"]) == ("rocm", ["gfx90a", "gfx942", "gfx1100"], [])
    assert document["toolkit"]["hip"] == "7.2.41134-0" and document["toolkit"]["cudnn"] is None


def test_an_xpu_build_reports_torch_xpu_get_arch_list() -> None:
    # torch/xpu/__init__.py get_arch_list(): "if not _is_compiled(): return []", so no device is needed
    torch = fake_torch("2.14.0+xpu", xpu="20260100", xpu_archs=["pvc", "bmg", "dg2", "arl-h", "mtl-h"])
    document = valid(script.collect(torch, DISTS))
    assert (document["backend"], document["archs"]) == ("xpu", ["pvc", "bmg", "dg2", "arl-h", "mtl-h"])
    assert document["toolkit"]["xpu"] == "20260100"


def test_a_gaudi_build_is_known_by_its_plugin_distribution() -> None:
    torch = fake_torch("2.11.0+hpu.synapse.v1.24.1")
    document = valid(script.collect(torch, {**DISTS, "habana-torch-plugin": "1.24.1.482"}))
    assert (document["backend"], document["archs"], document["toolkit"]["gaudi"]) == ("hpu", None, "1.24.1.482")


def test_a_cpu_build_has_no_targets_and_no_toolkit() -> None:
    document = valid(script.collect(fake_torch("2.13.0+cpu"), DISTS))
    assert (document["backend"], document["archs"], document["ptx"]) == ("cpu", [], [])
    assert set(document["toolkit"].values()) == {None}
    assert document["torch"] == {"version": "2.13.0+cpu", "public": "2.13.0", "local": "cpu"}
    assert document["companions"] == {"numpy": "2.4.6", "torchvision": "0.29.2"}


def test_a_missing_api_is_null_never_a_failed_build() -> None:
    torch = SimpleNamespace(__version__="2.0.1", version=SimpleNamespace(cuda="11.8"), _C=SimpleNamespace())
    document = valid(script.collect(torch, DISTS))
    assert document["backend"] == "cuda" and document["archs"] is None and document["ptx"] is None
    assert document["toolkit"]["cudnn"] is None and document["toolkit"]["nccl"] is None
    assert document["torch"]["local"] is None


@pytest.mark.parametrize(("number", "text"), [(92600, "9.26.0"), (91002, "9.10.2"), (8907, "8.9.7"), (None, None)])
def test_cudnn_versions_read_as_cudnn_numbers_them(number: int | None, text: str | None) -> None:
    # cudnn_version.h: CUDNN_VERSION = MAJOR * 10000 + MINOR * 100 + PATCH from cuDNN 9, * 1000 before
    assert script.cudnn_version(number) == text


def test_the_constraints_pin_every_distribution_as_installed() -> None:
    assert script.constraints(DISTS) == ("numpy==2.4.6\npip==24.0\ntorch==2.15.0+cu132\ntorchvision==0.29.2\n"
                                         "typing-extensions==4.16.0\n")


def test_a_torch_that_does_not_import_fails_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise OSError('libtorch_cpu.so: cannot open shared object')\n")
    run = subprocess.run([sys.executable, script.__file__, "--out", str(tmp_path / "facts.json")],
                         env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert run.returncode == script.EXIT_NO_TORCH
    assert run.stderr.strip() == "facts: torch does not import: OSError: libtorch_cpu.so: cannot open shared object"
    assert not (tmp_path / "facts.json").exists()


def test_the_reader_refuses_a_file_that_is_not_schema_1() -> None:
    document = json.loads(CUDA_215.read_text())
    with pytest.raises(FactsError, match="schema 2, this accel-images reads schema 1"):
        ImageFacts.from_document({**document, "schema": 2})
    with pytest.raises(FactsError, match=r"^backend: 'gpu' is not one of"):
        ImageFacts.from_document({**document, "backend": "gpu"})
    with pytest.raises(FactsError, match=r"^not JSON"):
        ImageFacts.from_bytes(b"{")


def test_the_compact_form_travels_and_reads_back() -> None:
    facts = ImageFacts.from_bytes(CUDA_215.read_bytes())
    compact = facts.compact()
    assert compact == {"torch": "2.15.0+cu132", "python": "3.11.7", "backend": "cuda", "machine": "x86_64",
                       "toolkit": {"cuda": "13.2", "cudnn": "9.26.0", "nccl": "2.30.7"},
                       "archs": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], "ptx": [],
                       "companions": {"numpy": "2.4.6", "torchaudio": "2.11.1", "torchvision": "0.29.2"}}
    again = ImageFacts.from_compact(json.loads(json.dumps(compact)))
    assert again is not None and again.compact() == compact
    assert ImageFacts.from_compact({"torch": "2.15.0"}) is None


# ---- the CUDA forward-compatibility library ---------------------------------------------------------
# nvidia/cuda's bases install cuda-compat-X-Y "if available": /usr/local/cuda-X.Y/compat/libcuda.so.<driver>,
# reached through the /usr/local/cuda link (NVIDIA's cuda-compat layout; the container toolkit's
# enable-cuda-compat hook globs /usr/local/cuda/compat/libcuda.so.*.* and takes the version from the name:
# NVIDIA/nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat/cudacompat.go).

def compat_tree(root: Path, *versions: str) -> Path:
    """/usr/local/cuda -> cuda-13.2, its compat/ holding libcuda.so.<version> and the soname links."""
    compat = root / "usr" / "local" / "cuda-13.2" / "compat"
    compat.mkdir(parents=True)
    (root / "usr" / "local" / "cuda").symlink_to("cuda-13.2")
    for version in versions:
        (compat / f"libcuda.so.{version}").write_bytes(b"\x7fELF")
    if versions:
        (compat / "libcuda.so.1").symlink_to(f"libcuda.so.{versions[0]}")
        (compat / "libcuda.so").symlink_to("libcuda.so.1")
    return root


def test_the_compat_driver_is_the_version_of_the_libcuda_under_usr_local_cuda_compat(tmp_path: Path) -> None:
    root = compat_tree(tmp_path, "595.58.03")
    assert script.cuda_compat(str(root)) == "595.58.03"
    torch = fake_torch("2.15.0+cu132", cuda="13.2", flags="sm_90")
    assert valid(script.collect(torch, DISTS, root=str(root)))["cuda_compat"] == "595.58.03"


def test_no_compat_library_is_null(tmp_path: Path) -> None:
    assert script.cuda_compat(str(tmp_path)) is None
    assert script.cuda_compat(str(compat_tree(tmp_path / "empty"))) is None
    assert valid(script.collect(fake_torch("2.13.0+cpu"), DISTS, root=str(tmp_path)))["cuda_compat"] is None


def test_two_compat_libraries_are_none_as_the_toolkit_takes_none(tmp_path: Path) -> None:
    # the hook warns "Unexpected number of CUDA compat libraries" and adds nothing
    assert script.cuda_compat(str(compat_tree(tmp_path, "595.58.03", "590.48.01"))) is None


def test_facts_without_the_compat_field_still_read() -> None:
    """Files written before the field existed parse: unknown (None) is not the same as measured absent ('')."""
    document = json.loads(CUDA_215.read_text())
    assert "cuda_compat" not in document
    assert ImageFacts.from_document(document).cuda_compat is None
    assert ImageFacts.from_document({**document, "cuda_compat": None}).cuda_compat == ""
    assert ImageFacts.from_document({**document, "cuda_compat": "595.58.03"}).cuda_compat == "595.58.03"
    with pytest.raises(FactsError, match="cuda_compat"):
        ImageFacts.from_document({**document, "cuda_compat": "595; id"})


# ---- the network: what training across nodes can use ---------------------------------------------------

def verbs_tree(root: Path, real: str | None = "libibverbs.so.1.14.44.0") -> Path:
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    if real:
        (lib / real).write_bytes(b"")
        (lib / script.VERBS_SONAME).symlink_to(real)
    return root


ANSWERS = {"ucx_info": "# Version 1.13.1\n# Git branch '<unknown>', revision 0000000", "mpirun": "mpirun (Open MPI) 4.1.4"}
"""What Debian 12's ucx-utils and openmpi-bin print first (run in a container of the Debian 12 stand-in)."""


def test_the_network_is_read_from_the_verbs_library_ucx_info_and_mpirun(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script, "first_line", lambda argv: ANSWERS[argv[0]].splitlines()[0])
    torch = fake_torch("2.15.0+cu132", cuda="13.2", flags="sm_90", nccl=(2, 30, 7))
    facts = valid(script.collect(torch, DISTS, root=str(verbs_tree(tmp_path))))
    assert facts["network"] == {"ibverbs": "1.14.44.0", "ucx": "1.13.1", "mpi": "Open MPI 4.1.4",
                                "collective": {"name": "nccl", "version": "2.30.7"}}


def test_an_image_without_the_stack_has_a_network_of_nulls_and_gloo_on_the_cpu(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script, "first_line", lambda argv: "")
    facts = valid(script.collect(fake_torch("2.13.0+cpu"), DISTS, root=str(tmp_path)))
    assert facts["network"] == {"ibverbs": None, "ucx": None, "mpi": None,
                                "collective": {"name": "gloo", "version": None}}


@pytest.mark.parametrize(("line", "expected"), [
    ("mpirun (Open MPI) 4.1.4", "Open MPI 4.1.4"),
    ("mpirun (Open MPI) 5.0.7rc1", "Open MPI 5.0.7"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.14 Build 20241121 (id: e7829d6)", "Intel(R) MPI Library 2021.14"),
    ("HYDRA build details:", None),
    ("", None),
])
def test_the_mpi_is_named_from_the_first_line_of_mpirun_version(line: str, expected: str | None) -> None:
    assert script.mpi_version(line) == expected


def test_a_rocm_build_names_rccl_with_the_version_torch_reports() -> None:
    torch = fake_torch("2.15.0+rocm7.2", hip="7.2.1", flags="gfx942", nccl=(2, 27, 7))
    network = script.network("rocm", script.toolkit(torch, "rocm", DISTS))
    assert network["collective"] == {"name": "rccl", "version": "2.27.7"}


def test_a_verbs_library_without_a_versioned_file_is_present_with_its_soname_only(tmp_path: Path) -> None:
    lib = tmp_path / "usr" / "lib64"
    lib.mkdir(parents=True)
    (lib / script.VERBS_SONAME).write_bytes(b"")
    assert script.verbs_library(str(tmp_path)) == "1"
    assert script.verbs_library(str(tmp_path / "nowhere")) is None


def test_a_tool_not_on_path_is_an_empty_answer_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert script.first_line(["mpirun", "--version"]) == ""


def test_the_network_travels_with_the_image_and_its_summary_names_it() -> None:
    document = json.loads(CUDA_215.read_text())
    network = {"ibverbs": "1.14.44.0", "ucx": "1.13.1", "mpi": "Open MPI 4.1.4",
               "collective": {"name": "nccl", "version": "2.30.7"}}
    facts = ImageFacts.from_document({**document, "network": network})
    assert facts.network == network
    travelled = ImageFacts.from_compact(facts.compact())
    assert travelled is not None and travelled.network == network
    assert facts.summary().endswith(" · RDMA verbs 1.14.44.0 · UCX 1.13.1 · Open MPI 4.1.4")
    old = ImageFacts.from_document(document)
    assert old.network is None and "network" not in old.compact() and "RDMA" not in old.summary()
    with pytest.raises(FactsError, match="network"):
        ImageFacts.from_document({**document, "network": {**network, "ucx": "1.13; id"}})


def test_the_facts_name_the_collective_library_each_vendor_declares() -> None:
    """facts.py runs in the image with the standard library alone, so it keeps its own table of library names
    by the backend torch reports; each must be the library the vendor declares (`Vendor.collective.library`,
    what the facts claims hold the image to: rccl, not torch's backend name nccl)."""
    from accel_images import vendors
    declared = {vendor.smoke_backend: vendor.collective.library for vendor in vendors.registry().values()
                if vendor.collective is not None}
    assert declared == script.COLLECTIVES
