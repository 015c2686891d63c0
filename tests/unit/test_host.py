"""Host detection against recorded tool outputs (tests/data/host, sources in its README) and fake roots."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel_images.errors import InputError
from accel_images.host.detect import HostInfo, compare_driver, detect_host, run_command
from accel_images.model.hostinfo import answer, exit_code, failed, said
from accel_images.vendors.gaudi import generation

DATA = Path(__file__).parents[1] / "data" / "host"

NVIDIA_QUERY = ("nvidia-smi", "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader")
NVIDIA_QUERY_NO_CC = ("nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader")
NVIDIA_TABLE = ("nvidia-smi",)
ROCMINFO = ("rocminfo",)
AMD_SMI_VERSION = ("amd-smi", "version")
AMD_SMI_STATIC = ("amd-smi", "static", "--asic")
HIPCONFIG = ("hipconfig", "--version")
XPU_SMI = ("xpu-smi", "discovery", "-j")
SYCL_LS = ("sycl-ls",)
HL_SMI = ("hl-smi",)
HL_SMI_QUERY = ("hl-smi", "-Q", "name,driver_version", "-f", "csv,noheader")
NVIDIA_FULL = ("nvidia-smi", "-q")
AMD_SMI_TABLE = ("amd-smi",)
AMD_SMI_STATIC_SECTIONS = ("amd-smi", "static", "--asic", "--driver")
AMD_SMI_STATIC_ALL = ("amd-smi", "static")
XPU_SMI_TABLE = ("xpu-smi", "discovery")
ALL_COMMANDS = (NVIDIA_QUERY, NVIDIA_QUERY_NO_CC, NVIDIA_TABLE, NVIDIA_FULL, ROCMINFO, AMD_SMI_VERSION,
                AMD_SMI_STATIC, AMD_SMI_STATIC_SECTIONS, AMD_SMI_TABLE, HIPCONFIG, XPU_SMI, XPU_SMI_TABLE, SYCL_LS,
                HL_SMI, HL_SMI_QUERY)


def recorded(name: str) -> str:
    return (DATA / name).read_text()


class FakeTools:
    """Answers commands from a table; a command not in it behaves like a missing tool (None)."""

    def __init__(self, answers: dict[tuple[str, ...], str | None] | None = None) -> None:
        self.answers = dict(answers or {})
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: list[str]) -> str | None:
        self.calls.append(tuple(argv))
        return self.answers.get(tuple(argv))


def machine(root: Path, files: dict[str, str]) -> Path:
    """A fake filesystem root: each key is an absolute path on the faked machine."""
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


NVIDIA_TOOLS = {NVIDIA_QUERY: recorded("nvidia-smi-query-a100-580.csv"),
                NVIDIA_TABLE: recorded("nvidia-smi-a100-580.txt")}
AMD_TOOLS = {ROCMINFO: recorded("rocminfo-mi300x.txt"), AMD_SMI_VERSION: recorded("amd-smi-version-6.4.1.txt")}
INTEL_TOOLS: dict[tuple[str, ...], str | None] = {SYCL_LS: recorded("sycl-ls-arc-a770.txt")}
GAUDI_TOOLS = {HL_SMI: recorded("hl-smi-gaudi2.txt"), HL_SMI_QUERY: recorded("hl-smi-query-gaudi2.csv")}
AMD_FILES = {"/dev/kfd": ""}
INTEL_FILES = {"/dev/dri/renderD128": ""}
H100_INFORMATION = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 110\nBus Location: \t 0000:04:00.0\n"


def evidence_text(host: HostInfo) -> str:
    return "\n".join(host.evidence)


# ---------------------------------------------------------------------------------------------
# NVIDIA
# ---------------------------------------------------------------------------------------------

def test_nvidia_from_recorded_query_and_table(tmp_path):
    host = detect_host(FakeTools(NVIDIA_TOOLS), tmp_path)
    assert host.vendor == "cuda"
    assert host.driver_version == "580.126.09"
    assert host.stack_version == "13.0"
    assert host.gpu_names == ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB")
    assert host.gpu_archs == ("8.0",)
    assert host.device_count == 2
    assert "CUDA up to 13.0" in evidence_text(host)
    assert host.evidence[-1] == "chose cuda"


@pytest.mark.parametrize("table, driver, stack_version", [
    ("nvidia-smi-h100-535.txt", "535.129.03", "12.2"),
    ("nvidia-smi-a100-580.txt", "580.126.09", "13.0"),
    ("nvidia-smi-b200-r610.txt", "610.43.02", "13.3"),  # R610: "KMD Version", "CUDA UMD Version"
])
def test_nvidia_header_gives_driver_and_highest_cuda(tmp_path, table, driver, stack_version):
    host = detect_host(FakeTools({NVIDIA_QUERY: recorded("nvidia-smi-query-mixed.csv"),
                                  NVIDIA_TABLE: recorded(table)}), tmp_path)
    assert (host.vendor, host.stack_version) == ("cuda", stack_version)
    assert host.driver_version == "570.86.15"  # the query rows win over the header
    header_only = detect_host(FakeTools({NVIDIA_TABLE: recorded(table)}), tmp_path)
    assert (header_only.driver_version, header_only.stack_version) == (driver, stack_version)


def test_nvidia_table_alone_counts_gpu_rows(tmp_path):
    host = detect_host(FakeTools({NVIDIA_TABLE: recorded("nvidia-smi-b200-r610.txt")}), tmp_path)
    assert host.device_count == 2
    assert host.gpu_names == ("NVIDIA B200", "NVIDIA B200")
    assert host.gpu_archs == ()


def test_mixed_nvidia_gpus_keep_each_architecture(tmp_path):
    host = detect_host(FakeTools({NVIDIA_QUERY: recorded("nvidia-smi-query-mixed.csv")}), tmp_path)
    assert host.gpu_names == ("NVIDIA TITAN V", "NVIDIA RTX 5880 Ada Generation")
    assert host.gpu_archs == ("7.0", "8.9")
    assert host.stack_version is None
    assert "highest CUDA not reported" in evidence_text(host)


def test_old_driver_without_compute_cap_still_detected(tmp_path):
    tools = FakeTools({NVIDIA_QUERY_NO_CC: "470.182.03, NVIDIA GeForce GTX 1080\n"})  # cc query fails
    host = detect_host(tools, tmp_path)
    assert (host.vendor, host.driver_version, host.gpu_archs) == ("cuda", "470.182.03", ())
    assert "cannot report compute_cap" in evidence_text(host)
    assert tools.calls[:2] == [NVIDIA_QUERY, NVIDIA_QUERY_NO_CC]


def test_compute_cap_not_available_is_no_arch(tmp_path):
    host = detect_host(FakeTools({NVIDIA_QUERY: "580.95.05, [N/A], NVIDIA H100 80GB HBM3\n"}), tmp_path)
    assert (host.device_count, host.gpu_archs) == (1, ())


@pytest.mark.parametrize("recording, driver", [
    ("proc-driver-nvidia-version.txt", "580.173.02"),
    ("proc-driver-nvidia-version-open.txt", "565.57.01"),
])
def test_without_nvidia_smi_the_proc_files_answer(tmp_path, recording, driver):
    root = machine(tmp_path, {"/proc/driver/nvidia/version": recorded(recording),
                              "/proc/driver/nvidia/gpus/0000:04:00.0/information": H100_INFORMATION,
                              "/proc/driver/nvidia/gpus/0000:64:00.0/information": H100_INFORMATION})
    host = detect_host(FakeTools(), root)
    assert (host.vendor, host.driver_version, host.stack_version) == ("cuda", driver, None)
    assert host.gpu_names == ("NVIDIA H100 80GB HBM3",) * 2
    assert "highest CUDA unknown" in evidence_text(host)


def test_nvidia_driver_loaded_without_gpus_is_not_cuda(tmp_path):
    root = machine(tmp_path, {"/proc/driver/nvidia/version": recorded("proc-driver-nvidia-version.txt")})
    host = detect_host(FakeTools(), root)
    assert host.vendor == "cpu"
    assert "lists no GPU" in evidence_text(host)


# ---- recorded in the 2026-12 batch: Jetson, broken drivers, nvidia-smi -q ---------------------

@pytest.mark.parametrize("recording, driver, cuda", [
    ("nvidia-smi-orin-jp6-540.txt", "540.4.0", "12.6"),
    ("nvidia-smi-orin-cuda-na.txt", "540.4.0", None),     # "CUDA Version: N/A" is no version
    ("nvidia-smi-orin-driver-na.txt", None, "12.2"),      # "NVIDIA-SMI 540.3.0" is the tool's, not the driver's
])
def test_jetson_orin_table_with_na_persistence_is_a_gpu(tmp_path, recording, driver, cuda):
    """The table names no compute capability; the Orin's is 8.7 (every Orin's: cuda-gpus), which is
    what tells the arm64 images that this GPU is a Jetson's."""
    host = detect_host(FakeTools({NVIDIA_TABLE: recorded(recording)}), tmp_path)
    assert (host.vendor, host.driver_version, host.stack_version) == ("cuda", driver, cuda)
    assert (host.gpu_names, host.device_count, host.gpu_archs, host.unusable) == (("Orin (nvgpu)",), 1, ("8.7",), None)


