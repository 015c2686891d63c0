"""recommend and pull: recorded hosts (tests/data/host, sources in its README) against the real matrix.

Hosts come from host.detect_host fed with the recorded tool outputs, the way tests/unit/test_host.py does;
a few rule tests build a HostInfo directly where no recording shows the case (a Gaudi 2 host on a
release newer than the matrix, RDNA2 consumer GPUs).

Here: the tests that need no engine or registry; those that do are in tests/integration/test_recommend_integration.py.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from accel_images.kb import compat
from accel_images.builder import engine
from accel_images.cli import fanout as cli_fanout, options
from accel_images.host.detect import HostInfo, detect_host
from accel_images.host.recommend import (Recommendation, default_vendor, describe_host, docker_run_line, judge,
                                          recommend)
from accel_images.model.reference import image_ref
from accel_images.plan.variants import select
from fakes import PullRecorder
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data" / "host"

NVIDIA_QUERY = ("nvidia-smi", "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader")
NVIDIA_TABLE = ("nvidia-smi",)
ROCMINFO = ("rocminfo",)
AMD_SMI_VERSION = ("amd-smi", "version")
SYCL_LS = ("sycl-ls",)
HL_SMI = ("hl-smi",)
HL_SMI_QUERY = ("hl-smi", "-Q", "name,driver_version", "-f", "csv,noheader")
NVIDIA_FULL = ("nvidia-smi", "-q")


def recorded(name: str) -> str:
    return (DATA / name).read_text()


def fake_tools(answers: dict[tuple[str, ...], str]):
    """A runner for detect_host: recorded answers; any other command behaves like a missing tool."""
    return lambda argv: answers.get(tuple(argv))


def machine(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def host_from(tmp_path: Path, answers: dict[tuple[str, ...], str], files: dict[str, str] | None = None) -> HostInfo:
    return detect_host(fake_tools(answers), machine(tmp_path, files or {}))


@pytest.fixture(scope="module")
def expansion():
    return options.load_expansion(str(FROZEN_MATRIX))


@pytest.fixture(scope="module")
def kb():
    return compat.load_kb()


def choose(host: HostInfo, expansion, kb, root: Path, **kwargs) -> Recommendation:
    """What `accel-images recommend` does: the host's vendor's variants from the real matrix."""
    variants = select(expansion.variants, {"vendor": host.vendor, **kwargs.pop("filters", {})})
    return recommend(host, variants, kb, image=expansion.image, dev_root=root, **kwargs)


def text(rec: Recommendation) -> str:
    return "\n".join((*rec.reasons, *rec.warnings))


# ---------------------------------------------------------------------------------------------
# NVIDIA
# ---------------------------------------------------------------------------------------------

def test_h100_on_driver_535_gets_cuda_12_6_and_why_not_13(tmp_path, expansion, kb):
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-h100-535.txt")})
    assert (host.driver_version, host.stack_version) == ("535.129.03", "12.2")
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant is not None and rec.variant.tag == "2.14.1-cuda12.6-py3.12-ubuntu24.04"
    assert ("2.14.1-cuda13.2-py3.12-ubuntu24.04: host driver 535.129.03 is below the CUDA 13.x floor 580"
            " (minor-version compatibility)") in rec.reasons
    assert any(r.startswith("2.14.1-cuda13.0-py3.12-ubuntu24.04: host driver 535.129.03 is below") for r in rec.reasons)
    # 535 is above the 12.x floor but below the 12.6.3 toolkit driver: it runs, with the MVC caveat
    assert any("toolkit driver 560.35.05" in w and "torch.compile" in w for w in rec.warnings)
    # the images require only cuda>=12.0 of the driver (NVIDIA_REQUIRE_CUDA), so 12.2 is no caveat
    assert not any("NVIDIA_REQUIRE_CUDA" in w for w in rec.warnings)
    assert any("compute capability is unknown" in w for w in rec.warnings)  # the table has none
    assert rec.docker_run == ("docker run --rm -it --gpus all --ipc host --ulimit memlock=-1 --ulimit stack=67108864 "
                              "accel-images/pytorch:2.14.1-cuda12.6-py3.12-ubuntu24.04")


def test_h100_compute_capability_is_compiled_into_cuda_12_6(tmp_path, expansion, kb):
    # Constructed query row with the recorded table's values and the H100's compute capability 9.0.
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-h100-535.txt"),
                                NVIDIA_QUERY: "535.129.03, 9.0, NVIDIA H100 80GB HBM3\n"})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.14.1-cuda12.6-py3.12-ubuntu24.04"
    assert "compiled for compute capability 9.0" in rec.reasons[0]
    assert not any("compute capability is unknown" in w for w in rec.warnings)


def test_a100_on_580_gets_cuda_13_0_not_13_2(tmp_path, expansion, kb):
    """A constructed query row with the 13.0 wheels' own toolkit driver: 580.126.20 is above the 13.x
    floor, so 13.2 would run under MVC; but 13.0's toolkit driver (13.0.3: 580.126.20, the wheels pin
    cuda-toolkit==13.0.3) is met outright, and both carry torch 2.14: the clean fit wins. (Torch ranks
    first: 2.15, built for 13.2 alone, would win without the filter; see the test below.)"""
    host = host_from(tmp_path, {NVIDIA_QUERY: "580.126.20, 8.0, NVIDIA A100-SXM4-40GB\n",
                                NVIDIA_TABLE: recorded("nvidia-smi-a100-580.txt")})
    rec = choose(host, expansion, kb, tmp_path, filters={"torch": "2.14"})
    assert rec.variant.tag == "2.14.1-cuda13.0-py3.12-ubuntu24.04"
    assert rec.reasons[0].startswith("2.14.1-cuda13.0-py3.12-ubuntu24.04: driver 580.126.20 meets the CUDA 13.0.3")
    passed_over = next(r for r in rec.reasons if r.startswith("2.14.1-cuda13.2-py3.12-ubuntu24.04"))
    assert "passed over" in passed_over and "595.58.03" in passed_over
    assert rec.warnings == ()
    assert rec.docker_run.endswith(" accel-images/pytorch:2.14.1-cuda13.0-py3.12-ubuntu24.04")


def test_cuda_13_2_alone_on_580_is_accepted_with_the_mvc_warning(tmp_path, expansion, kb):
    host = host_from(tmp_path, {NVIDIA_QUERY: recorded("nvidia-smi-query-a100-580.csv"),
                                NVIDIA_TABLE: recorded("nvidia-smi-a100-580.txt")})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.15.0-cuda13.2-py3.12-ubuntu24.04"   # the newest torch, under MVC
    assert any("below the CUDA 13.2.2 toolkit driver 595.71.05" in w for w in rec.warnings)


def test_b200_on_r610_gets_the_newest_cuda_13_2(tmp_path, expansion, kb):
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-b200-r610.txt")})
    assert (host.driver_version, host.stack_version) == ("610.43.02", "13.3")
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.15.0-cuda13.2-py3.12-ubuntu24.04"
    assert rec.reasons == ("2.15.0-cuda13.2-py3.12-ubuntu24.04: driver 610.43.02 meets the CUDA 13.2.2 "
                           "toolkit driver 595.71.05",)
    assert rec.docker_run == ("docker run --rm -it --gpus all --ipc host --ulimit memlock=-1 --ulimit stack=67108864 "
                              "accel-images/pytorch:2.15.0-cuda13.2-py3.12-ubuntu24.04")


def test_blackwell_has_no_kernels_in_cuda_12_6(tmp_path, expansion, kb):
    # Constructed query row: the recorded B200 table's driver and the B200's compute capability 10.0.
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-b200-r610.txt"),
                                NVIDIA_QUERY: "610.43.02, 10.0, NVIDIA B200\n610.43.02, 10.0, NVIDIA B200\n"})
    rec = choose(host, expansion, kb, tmp_path, filters={"stack": "12.6"})
    assert rec.variant is None and rec.docker_run is None
    assert all("no kernels for compute capability 10.0 in the cu126 wheel" in r for r in rec.reasons)


def test_volta_is_older_than_every_cuda_13_arch(expansion, kb):
    host = HostInfo(vendor="cuda", driver_version="580.126.09", stack_version="13.0",
                    gpu_names=("Tesla V100-SXM2-16GB",), gpu_archs=("7.0",), device_count=1)
    rec = recommend(host, select(expansion.variants, {"vendor": "cuda"}), kb, image=expansion.image)
    assert rec.variant.stack == "12.6"  # Volta is in cu126's list
    cu130 = next(r for r in rec.reasons if r.startswith("2.14.1-cuda13.0-py3.12-ubuntu24.04"))
    assert "compute capability 7.0 is older than every architecture compiled into the cu130 wheel" in cu130


def test_mixed_gpus_run_binary_compatible_kernels(tmp_path, expansion, kb):
    """Recorded TITAN V (7.0) + RTX 5880 Ada (8.9) on 570.86.15: cu13x is below the floor; cu126 has
    7.0 and 8.6 code, which the 8.9 GPU runs (same major, lower minor)."""
    host = host_from(tmp_path, {NVIDIA_QUERY: recorded("nvidia-smi-query-mixed.csv")})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.14.1-cuda12.6-py3.12-ubuntu24.04"
    assert "compiled for compute capability 7.0, 8.6 (runs on 8.9)" in rec.reasons[0]
    assert rec.warnings == ()


def test_driver_below_every_floor_recommends_nothing(expansion, kb):
    host = HostInfo(vendor="cuda", driver_version="470.182.03", stack_version="11.4",
                    gpu_names=("NVIDIA GeForce RTX 3090",), device_count=1)
    rec = recommend(host, select(expansion.variants, {"vendor": "cuda"}), kb, image=expansion.image)
    assert rec.variant is None and not rec.ok
    assert len(rec.reasons) == len(select(expansion.variants, {"vendor": "cuda", "platform": "linux/amd64"}))
    assert any("below the CUDA 12.x floor 525.60.13" in r for r in rec.reasons)
    assert any("CUDA error 804" in r for r in rec.reasons)


def test_a_data_center_gpu_below_every_floor_gets_a_devel_image_through_forward_compatibility(expansion, kb):
    # nvidia/cuda 12.6.3's base ships cuda-compat-12-6 and declares the R470 branch for the data-center
    # brands (NVIDIA_REQUIRE_CUDA, dist/12.6.3/ubuntu2404/base/Dockerfile); forward compatibility serves
    # NVIDIA Data Center GPUs (docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html)
    host = HostInfo(vendor="cuda", driver_version="470.182.03", stack_version="11.4", gpu_names=("NVIDIA A10",),
                    device_count=1)
    rec = recommend(host, select(expansion.variants, {"vendor": "cuda"}), kb, image=expansion.image)
    assert rec.variant is not None and rec.variant.tag == "2.14.1-cuda12.6-py3.12-ubuntu24.04-devel"
    assert any("forward compatibility" in w for w in rec.warnings)


def test_an_older_reported_cuda_major_is_rejected_without_a_driver_version(expansion, kb):
    host = HostInfo(vendor="cuda", stack_version="12.8", gpu_archs=("9.0",), device_count=1)
    cu132 = select(expansion.variants, {"vendor": "cuda", "stack": "13.2", "flavor": "runtime"})[0]
    fit = judge(host, cu132, kb)
    assert fit.rejections == ("the host driver supports CUDA up to 12.8, older than CUDA 13.x "
                              "(a newer CUDA major needs a newer driver)",)


def test_devel_preference(tmp_path, expansion, kb):
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-b200-r610.txt")})
    rec = choose(host, expansion, kb, tmp_path, prefer_flavor="devel")
    assert rec.variant.tag == "2.15.0-cuda13.2-py3.12-ubuntu24.04-devel"


def test_h100_asking_for_devel_prefers_native_compatibility_over_forward_compatibility(tmp_path, expansion, kb):
    """An H100 on R535: 2.15's CUDA 13.2 devel image runs only through forward compatibility (the
    image's cuda-compat libcuda, NVIDIA: supported on data-center GPUs, "only ... to enable newer CUDA
    on older drivers", docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html), 2.14's
    CUDA 12.6 devel image on the driver itself (minor-version compatibility): the second is chosen."""
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-h100-535.txt"),
                                NVIDIA_QUERY: "535.129.03, 9.0, NVIDIA H100 80GB HBM3\n"})
    rec = choose(host, expansion, kb, tmp_path, prefer_flavor="devel")
    assert rec.variant is not None and rec.variant.tag == "2.14.1-cuda12.6-py3.12-ubuntu24.04-devel"
    passed = next(r for r in rec.reasons if r.startswith("2.15.0-cuda13.2-py3.12-ubuntu24.04-devel: "))
    assert ("passed over for 2.14.1-cuda12.6-py3.12-ubuntu24.04-devel, which runs on the host's driver without"
            " CUDA forward compatibility") in passed
    assert not any("forward compatibility" in w for w in rec.warnings)


def test_forward_compatibility_is_still_chosen_where_nothing_runs_natively(expansion, kb):
    host = HostInfo(vendor="cuda", driver_version="470.182.03", stack_version="11.4", gpu_names=("NVIDIA A10",),
                    gpu_archs=("8.6",), device_count=1)
    rec = recommend(host, select(expansion.variants, {"vendor": "cuda"}), kb, image=expansion.image,
                    prefer_flavor="devel")
    assert rec.variant is not None and rec.variant.tag == "2.14.1-cuda12.6-py3.12-ubuntu24.04-devel"


def test_a_gh200_on_r570_is_told_what_would_verify_a_native_arm64_build(tmp_path, expansion, kb):
    """No linux/arm64 image of the matrix runs on R570 natively (the 13.x wheels need R580); the knowledge base
    leaves the arm64 CUDA 12.x builds unverified (torch 2.11's cu128, 2.14's cu126). The package index cannot
    settle it: its aarch64 wheels of 2.9.1 and 2.10.0 are +cpu builds and 2.11.0's is +cu130 (torch/version.py
    read from pypi.org's torch-2.9.1/2.10.0/2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl): the cuXY index's
    own aarch64 wheel is what would."""
    gh200 = replace(GH200, driver_version="570.172.08", stack_version="12.8")
    rec = choose(gh200, expansion, kb, tmp_path)
    assert rec.variant is not None and rec.variant.tag == "2.15.0-cuda13.2-py3.12-ubuntu24.04-devel"
    [line] = [w for w in rec.warnings if "unverified" in w]
    for fragment in ("linux/arm64", "CUDA 12.8 (torch 2.11)", "CUDA 12.6 (torch 2.14)", "without forward compatibility",
                     'platforms."linux/arm64".unverified', "download.pytorch.org/whl/cu128",
                     "aarch64 wheel", "torch/version.py", "the package index's aarch64 wheels"):
        assert fragment in line, fragment


# ---------------------------------------------------------------------------------------------
# AMD, Intel, Gaudi, CPU
# ---------------------------------------------------------------------------------------------

# AMD's user and kernel-space support matrix (instinct.docs.amd.com amdgpu-docs compatibility-matrix): the
# host's amdgpu kernel driver decides, not its ROCm user space, which the image does not use: "6.3.x | 6.1.x,
# 6.2.x, 6.3.x, 6.4.x, 7.0.x", "6.4.x | ... 7.2.x", "30.30.x | 6.3.x, ..., 7.2.x, 7.14.x".

def recorded_mi300x(tmp_path: Path) -> HostInfo:
    """The recorded MI300X node: ROCm 6.4.1 user space, amdgpu 6.10.5 (AMD GPU Driver 6.3)."""
    return host_from(tmp_path, {ROCMINFO: recorded("rocminfo-mi300x.txt"),
                                AMD_SMI_VERSION: recorded("amd-smi-version-6.4.1.txt")}, {"/dev/kfd": ""})


def test_an_mi300x_on_a_6_3_era_driver_gets_no_image_and_the_driver_it_needs(tmp_path, expansion, kb):
    host = recorded_mi300x(tmp_path)
    assert (host.vendor, host.gpu_archs, host.stack_version, host.driver_version) == ("rocm", ("gfx942",), "6.4.1",
                                                                                      "6.10.5")
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant is None
    assert ("2.14.1-rocm7.14-py3.12-ubuntu24.04: amdgpu kernel driver 6.10.5 (AMD GPU Driver 6.3) is outside what"
            " ROCm 7.14 supports: AMD GPU Driver 30.10 or later (amdgpu 6.14 or later), by AMD's user and"
            " kernel-space support matrix") in rec.reasons
    assert any(r.startswith("2.13.0-rocm7.2-py3.12-ubuntu24.04: amdgpu kernel driver 6.10.5") and
               "AMD GPU Driver 6.4 or later" in r for r in rec.reasons)


def test_mi300x_gets_rocm_7_14_with_torch_2_14(tmp_path, expansion, kb):
    """A current driver (AMD GPU Driver 30.30: amdgpu 6.16.13) under the same old ROCm 6.4.1 user space:
    7.14 is supported on it, and the host's user space is no caveat."""
    host = replace(recorded_mi300x(tmp_path), driver_version="6.16.13")
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.14.1-rocm7.14-py3.12-ubuntu24.04"
    assert rec.reasons[0] == "2.14.1-rocm7.14-py3.12-ubuntu24.04: gfx942 compiled into the rocm7.14 wheel"
    assert rec.warnings == ()
    flags = rec.docker_run.split()
    assert rec.docker_run.startswith("docker run --rm -it --device /dev/kfd --device /dev/dri ")
    assert "--security-opt seccomp=unconfined" in rec.docker_run
    assert flags.count("--ipc") == 1 and flags[flags.index("--ipc") + 1] == "host"
    assert flags[-1] == "accel-images/pytorch:2.14.1-rocm7.14-py3.12-ubuntu24.04"


