"""The guard against the hosts each vendor documents: CUDA forward compatibility and GKE's driver
path, hints that never loop, ROCm gfx targets, Gaudi driver versions, Intel Data Center GPU Max,
and the facts file an image's build writes.

Each rendered guard runs as the entry point of its image would (tests/unit/test_guard.py's Host: a
PATH of fake tools, ACCEL_IMAGES_DEV_ROOT over a fake /dev and /sys), with the environment its
rendered Dockerfile sets. Each test names the vendor reference the behaviour follows.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dockerfile_env import rendered_env
from test_guard import ROOT, Host, assert_ran, assert_refused, assert_warned, shared_host  # noqa: F401 (fixture)
from accel_images.kb import compat
from accel_images.cli import options
from accel_images.render.contexts import guard_script
from frozen import MATRIX as FROZEN_MATRIX


@pytest.fixture
def host(tmp_path: Path) -> Host:
    """One POSIX shell (dash where installed, Debian's /bin/sh): tests/unit/test_guard.py runs the
    shared checks under sh, dash and bash; these vendor decisions cost a guard run each."""
    return Host(tmp_path, "dash" if shutil.which("dash") else "sh")


@pytest.fixture(scope="module")
def expansion():
    return options.load_expansion(str(FROZEN_MATRIX))


@pytest.fixture(scope="module")
def kb():
    return compat.load_kb()

FAKE_NVIDIA_SMI = """#!/bin/sh
# One GPU per line of $0.gpus: driver|compute capability|name|Product Brand.
gpus="$0.gpus"
if [ "$1" = "-q" ]; then
    while IFS='|' read -r driver cc name brand; do
        printf 'GPU 00000000:%s:00.0\\n    Product Name                          : %s\\n' "$cc" "$name"
        printf '    Product Brand                         : %s\\n' "$brand"
    done < "$gpus"
    exit 0
fi
case "$1" in
    --query-gpu=driver_version) field=1 ;;
    --query-gpu=compute_cap) field=2 ;;
    --query-gpu=name) field=3 ;;
    *) exit 2 ;;