@pytest.mark.parametrize("answer, machine", [("x86_64\n", "x86_64"), ("aarch64\n", "aarch64"), (None, None),
                                             ("", None), ("two words\n", None)])
def test_the_cpu_architecture_is_what_uname_m_prints(tmp_path, answer, machine):
    answers: dict[tuple[str, ...], str | None] = {("uname", "-m"): answer} if answer is not None else {}
    host = detect_host(FakeTools(answers), tmp_path)
    assert host.machine == machine
    assert any(line.startswith("machine: ") for line in host.evidence)


def test_rows_of_the_process_table_are_not_gpus(tmp_path):
    """Jetson's process rows end in N/A like its GPU row; the table after "Processes:" is not read.
    The process rows are constructed in nvidia-smi's layout (the recordings have theirs dropped)."""
    processes = ("+---------------------------------------------------------------------------------------+\n"
                 "| Processes:                                                                            |\n"
                 "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |\n"
                 "|=======================================================================================|\n"
                 "|    0   N/A  N/A      2345      G   /usr/lib/xorg/Xorg                          N/A  |\n")
    host = detect_host(FakeTools({NVIDIA_TABLE: recorded("nvidia-smi-orin-jp6-540.txt") + processes}), tmp_path)
    assert host.device_count == 1


@pytest.mark.parametrize("recording, nvml", [
    ("nvidia-smi-nvml-mismatch-550.txt", "550.144"),
    ("nvidia-smi-nvml-mismatch-570.txt", "570.124"),
    ("nvidia-smi-nvml-mismatch-old.txt", None),
])
def test_driver_library_mismatch_is_an_unusable_cuda_host(tmp_path, recording, nvml):
    # nvidia-smi prints it on stdout and exits 18; every command form answers the same.
    failure = failed(recorded(recording), 18)
    tools = FakeTools({NVIDIA_QUERY: failure, NVIDIA_QUERY_NO_CC: failure, NVIDIA_FULL: failure, NVIDIA_TABLE: failure})
    root = machine(tmp_path, {"/proc/driver/nvidia/version": recorded("proc-driver-nvidia-version.txt"),
                              "/proc/driver/nvidia/gpus/0000:04:00.0/information": H100_INFORMATION})
    host = detect_host(tools, root)
    assert (host.vendor, host.driver_version, host.device_count, host.gpu_names) == ("cuda", None, 0, ())
    assert host.unusable.startswith("NVIDIA driver/library version mismatch")
    assert ("user-space NVML " + nvml in host.unusable) if nvml else "NVML" not in host.unusable
    assert "loaded kernel module 580.173.02" in host.unusable  # from /proc/driver/nvidia/version
    assert host.evidence[-1] == f"chose cuda: accelerator present but unusable: {host.unusable}"
    assert [c for c in tools.calls if c[0] == "nvidia-smi"] == [NVIDIA_QUERY]  # the first failure answers
    # ... and /proc/driver/nvidia, which lists the GPU, is not taken for a working driver


@pytest.mark.parametrize("recording, reason", [
    ("nvidia-smi-no-driver.txt", "NVIDIA driver not loaded / not reachable"),
    ("nvidia-smi-nvml-unknown-error-container.txt", "NVML Unknown Error"),
    ("nvidia-smi-nvml-mismatch-550.txt", "NVIDIA driver/library version mismatch (user-space NVML 550.144)"),
])
@pytest.mark.parametrize("command", [NVIDIA_QUERY, NVIDIA_TABLE, NVIDIA_FULL])
def test_nvidia_smi_failures_are_read_as_plain_text_from_any_form(tmp_path, recording, reason, command):
    host = detect_host(FakeTools({command: recorded(recording)}), tmp_path)
    assert (host.vendor, host.device_count, host.driver_version, host.stack_version) == ("cuda", 0, None, None)
    assert host.unusable.startswith(reason)


