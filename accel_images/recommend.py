"""Which published image fits this host: the answer behind `accel-images recommend` and `pull`.

Each variant is judged against the detected host by the rules of compat-facts.md, and the
judgement says one of three things: it cannot work (a rejection, with the reason), it works with a
reservation that is specific to this image (a caveat), or it fits. The newest image that fits wins:

    preferred flavor, then newest torch, then an image without caveats, then one compiled for the
    GPU's own architecture, then newest stack, newest Python, newest OS.

A clean fit beats a newer stack of the same torch that only fits with a caveat: both carry the same
torch, so nothing is lost, while the caveat (PTX/JIT paths, a runtime that may refuse to start the
container) is a real risk for a development image whose users run torch.compile.

The rules, and the decisions taken where the facts left room:

- CUDA driver (§2.2): reject a host driver below the minor-version-compatibility (MVC) floor of the
  wheel's CUDA major; between that floor and the toolkit's own driver, accept with a caveat: SASS
  kernels run, PTX JIT (the +PTX arch, Triton, torch.compile) may fail with
  cudaErrorUnsupportedPtxVersion.
- CUDA version the driver reports (`cuda_max`, §2.4): a driver never runs a newer CUDA *major*
  (forward compatibility needs the cuda-compat package, data-center GPUs only, and the images do not
  ship it), so an older major is a rejection. That never contradicts MVC, which only ever spans one
  major: a driver at or above the 13.x floor (580) reports 13.0 or newer. An older *minor* of the
  same major is exactly what MVC allows, so it is not a rejection; it is a caveat because the
  nvidia/cuda base sets NVIDIA_REQUIRE_CUDA=cuda>=<its version>, which the NVIDIA runtime checks
  against that reported version before Python starts (the base exempts some data-center driver
  branches, e.g. R535 for CUDA 12.6).
- GPU architecture (§1.3, §8.2): a GPU runs a wheel that holds SASS for its own compute capability
  or for a lower minor of the same major (8.9 runs 8.6 code); older than every compiled arch (cu13x
  on compute capability < 7.5) or newer than every major compiled (Blackwell on cu126) is a
  rejection. With several GPUs, the image is rejected only when it serves none of them.
- ROCm (§4.2, §4.3, §8.8): the gfx target must be in the wheel's arch list; for the RDNA parts that
  users commonly force to a neighbour, the unofficial HSA_OVERRIDE_GFX_VERSION is named as a warning,
  never applied. Container ROCm more than two minor releases (or a major) away from the host's is a
  caveat: the kernel driver is tested with user space close to its own.
- Intel XPU: any Intel GPU the host detection confirmed runs the +xpu wheels.
- Intel Gaudi (§6.1, §8.19): image software must equal the host's; the previous minor release
  (N-1) is allowed, with a caveat, on Gaudi 2 with host software 1.17 or newer. A different patch
  of the same minor is rejected: the documents bless none, and a mismatch of that kind was reported
  failing.
- CPU images run anywhere; on an accelerator host they rank after that vendor's own images.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from accel_images import devices
from accel_images.compat import STACK_NAMES, KnowledgeBase, vkey
from accel_images.host import HostInfo, compare_driver
from accel_images.variant import OS_ORDER, Variant

HSA_OVERRIDES = {
    "gfx1031": ("10.3.0", "gfx1030"), "gfx1032": ("10.3.0", "gfx1030"),
    "gfx1101": ("11.0.0", "gfx1100"), "gfx1102": ("11.0.0", "gfx1100"), "gfx1103": ("11.0.0", "gfx1100"),
}
"""Unofficial HSA_OVERRIDE_GFX_VERSION values users run these GPUs with, and the target each then
poses as (§8.8): RDNA2 parts as gfx1030, RDNA3 parts as gfx1100. AMD: "not supported by AMD but
some have had success"."""

ROCM_MINOR_WINDOW = 2
"""How many minor releases container ROCm may stray from the host's before a caveat (§4.3: the
ROCm 6.3 kernel driver was tested with user space 6.3, 6.2 and 6.1)."""