esac
cut -d'|' -f"$field" "$gpus"
"""


def image_env(tag: str, vendor: str = "cuda", arch: str = "amd64") -> dict[str, str]:
    """The ACCEL_IMAGES_* environment the rendered image `tag` sets on `arch` (no facts file: the rendered
    values): tests/dockerfile_env.py."""
    return {**rendered_env(vendor, tag, f"linux/{arch}"), "ACCEL_IMAGES_FACTS": "/nonexistent/facts.json"}


def nvidia(host: Host, *gpus: str) -> None:
    """A fake nvidia-smi on PATH answering for GPUs given as 'driver|cc|name|brand'."""
    script = host.bin / "nvidia-smi"
    script.write_text(FAKE_NVIDIA_SMI)
    script.chmod(0o755)
    Path(f"{script}.gpus").write_text("".join(f"{gpu}\n" for gpu in gpus))


H100 = "NVIDIA H100 80GB HBM3|NVIDIA"      # Product Brand as nvidia-smi -q prints it (tests/data/host/nvidia-smi-q-h100-565.txt)
RTX_4090 = "NVIDIA GeForce RTX 4090|GeForce"
RTX_5090 = "NVIDIA GeForce RTX 5090|GeForce"
B200 = "NVIDIA B200|NVIDIA"
DEVEL_132 = "2.15.0-cuda13.2-py3.12-ubuntu24.04-devel"
RUNTIME_132 = "2.15.0-cuda13.2-py3.12-ubuntu24.04"
RUNTIME_128 = "2.11.0-cuda12.8-py3.12-ubuntu24.04"


# ---- CUDA forward compatibility ----------------------------------------------------------------
# NVIDIA: "Forward Compatibility is applicable only for systems with NVIDIA Data Center GPUs, select
# NGC Server Ready SKUs of RTX cards, Jetson boards"
# (https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html); nvidia/cuda
# 13.2.1's base installs cuda-compat-13-2 and declares the branches 535, 570, 580, 590 for the
# data-center brands in NVIDIA_REQUIRE_CUDA (dist/13.2.1/ubuntu2404/base/Dockerfile).

def test_a_data_center_gpu_on_an_older_branch_runs_the_devel_image_through_forward_compatibility(
        host: Host) -> None:
    nvidia(host, f"535.104.05|9.0|{H100}")
    result = host.run("cuda", **image_env(DEVEL_132))
    assert_warned(result, "535.104.05", "CUDA forward compatibility", "data-center GPUs only",
                  "nvidia-container-runtime.modes.legacy.cuda-compat-mode")


def test_a_geforce_below_the_floor_is_refused_naming_the_driver_and_error_804(host: Host) -> None:
    nvidia(host, f"570.86.15|8.9|{RTX_4090}")
    line = assert_refused(host.run("cuda", **image_env(DEVEL_132)), "570.86.15", "below 580",
                          "GeForce", "CUDA error 804", "install an NVIDIA driver >= 580")
    assert "forward compatibility" in line


def test_the_brand_comes_from_the_name_when_nvidia_smi_q_names_none(host: Host) -> None:
    nvidia(host, "570.86.15|8.9|NVIDIA GeForce RTX 4090|")
    assert_refused(host.run("cuda", **image_env(DEVEL_132)), "CUDA error 804")


def test_a_data_center_branch_that_forward_compatibility_does_not_serve_is_refused(host: Host) -> None:
    # 560 is not among 13.2.1's branches (535, 570, 580, 590)
    nvidia(host, f"560.35.03|9.0|{H100}")
    assert_refused(host.run("cuda", **image_env(DEVEL_132)), "560.35.03", "R535/570/580/590",
                   "install an NVIDIA driver >= 580")


def test_runtime_images_have_no_cuda_compat_and_keep_refusing_below_the_floor(host: Host) -> None:
    # the runtime flavor sits on plain ubuntu:24.04 (pytorch/pytorch docker.Makefile BASE_RUNTIME): no cuda-compat
    nvidia(host, f"535.104.05|9.0|{H100}")
    assert_refused(host.run("cuda", **image_env(RUNTIME_132)), "535.104.05", "below 580", "minor-version")


def test_forward_compatibility_is_the_same_decision_in_recommend(kb, expansion) -> None:
    from accel_images.host.recommend import judge
    from accel_images.model.hostinfo import HostInfo

    variants = {v.tag: v for v in expansion.variants}
    h100 = HostInfo(vendor="cuda", driver_version="535.104.05", stack_version="12.2", device_count=1,
                    gpu_names=("NVIDIA H100 80GB HBM3",), gpu_archs=("9.0",))
    geforce = HostInfo(vendor="cuda", driver_version="570.86.15", stack_version="12.8", device_count=1,
                       gpu_names=("NVIDIA GeForce RTX 4090",), gpu_archs=("8.9",))
    devel = judge(h100, variants[DEVEL_132], kb)
    assert devel.fits and "forward compatibility" in devel.caveats[0]
    assert not judge(h100, variants[RUNTIME_132], kb).fits
    assert "CUDA error 804" in judge(geforce, variants[DEVEL_132], kb).rejections[0]


# ---- CUDA forward compatibility above the floor: the toolkit loads the compat libcuda by branch ------
# The container toolkit's enable-cuda-compat hook puts /usr/local/cuda/compat ahead of the host's
# libraries (/etc/ld.so.conf.d/00-compat-*.conf) whenever the host driver's major version is below
# that of the image's compat libcuda.so.X.Y.Z, whatever the GPU (NVIDIA/nvidia-container-toolkit
# cmd/nvidia-cdi-hook/cudacompat/cudacompat.go; its default cuda-compat mode `ldconfig`,
# api/config/v1/runtime.go; NVIDIA/nvidia-container-toolkit#1426, fixed by #1784). On a GeForce,
# TITAN or NVS that is CUDA error 804 even above the minor-version-compatibility floor.
DEVEL_126 = "2.14.1-cuda12.6-py3.12-ubuntu24.04-devel"
RTX_3090 = "NVIDIA GeForce RTX 3090|GeForce"


@pytest.mark.parametrize("driver, gpu, cc, tag", [
    ("580.95.05", RTX_4090, "8.9", DEVEL_132),    # R580 < the 13.2 base's compat R595
    ("550.163.01", RTX_3090, "8.6", DEVEL_126),   # R550 < the 12.6 base's compat R560
])
def test_a_geforce_above_the_floor_is_refused_by_a_devel_image_with_a_newer_compat_driver(
        host: Host, driver: str, gpu: str, cc: str, tag: str) -> None:
    nvidia(host, f"{driver}|{cc}|{gpu}")
    assert_refused(host.run("cuda", **image_env(tag)), driver, "CUDA error 804", "GeForce",
                   "forward-compatibility driver", "nvidia-container-toolkit#1784", "cuda-compat-mode", "or use ")


def test_the_named_way_out_starts_on_that_geforce(host: Host) -> None:
    nvidia(host, f"580.95.05|8.9|{RTX_4090}")
    line = assert_refused(host.run("cuda", **image_env(DEVEL_132)), "or use ")
    named = line.split("or use ")[1].split()[0].rstrip(",;")
    assert_ran(host.run("cuda", **image_env(named)))


def test_a_geforce_on_the_compat_drivers_branch_runs_the_devel_image(host: Host) -> None:
    nvidia(host, f"595.71.05|8.9|{RTX_4090}")
    result = host.run("cuda", **image_env(DEVEL_132))
    assert_ran(result)
    assert result.stderr == ""


def test_facts_without_a_compat_library_spare_a_geforce_the_brand_rule(python_host: Host) -> None:
    nvidia(python_host, f"580.95.05|8.9|{RTX_4090}")
    facts = facts_file(python_host.bin.parent, cuda_compat=None)
    assert_warned(python_host.run("cuda", **image_env(DEVEL_132) | {"ACCEL_IMAGES_FACTS": str(facts)}),
                  "minor-version compatibility")


def test_the_brand_rule_above_the_floor_is_recommends_too(kb, expansion) -> None:
    from accel_images.host.recommend import judge
    from accel_images.model.hostinfo import HostInfo

    variants = {v.tag: v for v in expansion.variants}
    geforce = HostInfo(vendor="cuda", driver_version="580.95.05", stack_version="13.0", device_count=1,
                       gpu_names=("NVIDIA GeForce RTX 4090",), gpu_archs=("8.9",))
    devel = judge(geforce, variants[DEVEL_132], kb)
    assert not devel.fits and "CUDA error 804" in devel.rejections[0] and "#1784" in devel.rejections[0]
    assert judge(geforce, variants[RUNTIME_132], kb).fits
    h100 = HostInfo(vendor="cuda", driver_version="580.95.05", stack_version="13.0", device_count=1,
                    gpu_names=("NVIDIA H100 80GB HBM3",), gpu_archs=("9.0",))
    assert judge(h100, variants[DEVEL_132], kb).fits


# ---- CUDA forward compatibility from the image's own facts -------------------------------------------
# nvidia/cuda's base Dockerfiles install cuda-compat "if available" (gitlab.com/nvidia/container-images/cuda
# dist/*/ubuntu2404/base/Dockerfile); facts.json's cuda_compat is the version of the libcuda the build
# found under /usr/local/cuda/compat (accel_images/smoke/facts.py), null where there is none.

def test_a_devel_image_whose_facts_show_the_compat_library_runs_an_older_branch(python_host: Host) -> None:
    nvidia(python_host, f"535.104.05|9.0|{H100}")
    facts = facts_file(python_host.bin.parent, cuda_compat="595.58.03")
    assert_warned(python_host.run("cuda", **image_env(DEVEL_132) | {"ACCEL_IMAGES_FACTS": str(facts)}),
                  "535.104.05", "CUDA forward compatibility", "595.58.03")


@pytest.mark.parametrize("compat", [None, "absent"])
def test_a_devel_image_whose_facts_show_no_compat_library_admits_no_older_branch(python_host: Host,
                                                                                 compat: str | None) -> None:
    nvidia(python_host, f"535.104.05|9.0|{H100}")
    fields = {} if compat == "absent" else {"cuda_compat": compat}
    facts = facts_file(python_host.bin.parent, **fields)
    assert_refused(python_host.run("cuda", **image_env(DEVEL_132) | {"ACCEL_IMAGES_FACTS": str(facts)}),
                   "535.104.05", "below 580", "no CUDA forward-compatibility library", "/usr/local/cuda/compat")


# ---- GKE: the driver under /usr/local/nvidia ---------------------------------------------------

def test_nvidia_smi_under_usr_local_nvidia_is_found_off_path(host: Host) -> None:
    # GoogleCloudPlatform/container-engine-accelerators cmd/nvidia_gpu/nvidia_gpu.go: the host's
    # /home/kubernetes/bin/nvidia is mounted at /usr/local/nvidia in the container
    tools = host.dev_root / "usr" / "local" / "nvidia" / "bin"
    tools.mkdir(parents=True)
    nvidia(host, f"610.43.02|9.0|{H100}")
    (host.bin / "nvidia-smi").rename(tools / "nvidia-smi")
    Path(f"{host.bin / 'nvidia-smi'}.gpus").rename(tools / "nvidia-smi.gpus")
    result = host.run("cuda", **image_env(RUNTIME_132), ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")
    assert_ran(result)
    assert result.stderr == ""


# ---- hints that never loop --------------------------------------------------------------------

def test_blackwell_on_r570_is_sent_to_the_cu128_build_and_told_the_driver(host: Host) -> None:
    """An RTX 5090 (12.0) on R570: the 13.x wheels need R580 and cu126 has no Blackwell kernels; the
    cu128 build of torch 2.11 runs under minor-version compatibility (floor 525.60.13)."""
    nvidia(host, f"570.124.06|12.0|{RTX_5090}")
    line = assert_refused(host.run("cuda", **image_env(RUNTIME_132)), "install an NVIDIA driver >= 580",
                          f"or use {RUNTIME_128}")
    assert "cuda12.6" not in line
    assert_ran(host.run("cuda", **image_env(RUNTIME_128)))


def test_no_admitting_image_means_the_refusal_names_none(host: Host) -> None:
    """A TITAN V (7.0, Volta) on R470: no CUDA 13 kernels, cu126 needs R525+, forward compatibility
    does not serve TITAN: nothing to name."""
    nvidia(host, "470.256.02|7.0|NVIDIA TITAN V|TITAN")
    line = assert_refused(host.run("cuda", **image_env(RUNTIME_132)), "older than every architecture")
    assert "use " not in line.replace("GUARD=off", "")


# ---- the facts file ---------------------------------------------------------------------------

def facts_file(tmp: Path, **fields: object) -> Path:
    """A facts file in the schema the image's build writes (schema 1)."""
    facts = {"schema": 1, "platform": {"os": "linux", "machine": "x86_64"}, "python": "3.12.3",
             "torch": {"version": "2.15.0+cu132", "public": "2.15.0", "local": "cu132"}, "backend": "cuda",
             "toolkit": {"cuda": "13.2", "hip": None, "xpu": None, "cudnn": "9.26.0", "nccl": "2.30.7"},
             "archs": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], "ptx": [],
             "companions": {"torchvision": "0.29.2"}, "distributions": {"triton": "3.9.0"}, **fields}
    path = tmp / "facts.json"
    path.write_text(json.dumps(facts))
    return path


