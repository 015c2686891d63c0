"""NVIDIA CUDA: cuXY wheels on nvidia/cuda bases, `--gpus all`, driver and architecture rules.

References (each rule below names its section of compat-facts.md and the vendor source):
- wheel indexes, toolkits and SASS targets per torch: PyTorch RELEASE.md
  https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix
- toolkit -> driver: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
- minor-version compatibility floors: https://docs.nvidia.com/deploy/cuda-compatibility/
- device flags: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Mapping, Sequence

from accel_images.model.devices import DeviceOptions, GpuRequest, SessionSettings, under
from accel_images.model.hostinfo import (DOTTED, Gpu, HostInfo, Runner, answer, exit_code, host_from, listing,
                                          pci_vendor_absent, quote, read, said, summary, unusable_host)
from accel_images.model.knowledge import Combo, Resolution, minor_of
from accel_images.vendors.base import Fit, VendorBase
from accel_images.versions import compare_driver, parse

if TYPE_CHECKING:
    from accel_images.model.knowledge import Knowledge, TorchRelease
    from accel_images.model.variant import Variant

NVIDIA_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"
NGC_PYTORCH_DOCS = "https://docs.nvidia.com/deeplearning/frameworks/user-guide/index.html"


@dataclass(frozen=True)
class CudaFacts:
    """The CUDA tables of the knowledge base (data/vendors/cuda.yaml)."""

    toolkits: Mapping[str, Mapping[str, str]]        # torch minor -> cuXY -> exact toolkit
    archs: Mapping[str, Mapping[str, tuple[str, ...]]]  # torch minor -> cuXY -> SASS targets
    drivers: Mapping[str, str]                      # toolkit X.Y.Z -> its driver
    families: Mapping[str, Mapping[str, Any]]       # X.Y -> mvc_floor, min_compute, base_version, base_os

    def toolkit(self, torch_minor: str, cuda: str) -> str:
        """The exact toolkit inside torch's cuXY wheel (RELEASE.md), else the family's GA."""
        return self.toolkits.get(torch_minor, {}).get(cuda) or f"{cuda}.0"

    def driver_min(self, toolkit: str) -> str | None:
        return self.drivers.get(toolkit)

    def mvc_floor(self, cuda: str) -> str:
        return str(self.families[cuda]["mvc_floor"])


def _strs(values: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


class Cuda(VendorBase):
    """The NVIDIA vendor: see the module docstring for its references."""

    def load_facts(self, raw: Mapping[str, Any]) -> CudaFacts:
        return CudaFacts(
            toolkits={str(m): {str(k): str(v) for k, v in row.items()} for m, row in raw.get("toolkits", {}).items()},
            archs={str(m): {str(k): _strs(v) for k, v in row.items()} for m, row in raw.get("archs", {}).items()},
            drivers={str(k): str(v) for k, v in raw["drivers"].items()},
            families={str(k): dict(v) for k, v in raw["families"].items()},
        )

    def facts(self, kb: Knowledge) -> CudaFacts:
        facts: CudaFacts = self.section(kb).facts
        return facts

    # ---- knowledge base ------------------------------------------------------------------

    def os_extra_reasons(self, kb: Knowledge, combo: Combo) -> list[str]:
        """The devel flavor sits on nvidia/cuda, which publishes each CUDA for some Ubuntu releases only."""
        families = self.facts(kb).families
        if combo.flavor == "runtime" or not combo.stack or combo.stack not in families:
            return []
        bases = families[combo.stack]["base_os"]
        if combo.os not in bases:
            return [f"nvidia/cuda has no CUDA {combo.stack} image for {combo.os} (CUDA {combo.stack} bases:"
                    f" {', '.join(bases)})"]
        return []

    def wheel_index(self, kb: Knowledge, stack: str | None) -> str | None:
        return "cu" + (stack or "").replace(".", "")

    def gpu_archs(self, kb: Knowledge, torch: str, stack: str | None) -> tuple[str, ...]:
        """SASS targets of the cuXY wheel, the last one marked '+PTX' where the wheel carries PTX."""
        return self.facts(kb).archs.get(minor_of(torch), {}).get(stack or "", ())

    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution:
        base = super().resolve(kb, combo)
        facts, stack = self.facts(kb), base.stack or ""
        toolkit = facts.toolkit(kb.release(base.torch).minor, stack)
        version = facts.families[stack]["base_version"]
        # Runtime: plain Ubuntu, as PyTorch's own runtime image (docker.Makefile BASE_RUNTIME=ubuntu):
        # the wheels bring cuBLAS, cuDNN and NCCL. Devel: nvidia/cuda devel for nvcc and headers.
        image = base.base_image if combo.flavor == "runtime" else f"nvidia/cuda:{version}-{combo.flavor}-{combo.os}"
        return Resolution(torch=base.torch, stack=stack, base_image=image,
                          wheel_index=base.wheel_index, toolkit=toolkit, min_driver=facts.driver_min(toolkit),
                          mvc_driver=facts.mvc_floor(stack), gpu_archs=base.gpu_archs)

    def details(self, kb: Knowledge, stack: str | None, row: TorchRelease) -> dict[str, Any]:
        details = super().details(kb, stack, row)
        if stack:
            facts = self.facts(kb)
            exact = details[self.name]
            toolkit = facts.toolkit(row.minor, exact)
            details.update(toolkit=toolkit, driver_min=facts.driver_min(toolkit), mvc_floor=facts.mvc_floor(exact))
        return details

    def base_upgrades(self, kb: Knowledge, variant: Variant) -> list[str]:
        """nvidia/cuda drops old patch releases: the newer bases for the same OS, newest first."""
        families = self.facts(kb).families
        if variant.flavor == "runtime":
            return []
        current = str(families.get(variant.stack or "", {}).get("base_version", "0"))
        versions = [str(row["base_version"]) for row in families.values()
                    if variant.os in row.get("base_os", ()) and parse(str(row["base_version"])) > parse(current)]
        return [f"nvidia/cuda:{version}-{variant.flavor}-{variant.os}"
                for version in sorted(versions, key=parse, reverse=True)]

    # ---- hardware -------------------------------------------------------------------------

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(vendor=self.name, device_requests=(GpuRequest(),), sources=(NVIDIA_DOCS,))  # --gpus all

    def session_settings(self) -> SessionSettings:
        """NVIDIA starts its PyTorch containers with `--ipc=host --ulimit memlock=-1 --ulimit
        stack=67108864` (NGC user guide, "Running PyTorch"): pinned host memory for fast copies to
        the GPU, and a 64 MB stack for deep recursion in compiled code."""
        return SessionSettings(ulimits=(("memlock", "-1"), ("stack", "67108864")), sources=(NGC_PYTORCH_DOCS,))

    def accelerator_present(self, dev_root: Path) -> bool:
        return any(under(dev_root, path).exists() for path in ("/dev/nvidiactl", "/dev/nvidia0"))

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        return _nvidia_from_smi(run, root, notes) or _nvidia_from_proc(root, notes)

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        """The same decisions as the image's guard (`decide`), plus what only the host report tells:
        the newest CUDA the driver reports."""
        decision = decide(host.driver_version, host.gpu_archs, variant)
        rejections, caveats = list(decision.refusals), list(decision.warnings)
        if not rejections and host.stack_version:
            rejections += _reported_cuda_rules(host.stack_version, variant.stack or "")
        return Fit(variant, tuple(rejections), tuple(caveats), decision.exact_arch, decision.why)

    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]:
        """What the guard decides with (the same facts `fit` uses), and the sibling images a
        refusal names: the one with the oldest driver floor, the newest and the oldest GPUs."""
        siblings = _siblings(variant, variants)
        env = {
            "ACCEL_IMAGES_CUDA": variant.toolkit or "",
            "ACCEL_IMAGES_MIN_DRIVER": variant.min_driver or "",
            "ACCEL_IMAGES_DRIVER_FLOOR": variant.mvc_driver or "",
            "ACCEL_IMAGES_GPU_ARCHS": ",".join(variant.gpu_archs),
            "ACCEL_IMAGES_FOR_OLDER_DRIVER": _pick(siblings, variant, lambda v: parse(v.mvc_driver or "0"),
                                                   lowest=True),
            "ACCEL_IMAGES_FOR_NEWER_GPU": _pick(siblings, variant, lambda v: _arch_span(v)[1], lowest=False),
            "ACCEL_IMAGES_FOR_OLDER_GPU": _pick(siblings, variant, lambda v: _arch_span(v)[0], lowest=True),
        }
        return {key: value for key, value in env.items() if value}

    def host_warnings(self, host: HostInfo, fits: list[Fit]) -> list[str]:
        warnings = []
        if host.driver_version is None:
            warnings.append("the NVIDIA driver version is unknown: driver rules were not applied")
        if host.device_count and not host.gpu_archs:
            warnings.append("the GPU compute capability is unknown:"
                            " the image's compiled architectures were not checked")
        return warnings

    def describe_host(self, host: HostInfo) -> list[str]:
        return [f"CUDA up to {host.stack_version}"] if host.stack_version else []


# ---------------------------------------------------------------------------------------------
# One decision for the guard and recommend: driver and GPU architecture (compat-facts §1.3, §2.2, §8.2)
# ---------------------------------------------------------------------------------------------

PTX_MARK = "+PTX"


@dataclass(frozen=True)
class Decision:
    """Whether a CUDA image runs on a host: refusals (it cannot), warnings (it runs, but)."""

    refusals: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    exact_arch: bool = False
    why: str = ""


def split_archs(archs: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    """('7.5', ..., '12.0+PTX') -> (('7.5', ..., '12.0'), '12.0'): the SASS targets and the PTX one."""
    sass = tuple(a.removesuffix(PTX_MARK) for a in archs)
    ptx = next((a.removesuffix(PTX_MARK) for a in archs if a.endswith(PTX_MARK)), None)
    return sass, ptx


def decide(driver: str | None, gpu_archs: Sequence[str], variant: Variant) -> Decision:
    """The rules, applied to what is known (a missing driver or architecture checks nothing):

    - driver below the minor-version-compatibility floor of the wheel's CUDA major (525.60.13 for
      12.x, 580 for 13.x): refused; between the floor and the toolkit's own driver: runs, warned
      that PTX JIT of newer code (torch.compile, Triton) may fail (NVIDIA's MVC document);
    - GPU architecture: SASS for the GPU's compute capability or a lower minor of the same major
      runs (8.6 code on 8.9); above that, only PTX of an architecture not above it can be JIT
      compiled; older than every target, or newer with no PTX for it: refused. With several GPUs,
      the image is refused only when it serves none of them.
    """
    refusals, warnings, why = _driver_decision(driver, variant)
    arch = _arch_decision(gpu_archs, variant)
    return Decision(tuple(refusals + list(arch.refusals)), tuple(warnings + list(arch.warnings)),
                    arch.exact_arch, "; ".join(p for p in (why, arch.why) if p))


def _driver_decision(driver: str | None, variant: Variant) -> tuple[list[str], list[str], str]:
    if driver is None or variant.mvc_driver is None:
        return [], [], ""
    floor, major = variant.mvc_driver, (variant.stack or "").split(".")[0]
    if compare_driver(driver, floor) < 0:
        return [f"host driver {driver} is below the CUDA {major}.x floor {floor} (minor-version compatibility)"], [], ""
    toolkit_driver = variant.min_driver
    if toolkit_driver and compare_driver(driver, toolkit_driver) < 0:
        warning = (f"host driver {driver} is below the CUDA {variant.toolkit} toolkit driver {toolkit_driver}: "
                   f"it runs under minor-version compatibility (floor {floor}), which covers the compiled kernels "
                   "but not PTX JIT of newer code (torch.compile, Triton)")
        return [], [warning], f"driver {driver} is above the CUDA {major}.x floor {floor}"
    return [], [], f"driver {driver} meets the CUDA {variant.toolkit} toolkit driver {toolkit_driver}"


def _arch_decision(gpu_archs: Sequence[str], variant: Variant) -> Decision:
    sass, ptx = split_archs(variant.gpu_archs)
    if not gpu_archs or not sass:
        return Decision()
    verdicts = {cc: _one_gpu(cc, sass, ptx, variant) for cc in gpu_archs}
    served = [cc for cc, (problem, _) in verdicts.items() if problem is None]
    problems = [problem for problem, _ in verdicts.values() if problem]
    if not served:
        return Decision(refusals=tuple(problems))
    warnings = [f"{problem}; only the GPUs of compute capability {', '.join(served)} can use it"
                for problem in problems]
    warnings += [f"compute capability {cc} runs through PTX JIT of the {ptx} code: the first run of each kernel "
                 "compiles it" for cc in served if verdicts[cc][1] == "ptx"]
    exact = all(verdicts[cc][1] == "exact" for cc in served)
    targets = ", ".join(cc if verdicts[cc][1] == "exact" else f"{_runs_as(cc, sass, ptx)} (runs on {cc})"
                        for cc in served)
    return Decision(warnings=tuple(warnings), exact_arch=exact, why=f"compiled for compute capability {targets}")


def _one_gpu(cc: str, sass: tuple[str, ...], ptx: str | None, variant: Variant) -> tuple[str | None, str]:
    """(problem or None, how it runs: 'exact', 'sass' of a lower minor, 'ptx')."""
    try:
        gpu = parse(cc)
    except ValueError:
        return None, "sass"
    if cc in sass:
        return None, "exact"
    if sass_for(cc, sass):
        return None, "sass"
    if ptx is not None and parse(ptx) <= gpu:
        return None, "ptx"
    built = f"{sass[0]}-{sass[-1]}" if len(sass) > 1 else sass[0]
    if gpu < min(parse(a) for a in sass):
        return (f"compute capability {cc} is older than every architecture compiled into the "
                f"{variant.wheel_index} wheel ({built})"), ""
    return (f"no kernels for compute capability {cc} in the {variant.wheel_index} wheel (built for {built}, "
            f"{'PTX ' + ptx if ptx else 'no PTX'})"), ""


def _runs_as(cc: str, sass: tuple[str, ...], ptx: str | None) -> str:
    return sass_for(cc, sass) or f"PTX {ptx}"


def sass_for(cc: str, compiled: Sequence[str]) -> str | None:
    """The newest compiled target a GPU of compute capability `cc` can run: same major, minor not above."""
    try:
        gpu = parse(cc)
        usable = [a for a in compiled if parse(a)[0] == gpu[0] and parse(a) <= gpu]
    except ValueError:
        return None
    return max(usable, key=parse) if usable else None


def _reported_cuda_rules(cuda_max: str, stack: str) -> list[str]:
    """A driver never runs a newer CUDA major (forward compatibility needs cuda-compat, data-center
    GPUs only). An older minor of the same major is what MVC allows, and the images require only
    `cuda>=<major>.0` (NVIDIA_REQUIRE_CUDA), so it is no reason against them."""
    try:
        reported, wanted = parse(cuda_max), parse(stack)
    except ValueError:
        return []
    if reported[0] < wanted[0]:
        return [f"the host driver supports CUDA up to {cuda_max}, older than CUDA {wanted[0]}.x "
                "(a newer CUDA major needs a newer driver)"]
    return []


def _siblings(variant: Variant, variants: Sequence[Variant]) -> list[Variant]:
    """Other CUDA images a user of this one would switch to: same flavor, Python and OS,
    this torch first (then the newest torch), so the hint changes as little as possible."""
    same = [v for v in variants if v.vendor == variant.vendor and v != variant
            and (v.flavor, v.python, v.os) == (variant.flavor, variant.python, variant.os)]
    return sorted(same, key=lambda v: (v.torch_minor != variant.torch_minor, v.sort_key()))


def _pick(siblings: list[Variant], variant: Variant, key: Any, lowest: bool) -> str:
    """The first sibling strictly better than `variant` by `key`, or ''."""
    better = [v for v in siblings if (key(v) < key(variant) if lowest else key(v) > key(variant))]
    if not better:
        return ""
    best = min(key(v) for v in better) if lowest else max(key(v) for v in better)
    return next(v.tag for v in better if key(v) == best)


def _arch_span(variant: Variant) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(oldest, newest) compute capability the image serves; PTX reaches every newer major too."""
    sass, ptx = split_archs(variant.gpu_archs)
    if not sass:
        return (0,), (0,)
    newest = (999,) if ptx else max(parse(a) for a in sass)
    return min(parse(a) for a in sass), newest


# ---------------------------------------------------------------------------------------------
# Host detection: nvidia-smi (CSV query, then -q, then the table), else /proc/driver/nvidia
# ---------------------------------------------------------------------------------------------

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
    return host_from("cuda", reading.gpus, driver_version=reading.driver, stack_version=reading.cuda)


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


# ---------------------------------------------------------------------------------------------
# The in-image guard (accel_images/smoke/guard.sh calls check_vendor)
# ---------------------------------------------------------------------------------------------

GUARD = r'''# arch_runs CC: the image has kernels a GPU of compute capability CC can run: SASS for CC or a
# lower minor of the same major, or PTX of an architecture not above CC (JIT compiled).
arch_runs() {
    for arch in $(printf '%s' "${ACCEL_IMAGES_GPU_ARCHS:-}" | tr ',' ' '); do
        target=${arch%+PTX}
        if [ "$target" = "$1" ]; then return 0; fi
        if [ "${target%%.*}" = "${1%%.*}" ] && version_lt "$target" "$1"; then return 0; fi
        if [ "$target" != "$arch" ] && version_lt "$target" "$1"; then return 0; fi
    done
    return 1
}

# or_use TAG: ", or use TAG" when a sibling image is named.
or_use() {
    if [ -n "$1" ]; then printf ', or use %s' "$1"; fi
}

check_vendor() {
    if ! command -v nvidia-smi > /dev/null 2>&1; then
        missing "no NVIDIA GPU visible in the container: run with --gpus all (NVIDIA Container Toolkit)"
        return
    fi
    # nvidia-smi prints its own failures on stdout: only a zero exit makes the answer a version.
    if ! answer=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1); then
        missing "nvidia-smi cannot reach the NVIDIA driver ($(printf '%s\n' "$answer" | head -n1))"
        return
    fi
    driver=$(printf '%s\n' "$answer" | head -n1 | tr -d ' ')
    is_version "$driver" || driver=""
    floor="${ACCEL_IMAGES_DRIVER_FLOOR:-}"
    cuda="${ACCEL_IMAGES_CUDA:-}"
    if [ -n "$driver" ] && [ -n "$floor" ] && version_lt "$driver" "$floor"; then
        refuse "host NVIDIA driver $driver is below $floor, the CUDA ${cuda%%.*}.x floor (minor-version compatibility) of ${ACCEL_IMAGES_TAG:-this image}: update the driver$(or_use "${ACCEL_IMAGES_FOR_OLDER_DRIVER:-}")"
    fi
    if [ -n "$driver" ] && [ -n "${ACCEL_IMAGES_MIN_DRIVER:-}" ] && version_lt "$driver" "$ACCEL_IMAGES_MIN_DRIVER"; then
        warn "host NVIDIA driver $driver is below the CUDA $cuda toolkit driver $ACCEL_IMAGES_MIN_DRIVER: it runs under minor-version compatibility, which covers the compiled kernels but not PTX JIT of newer code (torch.compile, Triton)"
    fi
    # compute_cap is unknown to old drivers: no answer means no architecture check.
    capabilities=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' ')
    [ -n "${ACCEL_IMAGES_GPU_ARCHS:-}" ] || return 0
    known="" served="" unserved=""
    for capability in $capabilities; do
        is_version "$capability" || continue
        known=1
        if arch_runs "$capability"; then served="$served $capability"; else unserved="$unserved $capability"; fi
    done
    [ -n "$known" ] || return 0
    if [ -n "$served" ]; then
        if [ -n "$unserved" ]; then
            warn "no kernels in ${ACCEL_IMAGES_TAG:-this image} for the GPUs of compute capability${unserved}: only those of${served} can use it"
        fi
        return 0
    fi
    capability=$(printf '%s' "$unserved" | tr -s ' ' | cut -d' ' -f2)
    oldest=$(printf '%s' "$ACCEL_IMAGES_GPU_ARCHS" | cut -d, -f1)
    if version_lt "$capability" "$oldest"; then
        refuse "GPU compute capability $capability is older than every architecture compiled into ${ACCEL_IMAGES_TAG:-this image} ($ACCEL_IMAGES_GPU_ARCHS)$(or_use "${ACCEL_IMAGES_FOR_OLDER_GPU:-}")"
    fi
    refuse "no kernels for GPU compute capability $capability in ${ACCEL_IMAGES_TAG:-this image} (compiled for $ACCEL_IMAGES_GPU_ARCHS)$(or_use "${ACCEL_IMAGES_FOR_NEWER_GPU:-}")"
}
'''  # noqa: E501 - each of the guard's messages is one line of shell

VENDOR = Cuda(
    name="cuda",
    title="NVIDIA CUDA",
    stack_name="CUDA",
    smoke_backend="cuda",
    kb_file=Path(__file__).parent.parent / "data" / "vendors" / "cuda.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gpu-nvidia"),
    detect_rank=10,
    guard_check=GUARD,
    sources=(NVIDIA_DOCS,),
)