GAUDI_N_MINUS_1_SINCE = "1.17"
_GAUDI2_MODEL = re.compile(r"HL-22\d")  # HL-225 family: Gaudi 2 (HL-205: Gaudi 1; HL-3xx: Gaudi 3)


@dataclass(frozen=True)
class Recommendation:
    """The chosen variant (None when nothing fits), why, what to watch out for, and how to run it."""

    variant: Variant | None
    image: str | None
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    docker_run: str | None

    @property
    def ok(self) -> bool:
        return self.variant is not None


@dataclass(frozen=True)
class Fit:
    """One variant judged against the host."""

    variant: Variant
    rejections: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    exact_arch: bool = False
    why: str = ""

    @property
    def fits(self) -> bool:
        return not self.rejections


def recommend(host: HostInfo, variants: Sequence[Variant], kb: KnowledgeBase, *, image: str,
              registry: str | None = None, prefer_flavor: str = "runtime",
              dev_root: Path = Path("/")) -> Recommendation:
    """The newest variant that runs on `host`, with the reasons for it and against newer ones.

    `image` is the matrix's image name and `registry` an optional prefix (`ghcr.io/acme`); `dev_root`
    stands for `/` when the device flags read group ids from the host's device files.
    """
    fits = [judge(host, variant, kb) for variant in variants]
    usable = sorted((f for f in fits if f.fits), key=lambda f: _rank(f, host, prefer_flavor))
    warnings = list(host_warnings(host, fits))
    if not usable:
        reasons = tuple(f"{f.variant.tag}: {'; '.join(f.rejections)}"
                        for f in sorted(fits, key=lambda f: f.variant.sort_key()))
        return Recommendation(None, None, reasons or ("no variant to choose from",), tuple(warnings), None)
    chosen = usable[0]
    warnings += chosen.caveats
    if chosen.variant.flavor != prefer_flavor:
        warnings.append(f"no {prefer_flavor} image fits; {chosen.variant.flavor} chosen "
                        f"({chosen.variant.vendor} images come as: {_flavors(variants, chosen.variant.vendor)})")
    if chosen.variant.vendor != host.vendor:
        warnings.append(f"no {host.vendor} image fits; the {chosen.variant.vendor} image uses no accelerator")
    ref = image_ref(image, chosen.variant.tag, registry)
    reasons = (f"{chosen.variant.tag}: {chosen.why}", *_passed_over(chosen, fits))
    return Recommendation(chosen.variant, ref, reasons, tuple(warnings),
                          docker_run_line(chosen.variant.vendor, ref, dev_root))


def image_ref(image: str, tag: str, registry: str | None = None) -> str:
    """`[registry/]image:tag`: the registry is a prefix such as `ghcr.io/acme` or `127.0.0.1:5000`;
    a scheme (`https://`, which `nightly --registry` accepts) is not part of an image name."""
    where = (registry or "").strip().split("://", 1)[-1].rstrip("/")
    prefix = f"{where}/" if where else ""
    return f"{prefix}{image}:{tag}"


def docker_run_line(vendor: str, ref: str, dev_root: Path = Path("/")) -> str:
    """`docker run --rm -it <device flags> <ref>` from the one table of device options.

    Every vendor gets a host IPC namespace: DataLoader workers share tensors through /dev/shm, and
    Docker's default 64 MB fails with "bus error ... insufficient shared memory" (§8.23). ROCm and
    Gaudi rows already ask for it; the PyTorch, NVIDIA and Intel documents add it for CUDA and XPU;
    on CPU the cause is the same.
    """
    options = devices.device_options(vendor, dev_root)
    if options.ipc_mode is None:
        options = replace(options, ipc_mode="host")
    return shlex.join(["docker", "run", "--rm", "-it", *options.cli_flags(), ref])


# ---------------------------------------------------------------------------------------------
# Judging one variant
# ---------------------------------------------------------------------------------------------