@pytest.fixture
def python_host(host: Host) -> Host:
    """A host whose PATH has the image's python (the guard reads the facts file with it)."""
    (host.bin / "python3").symlink_to(sys.executable)
    return host


def test_the_guard_decides_from_the_facts_file_over_the_rendered_list(python_host: Host) -> None:
    # the rendered list says 7.5-12.0; the facts file (what the installed torch holds) stops at sm_90
    nvidia(python_host, f"610.43.02|12.0|{RTX_5090}")
    env = image_env(RUNTIME_132)
    assert_ran(python_host.run("cuda", **env))
    facts = facts_file(python_host.bin.parent, archs=["sm_80", "sm_90"])
    assert_refused(python_host.run("cuda", **env | {"ACCEL_IMAGES_FACTS": str(facts)}),
                   "compute capability 12.0", "compiled for 8.0,9.0")


def test_ptx_in_the_facts_file_reaches_newer_gpus(python_host: Host) -> None:
    nvidia(python_host, f"610.43.02|12.0|{RTX_5090}")
    facts = facts_file(python_host.bin.parent, archs=["sm_80", "sm_90"], ptx=["compute_90"])
    assert_ran(python_host.run("cuda", **image_env(RUNTIME_132) | {"ACCEL_IMAGES_FACTS": str(facts)}))


@pytest.mark.parametrize("content", ['{"schema": 2}', "not json", '{"schema": 1, "archs": ["sm_90; id"]}',
                                     '{"schema": 1, "archs": ["$(id)"]}', '{"schema": true}'])
def test_an_unreadable_facts_file_is_one_warning_and_the_rendered_facts(python_host: Host, content: str) -> None:
    nvidia(python_host, f"610.43.02|12.0|{RTX_5090}")
    bad = python_host.bin.parent / "facts.json"
    bad.write_text(content)
    result = python_host.run("cuda", **image_env(RUNTIME_132) | {"ACCEL_IMAGES_FACTS": str(bad)})
    assert_warned(result, f"cannot read {bad}", "deciding from the image's environment")


def test_reading_the_facts_file_costs_one_python_start(host: Host) -> None:
    """The guard starts every container: the facts file costs one python start, and a guard with no
    file starts none. (What a start costs in time is measured, not asserted: benchmarks, guard_facts.)"""
    starts = host.bin.parent / "python-starts"
    counting = host.bin / "python3"
    counting.write_text(f"#!/bin/sh\necho started >> {shlex.quote(str(starts))}\n"
                        f'exec {shlex.quote(sys.executable)} "$@"\n')
    counting.chmod(0o755)
    nvidia(host, f"610.43.02|9.0|{H100}")
    env = image_env(RUNTIME_132)
    assert_ran(host.run("cuda", **env))
    assert not starts.exists()
    assert_ran(host.run("cuda", **env | {"ACCEL_IMAGES_FACTS": str(facts_file(host.bin.parent))}))
    assert starts.read_text() == "started\n"