def test_a_driver_of_unknown_version_is_one_warning_that_the_window_was_not_checked(expansion, kb):
    # the in-kernel amdgpu of a distribution has no version (amd-smi: "Linuxver...", no /sys/module/amdgpu/version)
    host = HostInfo(vendor="rocm", gpu_archs=("gfx90a",), device_count=1, stack_version="7.2.1")
    rec = recommend(host, select(expansion.variants, {"vendor": "rocm", "torch": "2.13"}), kb, image=expansion.image)
    assert rec.variant.tag == "2.13.0-rocm7.2-py3.12-ubuntu24.04"
    assert rec.warnings == ("the amdgpu kernel driver's version is unknown (a distribution's in-kernel driver has"
                            " none): AMD's user and kernel-space support matrix was not checked",)


@pytest.mark.parametrize("arch, override", [("gfx1031", "10.3.0"), ("gfx1032", "10.3.0")])
def test_consumer_gpu_outside_the_wheels_is_rejected_with_the_override_hint(expansion, kb, arch, override):
    host = HostInfo(vendor="rocm", gpu_archs=(arch,), device_count=1, stack_version="7.2.0")
    rec = recommend(host, select(expansion.variants, {"vendor": "rocm"}), kb, image=expansion.image)
    assert rec.variant is None
    assert all(f"GPU architecture {arch} is not compiled into the rocm" in r for r in rec.reasons)
    assert any(f"HSA_OVERRIDE_GFX_VERSION={override}" in w and "not supported by AMD" in w for w in rec.warnings)