def test_nvidia_smi_failing_without_an_nvidia_device_is_no_accelerator(tmp_path):
    """Driver packages on a machine without the GPU: sysfs lists PCI devices, none of vendor 0x10de."""
    root = machine(tmp_path, {"/sys/bus/pci/devices/0000:00:00.0/vendor": "0x8086\n",
                              "/sys/bus/pci/devices/0000:00:1f.0/vendor": "0x8086\n"})
    host = detect_host(FakeTools({NVIDIA_QUERY: failed(recorded("nvidia-smi-no-driver.txt"), 9)}), root)
    assert (host.vendor, host.unusable) == ("cpu", None)
    assert "no NVIDIA device is on the PCI bus" in evidence_text(host)
    with_gpu = machine(tmp_path, {"/sys/bus/pci/devices/0000:3b:00.0/vendor": "0x10de\n"})
    assert detect_host(FakeTools({NVIDIA_QUERY: recorded("nvidia-smi-no-driver.txt")}), with_gpu).unusable


def test_an_unknown_nvidia_smi_failure_is_no_answer(tmp_path):
    host = detect_host(FakeTools({NVIDIA_QUERY: failed("Some message\n", 3)}), tmp_path)
    assert (host.vendor, host.unusable) == ("cpu", None)
    assert "exited 3: 'Some message'" in evidence_text(host)


def test_nvidia_smi_q_stands_in_for_a_failing_csv_query(tmp_path):
    tools = FakeTools({NVIDIA_FULL: recorded("nvidia-smi-q-h100-565.txt")})
    host = detect_host(tools, tmp_path)
    assert (host.vendor, host.driver_version, host.stack_version) == ("cuda", "565.57.01", "12.7")
    assert host.device_count == 8                     # "Attached GPUs : 8"; one GPU block kept in the recording
    assert host.gpu_names == ("NVIDIA H100 80GB HBM3",)
    assert host.gpu_archs == ("9.0",)                 # Product Architecture: Hopper, all of which is 9.0
    assert "architecture Hopper" in evidence_text(host) and "PCI device id 0x233010DE" in evidence_text(host)
    assert tools.calls[:3] == [NVIDIA_QUERY, NVIDIA_QUERY_NO_CC, NVIDIA_FULL]
    assert NVIDIA_TABLE not in tools.calls            # -q also gave the CUDA version


def test_nvidia_smi_q_of_an_old_driver_has_no_architecture(tmp_path):
    host = detect_host(FakeTools({NVIDIA_FULL: recorded("nvidia-smi-q-a100-470.txt")}), tmp_path)
    assert (host.driver_version, host.stack_version, host.device_count) == ("470.103.01", "11.4", 1)
    assert (host.gpu_names, host.gpu_archs) == (("NVIDIA A100-SXM4-80GB",), ())
    assert "no Product Architecture field (unknown)" in evidence_text(host)


def test_nvidia_smi_q_is_not_asked_when_the_csv_query_answers(tmp_path):
    tools = FakeTools({**NVIDIA_TOOLS, NVIDIA_FULL: recorded("nvidia-smi-q-h100-565.txt")})
    assert detect_host(tools, tmp_path).gpu_names == ("NVIDIA A100-SXM4-40GB",) * 2
    assert NVIDIA_FULL not in tools.calls


def test_a_working_accelerator_wins_over_a_broken_one(tmp_path):
    tools = FakeTools({NVIDIA_QUERY: recorded("nvidia-smi-nvml-mismatch-550.txt"), **AMD_TOOLS})
    host = detect_host(tools, machine(tmp_path, AMD_FILES))
    assert (host.vendor, host.unusable) == ("rocm", None)
    assert host.evidence[-1] == "chose rocm over cuda (unusable) (order: cuda, rocm, xpu, gaudi)"


# ---------------------------------------------------------------------------------------------
# AMD ROCm
# ---------------------------------------------------------------------------------------------

def test_rocm_from_recorded_rocminfo_and_amd_smi(tmp_path):
    host = detect_host(FakeTools(AMD_TOOLS), machine(tmp_path, AMD_FILES))
    assert host.vendor == "rocm"
    assert host.gpu_names == ("AMD Instinct MI300X", "AMD Instinct MI300X")
    assert host.gpu_archs == ("gfx942",)
    assert host.device_count == 2  # CPU agents are not counted
    assert host.stack_version == "6.4.1"
    assert host.driver_version == "6.10.5"


def test_rocm_needs_dev_kfd(tmp_path):
    host = detect_host(FakeTools(AMD_TOOLS), tmp_path)
    assert host.vendor == "cpu"
    assert "no /dev/kfd" in evidence_text(host)


@pytest.mark.parametrize("tools, files, expected", [
    ({AMD_SMI_VERSION: recorded("amd-smi-version-6.3.3.txt"), HIPCONFIG: "6.2.41134-65d174c3e"},
     {"/opt/rocm/.info/version": "6.1.2-98\n"}, "6.3.3"),
    ({HIPCONFIG: "6.2.41134-65d174c3e"}, {"/opt/rocm/.info/version": "6.1.2-98\n"}, "6.2"),
    ({}, {"/opt/rocm/.info/version": "6.1.2-98\n"}, "6.1.2"),
    ({AMD_SMI_VERSION: "AMDSMI Tool: 26.1.0 | AMDSMI Library version: 26.1.0 | ROCm version: 7.14.0"},
     {}, "7.14.0"),  # TheRock layout: no /opt/rocm/.info/version at all
    ({}, {}, None),
])
def test_rocm_version_prefers_amd_smi_then_hipconfig_then_file(tmp_path, tools, files, expected):
    root = machine(tmp_path, {**AMD_FILES, **files})
    host = detect_host(FakeTools({ROCMINFO: recorded("rocminfo-mi300x.txt"), **tools}), root)
    assert (host.vendor, host.stack_version) == ("rocm", expected)


def test_in_kernel_amdgpu_banner_is_not_a_driver_version(tmp_path):
    tools = FakeTools({ROCMINFO: recorded("rocminfo-mi300x.txt"),
                       AMD_SMI_VERSION: recorded("amd-smi-version-inbox-driver.txt")})
    host = detect_host(tools, machine(tmp_path, AMD_FILES))
    assert host.stack_version == "6.4.0"
    assert host.driver_version == "6.8.5"  # from rocminfo's "ROCk module version 6.8.5 is loaded"
    assert "not a version" in evidence_text(host)