def test_the_guard_scripts_stay_posix() -> None:
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("dash is not installed")
    for vendor in ("cuda", "rocm", "xpu", "gaudi"):
        assert subprocess.run([dash, "-n"], input=guard_script(vendor), capture_output=True).returncode == 0


# ---- Jetson: an aarch64 host the SBSA builds do not serve ------------------------------------------
# JetPack 6's nvidia-smi names the GPU "Orin (nvgpu)" and leaves its fields N/A (tests/data/host/
# nvidia-smi-orin-*.txt); the arm64 images refuse it by its compute capability (data/vendors/cuda.yaml
# not_served), which the name gives when nvidia-smi does not.

@pytest.mark.parametrize("driver, cc", [("540.4.0", "8.7"), ("540.4.0", "[N/A]"), ("[N/A]", "[N/A]")])
def test_a_jetson_is_refused_with_where_its_images_are_even_without_a_compute_capability(
        host: Host, driver: str, cc: str) -> None:
    nvidia(host, f"{driver}|{cc}|Orin (nvgpu)|")
    assert_refused(host.run("cuda", **image_env(RUNTIME_132, arch="arm64")),
                   "compute capability 8.7 is a Jetson Orin GPU", "SBSA build", "l4t-pytorch")


# ---- ROCm: the GPU's gfx target ---------------------------------------------------------------
# KFD topology (kernel kfd_topology.c node_show: "gfx_target_version"; kfd_device.c: 90006 Vega20,
# 90010 Aldebaran, 110003 GC 11.0.1/11.0.4) read as rocminfo reads it; the wheels' targets are
# PYTORCH_ROCM_ARCH of pytorch/pytorch .ci/docker/manywheel/build.sh (7.14: no gfx900/gfx906).
ROCM_714 = "2.14.1-rocm7.14-py3.12-ubuntu24.04"
ROCM_72 = "2.13.0-rocm7.2-py3.12-ubuntu24.04"


def amd(host: Host, *versions: int) -> None:
    """/dev/kfd, a render node, a CPU node and one KFD topology node per GPU gfx_target_version."""
    host.device("kfd")
    host.device("dri/renderD128")
    nodes = host.dev_root / "sys" / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for index, version in enumerate((0, *versions)):
        (nodes / str(index)).mkdir(parents=True)
        (nodes / str(index) / "properties").write_text(
            f"cpu_cores_count {0 if version else 16}\nsimd_count 24\nmax_slots_scratch_cu 32\n"
            f"gfx_target_version {version}\nvendor_id 4098\ndevice_id 5567\n")


def test_an_mi50_is_refused_by_the_7_14_image_and_sent_to_7_2(host: Host) -> None:
    amd(host, 90006)  # gfx906: MI50 / Radeon VII
    line = assert_refused(host.run("rocm", **image_env(ROCM_714, "rocm")), "gfx906", f"use {ROCM_72} instead")
    assert "gfx908" in line
    assert_ran(host.run("rocm", **image_env(ROCM_72, "rocm")))


@pytest.mark.parametrize("tag", [ROCM_714, ROCM_72])
def test_a_radeon_780m_runs_the_images_whose_wheels_have_gfx1103(host: Host, tag: str) -> None:
    amd(host, 110003)  # gfx1103, built since pytorch/pytorch#179653
    result = host.run("rocm", **image_env(tag, "rocm"))
    assert_ran(result)
    assert result.stderr == ""


def test_a_target_no_wheel_has_is_refused_naming_none(host: Host) -> None:
    amd(host, 100100)  # gfx1010 (RDNA1): in no PyTorch ROCm wheel
    assert_refused(host.run("rocm", **image_env(ROCM_714, "rocm")), "gfx1010", "no sibling image has kernels")


def test_hsa_override_gfx_version_is_the_target_rocr_uses(host: Host) -> None:
    amd(host, 100301)  # gfx1031, which users run as gfx1030 (unofficial; ROCm/legacy-rocm-build#1756)
    assert_refused(host.run("rocm", **image_env(ROCM_714, "rocm")), "gfx1031")
    assert_ran(host.run("rocm", **image_env(ROCM_714, "rocm"), HSA_OVERRIDE_GFX_VERSION="10.3.0"))


# ROCr reads HSA_OVERRIDE_GFX_VERSION with sscanf("%u.%u.%u%c") and takes it only when exactly three
# numbers convert, major <= 63, minor and stepping <= 255; anything else is "HSA_OVERRIDE_GFX_VERSION %s
# is invalid" (ROCm/ROCR-Runtime libhsakmt/src/topology.c, topology_sysfs_get_node_props).
MALFORMED_OVERRIDES = ["gfx1030", "10.3.0.1", "10.3", "", "64.0.0", "10.256.0", "10.3.x", "$(id)"]


@pytest.mark.parametrize("value", MALFORMED_OVERRIDES)
def test_a_malformed_hsa_override_is_one_warning_and_the_gpus_own_target_decides(host: Host, value: str) -> None:
    amd(host, 90402)  # gfx942, which the 7.14 wheels have
    assert_warned(host.run("rocm", **image_env(ROCM_714, "rocm"), HSA_OVERRIDE_GFX_VERSION=value),
                  f"HSA_OVERRIDE_GFX_VERSION={value} is not", "ignored", "the GPUs' own targets")


def test_the_gfx_check_goes_on_past_a_malformed_override(host: Host) -> None:
    amd(host, 90006)  # gfx906: refused by the 7.14 image whatever the override says
    result = host.run("rocm", **image_env(ROCM_714, "rocm"), HSA_OVERRIDE_GFX_VERSION="gfx1030")
    assert result.returncode == 78 and result.stdout == "", result.stderr
    warning, error = result.stderr.splitlines()
    assert warning.startswith("accel-images: warning: HSA_OVERRIDE_GFX_VERSION=gfx1030")
    assert error.startswith("accel-images: error: GPU target gfx906")


