"""Reading an AMD host: /dev/kfd (or /dev/dxg on WSL2), GPUs from rocminfo / amd-smi / KFD topology,
versions from amd-smi and friends, failures from what rocminfo and amd-smi print.

`probe` is the one entry: it returns the host's GPUs (with their gfx targets where a source names
them), its amdgpu kernel driver and ROCm versions, an unusable accelerator when a failure blocks
containers, or None with the notes saying why. The output formats are read as recorded in
tests/data/host/. References: rocminfo.cc CheckInitialState; ROCm/amdsmi#172; the kernel's
kfd_topology.c and ROCR-Runtime libhsakmt.h for the KFD topology's gfx_target_version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Mapping

from accel_images.model.devices import under
from accel_images.model.hostinfo import (DOTTED, Gpu, HostInfo, Remembering, Runner, answer, first_answer, host_from,
                                          leading_version, listing, quote, read, said, summary, unusable_host, wsl)


def probe(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    """/dev/kfd natively; on WSL2 only /dev/dxg exists, and rocminfo and amd-smi answer there too."""
    if under(root, "/dev/kfd").exists():
        return _detect(Remembering(run), root, "/dev/kfd", notes)
    if wsl(root):
        notes.append("rocm: no /dev/kfd but /dev/dxg: WSL2, where ROCm reaches the GPU through the DirectX "
                     "paravirtual driver; asking rocminfo and amd-smi")
        return _detect(Remembering(run), root, "/dev/dxg", notes)
    notes.append("rocm: no /dev/kfd (amdgpu KFD driver not loaded) and no /dev/dxg (WSL2)")
    return None


_ROCMINFO = ["rocminfo"]
_AMD_SMI_VERSION = ["amd-smi", "version"]
_AMD_SMI_TABLE = ["amd-smi"]
_AMD_SMI_STATIC = [["amd-smi", "static", "--asic", "--driver"], ["amd-smi", "static", "--asic"], ["amd-smi", "static"]]
"""The sections read (ASIC, DRIVER), then the forms older callers and tools answer."""

_GFX = re.compile(r"(gfx[0-9a-f]+)(?::\S*)?")
_ISA_GFX = re.compile(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)(?::\S*)?")
_ROCK_MODULE = re.compile(rf"ROCk module version ({DOTTED}) is loaded")
_DOTTED_RE = re.compile(DOTTED)
_AMD_VENDOR_ID = 0x1002
# rocminfo's first line under WSL2 (ROCm 6.x WSL runtime): "WSL environment detected."
_ROCMINFO_WSL = re.compile(r"^WSL environment detected", re.MULTILINE)
# rocminfo's failures (rocminfo.cc CheckInitialState, then the HSA status of the failing call):
#   "Unable to open /dev/kfd read-write: Cannot allocate memory"
#   "ROCk module is NOT loaded, possibly no GPU devices"
#   "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate ..."
_KFD_OPEN = re.compile(r"Unable to open /dev/kfd read-write:[ \t]*(?P<why>[^\n]*?)[ \t]*$", re.MULTILINE)
_ROCK_NOT_LOADED = re.compile(r"ROCk module is NOT loaded")
_HSA_ERROR = re.compile(r"\b(HSA_STATUS_ERROR_[A-Z_]+)")
# amd-smi's library failing to start (Python logging, on stderr), ROCm/amdsmi#172:
#   "ERROR:root:Unable to get devices, driver not initialized (amdgpu not found in modules)"
_AMDGPU_NOT_FOUND = re.compile(r"amdgpu not found in modules")
_SMI_NOT_INITIALIZED = re.compile(r"driver not initiali[sz]ed")
# Plain `amd-smi`: a header box, closed by its first "|----+----|" rule. AMD-SMI 26 puts it on one line,
#   "| AMD-SMI 26.2.0+021c61fc      amdgpu version: 6.16.6   ROCm version: 7.1.1    |",
# AMD-SMI 27 one field a line: "| AMD-SMI            27.0.0 |", "| amdgpu Version:    6.19.4 |",
# "| ROCm Version:      7.14.0 |".
_SMI_RULE = re.compile(r"\|[-=]+\+[-=+|]*")
_SMI_TOOL = re.compile(r"AMD-SMI\s+(\S+)")
_SMI_AMDGPU = re.compile(r"amdgpu version:\s*(\S+)", re.IGNORECASE)
_SMI_ROCM = re.compile(r"ROCm version:\s*(\S+)", re.IGNORECASE)
# Then two rows a GPU, first cells "| 0000:04:00.0  AMD Radeon RX 9070 XT |" and
# "|   0       0     N/A             N/A |" (GPU, HIP-ID, OAM-ID, Partition-Mode); the process table follows.
_SMI_ROW = re.compile(r"\s*([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(\S.*?)\s*")
_SMI_ROW_IDS = re.compile(r"\s*\d+\s+\S+\s+\S+\s+(\S+)\s*")
_SMI_PROCESSES = re.compile(r"^\|?\s*Processes:?", re.MULTILINE)
# `amd-smi static`: a block per device opened by "GPU: 0" (or "CPU: 0", on APUs such as the MI300A) at
# the left margin; sections ("    ASIC:", "    DRIVER:") one indent in, fields ("        MARKET_NAME: ...")
# two, some deeper ("LIMIT:" / "PPT0:" / "MAX_POWER_LIMIT: 550 W"). IFWI and DRIVER both have a VERSION.
_STATIC_BLOCK = re.compile(r"(GPU|CPU|NIC|SWITCH)\s*:\s*\d+\s*")


def gfx(value: str) -> str | None:
    """'gfx942:sramecc+:xnack-' -> 'gfx942'; generic targets and non-gfx names -> None."""
    match = _GFX.fullmatch(value.strip().lower())
    return match.group(1) if match else None


def _version(value: str | None) -> str | None:
    """A dotted version as the tool printed it; 'N/A', 'Linuxver' or a kernel banner -> None."""
    value = (value or "").strip()
    return value if _DOTTED_RE.fullmatch(value) else None


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


def parse_rocminfo(text: str) -> list[Gpu]:
    gpus = []
    for agent in _rocminfo_agents(text):
        if agent.get("Device Type") != "GPU":
            continue
        isa = _ISA_GFX.fullmatch(agent.get("ISA", "").lower())
        arch = gfx(agent.get("Name", "")) or (isa.group(1) if isa else None)
        gpus.append(Gpu(agent.get("Marketing Name") or None, arch))
    return gpus


def rocminfo_failure(text: str) -> tuple[str, bool] | None:
    """(why rocminfo cannot reach the GPU, whether containers are blocked too), from its output.

    /dev/kfd refusing the host user ("Permission denied": not in the render group) blocks only that
    user: the `docker run` line adds the device groups. Any other refusal (ENOMEM, EBUSY) is the
    kernel driver's, so no container gets further either.
    """
    status = _HSA_ERROR.search(text)
    suffix = f" ({status.group(1)})" if status else ""
    if (kfd := _KFD_OPEN.search(text)):
        why = kfd.group("why") or "no reason given"
        if "permission" in why.lower():
            return (f"cannot open /dev/kfd: {why}{suffix}: this user is not in the render/video group "
                    "(containers get the groups through --group-add)"), False
        return f"cannot open /dev/kfd: {why}{suffix}", True
    if _ROCK_NOT_LOADED.search(text):
        return "amdgpu (ROCk) kernel module not loaded (rocminfo)", False
    if status:
        return f"rocminfo fails with {status.group(1)}", False
    return None


def amd_smi_failure(text: str) -> str | None:
    """Why amd-smi's library could not start, from its log lines."""
    if _AMDGPU_NOT_FOUND.search(text):
        return ("amdgpu not found in modules (amd-smi sees no amdgpu kernel module: not loaded, or built into "
                "the kernel, which amd-smi before the ROCm/amdsmi#172 fix does not recognise)")
    if _SMI_NOT_INITIALIZED.search(text):
        return "amd-smi: driver not initialized"
    return None


