"""Detect which accelerator this host has, so a build or a pull can pick the matching vendor.

Detection asks each vendor's own tools (nvidia-smi; rocminfo and amd-smi; xpu-smi and sycl-ls; hl-smi)
and reads a few driver files. Each tool runs under a short timeout and each answer is parsed
defensively: a missing, hung, crashing or babbling tool means "this vendor was not found", with a line
of evidence saying why, never an exception. Every file path hangs off ``root`` so that a test can fake
a whole machine in a temporary directory, and every command goes through ``run`` so that a test can
answer with recorded output.

Order (design.md): NVIDIA, then AMD ROCm, then Intel XPU, then Intel Gaudi, else CPU. All probes run,
so the evidence also names what lost.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Literal, TypeAlias

from accel_images.errors import InputError

Vendor = Literal["cuda", "rocm", "xpu", "gaudi", "cpu"]

CommandOutput: TypeAlias = str
"""What a tool printed on stdout, decoded; only ever for a tool that exited with status 0."""

Runner: TypeAlias = Callable[[list[str]], "CommandOutput | None"]

TOOL_TIMEOUT_S = 10.0
"""Long enough for nvidia-smi on an 8-GPU node waking from idle, short enough that a wedged driver
does not stall `make image`."""


@dataclass(frozen=True)
class HostInfo:
    """What the host offers. ``gpu_names`` has one entry per device when the source names them;
    ``gpu_archs`` lists each distinct architecture once, in the order first seen: NVIDIA compute
    capabilities ('9.0'), AMD gfx targets without feature suffix ('gfx942'), Intel device names."""

    vendor: Vendor = "cpu"
    driver_version: str | None = None
    cuda_max: str | None = None
    gpu_names: tuple[str, ...] = ()
    gpu_archs: tuple[str, ...] = ()
    device_count: int = 0
    rocm_version: str | None = None
    gaudi_version: str | None = None
    evidence: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Running tools and reading files
# ---------------------------------------------------------------------------------------------

def run_command(argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> CommandOutput | None:
    """Run a tool; its stdout, or None when it is missing, exits non-zero or outlives the timeout.

    The tool gets a process group of its own so that a hung nvidia-smi, and whatever it spawned, is
    killed as a whole. Stderr is dropped: tools print warnings there that are not answers.
    """
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
    except (OSError, ValueError):
        return None
    try:
        stdout, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return None
    if process.returncode != 0:
        return None
    return stdout.decode("utf-8", errors="replace")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the tool's whole process group; wait without reading, in case a child escaped it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass  # already gone
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _at(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def _listing(directory: Path, pattern: str) -> list[Path]:
    try:
        return sorted(directory.glob(pattern))
    except OSError:
        return []


def _quote(text: str) -> str:
    """A short, one-line sample of unexpected output for the evidence."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return repr(first[:60] + ("..." if len(first) > 60 else ""))


def _distinct(values: list[str | None]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value for value in values if value))


_DOTTED = r"\d+(?:\.\d+)+"
_DOTTED_RE = re.compile(_DOTTED)


@dataclass(frozen=True)
class _Gpu:
    name: str | None
    arch: str | None = None


def _host(vendor: Vendor, gpus: list[_Gpu], **fields: str | None) -> HostInfo:
    return HostInfo(vendor=vendor, gpu_names=tuple(g.name for g in gpus if g.name),
                    gpu_archs=_distinct([g.arch for g in gpus]), device_count=len(gpus), **fields)


def _summary(gpus: list[_Gpu]) -> str:
    names = _distinct([g.name for g in gpus])
    return f"{len(gpus)} device(s)" + (f" ({', '.join(names)})" if names else "")


# ---------------------------------------------------------------------------------------------
# NVIDIA: nvidia-smi, else /proc/driver/nvidia
# ---------------------------------------------------------------------------------------------