@pytest.mark.parametrize("value, target", [("9.0.10", "gfx90a"), ("09.00.010", "gfx90a"), ("11.0.0", "gfx1100")])
def test_a_well_formed_override_names_the_target_as_rocr_reads_it(host: Host, value: str, target: str) -> None:
    amd(host, 90006)  # gfx906, posing as the override's target
    result = host.run("rocm", **image_env(ROCM_714, "rocm"), HSA_OVERRIDE_GFX_VERSION=value)
    assert_ran(result)
    assert result.stderr == ""


def test_one_served_gpu_starts_with_a_warning_naming_the_other(host: Host) -> None:
    amd(host, 90402, 90006)  # gfx942 and gfx906
    assert_warned(host.run("rocm", **image_env(ROCM_714, "rocm")), "gfx906", "only those of gfx942")


def test_rocm_targets_come_from_the_facts_file(python_host: Host) -> None:
    amd(python_host, 90010)  # gfx90a
    facts = facts_file(python_host.bin.parent, backend="rocm", archs=["gfx942", "gfx950"],
                       toolkit={"cuda": None, "hip": "7.14", "xpu": None})
    assert_refused(python_host.run("rocm", **image_env(ROCM_714, "rocm") | {"ACCEL_IMAGES_FACTS": str(facts)}),
                   "gfx90a", "compiled for gfx942,gfx950")


def test_recommend_stops_offering_7_14_to_an_mi50(kb, expansion) -> None:
    from accel_images.host.recommend import recommend
    from accel_images.model.hostinfo import HostInfo
    from accel_images.plan.variants import select

    mi50 = HostInfo(vendor="rocm", gpu_archs=("gfx906",), device_count=1, stack_version="7.2.1")
    rec = recommend(mi50, select(expansion.variants, {"vendor": "rocm"}), kb, image=expansion.image)
    assert rec.variant is not None and rec.variant.tag == ROCM_72
    assert any(r.startswith(f"{ROCM_714}: GPU architecture gfx906 is not compiled") for r in rec.reasons)


# ---- ROCm: the host's amdgpu kernel driver -------------------------------------------------------
# The container brings its ROCm user space; the host's amdgpu kernel driver must be one AMD supports with it:
# AMD's "User and kernel-space support matrix" (instinct.docs.amd.com amdgpu-docs compatibility/
# compatibility-matrix.html: "30.10.x | 6.2.x, ..., 7.2.x, 7.14.x"; "6.4.x | 6.1.x, ..., 7.2.x"; "6.2.x | 6.0.x,
# ..., 7.0.x"). The driver's module version (/sys/module/amdgpu/version, the DKMS package's: amdgpu-dkms
# 6.8.5.60203 of AMD GPU Driver 6.2.3, 6.12.12.60404 of 6.4.4, 6.16.13.30300000 of 30.30) says which it is.


def amdgpu(host: Host, version: str) -> None:
    """The loaded amdgpu module's version, as the DKMS driver writes it."""
    path = host.dev_root / "sys" / "module" / "amdgpu" / "version"
    path.parent.mkdir(parents=True)
    path.write_text(f"{version}\n")


def test_a_6_2_era_amdgpu_driver_is_refused_by_the_7_14_image(host: Host) -> None:
    amd(host, 90402)  # gfx942: MI300X, which both images have kernels for
    amdgpu(host, "6.8.5")
    assert_refused(host.run("rocm", **image_env(ROCM_714, "rocm")), "amdgpu kernel driver 6.8.5", "AMD GPU Driver 30.10",
                   "no sibling image")


def test_a_6_4_era_driver_is_sent_from_the_7_14_image_to_7_2(host: Host) -> None:
    amd(host, 90402)
    amdgpu(host, "6.12.12")
    assert_refused(host.run("rocm", **image_env(ROCM_714, "rocm")), "6.12.12", f"use {ROCM_72} instead")
    assert_ran(host.run("rocm", **image_env(ROCM_72, "rocm")))


@pytest.mark.parametrize("tag", [ROCM_714, ROCM_72])
def test_a_current_driver_starts_either_image_silently(host: Host, tag: str) -> None:
    amd(host, 90402)
    amdgpu(host, "6.16.13")  # AMD GPU Driver 30.30
    result = host.run("rocm", **image_env(tag, "rocm"))
    assert_ran(result)
    assert result.stderr == ""


def test_a_gfx_refusal_names_only_an_image_the_driver_also_admits(host: Host) -> None:
    amd(host, 90006)  # gfx906: only the 7.2 wheels have it, and a 6.3-era driver is too old for 7.2
    amdgpu(host, "6.10.5")
    assert_refused(host.run("rocm", **image_env(ROCM_714, "rocm")), "gfx906", "no sibling image has kernels")


def test_the_kernel_driver_window_is_recommends_decision_too(kb, expansion) -> None:
    from accel_images.host.recommend import recommend
    from accel_images.model.hostinfo import HostInfo
    from accel_images.plan.variants import select

    rocm = select(expansion.variants, {"vendor": "rocm"})
    mi300x = HostInfo(vendor="rocm", gpu_names=("AMD Instinct MI300X",), gpu_archs=("gfx942",), device_count=8)
    old = recommend(replace(mi300x, driver_version="6.8.5", stack_version="6.2.3"), rocm, kb, image=expansion.image)
    assert old.variant is None
    assert any(r.startswith(f"{ROCM_714}: amdgpu kernel driver 6.8.5 (AMD GPU Driver 6.2)") for r in old.reasons)
    rec = recommend(replace(mi300x, driver_version="6.12.12", stack_version="6.4.1"), rocm, kb, image=expansion.image)
    assert rec.variant is not None and rec.variant.tag == ROCM_72
    current = recommend(replace(mi300x, driver_version="6.16.13", stack_version="6.4.1"), rocm, kb,
                        image=expansion.image)
    assert current.variant is not None and current.variant.tag == ROCM_714 and current.warnings == ()


