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
from typing import TYPE_CHECKING, Any, Mapping

from accel_images.devices import DeviceOptions, GpuRequest, under
from accel_images.hostinfo import DOTTED, Gpu, HostInfo, Runner, host_from, quote, read, listing, summary
from accel_images.vendors.base import Combo, Fit, Resolution, VendorBase, version_matches
from accel_images.versions import compare_driver, parse, safe_parse

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
        families = self.facts(kb).families
        if not combo.stack or combo.stack not in families:
            return []
        bases = families[combo.stack]["base_os"]
        if combo.os not in bases:
            return [f"nvidia/cuda has no CUDA {combo.stack} image for {combo.os} (CUDA {combo.stack} bases:"
                    f" {', '.join(bases)})"]
        return []

    def wheel_index(self, kb: "KnowledgeBase", stack: str | None) -> str | None:
        return "cu" + (stack or "").replace(".", "")

    def gpu_archs(self, kb: "KnowledgeBase", torch: str, stack: str | None) -> tuple[str, ...]:
        from accel_images.vendors.base import minor_of

        return self.facts(kb).archs.get(minor_of(torch), {}).get(stack or "", ())

    def resolve(self, kb: "KnowledgeBase", combo: Combo) -> Resolution:
        base = super().resolve(kb, combo)
        facts, stack = self.facts(kb), base.stack or ""
        toolkit = facts.toolkit(kb.release(base.torch).minor, stack)
        version = facts.families[stack]["base_version"]
        return Resolution(torch=base.torch, stack=stack, base_image=f"nvidia/cuda:{version}-{combo.flavor}-{combo.os}",
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
        stack = variant.stack or ""
        rejections, caveats, why = _driver_rules(host, variant)
        if not rejections and host.stack_version:
            more_rejections, more_caveats = _reported_cuda_rules(host.stack_version, stack)
            rejections, caveats = rejections + more_rejections, caveats + more_caveats
        arch_rejections, arch_caveats, exact, arch_why = _arch_rules(host, variant, self.facts(kb))
        return Fit(variant, tuple(rejections + arch_rejections), tuple(caveats + arch_caveats), exact,
                   "; ".join(p for p in (why, arch_why) if p))

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
# recommend: driver and architecture rules (compat-facts §1.3, §2.2, §2.4, §8.2)
# ---------------------------------------------------------------------------------------------

def _driver_rules(host: HostInfo, variant: "Variant") -> tuple[list[str], list[str], str]:
    """Reject below the minor-version-compatibility floor of the wheel's CUDA major; between that
    floor and the toolkit's own driver, accept with a caveat (SASS runs, PTX JIT may not)."""
    driver, stack = host.driver_version, variant.stack or ""
    if driver is None or variant.mvc_driver is None:
        return [], [], ""
    floor, major = variant.mvc_driver, stack.split(".")[0]
    if compare_driver(driver, floor) < 0:
        return [f"host driver {driver} is below the CUDA {major}.x floor {floor} (minor-version compatibility)"], [], ""
    toolkit_driver = variant.min_driver
    if toolkit_driver and compare_driver(driver, toolkit_driver) < 0:
        caveat = (f"host driver {driver} is below the CUDA {variant.toolkit} toolkit driver {toolkit_driver}: "
                  f"it runs under minor-version compatibility (floor {floor}), which covers the compiled SASS "
                  "kernels but may fail for PTX/JIT paths such as torch.compile and Triton")
        return [], [caveat], f"driver {driver} is above the CUDA {major}.x floor {floor}"
    return [], [], f"driver {driver} meets the CUDA {variant.toolkit} toolkit driver {toolkit_driver}"


def _reported_cuda_rules(cuda_max: str, stack: str) -> tuple[list[str], list[str]]:
    """A driver never runs a newer CUDA major; an older minor of the same major is what MVC allows,
    a caveat because the nvidia/cuda base declares NVIDIA_REQUIRE_CUDA cuda>=<its version>."""
    try:
        reported, wanted = parse(cuda_max), parse(stack)
    except ValueError:
        return [], []
    if reported[0] < wanted[0]:
        return [f"the host driver supports CUDA up to {cuda_max}, older than CUDA {wanted[0]}.x "
                "(a newer CUDA major needs a newer driver)"], []
    if reported < wanted:
        return [], [f"the host driver reports CUDA {cuda_max}; the image's nvidia/cuda base declares "
                    f"NVIDIA_REQUIRE_CUDA cuda>={stack}, so the NVIDIA runtime may refuse to start it "
                    "(the base exempts some data-center driver branches)"]
    return [], []


def _arch_rules(host: HostInfo, variant: "Variant", facts: CudaFacts) -> tuple[list[str], list[str], bool, str]:
    """GPU compute capabilities against the SASS targets compiled into the wheel."""
    if not host.gpu_archs:
        return [], [], False, ""
    compiled = variant.gpu_archs
    if not compiled:
        return _arch_floor(host, variant, facts)
    unsupported = {cc: problem for cc in host.gpu_archs if (problem := _arch_problem(cc, compiled, variant))}
    served = [cc for cc in host.gpu_archs if cc not in unsupported]
    if not served:
        return list(unsupported.values()), [], False, ""
    caveats = [f"{problem}; only the GPUs of compute capability {', '.join(served)} can use it"
               for problem in unsupported.values()]
    exact = all(cc in compiled for cc in served)
    targets = ", ".join(cc if cc in compiled else f"{sass_for(cc, compiled)} (runs on {cc})" for cc in served)
    return [], caveats, exact, f"compiled for compute capability {targets}"


def sass_for(cc: str, compiled: tuple[str, ...]) -> str | None:
    """The newest compiled target a GPU of compute capability `cc` can run: same major, minor not above."""
    try:
        gpu = parse(cc)
        usable = [a for a in compiled if parse(a)[0] == gpu[0] and parse(a) <= gpu]
    except ValueError:
        return None
    return max(usable, key=parse) if usable else None


def _arch_problem(cc: str, compiled: tuple[str, ...], variant: "Variant") -> str | None:
    try:
        gpu = parse(cc)
        targets = sorted(parse(a) for a in compiled)
    except ValueError:
        return None
    if sass_for(cc, compiled):
        return None
    built = f"{compiled[0]}-{compiled[-1]}" if len(compiled) > 1 else compiled[0]
    if gpu < targets[0]:
        return (f"compute capability {cc} is older than every architecture compiled into the "
                f"{variant.wheel_index} wheel ({built})")
    return f"no kernels for compute capability {cc} in the {variant.wheel_index} wheel (built for {built})"


def _arch_floor(host: HostInfo, variant: "Variant", facts: CudaFacts) -> tuple[list[str], list[str], bool, str]:
    """Without the wheel's arch list, the CUDA release's oldest target is the only rule left."""
    floor = facts.families.get(variant.stack or "", {}).get("min_compute")
    if floor is None:
        return [], [], False, ""
    old = [cc for cc in host.gpu_archs if safe_parse(cc) < parse(str(floor))]
    if len(old) == len(host.gpu_archs):
        return [f"compute capability {', '.join(old)} is older than CUDA {variant.stack}'s oldest target {floor}"], \
            [], False, ""
    return [], [], False, ""


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

GUARD = r'''check_vendor() {
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
    # compute_cap is unknown to old drivers: no answer means no architecture check.
    capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' ')
    is_version "$driver" || driver=""
    is_version "$capability" || capability=""
    if [ -n "$driver" ] && [ -n "${ACCEL_IMAGES_MIN_DRIVER:-}" ] && version_lt "$driver" "$ACCEL_IMAGES_MIN_DRIVER"; then
        refuse "host NVIDIA driver $driver is older than $ACCEL_IMAGES_MIN_DRIVER, which ${ACCEL_IMAGES_TAG:-this image} needs; update the driver or use an image with an older CUDA"
    fi
    oldest=$(printf '%s' "${ACCEL_IMAGES_GPU_ARCHS:-}" | cut -d, -f1)
    if [ -n "$capability" ] && [ -n "$oldest" ] && version_lt "$capability" "$oldest"; then
        refuse "GPU compute capability $capability is not compiled into this image (oldest: $oldest); use an image with an older CUDA (e.g. cuda12.6)"
    fi
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