_NVIDIA_QUERY = ["nvidia-smi", "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader"]
_NVIDIA_QUERY_NO_CC = ["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"]
_NVIDIA_TABLE = ["nvidia-smi"]
# R610 renamed the header fields: "KMD Version" and "CUDA UMD Version" (sglang issue 27487).
_NV_HEADER_DRIVER = re.compile(rf"(?:Driver|KMD) Version:\s*({_DOTTED})")
_NV_HEADER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\d+\.\d+)")
_NV_TABLE_ROW = re.compile(r"^\|\s+\d+\s+(\S.*?)\s+(?:On|Off)\s+\|", re.MULTILINE)
_NV_COMPUTE_CAP = re.compile(r"\d+\.\d+")
_NV_NOT_AVAILABLE = re.compile(r"\[?N/A\]?|\[Not Supported\]", re.IGNORECASE)
# Proprietary: "Kernel Module  580.173.02"; open: "Open Kernel Module for x86_64  565.57.01".
_NV_PROC_DRIVER = re.compile(rf"Kernel Module(?:\s+for\s+\S+)?\s+({_DOTTED})\s")
_NV_PROC_MODEL = re.compile(r"^Model:\s*(\S.*?)\s*$", re.MULTILINE)


def _parse_nvidia_query(text: str, with_compute_cap: bool = True) -> tuple[str | None, list[_Gpu]]:
    """Rows of ``driver_version[, compute_cap], name``; rows that do not look like that are skipped."""
    driver, gpus = None, []
    width = 3 if with_compute_cap else 2
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",", width - 1)]
        if len(fields) != width or not _DOTTED_RE.fullmatch(fields[0]) or not fields[-1]:
            continue
        arch = fields[1] if with_compute_cap else None
        if arch is not None and not _NV_COMPUTE_CAP.fullmatch(arch):
            if not _NV_NOT_AVAILABLE.fullmatch(arch):
                continue
            arch = None
        driver = driver or fields[0]
        gpus.append(_Gpu(fields[-1], arch))
    return driver, gpus


def _parse_nvidia_table(text: str) -> tuple[str | None, str | None, list[_Gpu]]:
    """Driver, highest supported CUDA and GPU rows from the plain ``nvidia-smi`` table."""
    driver = _NV_HEADER_DRIVER.search(text)
    cuda = _NV_HEADER_CUDA.search(text)
    gpus = [_Gpu(name) for name in _NV_TABLE_ROW.findall(text)]
    return (driver.group(1) if driver else None), (cuda.group(1) if cuda else None), gpus


def _nvidia_from_smi(run: Runner, notes: list[str]) -> HostInfo | None:
    query = run(_NVIDIA_QUERY)
    driver, gpus = _parse_nvidia_query(query) if query is not None else (None, [])
    if query is None and (query := run(_NVIDIA_QUERY_NO_CC)) is not None:
        notes.append("cuda: nvidia-smi cannot report compute_cap (old driver)")
        driver, gpus = _parse_nvidia_query(query, with_compute_cap=False)
    table = run(_NVIDIA_TABLE)
    table_driver, cuda_max, table_gpus = _parse_nvidia_table(table) if table is not None else (None, None, [])
    driver, gpus = driver or table_driver, gpus or table_gpus
    if query is None and table is None:
        notes.append("cuda: nvidia-smi missing, failing or timed out")
        return None
    if not (driver and gpus):
        sample = _quote(query or table or "")
        notes.append(f"cuda: nvidia-smi answered without a GPU row and driver version: {sample}")
        return None
    limit = f", CUDA up to {cuda_max}" if cuda_max else ", highest CUDA not reported"
    notes.append(f"cuda: nvidia-smi lists {_summary(gpus)}, driver {driver}{limit}")
    return _host("cuda", gpus, driver_version=driver, cuda_max=cuda_max)