def test_a_radeon_780m_gets_the_newest_wheel_that_builds_gfx1103(expansion, kb):
    # pytorch/pytorch#179653 put gfx1103 into PYTORCH_ROCM_ARCH (.ci/docker/manywheel/build.sh), for 7.2 and 7.14
    host = HostInfo(vendor="rocm", gpu_archs=("gfx1103",), device_count=1, stack_version="7.14.0")
    rec = recommend(host, select(expansion.variants, {"vendor": "rocm"}), kb, image=expansion.image)
    assert rec.variant is not None and rec.variant.tag == "2.14.1-rocm7.14-py3.12-ubuntu24.04"
    assert not any("HSA_OVERRIDE_GFX_VERSION" in w for w in rec.warnings)


def test_gfx1010_is_rejected_without_an_override_hint(expansion, kb):
    host = HostInfo(vendor="rocm", gpu_archs=("gfx1010",), device_count=1, stack_version="7.2.0")
    rec = recommend(host, select(expansion.variants, {"vendor": "rocm"}), kb, image=expansion.image)
    assert rec.variant is None
    assert not any("HSA_OVERRIDE_GFX_VERSION" in w for w in rec.warnings)


def test_arc_gpu_gets_the_newest_xpu_image(tmp_path, expansion, kb):
    host = host_from(tmp_path, {SYCL_LS: recorded("sycl-ls-arc-a770.txt")}, {"/dev/dri/renderD128": ""})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.14.1-xpu2026.1-py3.12-ubuntu24.04"
    owner = (tmp_path / "dev" / "dri" / "renderD128").stat().st_gid   # the render group, as the host names it
    groups = "" if owner == 0 else f" --group-add {owner}"            # root's group adds nothing
    assert rec.docker_run == (f"docker run --rm -it --device /dev/dri{groups} --ipc host "
                              "accel-images/pytorch:2.14.1-xpu2026.1-py3.12-ubuntu24.04")