def test_amd_smi_static_stands_in_for_rocminfo(tmp_path):
    tools = FakeTools({AMD_SMI_STATIC: recorded("amd-smi-static-asic-mi350x.txt")})
    host = detect_host(tools, machine(tmp_path, AMD_FILES))
    assert (host.vendor, host.gpu_names, host.gpu_archs) == ("rocm", ("AMD Instinct MI350X",), ("gfx950",))


def test_old_amd_smi_static_has_no_arch(tmp_path):
    tools = FakeTools({AMD_SMI_STATIC: recorded("amd-smi-static-mi300x-blog.txt")})
    host = detect_host(tools, machine(tmp_path, AMD_FILES))
    assert (host.gpu_names, host.gpu_archs, host.device_count) == (("MI300X-O",), (), 1)


def test_kfd_topology_answers_without_any_rocm_tool(tmp_path):
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    root = machine(tmp_path, {**AMD_FILES,
                              f"{nodes}/0/properties": "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n",
                              f"{nodes}/1/properties": "simd_count 440\ngfx_target_version 90010\nvendor_id 4098\n",
                              f"{nodes}/2/properties": "simd_count 1216\ngfx_target_version 90402\nvendor_id 4098\n",
                              f"{nodes}/3/properties": "gfx_target_version 110000\nvendor_id 4318\n"})  # not AMD
    host = detect_host(FakeTools(), root)
    assert (host.vendor, host.gpu_archs, host.device_count) == ("rocm", ("gfx90a", "gfx942"), 2)
    assert host.gpu_names == ()


def test_kfd_without_any_gpu_is_not_rocm(tmp_path):
    host = detect_host(FakeTools({ROCMINFO: "ROCk module is loaded\n"}), machine(tmp_path, AMD_FILES))
    assert host.vendor == "cpu"
    assert "/dev/kfd present but no GPU" in evidence_text(host)


def test_gfx_feature_suffix_is_stripped_and_generic_isa_ignored(tmp_path):
    rocminfo = ("*******\nAgent 2\n*******\n  Name:                    gfx90a:sramecc+:xnack-\n"
                "  Marketing Name:          AMD Instinct MI250X\n  Device Type:             GPU\n"
                "*******\nAgent 3\n*******\n  Name:                    AMD Radeon Graphics\n"
                "  Marketing Name:          AMD Radeon 780M Graphics\n  Device Type:             GPU\n"
                "  ISA Info:\n    ISA 1\n      Name:                    amdgcn-amd-amdhsa--gfx11-generic\n"
                "    ISA 2\n      Name:                    amdgcn-amd-amdhsa--gfx1103\n")
    host = detect_host(FakeTools({ROCMINFO: rocminfo}), machine(tmp_path, AMD_FILES))
    assert host.gpu_archs == ("gfx90a", "gfx1103")


# ---- recorded in the 2026-12 batch: WSL2, rocminfo and amd-smi failures, amd-smi table and static ----

def test_wsl2_rocm_has_dev_dxg_and_no_dev_kfd(tmp_path):
    """AMD's WSL notes (wsl-dev-dxg-doc.txt): the GPU is /dev/dxg; /dev/kfd does not exist."""
    assert "/dev/dxg" in recorded("wsl-dev-dxg-doc.txt") and "/dev/kfd is not present" in recorded("wsl-dev-dxg-doc.txt")
    host = detect_host(FakeTools({ROCMINFO: recorded("rocminfo-wsl-rx7900gre.txt")}), machine(tmp_path, {"/dev/dxg": ""}))
    assert (host.vendor, host.gpu_names, host.gpu_archs, host.device_count) == (
        "rocm", ("AMD Radeon RX 7900 GRE",), ("gfx1100",), 1)
    assert host.driver_version is None  # no "ROCk module version ... is loaded" banner under WSL
    assert "WSL2" in evidence_text(host) and "rocminfo reports a WSL environment" in evidence_text(host)


def test_neither_kfd_nor_dxg_asks_no_rocm_tool(tmp_path):
    tools = FakeTools({ROCMINFO: recorded("rocminfo-wsl-rx7900gre.txt")})
    assert detect_host(tools, tmp_path).vendor == "cpu"
    assert ROCMINFO not in tools.calls


def test_rocminfo_that_cannot_open_kfd_makes_an_unusable_host(tmp_path):
    failure = failed(recorded("rocminfo-kfd-cannot-allocate.txt"), 1)
    host = detect_host(FakeTools({ROCMINFO: failure}), machine(tmp_path, AMD_FILES))
    assert (host.vendor, host.device_count, host.driver_version) == ("rocm", 0, None)  # "ROCk module is loaded": no version
    assert host.unusable == "cannot open /dev/kfd: Cannot allocate memory (HSA_STATUS_ERROR_OUT_OF_RESOURCES)"


def test_a_kfd_failure_blocks_containers_even_when_amd_smi_lists_the_gpu(tmp_path):
    tools = FakeTools({ROCMINFO: recorded("rocminfo-kfd-cannot-allocate.txt"),
                       AMD_SMI_STATIC_SECTIONS: recorded("amd-smi-static-mi350x-sections.txt")})
    host = detect_host(tools, machine(tmp_path, AMD_FILES))
    assert host.unusable.startswith("cannot open /dev/kfd")
    assert (host.gpu_names, host.gpu_archs) == (("AMD Instinct MI350X",), ("gfx950",))


def test_kfd_permission_denied_only_blocks_this_user(tmp_path):
    """Constructed from rocminfo's own messages (rocminfo.cc CheckInitialState): a user outside the
    render group; the docker run line adds the groups, so the KFD topology's GPU counts."""
    rocminfo = ("ROCk module version 6.10.5 is loaded\nUnable to open /dev/kfd read-write: Permission denied\n"
                "alice is not member of \"render\" group, the default DRM access group.\n")
    root = machine(tmp_path, {**AMD_FILES, "/sys/class/kfd/kfd/topology/nodes/1/properties":
                              "gfx_target_version 90402\nvendor_id 4098\n"})
    host = detect_host(FakeTools({ROCMINFO: failed(rocminfo)}), root)
    assert (host.vendor, host.unusable, host.gpu_archs) == ("rocm", None, ("gfx942",))
    assert "render/video group" in evidence_text(host)


@pytest.mark.parametrize("command", [AMD_SMI_VERSION, AMD_SMI_TABLE, AMD_SMI_STATIC_ALL])
def test_amd_smi_without_amdgpu_module_and_no_gpu_is_unusable(tmp_path, command):
    host = detect_host(FakeTools({command: recorded("amd-smi-builtin-amdgpu-error.txt")}), machine(tmp_path, AMD_FILES))
    assert (host.vendor, host.device_count, host.stack_version, host.driver_version) == ("rocm", 0, None, None)
    assert host.unusable.startswith("amdgpu not found in modules")