@dataclass(frozen=True)
class AmdSmiTable:
    """Plain ``amd-smi``: the header's versions as printed (maybe 'N/A' or a cut kernel banner) and
    one row per GPU (BDF, name, partition mode)."""

    tool: str | None
    amdgpu: str | None
    rocm: str | None
    rows: tuple[tuple[str, str, str | None], ...]

    @property
    def gpus(self) -> list[Gpu]:
        return [Gpu(name) for _, name, _ in self.rows]


def parse_amd_smi_table(text: str) -> AmdSmiTable:
    lines = text.splitlines()
    rule = next((i for i, line in enumerate(lines) if _SMI_RULE.fullmatch(line.strip())), len(lines))
    header = "\n".join(lines[:rule])
    found = [pattern.search(header) for pattern in (_SMI_TOOL, _SMI_AMDGPU, _SMI_ROCM)]
    tool, amdgpu, rocm = (match.group(1) if match else None for match in found)
    body = _SMI_PROCESSES.split("\n".join(lines[rule:]), maxsplit=1)[0]
    rows: list[tuple[str, str, str | None]] = []
    for line in body.splitlines():
        cell = line.split("|")[1] if line.startswith("|") and line.count("|") > 2 else ""
        if (row := _SMI_ROW.fullmatch(cell)):
            rows.append((row.group(1), row.group(2), None))
        elif rows and rows[-1][2] is None and (ids := _SMI_ROW_IDS.fullmatch(cell)):
            rows[-1] = (*rows[-1][:2], ids.group(1))
    return AmdSmiTable(tool, amdgpu, rocm, tuple(rows))