def test_a_meteor_lake_laptop_without_vendor_tools_gets_the_xpu_image(tmp_path, expansion, kb):
    """No xpu-smi or sycl-ls: the integrated GPU's PCI id (8086:7D55, the kernel's INTEL_MTL_IDS) is one of
    the Core Ultra Arc graphics PyTorch's XPU guide validates (Meteor Lake-H), so not the CPU image."""
    device = "/sys/class/drm/renderD128/device"
    host = host_from(tmp_path, {}, {"/dev/dri/renderD128": "", f"{device}/vendor": "0x8086\n",
                                    f"{device}/uevent": "DRIVER=i915\nPCI_ID=8086:7D55\nPCI_SLOT_NAME=0000:00:02.0\n"})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant is not None and rec.variant.tag == "2.14.1-xpu2026.1-py3.12-ubuntu24.04"
    assert "Meteor Lake" in rec.reasons[0]


GAUDI_RUN = ("docker run --rm -it --runtime habana -e HABANA_VISIBLE_DEVICES=all "
             "-e OMPI_MCA_btl_vader_single_copy_mechanism=none --cap-add SYS_NICE --ipc host --network host "
             "--ulimit memlock=-1 ")


def gaudi2_host(tmp_path: Path, driver: str) -> HostInfo:
    """The recorded 8 x HL-225 hl-smi output, its driver version replaced (the recording has 1.15.0)."""
    answers = {HL_SMI: recorded("hl-smi-gaudi2.txt").replace("1.15.0-c43dc7b", driver),
               HL_SMI_QUERY: recorded("hl-smi-query-gaudi2.csv").replace("1.15.0-c43dc7b", driver)}
    return host_from(tmp_path, answers)


