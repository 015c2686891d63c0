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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from accel_images.devices import DeviceOptions, GpuRequest, under
from accel_images.hostinfo import DOTTED, Gpu, HostInfo, Runner, host_from, quote, read, listing, summary
from accel_images.vendors.base import Combo, Fit, Resolution, VendorBase, minor_of
from accel_images.versions import compare_driver, parse

if TYPE_CHECKING:
    from accel_images.compat import KnowledgeBase, TorchRelease
    from accel_images.variant import Variant

NVIDIA_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"


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

    def facts(self, kb: "KnowledgeBase") -> CudaFacts:
        facts: CudaFacts = self.section(kb).facts
        return facts

    # ---- knowledge base ------------------------------------------------------------------

    def os_extra_reasons(self, kb: "KnowledgeBase", combo: Combo) -> list[str]:
        """The devel flavor sits on nvidia/cuda, which publishes each CUDA for some Ubuntu releases only."""
        families = self.facts(kb).families
        if combo.flavor == "runtime" or not combo.stack or combo.stack not in families:
            return []
        bases = families[combo.stack]["base_os"]
        if combo.os not in bases:
            return [f"nvidia/cuda has no CUDA {combo.stack} image for {combo.os} (CUDA {combo.stack} bases:"
                    f" {', '.join(bases)})"]
        return []

    def wheel_index(self, kb: "KnowledgeBase", stack: str | None) -> str | None:
        return "cu" + (stack or "").replace(".", "")

    def gpu_archs(self, kb: "KnowledgeBase", torch: str, stack: str | None) -> tuple[str, ...]:
        """SASS targets of the cuXY wheel, the last one marked '+PTX' where the wheel carries PTX."""
        return self.facts(kb).archs.get(minor_of(torch), {}).get(stack or "", ())

    def resolve(self, kb: "KnowledgeBase", combo: Combo) -> Resolution:
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

    def details(self, kb: "KnowledgeBase", stack: str | None, row: "TorchRelease") -> dict[str, Any]:
        details = super().details(kb, stack, row)
        if stack:
            facts = self.facts(kb)
            exact = details[self.name]
            toolkit = facts.toolkit(row.minor, exact)
            details.update(toolkit=toolkit, driver_min=facts.driver_min(toolkit), mvc_floor=facts.mvc_floor(exact))
        return details

    def base_upgrades(self, kb: "KnowledgeBase", variant: "Variant") -> list[str]:
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

    def accelerator_present(self, dev_root: Path) -> bool:
        return any(under(dev_root, path).exists() for path in ("/dev/nvidiactl", "/dev/nvidia0"))

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        return _nvidia_from_smi(run, notes) or _nvidia_from_proc(root, notes)

    def fit(self, host: HostInfo, variant: "Variant", kb: "KnowledgeBase") -> Fit:
        """The same decisions as the image's guard (`decide`), plus what only the host report tells:
        the newest CUDA the driver reports."""
        decision = decide(host.driver_version, host.gpu_archs, variant)
        rejections, caveats = list(decision.refusals), list(decision.warnings)
        if not rejections and host.stack_version:
            rejections += _reported_cuda_rules(host.stack_version, variant.stack or "")
        return Fit(variant, tuple(rejections), tuple(caveats), decision.exact_arch, decision.why)

    def image_env(self, kb: "KnowledgeBase", variant: "Variant",
                  variants: "Sequence[Variant]") -> Mapping[str, str]:
        """What the guard decides with (the same facts `fit` uses), and the sibling images a
        refusal names: the one with the oldest driver floor, the newest and the oldest GPUs."""
        siblings = _siblings(variant, variants)
        env = {
            "ACCEL_IMAGES_CUDA": variant.toolkit or "",
            "ACCEL_IMAGES_MIN_DRIVER": variant.min_driver or "",
            "ACCEL_IMAGES_DRIVER_FLOOR": variant.mvc_driver or "",
            "ACCEL_IMAGES_GPU_ARCHS": ",".join(variant.gpu_archs),
            "ACCEL_IMAGES_FOR_OLDER_DRIVER": _pick(siblings, variant, lambda v: parse(v.mvc_driver or "0"), lowest=True),
            "ACCEL_IMAGES_FOR_NEWER_GPU": _pick(siblings, variant, lambda v: _arch_span(v)[1], lowest=False),
            "ACCEL_IMAGES_FOR_OLDER_GPU": _pick(siblings, variant, lambda v: _arch_span(v)[0], lowest=True),
        }
        return {key: value for key, value in env.items() if value}

    def host_warnings(self, host: HostInfo, fits: list[Fit]) -> list[str]:
        warnings = []
        if host.driver_version is None:
            warnings.append("the NVIDIA driver version is unknown: driver rules were not applied")
        if host.device_count and not host.gpu_archs:
            warnings.append("the GPU compute capability is unknown: the image's compiled architectures were not checked")
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