def _static_blocks(text: str) -> list[tuple[str, dict[tuple[str, ...], str]]]:
    """`amd-smi static` as (kind, {section path + key: value}) per device block, first value kept."""
    blocks: list[tuple[str, dict[tuple[str, ...], str]]] = []
    sections: list[tuple[int, str]] = []
    margin: int | None = None
    for line in text.splitlines():
        indent, stripped = len(line) - len(line.lstrip()), line.strip()
        if _STATIC_BLOCK.fullmatch(stripped) and (margin is None or indent <= margin):
            margin, sections = indent, []
            blocks.append((stripped.partition(":")[0].strip(), {}))
            continue
        key, colon, value = stripped.partition(":")
        if not blocks or not colon:
            continue
        while sections and sections[-1][0] >= indent:
            sections.pop()
        if not value.strip():
            sections.append((indent, key.strip()))
            continue
        path = (*(name for _, name in sections), key.strip())
        blocks[-1][1].setdefault(path, value.strip())
    return blocks


def _field(fields: Mapping[tuple[str, ...], str], key: str, section: str | None = None) -> str | None:
    """The value of `key`, under `section` when one is named, else in whichever section has it."""
    for path, value in fields.items():
        if path[-1] == key and (section is None or path[:-1] == (section,)):
            return value if value.upper() != "N/A" else None
    return None


@dataclass(frozen=True)
class AmdSmiStatic:
    gpus: list[Gpu]
    driver: str | None       # the DRIVER section's VERSION (not IFWI's, a firmware number)


def parse_amd_smi_static(text: str) -> AmdSmiStatic:
    """GPU blocks only: an APU's CPU block (MI300A) is no GPU."""
    gpu_blocks = [fields for kind, fields in _static_blocks(text) if kind == "GPU"]
    gpus = [Gpu(_field(fields, "MARKET_NAME"), gfx(_field(fields, "TARGET_GRAPHICS_VERSION") or ""))
            for fields in gpu_blocks
            if _field(fields, "MARKET_NAME") or _field(fields, "TARGET_GRAPHICS_VERSION")]
    drivers = [_version(_field(fields, "VERSION", "DRIVER")) for fields in gpu_blocks]
    return AmdSmiStatic(gpus, next((d for d in drivers if d), None))