def test_gaudi2_on_1_24_1_gets_the_1_24_1_image(tmp_path, expansion, kb):
    host = gaudi2_host(tmp_path, "1.24.1-8e42a1b")
    assert (host.vendor, host.stack_version, host.device_count) == ("gaudi", "1.24.1", 8)
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.11.0-gaudi1.24.1-py3.12-ubuntu24.04-devel"
    assert "matches the host's driver" in rec.reasons[0]
    assert any("no runtime image fits; devel chosen" in w for w in rec.warnings)
    assert rec.docker_run == GAUDI_RUN + "accel-images/pytorch:2.11.0-gaudi1.24.1-py3.12-ubuntu24.04-devel"


def test_recorded_gaudi2_on_1_15_has_no_matching_image(tmp_path, expansion, kb):
    host = host_from(tmp_path, {HL_SMI: recorded("hl-smi-gaudi2.txt")})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant is None
    assert any("image Gaudi software 1.24.1 differs from the host's 1.15.0" in r for r in rec.reasons)


def test_gaudi2_may_run_the_previous_release(tmp_path, expansion, kb):
    host = gaudi2_host(tmp_path, "1.25.0-0a1b2c3")
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.11.0-gaudi1.24.1-py3.12-ubuntu24.04-devel"
    assert any("one release behind" in w and "Gaudi 2" in w for w in rec.warnings)


def test_gaudi3_may_not_run_the_previous_release(expansion, kb):
    host = HostInfo(vendor="gaudi", driver_version="1.25.0-0a1b2c3", stack_version="1.25.0",
                    gpu_names=("HL-325L",), device_count=1)
    rec = recommend(host, select(expansion.variants, {"vendor": "gaudi"}), kb, image=expansion.image)
    assert rec.variant is None


def test_gaudi_n_minus_1_follows_the_detected_generation(tmp_path, expansion, kb):
    """The recorded 8 x HL-325L (Gaudi 3) on a release after the matrix's newest: N-1 is Gaudi 2's only."""
    gaudi3 = host_from(tmp_path, {HL_SMI: recorded("hl-smi-gaudi3-hl325l.txt").replace("1.20.1-366eb9c", "1.25.0-0a1b2c3")})
    assert (gaudi3.gpu_archs, gaudi3.stack_version) == (("gaudi3",), "1.25.0")
    assert choose(gaudi3, expansion, kb, tmp_path).variant is None
    by_arch = HostInfo(vendor="gaudi", stack_version="1.25.0", gpu_archs=("gaudi2",), device_count=1)
    assert recommend(by_arch, select(expansion.variants, {"vendor": "gaudi"}), kb, image=expansion.image).ok
    by_name_only = HostInfo(vendor="gaudi", stack_version="1.25.0", gpu_names=("HL-225",), device_count=1)
    assert recommend(by_name_only, select(expansion.variants, {"vendor": "gaudi"}), kb, image=expansion.image).ok


def test_same_minor_other_patch_is_rejected(expansion, kb):
    host = HostInfo(vendor="gaudi", stack_version="1.24.0", gpu_names=("HL-225",), device_count=1)
    rec = recommend(host, select(expansion.variants, {"vendor": "gaudi"}), kb, image=expansion.image)
    assert rec.variant.tag == "2.10.0-gaudi1.24.0-py3.12-ubuntu24.04-devel"
    assert any(r.startswith("2.11.0-gaudi1.24.1-py3.12-ubuntu24.04-devel: image Gaudi software 1.24.1 differs")
               for r in rec.reasons)


def test_no_accelerator_gets_the_newest_cpu_image(tmp_path, expansion, kb):
    host = host_from(tmp_path, {})
    assert host.vendor == "cpu"
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.15.0-cpu-py3.12-ubuntu24.04"
    assert rec.docker_run == "docker run --rm -it --ipc host accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"


def test_other_vendors_images_are_rejected_and_cpu_ranks_last(expansion, kb):
    host = HostInfo(vendor="xpu", gpu_names=("Intel(R) Arc(TM) A770 Graphics",), device_count=1)
    rec = recommend(host, expansion.variants, kb, image=expansion.image)
    assert rec.variant.vendor == "xpu"
    cuda_only = recommend(host, select(expansion.variants, {"vendor": "cuda"}), kb, image=expansion.image)
    assert cuda_only.variant is None
    assert all("needs a cuda accelerator; this host has a xpu accelerator" in r for r in cuda_only.reasons)
    with_cpu = recommend(host, [*select(expansion.variants, {"vendor": "cuda"}),
                                *select(expansion.variants, {"vendor": "cpu"})], kb, image=expansion.image)
    assert with_cpu.variant.vendor == "cpu"
    assert any("uses no accelerator" in w for w in with_cpu.warnings)