def test_amd_smi_version_line_after_its_log_lines(tmp_path):
    host = detect_host(FakeTools({AMD_SMI_VERSION: recorded("amd-smi-builtin-amdgpu-error.txt")}),
                       machine(tmp_path, AMD_FILES))
    assert "AMDSMI Tool 26.1.0+b5522cc8, library 26.1.0" in evidence_text(host)


def test_amd_smi_module_message_is_no_failure_when_rocminfo_lists_the_gpus(tmp_path):
    """Built-in amdgpu: amd-smi before ROCm/amdsmi#172 says so, while ROCm itself works."""
    tools = FakeTools({ROCMINFO: recorded("rocminfo-mi300x.txt"),
                       AMD_SMI_VERSION: recorded("amd-smi-builtin-amdgpu-error.txt")})
    host = detect_host(tools, machine(tmp_path, AMD_FILES))
    assert (host.vendor, host.unusable, host.device_count) == ("rocm", None, 2)
    assert "amdgpu not found in modules" in evidence_text(host)


@pytest.mark.parametrize("recording, names, rocm, driver, shown", [
    ("amd-smi-table-rx9070xt-7.1.1.txt", ("AMD Radeon RX 9070 XT",) * 2, "7.1.1", "6.16.6",
     ["amd-smi 26.2.0+021c61fc lists", "0000:04:00.0, 0000:07:00.0"]),
    ("amd-smi-table-builtin-amdgpu-rx7900xtx.txt", ("AMD Radeon RX 7900 XTX",), None, None,
     ["amd-smi 26.1.0+b5522cc8-d... lists", "'Linuxver'", "not a version"]),
    ("amd-smi-table-mi300a-doc-27.txt", ("AMD Instinct MI300A",) * 4, "7.14.0", "6.19.4",
     ["amd-smi 27.0.0 lists", "0000:01:00.0 SPX/NPS1, 0001:01:00.0 SPX/NPS1"]),
])
def test_plain_amd_smi_table(tmp_path, recording, names, rocm, driver, shown):
    host = detect_host(FakeTools({AMD_SMI_TABLE: recorded(recording)}), machine(tmp_path, AMD_FILES))
    assert (host.vendor, host.gpu_names, host.device_count, host.gpu_archs) == ("rocm", names, len(names), ())
    assert (host.stack_version, host.driver_version) == (rocm, driver)
    for text in shown:
        assert text in evidence_text(host)


@pytest.mark.parametrize("recording, command, name, arch, driver", [
    ("amd-smi-static-mi300a-doc.txt", AMD_SMI_STATIC_ALL, "AMD Instinct MI300A", "gfx942", "6.19.4"),
    ("amd-smi-static-mi350x-sections.txt", AMD_SMI_STATIC_SECTIONS, "AMD Instinct MI350X", "gfx950", "6.18.3"),
])
def test_amd_smi_static_gpu_blocks_and_driver_section(tmp_path, recording, command, name, arch, driver):
    host = detect_host(FakeTools({command: recorded(recording)}), machine(tmp_path, AMD_FILES))
    assert (host.gpu_names, host.gpu_archs, host.device_count) == ((name,), (arch,), 1)  # the CPU block is no GPU
    assert host.driver_version == driver  # DRIVER's VERSION, not IFWI's (N/A, or the firmware's 00154951)
    assert f"amdgpu driver {driver} (from amd-smi static DRIVER)" in evidence_text(host)


# ---------------------------------------------------------------------------------------------
# Intel XPU
# ---------------------------------------------------------------------------------------------

def test_xpu_from_recorded_sycl_ls(tmp_path):
    host = detect_host(FakeTools(INTEL_TOOLS), machine(tmp_path, INTEL_FILES))
    assert host.vendor == "xpu"
    assert host.gpu_names == ("Intel(R) Arc(TM) A770 Graphics",)  # the OpenCL lines do not count
    assert host.gpu_archs == host.gpu_names
    assert host.device_count == 1  # the integrated UHD Graphics 730 on Level Zero is no accelerator
    assert host.driver_version == "1.3.29735+27"
    assert "Intel(R) UHD Graphics 730 is integrated graphics; not counted" in evidence_text(host)


def test_xpu_from_older_sycl_ls_format(tmp_path):
    host = detect_host(FakeTools({SYCL_LS: recorded("sycl-ls-max1550-old.txt")}), machine(tmp_path, INTEL_FILES))
    assert host.gpu_names == ("Intel(R) Data Center GPU Max 1550",)


def test_xpu_smi_is_asked_first(tmp_path):
    tools = FakeTools({XPU_SMI: recorded("xpu-smi-discovery.json"), **INTEL_TOOLS})
    host = detect_host(tools, machine(tmp_path, INTEL_FILES))
    assert host.gpu_names == ("Intel(R) Graphics [0x020a]",)
    assert SYCL_LS not in tools.calls


def test_xpu_smi_skips_virtual_functions(tmp_path):
    listing = ('{"device_list": [{"device_id": 0, "device_name": "Intel(R) Data Center GPU Flex 170", '
               '"device_type": "GPU", "device_function_type": "physical"}, {"device_id": 1, '
               '"device_name": "Intel(R) Data Center GPU Flex 170", "device_type": "GPU", '
               '"device_function_type": "virtual"}]}')
    host = detect_host(FakeTools({XPU_SMI: listing}), machine(tmp_path, INTEL_FILES))
    assert host.device_count == 1


@pytest.mark.parametrize("recording", ["sycl-ls-opencl-only.txt", "sycl-ls-nvidia-cuda.txt"])
def test_sycl_ls_without_intel_level_zero_gpu_is_not_xpu(tmp_path, recording):
    host = detect_host(FakeTools({SYCL_LS: recorded(recording)}), machine(tmp_path, INTEL_FILES))
    assert host.vendor == "cpu"
    assert "no Intel Level Zero GPU" in evidence_text(host)


def render_node(vendor: str, slot: str, pci_id: str) -> dict[str, str]:
    device = "/sys/class/drm/renderD128/device"
    return {**INTEL_FILES, f"{device}/vendor": f"{vendor}\n",
            f"{device}/uevent": f"DRIVER=xe\nPCI_ID={pci_id}\nPCI_SLOT_NAME={slot}\n"}


def test_discrete_intel_gpu_found_by_pci_vendor(tmp_path):
    host = detect_host(FakeTools(), machine(tmp_path, render_node("0x8086", "0000:03:00.0", "8086:56A0")))
    assert (host.vendor, host.gpu_names) == ("xpu", ("Intel Arc A-Series (Alchemist) 8086:56A0",))  # INTEL_DG2_IDS