# ---- Intel Gaudi: the host driver's release ---------------------------------------------------
# hl-smi's -Q queries (docs.habana.ai System_Management_Interface_Tool: "-Q, --query-aip ...
# driver_version") and its summary header ("| Driver Version: 1.24.1-3bf9e81 |"); the rule is
# recommend's (vendors/gaudi/host.py fit): the same release; on Gaudi 2 from 1.17, an older one of its minor or the one before.
GAUDI_1241 = "2.11.0-gaudi1.24.1-py3.12-ubuntu24.04-devel"
GAUDI_1240 = "2.10.0-gaudi1.24.0-py3.12-ubuntu24.04-devel"
FAKE_HL_SMI = """#!/bin/sh
# $0.answers: the driver ('1.24.1-3bf9e81') and the model ('HL-225'); QUERY=no: an hl-smi without -Q.
read -r driver model < "$0.answers"
if [ "$1" = "-Q" ]; then
    [ "${{QUERY:-yes}}" = yes ] || {{ echo "hl-smi: unknown option -Q"; exit 1; }}
    case "$2" in driver_version) echo "$driver" ;; name) echo "$model"; echo "$model" ;; esac
    exit 0
fi
printf '| HL-SMI Version:                              hl-1.24.1-fw-51.5.0           |\\n'
printf '| Driver Version:                                     %s          |\\n' "$driver"
printf '| Nic Driver Version:                                 9.9.9-0000000          |\\n'
"""


def gaudi(host: Host, driver: str, model: str = "HL-225") -> None:
    host.device("accel/accel0")
    host.device("accel/accel_controlD0")
    script = host.bin / "hl-smi"
    script.write_text(FAKE_HL_SMI.format())
    script.chmod(0o755)
    Path(f"{script}.answers").write_text(f"{driver} {model}\n")
    logs = host.bin.parent / "habana_logs"
    logs.mkdir(exist_ok=True)


def gaudi_env(tag: str, host: Host) -> dict[str, str]:
    return image_env(tag, "gaudi") | {"HABANA_LOGS": str(host.bin.parent / "habana_logs")}


def test_the_matching_gaudi_driver_starts_silently(host: Host) -> None:
    gaudi(host, "1.24.1-3bf9e81")
    result = host.run("gaudi", **gaudi_env(GAUDI_1241, host))
    assert_ran(result)
    assert result.stderr == ""


def test_another_gaudi_driver_is_refused_naming_the_image_that_matches(host: Host) -> None:
    gaudi(host, "1.24.1-3bf9e81", "HL-325L")
    assert_refused(host.run("gaudi", **gaudi_env(GAUDI_1240, host)), "host Intel Gaudi driver 1.24.1",
                   "software 1.24.0", "install the Intel Gaudi 1.24.0 driver", f"or use {GAUDI_1241}")


def test_the_summary_header_stands_in_for_an_hl_smi_without_queries(host: Host) -> None:
    gaudi(host, "1.23.0-a1b2c3d")
    line = assert_refused(host.run("gaudi", **gaudi_env(GAUDI_1241, host), QUERY="no"), "driver 1.23.0")
    assert "9.9.9" not in line  # the "Nic Driver Version" line is not the driver's


def test_gaudi2_runs_the_previous_release_with_a_warning_gaudi3_does_not(host: Host) -> None:
    gaudi(host, "1.25.0-0abcdef", "HL-225")
    assert_warned(host.run("gaudi", **gaudi_env(GAUDI_1241, host)), "one release behind", "Gaudi 2 only")
    gaudi(host, "1.25.0-0abcdef", "HL-325L")
    line = assert_refused(host.run("gaudi", **gaudi_env(GAUDI_1241, host)), "install the Intel Gaudi 1.24.1 driver")
    assert "or use" not in line


# Patch releases: "Added software backward/forward compatibility support for Gaudi 2, allowing users to run
# 1.16 dockers with Intel Gaudi software version 1.17.0" (docs.habana.ai Release Notes v1.17) is stated
# per minor release; that an older patch of the host's own minor runs too is inferred (no Habana document
# speaks of patch releases), so that no image is refused on a driver nearer to it than one that admits it.
@pytest.mark.parametrize("driver", ["1.24.1-3bf9e81", "1.25.0-0abcdef"])
def test_gaudi2_runs_an_older_patch_of_the_hosts_release_as_it_runs_the_previous_release(
        host: Host, driver: str) -> None:
    gaudi(host, driver, "HL-225")
    assert_warned(host.run("gaudi", **gaudi_env(GAUDI_1240, host)), "image Intel Gaudi software 1.24.0",
                  f"host driver's {driver.split('-')[0]}", "Gaudi 2 only")


@pytest.mark.parametrize("driver", ["1.24.1-3bf9e81", "1.25.0-0abcdef"])
def test_gaudi3_runs_only_the_hosts_own_release(host: Host, driver: str) -> None:
    gaudi(host, driver, "HL-325L")
    assert_refused(host.run("gaudi", **gaudi_env(GAUDI_1240, host)), "install the Intel Gaudi 1.24.0 driver")


def test_an_image_newer_than_the_gaudi2_driver_is_refused_even_within_its_minor(host: Host) -> None:
    gaudi(host, "1.24.0-0abcdef", "HL-225")
    assert_refused(host.run("gaudi", **gaudi_env(GAUDI_1241, host)), "install the Intel Gaudi 1.24.1 driver",
                   f"or use {GAUDI_1240}")


def test_gaudi_patch_releases_are_recommends_rule_too(kb, expansion) -> None:
    from accel_images.host.recommend import judge
    from accel_images.model.hostinfo import HostInfo

    variants = {v.tag: v for v in expansion.variants}
    gaudi2 = HostInfo(vendor="gaudi", driver_version="1.24.1-3bf9e81", stack_version="1.24.1", device_count=1,
                      gpu_names=("HL-225",), gpu_archs=("gaudi2",))
    older = judge(gaudi2, variants[GAUDI_1240], kb)
    assert older.fits and "Gaudi 2 only" in older.caveats[0]
    gaudi3 = HostInfo(vendor="gaudi", driver_version="1.24.1-3bf9e81", stack_version="1.24.1", device_count=1,
                      gpu_names=("HL-325L",), gpu_archs=("gaudi3",))
    assert not judge(gaudi3, variants[GAUDI_1240], kb).fits