def test_registry_prefix():
    assert image_ref("accel-images/pytorch", "t", None) == "accel-images/pytorch:t"
    assert image_ref("accel-images/pytorch", "t", "ghcr.io/acme/") == "ghcr.io/acme/accel-images/pytorch:t"
    assert image_ref("accel-images/pytorch", "t", "127.0.0.1:5000") == "127.0.0.1:5000/accel-images/pytorch:t"
    assert image_ref("img", "t", "http://127.0.0.1:5000/ns") == "127.0.0.1:5000/ns/img:t"
    assert image_ref("accel-images/pytorch", "t", " ") == "accel-images/pytorch:t"
    assert docker_run_line("cpu", "r:t") == "docker run --rm -it --ipc host r:t"


def test_recommendation_is_frozen(expansion, kb):
    rec = recommend(HostInfo(), select(expansion.variants, {"vendor": "cpu"}), kb, image=expansion.image)
    with pytest.raises(AttributeError):
        rec.variant = None  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# The commands
# ---------------------------------------------------------------------------------------------

def host_file(tmp_path: Path, host: HostInfo) -> Path:
    path = tmp_path / "host.json"
    path.write_text(json.dumps(asdict(host)))
    return path


def run(command, *args: str):
    return CliRunner().invoke(command, ["--matrix", str(FROZEN_MATRIX), *args])


A100 = HostInfo(vendor="cuda", driver_version="580.126.09", stack_version="13.0",
                gpu_names=("NVIDIA A100-SXM4-40GB",) * 2, gpu_archs=("8.0",), device_count=2)


@pytest.mark.parametrize("vendor, flags", [
    ("gaudi", ("--network", "host", "--ulimit", "memlock=-1")),   # Habana's `docker run --net=host`
    ("rocm", ("--cap-add", "SYS_PTRACE")),                       # AMD's PyTorch container line
    ("cuda", ("--ulimit", "memlock=-1", "--ulimit", "stack=67108864")),  # NGC's "Running PyTorch"
])
def test_recommends_line_has_the_container_flags_run_print_has(tmp_path, vendor, flags):
    """One source: the line `recommend` prints and the container part of `run --print` (less the session's
    user, workspace and identity) come from the same Launch."""
    from accel_images.host.session import container_flags
    line = docker_run_line(vendor, "r:t", tmp_path).split()
    assert line == ["docker", "run", "--rm", "-it", *container_flags(vendor, tmp_path), "r:t"]
    assert " ".join(flags) in " ".join(line)


def test_recommend_command_prints_the_docker_run_line(tmp_path):
    result = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, A100)),
                 "--registry", "ghcr.io/acme", "--from-matrix")
    assert result.exit_code == 0, result.output
    comment, line = result.stdout.strip().splitlines()
    assert line == ("docker run --rm -it --gpus all --ipc host --ulimit memlock=-1 --ulimit stack=67108864"
                    " ghcr.io/acme/accel-images/pytorch:2.15.0-cuda13.2-py3.12-ubuntu24.04")
    assert comment.startswith("# chosen from the matrix, not checked against ghcr.io/acme: if it does not publish")
    assert "host: cuda, driver 580.126.09, CUDA up to 13.0" in result.stderr


def test_an_image_from_the_matrix_is_said_to_need_building_on_the_docker_run_lines_stream(tmp_path):
    """Without a registry the image exists nowhere: stdout says so, as a shell comment, with the build that
    makes exactly that image (its filters select it and nothing else)."""
    from accel_images.plan.matrix import load_matrix
    from accel_images.plan.variants import expand, select
    result = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, A100)))
    assert result.exit_code == 0, result.output
    comment, line = result.stdout.strip().splitlines()
    assert line.startswith("docker run --rm -it --pull never ")  # the line for after the build: never Docker Hub
    assert line.endswith(" accel-images/pytorch:2.15.0-cuda13.2-py3.12-ubuntu24.04")
    assert comment.startswith("# not built here, and no registry is configured: build it here with `accel-images build"
                              " --matrix")
    from accel_images.host.sources import config_path
    assert comment.endswith(", or name the registry that publishes it: --registry REG, ACCEL_IMAGES_REGISTRY=REG, or"
                            f" `registry: REG` in {config_path()}")
    build = comment.split("`")[1].split()
    filters = {build[i][2:]: build[i + 1] for i in range(2, len(build), 2) if build[i] != "--matrix"}
    expansion = expand(load_matrix(FROZEN_MATRIX), compat.load_kb())
    # one tag (its platforms' variants: a build without --platform builds the engine's own, this host's)
    assert {v.tag for v in select(expansion.variants, filters)} == {"2.15.0-cuda13.2-py3.12-ubuntu24.04"}
    record = json.loads(run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, A100)),
                            "--json").stdout)
    assert record["build_first"] == comment.removeprefix("# ")


def test_recommend_command_json(tmp_path):
    result = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, A100)), "--json",
                 "--flavor", "devel", "--python", "3.12")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["image"] == "accel-images/pytorch:2.15.0-cuda13.2-py3.12-ubuntu24.04-devel"
    assert record["variant"]["tag"] == "2.15.0-cuda13.2-py3.12-ubuntu24.04-devel"
    assert record["host"]["gpu_archs"] == ["8.0"]
    assert record["docker_run"].endswith(record["image"])


def test_recommend_command_with_nothing_fitting_is_one_error_line(tmp_path):
    old = replace(A100, driver_version="470.182.03", stack_version="11.4", gpu_names=("NVIDIA GeForce RTX 3090",))
    result = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, old)))
    assert result.exit_code == 1
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("accel-images: error:")]
    assert len(error_lines) == 1 and "no image in the matrix fits this cuda host" in error_lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("content", ['{"vendor": "cuda", "gpus": 3}', '{"vendor": "tpu"}', "[1, 2]", "not json"])
