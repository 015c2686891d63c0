"""Reading an NVIDIA host: nvidia-smi (CSV query, then -q, then the table), else /proc/driver/nvidia.

`probe` is the one entry: it returns the host's driver, newest CUDA and GPUs (named, with their
compute capabilities where the tools say or the model implies them), an unusable accelerator when
nvidia-smi names a driver failure, or None with the notes saying why. The output formats are read
as recorded in tests/data/host/ (nvidia-smi on data-center, consumer and Jetson machines). References:
- compute capabilities per GPU and architecture: https://developer.nvidia.com/cuda-gpus
- R610's renamed header fields ("KMD Version", "CUDA UMD Version"): sglang issue 27487
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Mapping

from accel_images.model.devices import under
from accel_images.model.hostinfo import (DOTTED, Gpu, HostInfo, Runner, answer, exit_code, host_from, listing,
                                          pci_vendor_absent, quote, read, said, summary, unusable_host)

_NVIDIA_QUERY = ["nvidia-smi", "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader"]
_NVIDIA_QUERY_NO_CC = ["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"]
_NVIDIA_FULL = ["nvidia-smi", "-q"]
_NVIDIA_TABLE = ["nvidia-smi"]
NVIDIA_PCI_VENDOR = "0x10de"

# Table header: "| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   CUDA Version: 12.2 |". R610 renamed
# the fields "KMD Version" and "CUDA UMD Version" (sglang issue 27487); Jetson prints "N/A" in either,
# which is no version (and "NVIDIA-SMI 540.3.0" is the tool's own version, never the driver's).
_NV_HEADER_DRIVER = re.compile(rf"(?:Driver|KMD) Version:\s*({DOTTED})")
_NV_HEADER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\d+\.\d+)")
# First cell of a GPU row: "   0  NVIDIA H100 80GB HBM3          On  "; Jetson prints "N/A" for the
# persistence mode: "   0  Orin (nvgpu)                  N/A  ".
_NV_ROW_CELL = re.compile(r"\s*\d+\s+(\S.*?)\s+(?:On|Off|N/A)\s*")
# The MIG and process tables after the GPU rows have rows of their own ("| 0  N/A  N/A  2345  G  Xorg  N/A |").
_NV_TABLE_END = re.compile(r"^\|\s*(?:Processes|MIG devices):", re.MULTILINE)
_NV_COMPUTE_CAP = re.compile(r"\d+\.\d+")
_NV_NOT_AVAILABLE = re.compile(r"\[?N/A\]?|\[Not Supported\]", re.IGNORECASE)
_DOTTED_RE = re.compile(DOTTED)
# Proprietary: "Kernel Module  580.173.02"; open: "Open Kernel Module for x86_64  565.57.01".
_NV_PROC_DRIVER = re.compile(rf"Kernel Module(?:\s+for\s+\S+)?\s+({DOTTED})\s")
_NV_PROC_MODEL = re.compile(r"^Model:\s*(\S.*?)\s*$", re.MULTILINE)
# `nvidia-smi -q` (= -a): "Key    : value" lines; top-level "Driver Version : 565.57.01", "CUDA Version : 12.7",
# "Attached GPUs : 8", then one block per GPU opened by "GPU 00000000:18:00.0" with indented fields
# ("    Product Name : NVIDIA H100 80GB HBM3", "    Product Architecture : Hopper", since driver 5xx).
_NVQ_FIELD = re.compile(r"(?P<indent>\s*)(?P<key>\S[^:]*?)\s*:\s*(?P<value>.*?)\s*")
_NVQ_GPU = re.compile(r"GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*")
# Failures nvidia-smi prints on stdout, exiting non-zero:
#   "Failed to initialize NVML: Driver/library version mismatch" (+ "NVML library version: 550.144" since ~535)
#   "Failed to initialize NVML: Unknown Error"
#   "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that ..."
_NVML_FAILED = re.compile(r"Failed to initialize NVML:[ \t]*(?P<why>[^\n]*?)[ \t]*$", re.MULTILINE)
_NVML_LIBRARY = re.compile(rf"NVML library version:\s*({DOTTED})")
_NV_NO_DRIVER = re.compile(r"couldn.t communicate with the NVIDIA driver", re.IGNORECASE)

JETSON_GPU_CC = {"Orin": "8.7", "Xavier": "7.2"}
"""A Jetson module's nvidia-smi names its integrated GPU `Orin (nvgpu)` and reports no compute
capability (tests/data/host/nvidia-smi-orin-*.txt, recorded on JetPack 6); every Orin is 8.7 and
every Xavier 7.2 (https://developer.nvidia.com/cuda-gpus). Known, the capability lets the arm64 images
refuse a Jetson with the reason (data/vendors/cuda.yaml `not_served`) instead of dying on it."""
ARCHITECTURE_CC = {"Volta": "7.0", "Turing": "7.5", "Ada Lovelace": "8.9", "Hopper": "9.0"}
"""`Product Architecture` names (nvidia-smi -q) whose every GPU has one compute capability, per
https://developer.nvidia.com/cuda-gpus (Volta's 7.2 is the Xavier SoC, which has no nvidia-smi).
Ampere (8.0, 8.6, 8.7), Blackwell (10.0, 10.3, 12.0...) and Pascal (6.0-6.2) span several: unknown."""


def parse_nvidia_query(text: str, with_compute_cap: bool = True) -> tuple[str | None, list[Gpu]]:
    """Rows of ``driver_version[, compute_cap], name``; rows that do not look like that are skipped.
    A driver or compute capability of '[N/A]' (Jetson, old drivers) is unknown, not a bad row."""
    driver, gpus = None, []
    width = 3 if with_compute_cap else 2
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",", width - 1)]
        if len(fields) != width or not fields[-1] or not _version_or_na(fields[0]):
            continue
        arch: str | None = fields[1] if with_compute_cap else None
        if arch is not None and not _NV_COMPUTE_CAP.fullmatch(arch):
            if not _NV_NOT_AVAILABLE.fullmatch(arch):
                continue
            arch = None
        driver = driver or (fields[0] if _DOTTED_RE.fullmatch(fields[0]) else None)
        gpus.append(Gpu(fields[-1], arch))
    return driver, gpus


def _version_or_na(value: str) -> bool:
    return bool(_DOTTED_RE.fullmatch(value) or _NV_NOT_AVAILABLE.fullmatch(value))


def parse_nvidia_table(text: str) -> tuple[str | None, str | None, list[Gpu]]:
    """Driver, highest supported CUDA and GPU rows from the plain ``nvidia-smi`` table."""
    driver = _NV_HEADER_DRIVER.search(text)
    cuda = _NV_HEADER_CUDA.search(text)
    gpu_part = _NV_TABLE_END.split(text, maxsplit=1)[0]
    cells = [line.split("|")[1] for line in gpu_part.splitlines() if line.startswith("|") and line.count("|") > 2]
    gpus = [Gpu(match.group(1)) for match in map(_NV_ROW_CELL.fullmatch, cells) if match]
    return (driver.group(1) if driver else None), (cuda.group(1) if cuda else None), gpus


@dataclass(frozen=True)
class NvidiaReport:
    """What ``nvidia-smi -q`` says: top-level versions, then per GPU block its fields."""

    driver: str | None
    cuda: str | None
    attached: int
    gpus: tuple[Mapping[str, str], ...]


def parse_nvidia_full(text: str) -> NvidiaReport:
    """``nvidia-smi -q``: the first value of each key per GPU block; versions from the top level."""
    top: dict[str, str] = {}
    blocks: list[dict[str, str]] = []
    for line in text.splitlines():
        if _NVQ_GPU.fullmatch(line):
            blocks.append({})
            continue
        field = _NVQ_FIELD.fullmatch(line)
        if field is None:
            continue
        target = blocks[-1] if blocks and field.group("indent") else top
        target.setdefault(field.group("key"), field.group("value"))
    driver = top.get("Driver Version") or top.get("KMD Version") or ""
    cuda = _NV_COMPUTE_CAP.fullmatch(top.get("CUDA Version") or top.get("CUDA UMD Version") or "")
    attached = top.get("Attached GPUs", "")
    return NvidiaReport(driver if _DOTTED_RE.fullmatch(driver) else None, cuda.group(0) if cuda else None,
                        int(attached) if attached.isdigit() else 0, tuple(blocks))


def _full_report_gpus(report: NvidiaReport) -> list[Gpu]:
    """One Gpu per block (named, with the compute capability its architecture implies); GPUs that
    `Attached GPUs` counts beyond the blocks (a trimmed report) are counted, unnamed."""
    gpus = [Gpu(block.get("Product Name") or None, ARCHITECTURE_CC.get(block.get("Product Architecture", "")))
            for block in report.gpus]
    return gpus + [Gpu(None)] * max(0, report.attached - len(gpus))


def nvidia_failure(text: str, root: Path) -> str | None:
    """Why nvidia-smi cannot reach the driver, when its output says so; None for any other output."""
    if _NV_NO_DRIVER.search(text):
        return ("NVIDIA driver not loaded / not reachable (nvidia-smi couldn't communicate with the NVIDIA "
                "driver: is the nvidia kernel module loaded for this kernel?)")
    failed = _NVML_FAILED.search(text)
    if failed is None:
        return None
    why = failed.group("why")
    if "mismatch" in why.lower():
        return _mismatch(text, root)
    if why.lower().startswith("unknown error"):
        return ("NVML Unknown Error (in a container: its device access was lost, e.g. after `systemctl "
                "daemon-reload` on the host; restart the container)")
    return f"NVML failed to initialize: {why or 'no reason given'}"


def _mismatch(text: str, root: Path) -> str:
    """The user-space NVML differs from the loaded kernel module: a driver update without a reboot."""
    library = _NVML_LIBRARY.search(text)
    module = _NV_PROC_DRIVER.search(read(under(root, "/proc/driver/nvidia/version")) or "")
    versions = ", ".join(part for part in (f"user-space NVML {library.group(1)}" if library else "",
                                           f"loaded kernel module {module.group(1)}" if module else "") if part)
    return ("NVIDIA driver/library version mismatch" + (f" ({versions})" if versions else "")
            + ": reboot, or reload the nvidia kernel modules, after a driver update")


@dataclass
class _SmiReading:
    """What the nvidia-smi command forms said so far, merged: the first to name a value wins."""

    driver: str | None = None
    cuda: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def merge(self, driver: str | None, cuda: str | None, gpus: list[Gpu]) -> None:
        self.driver, self.cuda = self.driver or driver, self.cuda or cuda
        self.gpus = self.gpus or gpus


def _read_query(reading: _SmiReading, text: str, notes: list[str]) -> None:
    reading.merge(*_with_cuda(None, parse_nvidia_query(text)))


def _read_query_no_cc(reading: _SmiReading, text: str, notes: list[str]) -> None:
    notes.append("cuda: nvidia-smi cannot report compute_cap (old driver)")
    reading.merge(*_with_cuda(None, parse_nvidia_query(text, with_compute_cap=False)))


def _read_full(reading: _SmiReading, text: str, notes: list[str]) -> None:
    report = parse_nvidia_full(text)
    if report.gpus:
        archs = _each(report, "Product Architecture")
        notes.append(f"cuda: nvidia-smi -q: {report.attached or len(report.gpus)} attached GPU(s)"
                     + (f", architecture {archs}" if archs else ", no Product Architecture field (unknown)")
                     + (f", PCI device id {ids}" if (ids := _each(report, "Device Id")) else ""))
    reading.merge(report.driver, report.cuda, _full_report_gpus(report))


def _each(report: NvidiaReport, key: str) -> str:
    """The distinct values of one field over the GPU blocks, for the evidence."""
    return ", ".join(dict.fromkeys(block[key] for block in report.gpus if block.get(key)))


def _read_table(reading: _SmiReading, text: str, notes: list[str]) -> None:
    driver, cuda, gpus = parse_nvidia_table(text)
    reading.merge(driver, cuda, gpus)


def _with_cuda(cuda: str | None, parsed: tuple[str | None, list[Gpu]]) -> tuple[str | None, str | None, list[Gpu]]:
    return parsed[0], cuda, parsed[1]


_SMI_FORMS: tuple[tuple[list[str], Callable[[_SmiReading], bool],
                        Callable[[_SmiReading, str, list[str]], None]], ...] = (
    (_NVIDIA_QUERY, lambda r: True, _read_query),
    (_NVIDIA_QUERY_NO_CC, lambda r: not r.answered, _read_query_no_cc),  # compute_cap is new in 510-era drivers
    (_NVIDIA_FULL, lambda r: not r.gpus, _read_full),                    # when the CSV query fails
    (_NVIDIA_TABLE, lambda r: not r.gpus or r.cuda is None, _read_table),  # the newest CUDA is only in headers
)
"""nvidia-smi's command forms, each asked only while what it adds is still unknown."""


def _nvidia_from_smi(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    reading = _SmiReading()
    for argv, wanted, read_into in _SMI_FORMS:
        if not wanted(reading):
            continue
        output = run(argv)
        if (reason := nvidia_failure(said(output), root)):
            return _broken(reason, root, notes)
        if (text := answer(output)) is None:
            if output is not None:
                reading.failures.append(f"`{' '.join(argv)}` exited {exit_code(output)}: {quote(said(output))}")
            continue
        reading.answered.append(text)
        read_into(reading, text, notes)
    return _smi_host(reading, notes)


def _smi_host(reading: _SmiReading, notes: list[str]) -> HostInfo | None:
    if not reading.answered:
        notes.append("cuda: nvidia-smi missing, failing or timed out" + "".join(f"; {f}" for f in reading.failures))
        return None
    if not reading.gpus:
        notes.append(f"cuda: nvidia-smi answered without a GPU row: {quote(reading.answered[0])}")
        return None
    limit = f", CUDA up to {reading.cuda}" if reading.cuda else ", highest CUDA not reported"
    notes.append(f"cuda: nvidia-smi lists {summary(reading.gpus)}, driver {reading.driver or 'not reported'}{limit}")
    gpus = [gpu if gpu.arch else Gpu(gpu.name, _jetson_cc(gpu.name)) for gpu in reading.gpus]
    return host_from("cuda", gpus, driver_version=reading.driver, stack_version=reading.cuda)


def _jetson_cc(name: str | None) -> str | None:
    """The compute capability of a Jetson's integrated GPU from its name (`Orin (nvgpu)`), else None."""
    first = (name or "").split(" ")[0]
    return JETSON_GPU_CC.get(first)


def _broken(reason: str, root: Path, notes: list[str]) -> HostInfo | None:
    """nvidia-smi names a driver failure: an unusable accelerator, unless sysfs shows no NVIDIA device
    at all (driver packages on a machine without the GPU fail the same way)."""
    if pci_vendor_absent(root, NVIDIA_PCI_VENDOR):
        notes.append(f"cuda: nvidia-smi fails ({reason}), but no NVIDIA device is on the PCI bus")
        return None
    notes.append(f"cuda: accelerator present but unusable: {reason}")
    return unusable_host("cuda", reason)


def _nvidia_from_proc(root: Path, notes: list[str]) -> HostInfo | None:
    version = read(under(root, "/proc/driver/nvidia/version"))
    if version is None:
        notes.append("cuda: no /proc/driver/nvidia/version (NVIDIA kernel driver not loaded)")
        return None
    driver = _NV_PROC_DRIVER.search(version)
    if driver is None:
        notes.append(f"cuda: /proc/driver/nvidia/version unreadable: {quote(version)}")
        return None
    gpus = []
    for directory in listing(under(root, "/proc/driver/nvidia/gpus"), "*"):
        model = _NV_PROC_MODEL.search(read(directory / "information") or "")
        gpus.append(Gpu(model.group(1) if model else None))
    if not gpus:
        notes.append(f"cuda: kernel driver {driver.group(1)} loaded but /proc/driver/nvidia/gpus lists no GPU")
        return None
    notes.append(f"cuda: /proc/driver/nvidia lists {summary(gpus)}, driver {driver.group(1)}; "
                 "highest CUDA unknown without nvidia-smi")
    return host_from("cuda", gpus, driver_version=driver.group(1))



def probe(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    """The NVIDIA host nvidia-smi describes, else the one /proc/driver/nvidia does; None without either."""
    return _nvidia_from_smi(run, root, notes) or _nvidia_from_proc(root, notes)