def judge(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> Fit:
    """Whether `variant` runs on `host`, and with which reservations."""
    if variant.vendor == "cpu":
        return Fit(variant, why="CPU image: runs on any host", exact_arch=True)
    if variant.vendor != host.vendor:
        have = "no accelerator" if host.vendor == "cpu" else f"a {host.vendor} accelerator"
        return Fit(variant, rejections=(f"needs a {variant.vendor} accelerator; this host has {have}",))
    judges = {"cuda": _judge_cuda, "rocm": _judge_rocm, "xpu": _judge_xpu, "gaudi": _judge_gaudi}
    return judges[variant.vendor](host, variant, kb)


def _judge_cuda(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> Fit:
    stack = variant.stack or ""
    rejections, caveats, why = _cuda_driver(host, variant, kb)
    if not rejections and host.cuda_max:
        more_rejections, more_caveats = _cuda_reported(host.cuda_max, stack)
        rejections, caveats = rejections + more_rejections, caveats + more_caveats
    arch_rejections, arch_caveats, exact, arch_why = _cuda_arch(host, variant, kb)
    return Fit(variant, tuple(rejections + arch_rejections), tuple(caveats + arch_caveats), exact,
               "; ".join(p for p in (why, arch_why) if p))


def _cuda_driver(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> tuple[list[str], list[str], str]:
    driver, stack = host.driver_version, variant.stack or ""
    if driver is None:
        return [], [], ""
    floor = variant.mvc_driver or kb.cuda_mvc_floor(stack)
    major = stack.split(".")[0]
    if compare_driver(driver, floor) < 0:
        return [f"host driver {driver} is below the CUDA {major}.x floor {floor} (minor-version compatibility)"], [], ""
    toolkit_driver = variant.min_driver
    if toolkit_driver and compare_driver(driver, toolkit_driver) < 0:
        caveat = (f"host driver {driver} is below the CUDA {variant.cuda_toolkit} toolkit driver {toolkit_driver}: "
                  f"it runs under minor-version compatibility (floor {floor}), which covers the compiled SASS "
                  "kernels but may fail for PTX/JIT paths such as torch.compile and Triton")
        return [], [caveat], f"driver {driver} is above the CUDA {major}.x floor {floor}"
    return [], [], f"driver {driver} meets the CUDA {variant.cuda_toolkit} toolkit driver {toolkit_driver}"


def _cuda_reported(cuda_max: str, stack: str) -> tuple[list[str], list[str]]:
    """Rules on the highest CUDA the driver reports (see the module docstring)."""
    try:
        reported, wanted = vkey(cuda_max), vkey(stack)
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


def _cuda_arch(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> tuple[list[str], list[str], bool, str]:
    """GPU compute capabilities against the SASS targets compiled into the wheel."""
    if not host.gpu_archs:
        return [], [], False, ""
    compiled = variant.gpu_archs
    if not compiled:
        return _cuda_arch_floor(host, variant, kb)
    unsupported = {cc: problem for cc in host.gpu_archs if (problem := _cuda_arch_problem(cc, compiled, variant))}
    served = [cc for cc in host.gpu_archs if cc not in unsupported]
    if not served:
        return list(unsupported.values()), [], False, ""
    caveats = [f"{problem}; only the GPUs of compute capability {', '.join(served)} can use it"
               for problem in unsupported.values()]
    exact = all(cc in compiled for cc in served)
    targets = ", ".join(cc if cc in compiled else f"{_sass_for(cc, compiled)} (runs on {cc})" for cc in served)
    return [], caveats, exact, f"compiled for compute capability {targets}"


def _sass_for(cc: str, compiled: tuple[str, ...]) -> str | None:
    """The newest compiled target a GPU of compute capability `cc` can run: same major, minor not above."""
    try:
        gpu = vkey(cc)
        usable = [a for a in compiled if vkey(a)[0] == gpu[0] and vkey(a) <= gpu]
    except ValueError:
        return None
    return max(usable, key=vkey) if usable else None


def _cuda_arch_problem(cc: str, compiled: tuple[str, ...], variant: Variant) -> str | None:
    try:
        gpu = vkey(cc)
        targets = sorted(vkey(a) for a in compiled)
    except ValueError:
        return None
    if _sass_for(cc, compiled):
        return None
    built = f"{compiled[0]}-{compiled[-1]}" if len(compiled) > 1 else compiled[0]
    if gpu < targets[0]:
        return (f"compute capability {cc} is older than every architecture compiled into the "
                f"{variant.wheel_index} wheel ({built})")
    return f"no kernels for compute capability {cc} in the {variant.wheel_index} wheel (built for {built})"


def _cuda_arch_floor(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> tuple[list[str], list[str], bool, str]:
    """Without the wheel's arch list, the CUDA release's oldest target is the only rule left."""
    floor = kb.cuda.get(variant.stack or "", {}).get("min_compute")
    if floor is None:
        return [], [], False, ""
    old = [cc for cc in host.gpu_archs if _safe_vkey(cc) < vkey(floor)]
    if len(old) == len(host.gpu_archs):
        return [f"compute capability {', '.join(old)} is older than CUDA {variant.stack}'s oldest target {floor}"], \
            [], False, ""
    return [], [], False, ""


def _safe_vkey(version: str) -> tuple[int, ...]:
    try:
        return vkey(version)
    except ValueError:
        return (0,)


def _judge_rocm(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> Fit:
    stack = variant.stack or ""
    caveats = []
    if host.rocm_version and _rocm_far(host.rocm_version, stack):
        caveats.append(f"container ROCm {stack} is far from the host's ROCm {host.rocm_version}: the host kernel "
                       f"driver is tested with user space within a few releases of its own")
    if not host.gpu_archs:
        return Fit(variant, caveats=tuple(caveats), why=f"ROCm {stack}")
    compiled = variant.gpu_archs
    served = [a for a in host.gpu_archs if a in compiled]
    missing = [a for a in host.gpu_archs if a not in compiled]
    if not served:
        return Fit(variant, rejections=(f"GPU architecture {', '.join(missing)} is not compiled into the "
                                        f"{variant.wheel_index} wheel (it has {', '.join(compiled)})",))
    if missing:
        caveats.append(f"GPU architecture {', '.join(missing)} is not compiled into the {variant.wheel_index} "
                       f"wheel; only the {', '.join(served)} GPUs can use it")
    return Fit(variant, caveats=tuple(caveats), exact_arch=True,
               why=f"{', '.join(served)} compiled into the {variant.wheel_index} wheel")


def _rocm_far(host_version: str, stack: str) -> bool:
    """More than ROCM_MINOR_WINDOW minor releases apart, or a different major (tuples, never floats)."""
    try:
        host, image = vkey(host_version), vkey(stack)
    except ValueError:
        return False
    if host[0] != image[0]:
        return True
    return abs((host + (0,))[1] - (image + (0,))[1]) > ROCM_MINOR_WINDOW


def _judge_xpu(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> Fit:
    names = ", ".join(dict.fromkeys(host.gpu_names)) or "an Intel GPU"
    return Fit(variant, exact_arch=True, why=f"+xpu wheel (oneAPI {variant.stack}) runs on {names}")


def _judge_gaudi(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> Fit:
    image_sw, host_sw = variant.stack or "", host.gaudi_version
    if host_sw is None:
        return Fit(variant, rejections=("the host's Intel Gaudi software version is unknown "
                                        "(hl-smi reported no driver version)",))
    if compare_driver(image_sw, host_sw) == 0:
        return Fit(variant, exact_arch=True, why=f"Intel Gaudi software {image_sw} matches the host's driver")
    if _previous_minor(image_sw, host_sw) and _gaudi2(host) and \
            compare_driver(host_sw, GAUDI_N_MINUS_1_SINCE) >= 0:
        return Fit(variant, caveats=(f"image Gaudi software {image_sw} is one release behind the host's {host_sw}: "
                                     "allowed on Gaudi 2 only (N-1 compatibility since 1.17)",),
                   exact_arch=True, why=f"Intel Gaudi software {image_sw} runs on Gaudi 2 with {host_sw} (N-1)")
    return Fit(variant, rejections=(f"image Gaudi software {image_sw} differs from the host's {host_sw}: container "
                                    "and host driver must match (N-1 only on Gaudi 2 from 1.17)",))


def _previous_minor(image_sw: str, host_sw: str) -> bool:
    try:
        image, host = vkey(image_sw)[:2], vkey(host_sw.split("-")[0])[:2]
    except ValueError:
        return False
    return len(image) == len(host) == 2 and image[0] == host[0] and image[1] == host[1] - 1


def _gaudi2(host: HostInfo) -> bool:
    return bool(host.gpu_names) and all(_GAUDI2_MODEL.match(name) for name in host.gpu_names)


# ---------------------------------------------------------------------------------------------
# Ranking and explaining
# ---------------------------------------------------------------------------------------------

def _rank(fit: Fit, host: HostInfo, prefer_flavor: str) -> tuple:
    v = fit.variant
    newest = lambda version: tuple(-p for p in _safe_vkey(version or "0"))  # noqa: E731
    return (v.vendor != host.vendor, v.flavor != prefer_flavor, newest(v.torch), bool(fit.caveats),
            not fit.exact_arch, newest(v.stack), newest(v.python),
            -OS_ORDER.index(v.os) if v.os in OS_ORDER else 0, v.tag)


def _passed_over(chosen: Fit, fits: list[Fit]) -> list[str]:
    """Why each newer variant of the chosen vendor and flavor lost to the chosen one."""
    lines = []
    for fit in sorted(fits, key=lambda f: f.variant.sort_key()):
        v = fit.variant
        if fit is chosen or v.sort_key() >= chosen.variant.sort_key():
            continue
        if v.vendor != chosen.variant.vendor or v.flavor != chosen.variant.flavor:
            continue
        if fit.rejections:
            lines.append(f"{v.tag}: {'; '.join(fit.rejections)}")
        elif fit.caveats:
            lines.append(f"{v.tag}: passed over for {chosen.variant.tag}: {'; '.join(fit.caveats)}")
    return lines


def host_warnings(host: HostInfo, fits: list[Fit]) -> list[str]:
    """What holds for every image on this host: facts detection could not establish, workarounds."""
    warnings = []
    if host.vendor == "cuda" and host.driver_version is None:
        warnings.append("the NVIDIA driver version is unknown: driver rules were not applied")
    if host.vendor in ("cuda", "rocm") and host.device_count and not host.gpu_archs:
        kind = "compute capability" if host.vendor == "cuda" else "gfx target"
        warnings.append(f"the GPU {kind} is unknown: the image's compiled architectures were not checked")
    if host.vendor == "rocm" and host.rocm_version is None:
        warnings.append("the host ROCm version is unknown: container/host ROCm distance was not checked")
    if host.vendor == "rocm":
        warnings += _hsa_override_hints(host, fits)
    return warnings


def _hsa_override_hints(host: HostInfo, fits: list[Fit]) -> list[str]:
    rocm = [f.variant for f in fits if f.variant.vendor == "rocm"]
    hints = []
    for arch in host.gpu_archs:
        if arch not in HSA_OVERRIDES or not rocm or any(arch in v.gpu_archs for v in rocm):
            continue
        version, poses_as = HSA_OVERRIDES[arch]
        hints.append(f"{arch} is in no official wheel; unofficial workaround, not supported by AMD: "
                     f"-e HSA_OVERRIDE_GFX_VERSION={version} makes ROCm treat it as {poses_as}")
    return hints


def _flavors(variants: Sequence[Variant], vendor: str) -> str:
    return ", ".join(sorted({v.flavor for v in variants if v.vendor == vendor}))


def describe_host(host: HostInfo) -> str:
    """One line: what was found on the host."""
    if host.vendor == "cpu":
        return "cpu (no accelerator found)"
    parts: list[str] = [host.vendor]
    if host.driver_version:
        parts.append(f"driver {host.driver_version}")
    if host.cuda_max:
        parts.append(f"CUDA up to {host.cuda_max}")
    if host.rocm_version:
        parts.append(f"ROCm {host.rocm_version}")
    if host.gaudi_version:
        parts.append(f"{STACK_NAMES['gaudi']} software {host.gaudi_version}")
    names = ", ".join(dict.fromkeys(host.gpu_names))
    parts.append(f"{host.device_count} device(s)" + (f" ({names})" if names else ""))
    if host.gpu_archs:
        parts.append("arch " + ", ".join(host.gpu_archs))
    return ", ".join(parts)