def test_bad_host_json_is_an_input_error(tmp_path, content):
    path = tmp_path / "host.json"
    path.write_text(content)
    result = run(cli_fanout.recommend_command, "--host-json", str(path))
    assert result.exit_code == 2
    assert "--host-json" in result.stderr


def test_host_json_option_is_in_the_help():
    result = CliRunner().invoke(cli_fanout.recommend_command, ["--help"])
    assert "--registry" in result.output and "--host-json" in result.output


def test_pull_command_pulls_the_chosen_image_then_prints_the_line(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "Engine", PullRecorder)  # pull imports it when it runs
    PullRecorder.pulled = []
    result = run(cli_fanout.pull_command, "--host-json", str(host_file(tmp_path, HostInfo())),
                 "--registry", "registry.example:5000/team", "--from-matrix")
    assert result.exit_code == 0, result.output
    ref = "registry.example:5000/team/accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"
    assert PullRecorder.pulled == [ref]
    assert result.stdout.strip() == f"docker run --rm -it --ipc host {ref}"


def test_pull_command_pulls_nothing_when_nothing_fits(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "Engine", PullRecorder)  # pull imports it when it runs
    PullRecorder.pulled = []
    gaudi = HostInfo(vendor="gaudi", stack_version="1.15.0", gpu_names=("HL-225",), device_count=1)
    result = run(cli_fanout.pull_command, "--host-json", str(host_file(tmp_path, gaudi)))
    assert result.exit_code == 1 and PullRecorder.pulled == []


# ---------------------------------------------------------------------------------------------
# A broken driver: accelerator present but unusable
# ---------------------------------------------------------------------------------------------

def mismatch_host(tmp_path: Path) -> HostInfo:
    return host_from(tmp_path, {NVIDIA_QUERY: recorded("nvidia-smi-nvml-mismatch-550.txt")})


def test_unusable_accelerator_gets_the_cpu_image_with_the_reason(tmp_path, expansion, kb):
    host = mismatch_host(tmp_path)
    rec = recommend(host, select(expansion.variants, {"vendor": default_vendor(host)}), kb, image=expansion.image)
    assert default_vendor(host) == "cpu"
    assert rec.variant.tag == "2.15.0-cpu-py3.12-ubuntu24.04"
    assert rec.warnings[0] == ("accelerator present but unusable: NVIDIA driver/library version mismatch "
                               "(user-space NVML 550.144): reboot, or reload the nvidia kernel modules, after a "
                               "driver update")
    assert rec.warnings[1] == "the cpu image is recommended instead: it uses no accelerator"
    assert describe_host(host).startswith("cuda, accelerator present but unusable: NVIDIA driver/library")


def test_unusable_accelerator_runs_none_of_its_vendors_images(tmp_path, expansion, kb):
    host = host_from(tmp_path, {ROCMINFO: recorded("rocminfo-kfd-cannot-allocate.txt")}, {"/dev/kfd": ""})
    rec = choose(host, expansion, kb, tmp_path)  # the rocm images, as `--vendor rocm` asks
    assert rec.variant is None
    assert all("needs a working AMD ROCm accelerator; accelerator present but unusable: cannot open /dev/kfd: "
               "Cannot allocate memory" in reason for reason in rec.reasons)
    assert rec.warnings == (f"accelerator present but unusable: {host.unusable}",)


def test_recommend_command_on_an_unusable_host_prints_the_cpu_image_and_exits_6(tmp_path):
    host = HostInfo(vendor="cuda", unusable="NVIDIA driver not loaded / not reachable (...)")
    result = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, host)))
    assert result.exit_code == 6, result.output
    assert result.stdout.strip().splitlines()[-1] == \
        "docker run --rm -it --pull never --ipc host accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"
    assert "host: cuda, accelerator present but unusable: NVIDIA driver not loaded" in result.stderr
    assert "warning: accelerator present but unusable: NVIDIA driver not loaded" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("accel-images: error: accelerator present but unusable")
    asked = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, host)), "--vendor", "cpu")
    assert asked.exit_code == 0 and asked.stdout == result.stdout
    cuda = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, host)), "--vendor", "cuda")
    assert cuda.exit_code == 1 and "needs a working NVIDIA CUDA accelerator" in cuda.stderr


def test_recommend_json_carries_the_reason(tmp_path):
    host = HostInfo(vendor="rocm", unusable="amdgpu not found in modules (...)")
    result = run(cli_fanout.recommend_command, "--host-json", str(host_file(tmp_path, host)), "--json")
    assert result.exit_code == 6
    record = json.loads(result.stdout)
    assert record["host"]["unusable"] == "amdgpu not found in modules (...)"
    assert record["variant"]["vendor"] == "cpu"
    assert record["warnings"][0] == "accelerator present but unusable: amdgpu not found in modules (...)"


def test_pull_on_an_unusable_host_pulls_the_cpu_image_and_exits_6(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "Engine", PullRecorder)  # pull imports it when it runs
    PullRecorder.pulled = []
    host = HostInfo(vendor="cuda", unusable="NVML Unknown Error (...)")
    result = run(cli_fanout.pull_command, "--host-json", str(host_file(tmp_path, host)), "--registry", "ghcr.io/acme",
                 "--from-matrix")
    assert result.exit_code == 6
    assert PullRecorder.pulled == ["ghcr.io/acme/accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"]


@pytest.mark.parametrize("content", ['{"vendor": "cuda", "unusable": 3}', '{"vendor": "cuda", "device_count": "2"}',
                                     '{"vendor": "cuda", "gpu_names": [1]}'])