def decide(driver: str | None, gpu_archs: Sequence[str], variant: "Variant") -> Decision:
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


def _driver_decision(driver: str | None, variant: "Variant") -> tuple[list[str], list[str], str]:
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


def _arch_decision(gpu_archs: Sequence[str], variant: "Variant") -> Decision:
    sass, ptx = split_archs(variant.gpu_archs)
    if not gpu_archs or not sass:
        return Decision()
    verdicts = {cc: _one_gpu(cc, sass, ptx, variant) for cc in gpu_archs}
    served = [cc for cc, (problem, _) in verdicts.items() if problem is None]
    problems = [problem for problem, _ in verdicts.values() if problem]
    if not served:
        return Decision(refusals=tuple(problems))
    warnings = [f"{problem}; only the GPUs of compute capability {', '.join(served)} can use it" for problem in problems]
    warnings += [f"compute capability {cc} runs through PTX JIT of the {ptx} code: the first run of each kernel "
                 "compiles it" for cc in served if verdicts[cc][1] == "ptx"]
    exact = all(verdicts[cc][1] == "exact" for cc in served)
    targets = ", ".join(cc if verdicts[cc][1] == "exact" else f"{_runs_as(cc, sass, ptx)} (runs on {cc})"
                        for cc in served)
    return Decision(warnings=tuple(warnings), exact_arch=exact, why=f"compiled for compute capability {targets}")


def _one_gpu(cc: str, sass: tuple[str, ...], ptx: str | None, variant: "Variant") -> tuple[str | None, str]:
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


def _siblings(variant: "Variant", variants: "Sequence[Variant]") -> list["Variant"]:
    """Other CUDA images a user of this one would switch to: same flavor, Python and OS,
    this torch first (then the newest torch), so the hint changes as little as possible."""
    same = [v for v in variants if v.vendor == variant.vendor and v != variant
            and (v.flavor, v.python, v.os) == (variant.flavor, variant.python, variant.os)]
    return sorted(same, key=lambda v: (v.torch_minor != variant.torch_minor, v.sort_key()))


def _pick(siblings: list["Variant"], variant: "Variant", key: Any, lowest: bool) -> str:
    """The first sibling strictly better than `variant` by `key`, or ''."""
    better = [v for v in siblings if (key(v) < key(variant) if lowest else key(v) > key(variant))]
    if not better:
        return ""
    best = min(key(v) for v in better) if lowest else max(key(v) for v in better)
    return next(v.tag for v in better if key(v) == best)