def test_without_hl_smi_the_driver_is_not_checked(host: Host) -> None:
    host.device("accel/accel0")
    (host.bin.parent / "habana_logs").mkdir()
    assert_ran(host.run("gaudi", **gaudi_env(GAUDI_1240, host)))


# ---- Intel Gaudi: read-only roots ----------------------------------------------------------------
# Apptainer runs images from SIF, "the compressed Apptainer read only image format ... The default format
# is immutable" (apptainer.org/docs/user/main/cli/apptainer_build.html); Enroot's root file system is
# read-only unless ENROOT_ROOTFS_WRITABLE (NVIDIA/enroot doc/configuration.md) or Pyxis's
# --container-writable (NVIDIA/pyxis wiki, Usage) says otherwise. A path under a plain file stands in for
# a read-only root here: no one, root included, can make a directory there.
SHOW_HABANA_LOGS = ["sh", "-c", 'printf "%s" "$HABANA_LOGS"']


def read_only(host: Host) -> str:
    """A HABANA_LOGS that cannot be made or written, as /var/log/habana_logs under a read-only root."""
    blocked = host.bin.parent / "read-only-root"
    blocked.write_text("")
    return str(blocked / "var" / "log" / "habana_logs")


def test_a_read_only_habana_logs_falls_back_to_a_directory_of_the_users_under_tmpdir(host: Host) -> None:
    gaudi(host, "1.24.1-3bf9e81")
    logs = read_only(host)
    result = host.run("gaudi", SHOW_HABANA_LOGS, **gaudi_env(GAUDI_1241, host) | {"HABANA_LOGS": logs})
    fallback = host.tmp / f"habana_logs-{os.getuid()}"
    assert result.returncode == 0, result.stderr
    assert result.stdout == str(fallback), "the command gets the writable HABANA_LOGS"
    assert fallback.is_dir()
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-images: warning: "), result.stderr
    assert f"HABANA_LOGS={logs} is not writable" in lines[0] and str(fallback) in lines[0]


def test_dev_shm_holds_habana_logs_when_tmpdir_is_not_writable_either(host: Host) -> None:
    gaudi(host, "1.24.1-3bf9e81")
    shm = host.device("shm", directory=True)
    result = host.run("gaudi", SHOW_HABANA_LOGS, **gaudi_env(GAUDI_1241, host)
                      | {"HABANA_LOGS": read_only(host), "TMPDIR": read_only(host) + "-tmp"})
    assert result.stdout == str(shm / f"habana_logs-{os.getuid()}"), result.stderr


def test_a_fallback_someone_else_owns_is_not_used(host: Host) -> None:
    """A shared /tmp (Apptainer binds the host's): a name another user took first is skipped."""
    gaudi(host, "1.24.1-3bf9e81")
    taken = host.tmp / f"habana_logs-{os.getuid()}"
    taken.symlink_to(host.bin.parent)
    line = assert_refused(host.run("gaudi", **gaudi_env(GAUDI_1241, host) | {"HABANA_LOGS": read_only(host)}),
                          "is not writable", "set HABANA_LOGS to a writable directory")
    assert "/dev/shm" in line


def test_no_writable_place_for_habana_logs_is_one_refusal(host: Host) -> None:
    gaudi(host, "1.24.1-3bf9e81")
    assert_refused(host.run("gaudi", **gaudi_env(GAUDI_1241, host)
                            | {"HABANA_LOGS": read_only(host), "TMPDIR": read_only(host) + "-tmp"}),
                   "HABANA_LOGS=", "is not writable by user", "the Habana runtime aborts",
                   "set HABANA_LOGS to a writable directory")


def test_gaudi_decision_is_recommends(kb, expansion) -> None:
    from accel_images.host.recommend import judge
    from accel_images.model.hostinfo import HostInfo

    variants = {v.tag: v for v in expansion.variants}
    gaudi3 = HostInfo(vendor="gaudi", driver_version="1.24.1-3bf9e81", stack_version="1.24.1", device_count=1,
                      gpu_names=("HL-325L",), gpu_archs=("gaudi3",))
    assert judge(gaudi3, variants[GAUDI_1241], kb).fits
    assert not judge(gaudi3, variants[GAUDI_1240], kb).fits


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() != 0
                    or not shutil.which("setpriv"), reason="changing user and file groups needs root and setpriv")
def test_unopenable_gaudi_nodes_are_refused_with_the_exact_group_add(shared_host: Host) -> None:
    # /dev/accel/accel0 and accel_controlD0, the nodes the habana runtime maps (habana-container-runtime
    # devPrefixes); their group on the host is not documented: the guard names whatever it is
    from test_guard import as_user, node

    for relative in ("accel/accel0", "accel/accel_controlD0"):
        node(shared_host, relative, 4242)
    (shared_host.dev_root / "dev" / "accel").chmod(0o755)
    line = assert_refused(as_user(shared_host, "gaudi", "", HABANA_LOGS="/tmp"), "user 1000 cannot open",
                          "--group-add 4242")
    assert "accel_controlD0" in line


# ---- Intel XPU: Data Center GPU Max -----------------------------------------------------------
# "For data center GPUs, including Intel Data Center GPU Max Series ..., the out-of-tree drivers are
# the only drivers validated by Intel" (dgpu-docs.intel.com driver/kernel-driver-types.html); the PCI
# ids: the kernel's INTEL_PVC_IDS (include/drm/intel/i915_pciids.h).
XPU = "2.14.1-xpu2026.1-py3.12-ubuntu24.04"


def render_nodes(host: Host, *devices: str) -> None:
    """A render node per 'vendor:device' PCI id pair, with both under /sys/class/drm/renderD*/device."""
    for index, pci_id in enumerate(devices):
        vendor, device_id = pci_id.split(":")
        host.device(f"dri/renderD{128 + index}")
        device = host.dev_root / "sys" / "class" / "drm" / f"renderD{128 + index}" / "device"
        device.mkdir(parents=True)
        (device / "vendor").write_text(f"{vendor}\n")
        (device / "device").write_text(f"{device_id}\n")


def intel(host: Host, *device_ids: str) -> None:
    """A render node per Intel device (PCI vendor 0x8086)."""
    render_nodes(host, *(f"0x8086:{device_id}" for device_id in device_ids))