def kfd_arch(properties: str) -> str | None:
    """A KFD topology node's gfx target: gfx_target_version 90402 -> gfx942, 90010 -> gfx90a."""
    fields = dict(line.split(None, 1) for line in properties.splitlines() if len(line.split(None, 1)) == 2)
    version, vendor = fields.get("gfx_target_version", ""), fields.get("vendor_id", str(_AMD_VENDOR_ID))
    if not version.isdigit() or int(version) == 0 or vendor.strip() != str(_AMD_VENDOR_ID):
        return None
    number = int(version)
    major, minor, stepping = number // 10000, (number // 100) % 100, number % 100
    return f"gfx{major}{minor:x}{stepping:x}"


def _kfd_gpus(root: Path) -> list[Gpu]:
    nodes = listing(under(root, "/sys/class/kfd/kfd/topology/nodes"), "*/properties")
    archs = [kfd_arch(read(node) or "") for node in nodes]
    return [Gpu(None, arch) for arch in archs if arch]


def _detect(run: Remembering, root: Path, device: str, notes: list[str]) -> HostInfo | None:
    """GPUs, versions and failures; a failure makes the host unusable when it blocks containers or
    when no source lists a GPU at all (the built-in-amdgpu amd-smi message alone is no failure)."""
    rocminfo = run(_ROCMINFO)
    if _ROCMINFO_WSL.search(rocminfo or ""):
        notes.append("rocm: rocminfo reports a WSL environment (the GPU driver is the Windows one)")
    gpus = _amd_gpus(rocminfo, run, root, device, notes)
    smi_version = run(_AMD_SMI_VERSION)
    found = rocminfo_failure(said(rocminfo))
    smi_failures = [reason for out in run.outputs("amd-smi") if (reason := amd_smi_failure(said(out)))]
    reasons = [reason for reason in ((found or ("", False))[0], *smi_failures[:1]) if reason]
    if not gpus and not reasons:
        return None
    smi = _amd_smi_fields(answer(smi_version) or (smi_version if smi_failures else None))
    if smi.get("amdsmi tool"):
        library = smi.get("amdsmi library version") or "unknown"
        notes.append(f"rocm: AMDSMI Tool {smi['amdsmi tool']}, library {library}")
    versions = {"driver_version": _amd_driver(smi, rocminfo, run, root, notes),
                "stack_version": _rocm_version(run, root, smi, notes)}
    if found and found[1]:
        return _broken(found[0], gpus, versions, notes)
    if not gpus:
        return _broken(reasons[0], [], versions, notes)
    notes += [f"rocm: {reason} (GPUs are listed all the same)" for reason in reasons]
    return host_from("rocm", gpus, **versions)


def _broken(reason: str, gpus: list[Gpu], versions: dict[str, str | None], notes: list[str]) -> HostInfo:
    notes.append(f"rocm: accelerator present but unusable: {reason}")
    return unusable_host("rocm", reason, gpus, **versions)