def _nvidia_from_proc(root: Path, notes: list[str]) -> HostInfo | None:
    version = _read(_at(root, "/proc/driver/nvidia/version"))
    if version is None:
        notes.append("cuda: no /proc/driver/nvidia/version (NVIDIA kernel driver not loaded)")
        return None
    driver = _NV_PROC_DRIVER.search(version)
    if driver is None:
        notes.append(f"cuda: /proc/driver/nvidia/version unreadable: {_quote(version)}")
        return None
    gpus = []
    for directory in _listing(_at(root, "/proc/driver/nvidia/gpus"), "*"):
        model = _NV_PROC_MODEL.search(_read(directory / "information") or "")
        gpus.append(_Gpu(model.group(1) if model else None))
    if not gpus:
        notes.append(f"cuda: kernel driver {driver.group(1)} loaded but /proc/driver/nvidia/gpus lists no GPU")
        return None
    notes.append(f"cuda: /proc/driver/nvidia lists {_summary(gpus)}, driver {driver.group(1)}; "
                 "highest CUDA unknown without nvidia-smi")
    return _host("cuda", gpus, driver_version=driver.group(1))


def _probe_nvidia(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    return _nvidia_from_smi(run, notes) or _nvidia_from_proc(root, notes)


# ---------------------------------------------------------------------------------------------
# AMD ROCm: /dev/kfd, GPUs from rocminfo / amd-smi / KFD topology, versions from amd-smi and friends
# ---------------------------------------------------------------------------------------------

_GFX = re.compile(r"(gfx[0-9a-f]+)(?::\S*)?")
_ISA_GFX = re.compile(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)(?::\S*)?")
_ROCK_MODULE = re.compile(rf"ROCk module version ({_DOTTED}) is loaded")
_AMD_VENDOR_ID = 0x1002


def _gfx(value: str) -> str | None:
    """'gfx942:sramecc+:xnack-' -> 'gfx942'; generic targets and non-gfx names -> None."""
    match = _GFX.fullmatch(value.strip().lower())
    return match.group(1) if match else None


def _rocminfo_agents(text: str) -> list[dict[str, str]]:
    """Per agent, the first value of each key: the agent's own Name comes before its ISA names."""
    agents: list[dict[str, str]] = []
    for line in text.splitlines():
        if re.fullmatch(r"\s*Agent \d+\s*", line):
            agents.append({})
        elif agents and ":" in line:
            key, _, value = line.partition(":")
            agents[-1].setdefault(key.strip(), value.strip())
            if key.strip() == "Name" and _ISA_GFX.fullmatch(value.strip()):
                agents[-1].setdefault("ISA", value.strip())
    return agents


def _parse_rocminfo(text: str) -> list[_Gpu]:
    gpus = []
    for agent in _rocminfo_agents(text):
        if agent.get("Device Type") != "GPU":
            continue
        isa = _ISA_GFX.fullmatch(agent.get("ISA", "").lower())
        arch = _gfx(agent.get("Name", "")) or (isa.group(1) if isa else None)
        gpus.append(_Gpu(agent.get("Marketing Name") or None, arch))
    return gpus


def _parse_amd_smi_static(text: str) -> list[_Gpu]:
    """``amd-smi static --asic``: 'GPU: N' blocks with MARKET_NAME and (ROCm 6.3+) TARGET_GRAPHICS_VERSION."""
    blocks: list[dict[str, str]] = []
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "GPU" and value.strip().isdigit():
            blocks.append({})
        elif blocks and value.strip():
            blocks[-1].setdefault(key.strip(), value.strip())
    return [_Gpu(block.get("MARKET_NAME"), _gfx(block.get("TARGET_GRAPHICS_VERSION", "")))
            for block in blocks if "MARKET_NAME" in block or "TARGET_GRAPHICS_VERSION" in block]


def _kfd_arch(properties: str) -> str | None:
    """A KFD topology node's gfx target: gfx_target_version 90402 -> gfx942, 90010 -> gfx90a."""
    fields = dict(line.split(None, 1) for line in properties.splitlines() if len(line.split(None, 1)) == 2)
    version, vendor = fields.get("gfx_target_version", ""), fields.get("vendor_id", str(_AMD_VENDOR_ID))
    if not version.isdigit() or int(version) == 0 or vendor.strip() != str(_AMD_VENDOR_ID):
        return None
    number = int(version)
    major, minor, stepping = number // 10000, (number // 100) % 100, number % 100
    return f"gfx{major}{minor:x}{stepping:x}"


def _kfd_gpus(root: Path) -> list[_Gpu]:
    nodes = _listing(_at(root, "/sys/class/kfd/kfd/topology/nodes"), "*/properties")
    archs = [_kfd_arch(_read(node) or "") for node in nodes]
    return [_Gpu(None, arch) for arch in archs if arch]


def _amd_gpus(rocminfo: str | None, run: Runner, root: Path, notes: list[str]) -> list[_Gpu]:
    """rocminfo names the canonical gfx targets; amd-smi and the KFD topology stand in without it."""
    if rocminfo is not None and (gpus := _parse_rocminfo(rocminfo)):
        notes.append(f"rocm: rocminfo lists {_summary(gpus)}")
        return gpus
    static = run(["amd-smi", "static", "--asic"])
    if static is not None and (gpus := _parse_amd_smi_static(static)):
        notes.append(f"rocm: amd-smi static lists {_summary(gpus)}")
        return gpus
    if (gpus := _kfd_gpus(root)):
        notes.append(f"rocm: KFD topology lists {len(gpus)} GPU node(s)")
        return gpus
    answered = [name for name, out in (("rocminfo", rocminfo), ("amd-smi static", static)) if out is not None]
    notes.append("rocm: /dev/kfd present but no GPU in "
                 + (", ".join(answered) + " or " if answered else "") + "KFD topology")
    return []


def _amd_smi_fields(text: str | None) -> dict[str, str]:
    """``amd-smi version``: 'AMDSMI Tool: 25.4.2 | ... | ROCm version: 6.4.1 | amdgpu version: 6.10.5'."""
    fields = {}
    for part in (text or "").split("|"):
        key, _, value = part.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def _leading_version(text: str | None, parts: int = 3) -> str | None:
    match = re.match(r"\s*(\d+(?:\.\d+){1,%d})" % (parts - 1), text or "")
    return match.group(1) if match else None


def _rocm_version(run: Runner, root: Path, smi: dict[str, str], notes: list[str]) -> str | None:
    """amd-smi first, then hipconfig, then the legacy file: TheRock installs may lack the file."""
    if (version := _leading_version(smi.get("ROCm version"))):
        notes.append(f"rocm: amd-smi reports ROCm {version}")
        return version
    if (version := _leading_version(run(["hipconfig", "--version"]), parts=2)):
        notes.append(f"rocm: hipconfig reports HIP {version}, taken as ROCm {version}")
        return version
    if (version := _leading_version(_read(_at(root, "/opt/rocm/.info/version")))):
        notes.append(f"rocm: /opt/rocm/.info/version says {version}")
        return version
    notes.append("rocm: ROCm version unknown (no amd-smi, hipconfig or /opt/rocm/.info/version)")
    return None


def _amd_driver(smi: dict[str, str], rocminfo: str | None, root: Path, notes: list[str]) -> str | None:
    """The amdgpu kernel driver: amd-smi, the rocminfo banner, then the DKMS module's version file.
    The in-kernel driver has no version of its own (amd-smi then prints a kernel banner)."""
    reported = smi.get("amdgpu version", "")
    if reported and reported != "N/A" and not _DOTTED_RE.fullmatch(reported):
        notes.append(f"rocm: amd-smi amdgpu version is not a version (in-kernel driver?): {_quote(reported)}")
    banner = _ROCK_MODULE.search(rocminfo or "")
    module = (_read(_at(root, "/sys/module/amdgpu/version")) or "").strip()
    for source, value in (("amd-smi", reported), ("rocminfo", banner.group(1) if banner else ""),
                          ("/sys/module/amdgpu/version", module)):
        if _DOTTED_RE.fullmatch(value):
            notes.append(f"rocm: amdgpu driver {value} (from {source})")
            return value
    notes.append("rocm: amdgpu driver version unknown")
    return None


def _probe_amd(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    if not _at(root, "/dev/kfd").exists():
        notes.append("rocm: no /dev/kfd (amdgpu KFD driver not loaded)")
        return None
    rocminfo = run(["rocminfo"])
    gpus = _amd_gpus(rocminfo, run, root, notes)
    if not gpus:
        return None
    smi = _amd_smi_fields(run(["amd-smi", "version"]))
    return _host("rocm", gpus, driver_version=_amd_driver(smi, rocminfo, root, notes),
                 rocm_version=_rocm_version(run, root, smi, notes))


# ---------------------------------------------------------------------------------------------
# Intel XPU: /dev/dri render nodes plus positive evidence (xpu-smi, sycl-ls, PCI vendor 0x8086)
# ---------------------------------------------------------------------------------------------

# "[level_zero:gpu][level_zero:0] <platform>, <device> <version> [<driver>]", and the older
# "[ext_oneapi_level_zero:gpu:0] ..." form. OpenCL-only entries do not count: torch.xpu needs Level Zero.
_SYCL_LEVEL_ZERO = re.compile(r"\[(?:ext_oneapi_)?level_zero:gpu(?::\d+)?\](?:\[[^\]]*\])?\s+"
                              r"[^,]*,\s+(?P<name>.+?)\s+\d+(?:\.\d+)+\s+\[[^\]]*\]\s*")
_INTEL_PCI_VENDOR = "0x8086"
_INTEGRATED_SLOT = ":00:02.0"  # where Intel integrated graphics sits: bus 0, device 2


def _parse_xpu_smi(text: str) -> list[_Gpu]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    devices = data.get("device_list") if isinstance(data, dict) else None
    gpus = []
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, dict) or device.get("device_function_type") == "virtual":
            continue
        name, kind = device.get("device_name"), str(device.get("device_type", "GPU"))
        if isinstance(name, str) and name and "GPU" in kind and "Intel" in str(device.get("vendor_name", "Intel")):
            gpus.append(_Gpu(name, name))
    return gpus


def _parse_sycl_ls(text: str) -> list[_Gpu]:
    names = [match.group("name") for match in map(_SYCL_LEVEL_ZERO.fullmatch, text.splitlines()) if match]
    return [_Gpu(name, name) for name in names if "Intel" in name]


def _uevent(device: Path) -> dict[str, str]:
    lines = (_read(device / "uevent") or "").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _sysfs_intel_gpus(root: Path, notes: list[str]) -> list[_Gpu]:
    """Discrete Intel GPUs by PCI vendor id; the integrated one at 00:02.0 alone is no accelerator."""
    gpus = []
    for node in _listing(_at(root, "/sys/class/drm"), "renderD*"):
        if (_read(node / "device" / "vendor") or "").strip().lower() != _INTEL_PCI_VENDOR:
            continue
        event = _uevent(node / "device")
        slot = event.get("PCI_SLOT_NAME", "")
        if slot.endswith(_INTEGRATED_SLOT):
            notes.append(f"xpu: {node.name} is Intel integrated graphics ({slot}); not counted")
            continue
        name = f"Intel GPU {event['PCI_ID']}" if event.get("PCI_ID") else None
        gpus.append(_Gpu(name, name))
    return gpus


def _intel_gpus(run: Runner, root: Path, notes: list[str]) -> list[_Gpu]:
    for argv, parse in ((["xpu-smi", "discovery", "-j"], _parse_xpu_smi), (["sycl-ls"], _parse_sycl_ls)):
        output = run(argv)
        if output is None:
            notes.append(f"xpu: {argv[0]} missing, failing or timed out")
        elif (gpus := parse(output)):
            notes.append(f"xpu: {argv[0]} lists {_summary(gpus)}")
            return gpus
        else:
            notes.append(f"xpu: {argv[0]} lists no Intel Level Zero GPU: {_quote(output)}")
    if (gpus := _sysfs_intel_gpus(root, notes)):
        notes.append(f"xpu: PCI vendor {_INTEL_PCI_VENDOR} on {len(gpus)} discrete render node(s)")
    return gpus


def _probe_intel(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    if not _listing(_at(root, "/dev/dri"), "renderD*"):
        notes.append("xpu: no /dev/dri/renderD* node")
        return None
    gpus = _intel_gpus(run, root, notes)
    if not gpus:
        notes.append("xpu: /dev/dri present but no Intel GPU confirmed (it also serves AMD and other GPUs)")
        return None
    return _host("xpu", gpus)


# ---------------------------------------------------------------------------------------------
# Intel Gaudi: hl-smi
# ---------------------------------------------------------------------------------------------

_HL_DRIVER = re.compile(r"^\|\s*Driver Version:\s*(\S+)", re.MULTILINE)  # not "Nic Driver Version"
_HL_ROW = re.compile(r"^\|\s+\d+\s+(HL-\S+)\s", re.MULTILINE)
_HL_DRIVER_VALUE = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?")


def _parse_hl_smi_query(text: str) -> tuple[str | None, list[_Gpu]]:
    """``hl-smi -Q name,driver_version -f csv,noheader`` rows: 'HL-225, 1.15.0-c43dc7b'."""
    driver, gpus = None, []
    for line in text.splitlines():
        name, _, value = (part.strip() for part in line.partition(","))
        if name and _HL_DRIVER_VALUE.fullmatch(value):
            driver = driver or value
            gpus.append(_Gpu(name))
    return driver, gpus


def _parse_hl_smi_table(text: str) -> tuple[str | None, list[_Gpu]]:
    driver = _HL_DRIVER.search(text)
    value = driver.group(1) if driver and _HL_DRIVER_VALUE.fullmatch(driver.group(1)) else None
    return value, [_Gpu(name) for name in _HL_ROW.findall(text)]


def _probe_gaudi(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    table = run(["hl-smi"])
    query = run(["hl-smi", "-Q", "name,driver_version", "-f", "csv,noheader"])
    if table is None and query is None:
        notes.append("gaudi: hl-smi missing, failing or timed out")
        return None
    query_driver, query_gpus = _parse_hl_smi_query(query or "")
    table_driver, table_gpus = _parse_hl_smi_table(table or "")
    driver, gpus = table_driver or query_driver, query_gpus or table_gpus
    if not (driver and gpus):
        notes.append(f"gaudi: hl-smi answered without a device row and driver version: {_quote(table or query or '')}")
        return None
    version = _leading_version(driver)
    notes.append(f"gaudi: hl-smi lists {_summary(gpus)}, driver {driver} (Gaudi software {version})")
    return _host("gaudi", gpus, driver_version=driver, gaudi_version=version)


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------

_PROBES: tuple[Callable[[Runner, Path, list[str]], HostInfo | None], ...] = (
    _probe_nvidia, _probe_amd, _probe_intel, _probe_gaudi)


def detect_host(run: Runner = run_command, root: Path = Path("/")) -> HostInfo:
    """Which accelerator this host has, with the evidence for the choice; CPU when there is none."""
    notes: list[str] = []
    found = [host for probe in _PROBES if (host := probe(run, root, notes)) is not None]
    if not found:
        return HostInfo(vendor="cpu", evidence=(*notes, "chose cpu: no accelerator found"))
    chosen, others = found[0], [host.vendor for host in found[1:]]
    verdict = f"chose {chosen.vendor}" + (
        f" over {', '.join(others)} (order: cuda, rocm, xpu, gaudi)" if others else "")
    return replace(chosen, evidence=(*notes, verdict))


def compare_driver(a: str, b: str) -> int:
    """-1, 0 or 1 as driver version ``a`` is older than, equal to or newer than ``b``.

    Number by number ('580.95.05' > '575.57.08', '1.10' > '1.9'); missing parts count as zero
    ('580' == '580.0'); a build suffix is ignored ('1.15.0-c43dc7b' == '1.15.0'). Floats would put
    '1.10' before '1.9', and packaging.version rejects suffixes such as '-c43dc7b'.
    """
    left, right = _driver_numbers(a), _driver_numbers(b)
    width = max(len(left), len(right))
    left, right = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
    return (left > right) - (left < right)


def _driver_numbers(version: str) -> tuple[int, ...]:
    match = re.match(r"\s*(\d+(?:\.\d+)*)", version)
    if match is None:
        raise InputError(f"not a driver version: {version!r}", hint="expected dotted numbers such as 580.95.05")
    return tuple(int(part) for part in match.group(1).split("."))