def test_a_data_center_gpu_max_is_refused_with_the_reason(host: Host) -> None:
    intel(host, "0x0bd5")  # Max 1550
    assert_refused(host.run("xpu", **image_env(XPU, "xpu")), "Data Center GPU Max", "0x0bd5", "out-of-tree i915",
                   "ppa:kobuk-team/intel-graphics")


def test_an_arc_gpu_starts(host: Host) -> None:
    intel(host, "0x56a0")  # Arc A770
    result = host.run("xpu", **image_env(XPU, "xpu"))
    assert_ran(result)
    assert result.stderr == ""


def test_a_max_beside_an_arc_is_a_warning(host: Host) -> None:
    intel(host, "0x56a0", "0x0BD6")
    assert_warned(host.run("xpu", **image_env(XPU, "xpu")), "0x0bd6", "only the other GPUs")


# ---- Intel XPU: no Intel render node ------------------------------------------------------------
# /sys/class/drm/renderD*/device/vendor is the PCI vendor id of the node's device (the kernel's
# Documentation/ABI/testing/sysfs-bus-pci, "vendor"); Intel's is 0x8086, AMD's 0x1002 and NVIDIA's
# 0x10de (include/linux/pci_ids.h PCI_VENDOR_ID_INTEL, _ATI, _NVIDIA). recommend counts a node as
# Intel's unless sysfs names another vendor (vendors/xpu/host.py accelerator_present); so does the guard.
MI300X, RTX_A6000 = "0x1002:0x74a1", "0x10de:0x2230"


def test_an_xpu_image_on_an_amd_only_host_warns_and_refuses_when_an_accelerator_is_required(host: Host) -> None:
    render_nodes(host, MI300X, MI300X)
    assert_warned(host.run("xpu", **image_env(XPU, "xpu")), "no Intel GPU among the render nodes",
                  "PCI vendor 0x1002", "running on the CPU")
    assert_refused(host.run("xpu", **image_env(XPU, "xpu"), ACCEL_IMAGES_REQUIRE_ACCELERATOR="1"),
                   "no Intel GPU among the render nodes", "0x1002")


def test_an_intel_gpu_beside_another_vendors_starts_silently(host: Host) -> None:
    render_nodes(host, RTX_A6000, "0x8086:0x56a0")
    result = host.run("xpu", **image_env(XPU, "xpu"), ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")
    assert_ran(result)
    assert result.stderr == ""


def test_a_render_node_sysfs_says_nothing_of_counts_as_intels(host: Host) -> None:
    host.device("dri/renderD128")  # no /sys/class/drm: the vendor cannot be read, as recommend decides
    result = host.run("xpu", **image_env(XPU, "xpu"), ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")
    assert_ran(result)
    assert result.stderr == ""


# ---- Intel XPU: processor graphics --------------------------------------------------------------
# Integrated graphics sits at PCI slot 00:02.0 (the uevent's PCI_SLOT_NAME); host detection counts it only
# when its device id is of a family PyTorch's XPU guide validates (docs.pytorch.org get_start_xpu: Core
# Ultra's Arc graphics; ids from the kernel's include/drm/intel/pciids.h, xpu.yaml validated_gpus). The guard
# decides the same, so an XPU image on a UHD-only laptop no longer starts where recommend says no accelerator.


def at_slot(host: Host, node: int, slot: str) -> None:
    """Render node renderD<node>'s PCI device sits at `slot` (0000:00:02.0), as its uevent says."""
    device = host.dev_root / "sys" / "class" / "drm" / f"renderD{node}" / "device"
    (device / "uevent").write_text(f"DRIVER=xe\nPCI_SLOT_NAME={slot}\n")


def test_uhd_graphics_alone_is_no_intel_gpu_and_is_refused_when_one_is_required(host: Host) -> None:
    intel(host, "0x46a6")  # Alder Lake-P: INTEL_ADLP_IDS, not a validated family
    at_slot(host, 128, "0000:00:02.0")
    assert_warned(host.run("xpu", **image_env(XPU, "xpu")), "no Intel GPU among the render nodes",
                  "integrated graphics 0x46a6 at 00:02.0 is not counted")
    assert_refused(host.run("xpu", **image_env(XPU, "xpu"), ACCEL_IMAGES_REQUIRE_ACCELERATOR="1"),
                   "integrated graphics 0x46a6 at 00:02.0 is not counted")


@pytest.mark.parametrize("device_id", ["0x7d55", "0x7D51", "0x64a0"])  # Meteor, Arrow, Lunar Lake
def test_core_ultra_arc_graphics_at_the_integrated_slot_starts(host: Host, device_id: str) -> None:
    intel(host, device_id)
    at_slot(host, 128, "0000:00:02.0")
    result = host.run("xpu", **image_env(XPU, "xpu"), ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")
    assert_ran(result)
    assert result.stderr == ""


def test_a_discrete_arc_beside_uhd_graphics_starts_silently(host: Host) -> None:
    intel(host, "0x46a6", "0x56a0")
    at_slot(host, 128, "0000:00:02.0")
    at_slot(host, 129, "0000:03:00.0")
    result = host.run("xpu", **image_env(XPU, "xpu"), ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")
    assert_ran(result)
    assert result.stderr == ""


def test_recommend_rejects_a_data_center_gpu_max(tmp_path: Path, kb, expansion) -> None:
    from accel_images.host.detect import detect_host
    from accel_images.host.recommend import judge

    recorded = (Path(__file__).parents[1] / "data" / "host" / "sycl-ls-max1550-old.txt").read_text()
    (tmp_path / "dev" / "dri").mkdir(parents=True)
    (tmp_path / "dev" / "dri" / "renderD128").write_text("")
    max1550 = detect_host(lambda argv: recorded if argv == ["sycl-ls"] else None, tmp_path)
    assert max1550.vendor == "xpu" and max1550.gpu_names
    fit = judge(max1550, next(v for v in expansion.variants if v.tag == XPU), kb)
    assert not fit.fits and "Data Center GPU Max" in fit.rejections[0]