def _amd_gpus(rocminfo: str | None, run: Runner, root: Path, device: str, notes: list[str]) -> list[Gpu]:
    """rocminfo names the canonical gfx targets; amd-smi and the KFD topology stand in without it."""
    if rocminfo is not None and (gpus := parse_rocminfo(rocminfo)):
        notes.append(f"rocm: rocminfo lists {summary(gpus)}")
        return gpus
    command, static = first_answer(run, _AMD_SMI_STATIC)
    if static is not None and (gpus := parse_amd_smi_static(static).gpus):
        notes.append(f"rocm: {command} lists {summary(gpus)}")
        return gpus
    table = run(_AMD_SMI_TABLE)
    if table is not None and (gpus := (parsed := parse_amd_smi_table(table)).gpus):
        where = ", ".join(bdf + (f" {mode}" if mode and mode != "N/A" else "") for bdf, _, mode in parsed.rows)
        notes.append(f"rocm: amd-smi {parsed.tool or ''} lists {summary(gpus)} at {where}; no gfx target in its table")
        return gpus
    if (gpus := _kfd_gpus(root)):
        notes.append(f"rocm: KFD topology lists {len(gpus)} GPU node(s)")
        return gpus
    answered = [name for name, out in (("rocminfo", rocminfo), ("amd-smi", static), ("amd-smi", table))
                if out is not None]
    notes.append(f"rocm: {device} present but no GPU in "
                 + (", ".join(dict.fromkeys(answered)) + " or " if answered else "") + "KFD topology")
    return []


def _amd_smi_fields(text: str | None) -> dict[str, str]:
    """``amd-smi version``: 'AMDSMI Tool: 25.4.2+aca1101 | ... | ROCm version: 6.4.1 | amdgpu version: 6.10.5',
    read line by line (log lines may come first: 'ERROR:root:...'), keys in lower case (the tool's
    capitalisation varies between releases: 'amdgpu version', 'amdgpu Version')."""
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        for part in line.split("|"):
            key, _, value = part.partition(":")
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def _table(run: Runner) -> AmdSmiTable:
    return parse_amd_smi_table(run(_AMD_SMI_TABLE) or "")


def _rocm_version(run: Runner, root: Path, smi: dict[str, str], notes: list[str]) -> str | None:
    """amd-smi first (its version command, then its table's header), then hipconfig, then the legacy
    file: TheRock installs may lack the file."""
    if (version := leading_version(smi.get("rocm version"))):
        notes.append(f"rocm: amd-smi reports ROCm {version}")
        return version
    if (version := _version(_table(run).rocm)):
        notes.append(f"rocm: the amd-smi table header says ROCm {version}")
        return version
    if (version := leading_version(answer(run(["hipconfig", "--version"])), parts=2)):
        notes.append(f"rocm: hipconfig reports HIP {version}, taken as ROCm {version}")
        return version
    if (version := leading_version(read(under(root, "/opt/rocm/.info/version")))):
        notes.append(f"rocm: /opt/rocm/.info/version says {version}")
        return version
    notes.append("rocm: ROCm version unknown (no amd-smi, hipconfig or /opt/rocm/.info/version)")
    return None


def _amd_driver(smi: dict[str, str], rocminfo: str | None, run: Runner, root: Path, notes: list[str]) -> str | None:
    """The amdgpu kernel driver: amd-smi, the rocminfo banner, the DKMS module's version file, then
    amd-smi's table header and its static DRIVER section. The in-kernel driver has no version of
    its own (amd-smi then prints a kernel banner, cut to 'Linuxver' in its table)."""
    sources: list[tuple[str, Callable[[], str | None]]] = [
        ("amd-smi version", lambda: smi.get("amdgpu version", "")),
        ("rocminfo", lambda: banner.group(1) if (banner := _ROCK_MODULE.search(rocminfo or "")) else ""),
        ("/sys/module/amdgpu/version", lambda: (read(under(root, "/sys/module/amdgpu/version")) or "").strip()),
        ("the amd-smi table header", lambda: _table(run).amdgpu or ""),
        ("amd-smi static DRIVER", lambda: parse_amd_smi_static(first_answer(run, _AMD_SMI_STATIC)[1] or "").driver),
    ]
    for source, value_of in sources:
        value = value_of() or ""
        if _DOTTED_RE.fullmatch(value):
            notes.append(f"rocm: amdgpu driver {value} (from {source})")
            return value
        if value and value != "N/A":
            notes.append(f"rocm: {source} gives an amdgpu version that is not a version (in-kernel driver?): "
                         f"{quote(value)}")
    notes.append("rocm: amdgpu driver version unknown")
    return None