@pytest.mark.parametrize("vendor, slot, pci_id", [
    ("0x8086", "0000:00:02.0", "8086:A780"),  # integrated graphics of a plain desktop
    ("0x1002", "0000:03:00.0", "1002:744C"),  # an AMD card also has /dev/dri
    ("0x1a03", "0000:02:00.0", "1A03:2000"),  # a server's BMC display
])
def test_dev_dri_alone_is_not_an_intel_accelerator(tmp_path, vendor, slot, pci_id):
    host = detect_host(FakeTools(), machine(tmp_path, render_node(vendor, slot, pci_id)))
    assert host.vendor == "cpu"
    assert "no Intel GPU confirmed" in evidence_text(host)


@pytest.mark.parametrize("driver", ["xe", "i915"])
def test_the_intel_kernel_driver_is_part_of_the_host_description(tmp_path, driver):
    """The kernel driver bound to the Intel render node (its sysfs `driver` link): what Intel's Kubernetes
    device plugin names the node's GPUs after (gpu.intel.com/i915 or gpu.intel.com/xe)."""
    root = machine(tmp_path, render_node("0x8086", "0000:03:00.0", "8086:E20B"))
    bound = root / "sys" / "bus" / "pci" / "drivers" / driver
    bound.mkdir(parents=True)
    (root / "sys" / "class" / "drm" / "renderD128" / "device" / "driver").symlink_to(bound)
    assert detect_host(FakeTools(), root).kernel_drivers == (driver,)


@pytest.mark.parametrize("pci_id, family", [
    ("8086:7D55", "Meteor Lake"),   # the kernel's INTEL_MTL_IDS (include/drm/intel/pciids.h)
    ("8086:7DD1", "Arrow Lake"),    # INTEL_ARL_H_IDS
    ("8086:64A0", "Lunar Lake"),    # INTEL_LNL_IDS
])
def test_core_ultra_graphics_without_vendor_tools_is_an_xpu_host_by_its_pci_id(tmp_path, pci_id, family):
    """PyTorch's XPU guide validates Core Ultra processors' Arc graphics (Meteor Lake-H, Arrow Lake-H, Lunar
    Lake), which sit at the integrated slot 00:02.0: sysfs's PCI id decides (knowledge base, xpu.yaml
    validated_gpus), not a name sysfs does not have."""
    host = detect_host(FakeTools(), machine(tmp_path, render_node("0x8086", "0000:00:02.0", pci_id)))
    assert (host.vendor, host.device_count) == ("xpu", 1)
    assert family in host.gpu_names[0] and pci_id in host.gpu_names[0]


# ---- recorded in the 2026-12 batch: xpu-smi table, Level Zero drivers, integrated GPUs --------------

@pytest.mark.parametrize("command", [XPU_SMI_TABLE, XPU_SMI])
def test_xpu_smi_discovery_table(tmp_path, command):
    tools = FakeTools({command: recorded("xpu-smi-discovery-arc-a770.txt")})
    host = detect_host(tools, machine(tmp_path, INTEL_FILES))
    assert (host.vendor, host.gpu_names, host.device_count, host.driver_version) == (
        "xpu", ("Intel(R) Arc(TM) A770 Graphics",), 1, None)  # no driver version in this form
    assert "at id 0, 0000:03:00.0, /dev/dri/card0" in evidence_text(host)
    assert SYCL_LS not in tools.calls


def test_xpu_smi_virtual_functions_in_the_table_are_skipped(tmp_path):
    table = recorded("xpu-smi-discovery-arc-a770.txt")
    virtual = table.replace("| 0         |", "| 1         |").replace("physical", "virtual ")
    body = table.rstrip("\n").rsplit("\n", 1)[0]  # the device rows, without the closing rule
    host = detect_host(FakeTools({XPU_SMI_TABLE: body + "\n" + virtual.split("\n", 3)[3]}), machine(tmp_path, INTEL_FILES))
    assert host.device_count == 1


def test_xpu_smi_detail_gives_the_driver(tmp_path):
    """`xpu-smi discovery -d 0` answers with the device's "Driver Version" (constructed in the layout
    and with the value of the xpumanager smi_user_guide.md sample of `discovery -d 0000:4d:00.0`)."""
    detail = ("| 0         | Device Type: GPU                   |\n"
              "|           | Device Name: Intel(R) Graphics [0x020a]  |\n"
              "|           | Driver Version: 16929133           |\n")
    tools = FakeTools({XPU_SMI: recorded("xpu-smi-discovery.json"), ("xpu-smi", "discovery", "-d", "0", "-j"): detail})
    assert detect_host(tools, machine(tmp_path, INTEL_FILES)).driver_version == "16929133"


@pytest.mark.parametrize("recording, name, driver", [
    ("sycl-ls-level-zero-a770-uhd750.txt", "Intel(R) Arc(TM) A770 Graphics", "1.3.26918"),
    ("sycl-ls-level-zero-a770-llamacpp-2024.txt", "Intel(R) Arc(TM) A770 Graphics", "1.3.26918"),
    ("sycl-ls-b580-ur.txt", "Intel(R) Arc(TM) B580 Graphics", "1.6.33578+11"),
    ("sycl-ls-max1550-old.txt", "Intel(R) Data Center GPU Max 1550", "1.3.25733"),
])
def test_sycl_ls_level_zero_gpu_and_driver(tmp_path, recording, name, driver):
    host = detect_host(FakeTools({SYCL_LS: recorded(recording)}), machine(tmp_path, INTEL_FILES))
    assert (host.vendor, host.gpu_names, host.device_count, host.driver_version) == ("xpu", (name,), 1, driver)


def test_integrated_gpu_beside_a_discrete_one_is_not_counted(tmp_path):
    host = detect_host(FakeTools({SYCL_LS: recorded("sycl-ls-level-zero-a770-uhd750.txt")}), machine(tmp_path, INTEL_FILES))
    assert host.gpu_names == ("Intel(R) Arc(TM) A770 Graphics",)
    assert "Intel(R) UHD Graphics 750 is integrated graphics; not counted" in evidence_text(host)


def test_integrated_gpu_alone_is_no_accelerator(tmp_path):
    only_uhd = "\n".join(line for line in recorded("sycl-ls-level-zero-a770-uhd750.txt").splitlines() if "A770" not in line)
    host = detect_host(FakeTools({SYCL_LS: only_uhd}), machine(tmp_path, INTEL_FILES))
    assert host.vendor == "cpu"
    assert "no Intel GPU confirmed" in evidence_text(host)