def _arch_span(variant: "Variant") -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(oldest, newest) compute capability the image serves; PTX reaches every newer major too."""
    sass, ptx = split_archs(variant.gpu_archs)
    if not sass:
        return (0,), (0,)
    newest = (999,) if ptx else max(parse(a) for a in sass)
    return min(parse(a) for a in sass), newest


# ---------------------------------------------------------------------------------------------
# Host detection: nvidia-smi, else /proc/driver/nvidia
# ---------------------------------------------------------------------------------------------

_NVIDIA_QUERY = ["nvidia-smi", "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader"]
_NVIDIA_QUERY_NO_CC = ["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"]
_NVIDIA_TABLE = ["nvidia-smi"]
# R610 renamed the header fields: "KMD Version" and "CUDA UMD Version" (sglang issue 27487).
_NV_HEADER_DRIVER = re.compile(rf"(?:Driver|KMD) Version:\s*({DOTTED})")
_NV_HEADER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\d+\.\d+)")
_NV_TABLE_ROW = re.compile(r"^\|\s+\d+\s+(\S.*?)\s+(?:On|Off)\s+\|", re.MULTILINE)
_NV_COMPUTE_CAP = re.compile(r"\d+\.\d+")
_NV_NOT_AVAILABLE = re.compile(r"\[?N/A\]?|\[Not Supported\]", re.IGNORECASE)
_DOTTED_RE = re.compile(DOTTED)
# Proprietary: "Kernel Module  580.173.02"; open: "Open Kernel Module for x86_64  565.57.01".
_NV_PROC_DRIVER = re.compile(rf"Kernel Module(?:\s+for\s+\S+)?\s+({DOTTED})\s")
_NV_PROC_MODEL = re.compile(r"^Model:\s*(\S.*?)\s*$", re.MULTILINE)


def parse_nvidia_query(text: str, with_compute_cap: bool = True) -> tuple[str | None, list[Gpu]]:
    """Rows of ``driver_version[, compute_cap], name``; rows that do not look like that are skipped."""
    driver, gpus = None, []
    width = 3 if with_compute_cap else 2
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",", width - 1)]
        if len(fields) != width or not _DOTTED_RE.fullmatch(fields[0]) or not fields[-1]:
            continue
        arch: str | None = fields[1] if with_compute_cap else None
        if arch is not None and not _NV_COMPUTE_CAP.fullmatch(arch):
            if not _NV_NOT_AVAILABLE.fullmatch(arch):
                continue
            arch = None
        driver = driver or fields[0]
        gpus.append(Gpu(fields[-1], arch))
    return driver, gpus


def parse_nvidia_table(text: str) -> tuple[str | None, str | None, list[Gpu]]:
    """Driver, highest supported CUDA and GPU rows from the plain ``nvidia-smi`` table."""
    driver = _NV_HEADER_DRIVER.search(text)
    cuda = _NV_HEADER_CUDA.search(text)
    gpus = [Gpu(name) for name in _NV_TABLE_ROW.findall(text)]
    return (driver.group(1) if driver else None), (cuda.group(1) if cuda else None), gpus


def _nvidia_from_smi(run: Runner, notes: list[str]) -> HostInfo | None:
    query = run(_NVIDIA_QUERY)
    driver, gpus = parse_nvidia_query(query) if query is not None else (None, [])
    if query is None and (query := run(_NVIDIA_QUERY_NO_CC)) is not None:
        notes.append("cuda: nvidia-smi cannot report compute_cap (old driver)")
        driver, gpus = parse_nvidia_query(query, with_compute_cap=False)
    table = run(_NVIDIA_TABLE)
    table_driver, cuda_max, table_gpus = parse_nvidia_table(table) if table is not None else (None, None, [])
    driver, gpus = driver or table_driver, gpus or table_gpus
    if query is None and table is None:
        notes.append("cuda: nvidia-smi missing, failing or timed out")
        return None
    if not (driver and gpus):
        sample = quote(query or table or "")
        notes.append(f"cuda: nvidia-smi answered without a GPU row and driver version: {sample}")
        return None
    limit = f", CUDA up to {cuda_max}" if cuda_max else ", highest CUDA not reported"
    notes.append(f"cuda: nvidia-smi lists {summary(gpus)}, driver {driver}{limit}")
    return host_from("cuda", gpus, driver_version=driver, stack_version=cuda_max)


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
'''

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