def test_host_json_field_types_are_checked(tmp_path, content):
    path = tmp_path / "host.json"
    path.write_text(content)
    result = run(cli_fanout.recommend_command, "--host-json", str(path))
    assert result.exit_code == 2 and "--host-json" in result.stderr


def test_jetson_without_a_driver_version_is_judged_without_driver_rules(tmp_path, expansion, kb):
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-orin-driver-na.txt")})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.ok
    assert "the NVIDIA driver version is unknown: driver rules were not applied" in rec.warnings


def test_nvidia_smi_q_host_gets_hopper_kernels(tmp_path, expansion, kb):
    host = host_from(tmp_path, {NVIDIA_FULL: recorded("nvidia-smi-q-h100-565.txt")})
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant.tag == "2.14.1-cuda12.6-py3.12-ubuntu24.04"
    assert "compiled for compute capability 9.0" in rec.reasons[0]


# ---------------------------------------------------------------------------------------------
# The CPU architecture: an image of the host's platform, never one that dies with "exec format error"
# ---------------------------------------------------------------------------------------------

GH200 = HostInfo(vendor="cuda", driver_version="580.95.05", stack_version="13.0", gpu_names=("NVIDIA GH200 480GB",),
                 gpu_archs=("9.0",), device_count=1, machine="aarch64")
"""A Grace Hopper node: arm64, compute capability 9.0, driver 580 (the issue's acceptance host)."""


def test_a_gh200_gets_an_arm64_cuda_image_compiled_for_hopper(tmp_path, expansion, kb):
    rec = choose(GH200, expansion, kb, tmp_path)
    assert rec.variant is not None and rec.variant.platform == "linux/arm64" and rec.variant.vendor == "cuda"
    assert rec.variant.gpu_archs == ("8.0", "9.0", "10.0", "11.0", "12.0")  # the SBSA wheels' list
    assert "compiled for compute capability 9.0" in rec.reasons[0]
    # the tag is the same for every platform: one index, the engine pulls the arm64 image of it
    assert rec.image == f"accel-images/pytorch:{rec.variant.tag}" and "--platform" not in (rec.docker_run or "")
    assert rec.variant.tag == "2.15.0-cuda13.2-py3.12-ubuntu24.04"  # newest torch; the 13.2 driver caveat stands


def test_an_arm64_host_with_an_amd_gpu_is_told_rocm_is_amd64_only(tmp_path, expansion, kb):
    host = HostInfo(vendor="rocm", driver_version="6.12.12", stack_version="7.2", gpu_names=("AMD Instinct MI300X",),
                    gpu_archs=("gfx942",), device_count=1, machine="aarch64")
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant is None
    assert rec.reasons and all("no linux/arm64 image (AMD ROCm images are amd64 only" in r for r in rec.reasons)


def test_a_jetson_orin_is_refused_with_the_l4t_pointer(tmp_path, expansion, kb):
    """The recorded Orin (JetPack 6) on its aarch64 CPU: 8.0 SASS would run on 8.7 by the arch rules, but
    the SBSA builds do not run on Jetson at all; the answer names NVIDIA's L4T/JetPack containers."""
    host = host_from(tmp_path, {NVIDIA_TABLE: recorded("nvidia-smi-orin-jp6-540.txt"), ("uname", "-m"): "aarch64\n"})
    assert (host.machine, host.gpu_archs) == ("aarch64", ("8.7",))
    rec = choose(host, expansion, kb, tmp_path)
    assert rec.variant is None
    jetson = [r for r in rec.reasons if "Jetson Orin" in r]
    assert jetson and all("l4t-pytorch" in r and "SBSA" in r for r in jetson)


def test_on_an_x86_64_host_nothing_changes(tmp_path, expansion, kb):
    """The same answer with the machine read as without it (hosts recorded before it was)."""
    host = host_from(tmp_path, {NVIDIA_QUERY: recorded("nvidia-smi-query-a100-580.csv")})
    for machine in (None, "x86_64"):
        rec = choose(replace(host, machine=machine), expansion, kb, tmp_path)
        assert rec == choose(host, expansion, kb, tmp_path) and rec.variant.platform == "linux/amd64"
    assert describe_host(replace(host, machine="x86_64")) == describe_host(host)


def test_a_cpu_no_image_is_built_for_gets_nothing_and_why(tmp_path, expansion, kb):
    rec = choose(HostInfo(machine="riscv64"), expansion, kb, tmp_path)
    assert rec.variant is None
    assert all("this host's CPU is riscv64; the images are built for" in r for r in rec.reasons)


def test_an_arm64_cpu_host_gets_the_newest_arm64_cpu_image(tmp_path, expansion, kb):
    rec = choose(HostInfo(machine="aarch64"), expansion, kb, tmp_path)
    assert rec.variant is not None and rec.variant.platform == "linux/arm64"
    assert rec.variant.tag == "2.14.1-cpu-py3.12-ubuntu24.04"  # 2.15's CPU aarch64 wheel is unverified
    assert any(r.startswith("2.15.0-cpu-py3.12-ubuntu24.04: no linux/arm64 image") for r in rec.reasons)


def test_pull_asks_the_engine_for_the_hosts_platform(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "Engine", PullRecorder)  # pull imports it when it runs
    PullRecorder.pulled, PullRecorder.platforms = [], []
    result = run(cli_fanout.pull_command, "--host-json", str(host_file(tmp_path, HostInfo(machine="aarch64"))),
                 "--registry", "ghcr.io/acme", "--from-matrix")
    assert result.exit_code == 0, result.output
    assert PullRecorder.platforms == ["linux/arm64"]
    assert PullRecorder.pulled == ["ghcr.io/acme/accel-images/pytorch:2.14.1-cpu-py3.12-ubuntu24.04"]