@pytest.mark.parametrize("device, counted", [
    ({"device_name": "Intel(R) Graphics", "device_type": "Integrated GPU", "pci_bdf_address": "0000:00:02.0"}, False),
    ({"device_name": "Intel(R) Iris(R) Xe Graphics", "pci_bdf_address": "0000:00:02.0"}, False),
    ({"device_name": "Intel(R) Data Center GPU Flex 170", "pci_bdf_address": "0000:4d:00.0"}, True),
    ({"device_name": "Intel(R) Arc(TM) Graphics", "pci_bdf_address": "0000:00:02.0"}, True),  # Core Ultra: torch.xpu runs it
    # Lunar Lake by its PCI id (the kernel's INTEL_LNL_IDS), whatever xpu-smi names or types it
    ({"device_name": "Intel(R) Graphics", "device_type": "Integrated GPU", "pci_bdf_address": "0000:00:02.0",
      "pci_device_id": "0x64a0"}, True),
])
def test_xpu_smi_integrated_by_type_slot_or_name(tmp_path, device, counted):
    listing = json.dumps({"device_list": [{"device_id": 0, "device_type": "GPU", **device}]})
    host = detect_host(FakeTools({XPU_SMI: listing}), machine(tmp_path, INTEL_FILES))
    assert (host.vendor == "xpu") is counted


# ---------------------------------------------------------------------------------------------
# Intel Gaudi
# ---------------------------------------------------------------------------------------------

def test_gaudi_from_recorded_hl_smi(tmp_path):
    host = detect_host(FakeTools(GAUDI_TOOLS), tmp_path)
    assert host.vendor == "gaudi"
    assert host.device_count == 8
    assert set(host.gpu_names) == {"HL-225"}
    assert host.driver_version == "1.15.0-c43dc7b"
    assert host.stack_version == "1.15.0"  # the driver's, not hl-smi's own 1.14.0


def test_gaudi_table_alone_is_enough(tmp_path):
    host = detect_host(FakeTools({HL_SMI: recorded("hl-smi-gaudi2.txt")}), tmp_path)
    assert (host.vendor, host.device_count, host.stack_version) == ("gaudi", 8, "1.15.0")


def test_nic_driver_line_is_not_the_driver(tmp_path):
    header = recorded("hl-smi-header-nic.txt")
    without_driver = "\n".join(line for line in header.splitlines() if not line.startswith("| Driver Version"))
    host = detect_host(FakeTools({HL_SMI: without_driver + "\n" + recorded("hl-smi-gaudi2.txt").split("\n", 3)[3]}),
                       tmp_path)
    assert host.vendor == "cpu"
    assert "without a device row and driver version" in evidence_text(host)
    with_driver = detect_host(FakeTools({HL_SMI: header, HL_SMI_QUERY: "HL-325L, 1.22.0-5f8fa9f\n"}), tmp_path)
    assert (with_driver.stack_version, with_driver.gpu_names) == ("1.22.0", ("HL-325L",))


# ---- recorded in the 2026-12 batch: Gaudi generations ------------------------------------------------

@pytest.mark.parametrize("recording, model, driver, generation", [
    ("hl-smi-gaudi3-hl325l.txt", "HL-325L", "1.20.1-366eb9c", "gaudi3"),   # not the Nic Driver Version
    ("hl-smi-gaudi1-hl205-dl1.txt", "HL-205", "1.4.0-d8f95f4", "gaudi"),
    ("hl-smi-gaudi2.txt", "HL-225", "1.15.0-c43dc7b", "gaudi2"),
])
def test_gaudi_generation_from_the_model_number(tmp_path, recording, model, driver, generation):
    host = detect_host(FakeTools({HL_SMI: recorded(recording)}), tmp_path)
    assert (host.vendor, host.device_count, set(host.gpu_names)) == ("gaudi", 8, {model})
    assert (host.driver_version, host.stack_version) == (driver, driver.split("-")[0])
    assert host.gpu_archs == (generation,)


def test_gaudi_generations_agree_with_their_sources():
    """The model-number table in gaudi/detect.py against the excerpts it cites (gaudi-model-names-sources.txt)."""
    sources = recorded("gaudi-model-names-sources.txt")
    dstack = dict(re.findall(r'"(HL-\d+)": "(Gaudi\d?)"', sources))
    assert dstack == {"HL-205": "Gaudi", "HL-225": "Gaudi2", "HL-325": "Gaudi3", "HL-338": "Gaudi3"}
    for model, name in dstack.items():
        assert generation(model) == name.lower()
    for model in ("HL-328", "HL-388", "HL-338", "HL-325L", "HL-335"):  # The Register, from Intel's whitepaper
        assert model in sources and generation(model) == "gaudi3"
    assert generation("HL-225B") == "gaudi2" and generation("HL-999") is None and generation(None) is None


# ---------------------------------------------------------------------------------------------
# Precedence, empty machines, this machine
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("present, expected", [
    (("cuda", "rocm", "xpu", "gaudi"), "cuda"),
    (("rocm", "xpu", "gaudi"), "rocm"),
    (("xpu", "gaudi"), "xpu"),
    (("gaudi",), "gaudi"),
    ((), "cpu"),
])
def test_precedence_when_several_are_present(tmp_path, present, expected):
    tools: dict[str, dict[tuple[str, ...], str | None]] = {"cuda": NVIDIA_TOOLS, "rocm": AMD_TOOLS, "xpu": INTEL_TOOLS,
                                                           "gaudi": GAUDI_TOOLS}
    files = {"rocm": AMD_FILES, "xpu": INTEL_FILES}
    answers = {command: out for vendor in present for command, out in tools[vendor].items()}
    root = machine(tmp_path, {path: text for vendor in present for path, text in files.get(vendor, {}).items()})
    host = detect_host(FakeTools(answers), root)
    assert host.vendor == expected
    losers = [vendor for vendor in present if vendor != expected]
    if losers:
        assert host.evidence[-1] == f"chose {expected} over {', '.join(losers)} (order: cuda, rocm, xpu, gaudi)"


def test_machine_with_nothing_is_cpu(tmp_path):
    tools = FakeTools()
    host = detect_host(tools, tmp_path)
    assert host == HostInfo(vendor="cpu", evidence=host.evidence)
    assert host.evidence[-1] == "chose cpu: no accelerator found"
    assert {NVIDIA_QUERY, NVIDIA_TABLE, HL_SMI} <= set(tools.calls)


ACCELERATOR_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dri", "/dev/accel", "/proc/driver/nvidia/version")


@pytest.mark.skipif(any(Path(node).exists() for node in ACCELERATOR_NODES),
                    reason="this machine has accelerator device nodes")
def test_this_machine_has_no_accelerator():
    host = detect_host()
    assert host.vendor == "cpu", host.evidence
    assert host.device_count == 0


def test_host_info_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        HostInfo().vendor = "cuda"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Hung, crashing and babbling tools
# ---------------------------------------------------------------------------------------------

def test_run_command_returns_stdout_of_a_working_tool():
    assert run_command([sys.executable, "-c", "print('580.95.05, 9.0, NVIDIA H200')"]) == \
        "580.95.05, 9.0, NVIDIA H200\n"


@pytest.mark.parametrize("code", [
    "import time; time.sleep(60)",                                     # hangs
    "import os; os.abort()",                                           # crashes
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
    " time.sleep(60)",                                                 # hangs with a child holding stdout
])
def test_run_command_gives_none_for_a_tool_that_does_not_answer(code):
    assert run_command([sys.executable, "-c", code], timeout_s=0.1) is None


def test_run_command_keeps_what_a_failing_tool_printed():
    """nvidia-smi prints its failure on stdout and exits non-zero; amd-smi logs to stderr."""
    code = "import sys; print('Failed to initialize NVML: Unknown Error'); print('ERROR:root:x', file=sys.stderr); sys.exit(9)"
    output = run_command([sys.executable, "-c", code])
    assert output == "Failed to initialize NVML: Unknown Error\n"
    assert (exit_code(output), answer(output)) == (9, None)
    assert said(output) == "Failed to initialize NVML: Unknown Error\n\nERROR:root:x\n"
    working = run_command([sys.executable, "-c", "print('ok')"])
    assert (exit_code(working), answer(working)) == (0, "ok\n")


def test_run_command_gives_none_for_a_missing_tool(tmp_path):
    assert run_command([str(tmp_path / "nvidia-smi")]) is None


def write_tool(bin_dir: Path, name: str, script: str) -> None:
    """A POSIX shell tool: it starts in a millisecond, where a Python one takes tens."""
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


def test_hung_and_crashing_tools_on_path_mean_cpu(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sleep, head, tr = (shutil.which(tool) for tool in ("sleep", "head", "tr"))
    write_tool(bin_dir, "nvidia-smi", f"exec {sleep} 60")
    write_tool(bin_dir, "rocminfo", "kill -ABRT $$")
    write_tool(bin_dir, "sycl-ls", r"printf '\000\377 garbage [level_zero:gpu] ,,,\n'")
    write_tool(bin_dir, "xpu-smi", f"{head} -c 100000 /dev/zero | {tr} '\\0' '['")
    write_tool(bin_dir, "hl-smi", "echo '| Driver Version: none |'")
    monkeypatch.setenv("PATH", str(bin_dir))
    root = machine(tmp_path / "root", {**AMD_FILES, **INTEL_FILES})
    host = detect_host(lambda argv: run_command(argv, timeout_s=0.1), root)
    assert host.vendor == "cpu"
    assert "nvidia-smi missing, failing or timed out" in evidence_text(host)
    assert "gaudi: hl-smi answered without a device row" in evidence_text(host)


@pytest.mark.parametrize("command", [HL_SMI, SYCL_LS, XPU_SMI])
def test_garbage_from_a_tool_is_not_detection(tmp_path, command):
    garbage = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    host = detect_host(FakeTools({command: garbage}), machine(tmp_path, INTEL_FILES))
    assert host.vendor == "cpu"
    assert "NVIDIA-SMI has failed" in evidence_text(host)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs=st.fixed_dictionaries({command: st.one_of(st.none(), st.text(), st.sampled_from([
    "[]", "{}", '{"device_list": 5}', '{"device_list": [1, {"device_name": 3}]}', "1.2.3, 4.5, x\n",
    "| Driver Version: 1.2.3 |\n|   0  HL-", "Agent 1\n  Device Type: GPU\n", "GPU: 0\nGPU: x\n"]))
    for command in ALL_COMMANDS}),
    files=st.dictionaries(st.sampled_from([
        "/proc/driver/nvidia/version", "/proc/driver/nvidia/gpus/0/information", "/opt/rocm/.info/version",
        "/sys/class/kfd/kfd/topology/nodes/1/properties", "/sys/module/amdgpu/version",
        "/sys/class/drm/renderD128/device/vendor", "/sys/class/drm/renderD128/device/uevent"]), st.text()))
def test_any_output_is_handled_without_an_exception(outputs, files):
    with tempfile.TemporaryDirectory() as directory:
        root = machine(Path(directory), {**AMD_FILES, **INTEL_FILES, **files})
        host = detect_host(FakeTools(outputs), root)
    assert host.vendor in ("cuda", "rocm", "xpu", "gaudi", "cpu")
    assert host.evidence and host.evidence[-1].startswith(f"chose {host.vendor}")
    assert host.device_count >= (0 if host.vendor == "cpu" or host.unusable else 1)


# ---------------------------------------------------------------------------------------------
# Driver versions
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, expected", [
    ("580.95.05", "575.57.08", 1),
    ("575.57.08", "580.95.05", -1),
    ("580.95.05", "580.95.05", 0),
    ("560.35.05", "560.35.03", 1),
    ("1.10", "1.9", 1),                   # a float would say 1.10 < 1.9
    ("580", "580.0.0", 0),
    ("535.129.03", "535.129.3", 0),
    ("1.15.0-c43dc7b", "1.15.0", 0),      # Gaudi build suffix
    ("595.58.03", "595.45.04", 1),
])
def test_compare_driver(a, b, expected):
    assert compare_driver(a, b) == expected


@pytest.mark.parametrize("bad", ["", "N/A", "driver", "-1.0"])
def test_compare_driver_rejects_non_versions(bad):
    with pytest.raises(InputError, match="not a driver version"):
        compare_driver(bad, "580.95.05")


@given(a=st.lists(st.integers(0, 999), min_size=1, max_size=4),
       b=st.lists(st.integers(0, 999), min_size=1, max_size=4))
def test_compare_driver_orders_like_padded_number_tuples(a, b):
    def text(parts: list[int]) -> str:
        return ".".join(f"{part:02d}" for part in parts)
    width = max(len(a), len(b))
    padded_a, padded_b = a + [0] * (width - len(a)), b + [0] * (width - len(b))
    expected = (padded_a > padded_b) - (padded_a < padded_b)
    assert compare_driver(text(a), text(b)) == expected == -compare_driver(text(b), text(a))
