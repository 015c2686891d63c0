"""One decision for the in-image guard and `recommend`: does a CUDA image run on this driver and GPU.

The rules (compat-facts §1.3, §2.2, §8.2), over what an image variant and a host say, with no
knowledge base and no host probing: the caller hands both in. `guard.sh`'s shell `decide` is the
same rule, read from the same facts. References:
- minor-version compatibility floors: https://docs.nvidia.com/deploy/cuda-compatibility/
- forward compatibility (cuda-compat, data-center GPUs only; CUDA error 804 elsewhere):
  https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html; the container toolkit
  loads the compat libraries unless nvidia-container-runtime.modes.legacy.cuda-compat-mode is
  `disabled` (NVIDIA/nvidia-container-toolkit api/config/v1/runtime.go)
- SASS and PTX targets per torch: PyTorch RELEASE.md
  https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Sequence

from accel_images.versions import compare_driver, parse

if TYPE_CHECKING:
    from accel_images.model.variant import Variant

PTX_MARK = "+PTX"
"""How the knowledge base marks the one target a wheel also carries as PTX ('12.0+PTX')."""


FORWARD_COMPAT = "CUDA forward compatibility"
"""Fit.through of an image that runs on the host only through its cuda-compat libraries."""

CONSUMER_BRANDS = ("GeForce", "TITAN", "NVS")
"""GPU brands CUDA forward compatibility does not serve: the NVML brands (nvmlBrandType_t: GEFORCE,
GEFORCE_RTX, TITAN, TITAN_RTX, NVS) that nvidia/cuda's NVIDIA_REQUIRE_CUDA never lists among the
brands whose older drivers its cuda-compat package serves (cuda.yaml forward_compat.brands). NVIDIA:
"Forward Compatibility is applicable only for systems with NVIDIA Data Center GPUs, select NGC Server
Ready SKUs of RTX cards, Jetson boards"; elsewhere CUDA fails with error 804
(cudaErrorCompatNotSupportedOnDevice). The guard reads the brand from `nvidia-smi -q` ("Product
Brand"), else the name; `recommend`'s host report has the names, which carry the brand."""
_CONSUMER = re.compile(r"\b(?:" + "|".join(CONSUMER_BRANDS) + r")\b", re.IGNORECASE)


def consumer(names: Sequence[str]) -> bool:
    """A GPU of these names is a GeForce, TITAN or NVS: no CUDA forward compatibility for it."""
    return any(_CONSUMER.search(name) for name in names)


@dataclass(frozen=True)
class Decision:
    """Whether a CUDA image runs on a host: refusals (it cannot), warnings (it runs, but), and
    whether it runs only through CUDA forward compatibility."""

    refusals: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    exact_arch: bool = False
    why: str = ""
    forward_compat: bool = False


def split_archs(archs: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    """('7.5', ..., '12.0+PTX') -> (('7.5', ..., '12.0'), '12.0'): the SASS targets and the PTX one."""
    sass = tuple(a.removesuffix(PTX_MARK) for a in archs)
    ptx = next((a.removesuffix(PTX_MARK) for a in archs if a.endswith(PTX_MARK)), None)
    return sass, ptx


def decide(driver: str | None, gpu_archs: Sequence[str], variant: Variant,
           gpu_names: Sequence[str] = (), compat_branches: Sequence[str] = (),
           compat_driver: str | None = None) -> Decision:
    """The rules, applied to what is known (a missing driver or architecture checks nothing):

    - driver below the minor-version-compatibility floor of the wheel's CUDA major (525.60.13 for
      12.x, 580 for 13.x): refused, unless the image carries NVIDIA's cuda-compat library
      (`compat_driver`, its libcuda's driver) and declares the driver's branch among those it serves
      (`compat_branches`, from nvidia/cuda's NVIDIA_REQUIRE_CUDA) and no GPU is a GeForce, TITAN or NVS:
      then it runs through forward compatibility, warned;
    - a GeForce, TITAN or NVS whose driver branch is older than the image's compat libcuda: refused
      above the floor too, since the container toolkit loads that libcuda whenever its branch is the
      newer one (CUDA error 804; `COMPAT_LOADED`);
    - between the floor and the toolkit's own driver: runs, warned that PTX JIT of newer code
      (torch.compile, Triton) may fail (NVIDIA's MVC document);
    - GPU architecture: SASS for the GPU's compute capability or a lower minor of the same major
      runs (8.6 code on 8.9); above that, only PTX of an architecture not above it can be JIT
      compiled; older than every target, or newer with no PTX for it: refused. With several GPUs,
      the image is refused only when it serves none of them.

    The guard's shell `decide` (guard.sh) is the same rule, read from the same facts.
    """
    compat = Compat(tuple(compat_branches), compat_driver)
    driver_part = _driver_decision(driver, variant, gpu_names, compat)
    arch = _arch_decision(gpu_archs, variant)
    return Decision(driver_part.refusals + arch.refusals, driver_part.warnings + arch.warnings,
                    arch.exact_arch, "; ".join(p for p in (driver_part.why, arch.why) if p), driver_part.forward_compat)


@dataclass(frozen=True)
class Compat:
    """What an image holds for CUDA forward compatibility: the driver branches its base declares
    (NVIDIA_REQUIRE_CUDA) and its compat libcuda's driver (None: no library)."""

    branches: tuple[str, ...] = ()
    driver: str | None = None


COMPAT_LOADED = ("which the NVIDIA Container Toolkit loads from /usr/local/cuda/compat ahead of the host's in its"
                 " default cuda-compat mode")
WAYS_OUT = ("use a container toolkit with NVIDIA/nvidia-container-toolkit#1784, set"
            " nvidia-container-runtime.modes.legacy.cuda-compat-mode = \"disabled\"")
"""NVIDIA/nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat/cudacompat.go: /etc/ld.so.conf.d/00-compat-*.conf
when the host driver's major is below the compat libcuda's; the mode is api/config/v1/runtime.go's
(`ldconfig` by default, `disabled` turns it off); the GPU is not asked (NVIDIA/nvidia-container-toolkit#1426,
fixed by #1784). The runtime flavor's plain Ubuntu base has no compat library at all."""


def compat_loaded(driver: str, compat_driver: str | None) -> bool:
    """The container toolkit puts the image's compat libcuda first: its major (the driver branch) is
    above the host driver's (cudacompat.go compares the majors alone)."""
    if not compat_driver:
        return False
    try:
        return parse(driver)[0] < parse(compat_driver)[0]
    except ValueError:
        return False


def _driver_decision(driver: str | None, variant: Variant, gpu_names: Sequence[str], compat: Compat) -> Decision:
    """The driver rules of `decide`: below the floor, the compat libcuda on a consumer GPU, then MVC."""
    if driver is None or variant.mvc_driver is None:
        return Decision()
    if compare_driver(driver, variant.mvc_driver) < 0:
        return _below_floor(driver, variant, gpu_names, compat)
    if compat_loaded(driver, compat.driver) and consumer(gpu_names):
        return Decision(refusals=(f"host driver {driver} is older than the image's CUDA forward-compatibility driver"
                                  f" {compat.driver}, {COMPAT_LOADED}, and CUDA forward compatibility does not serve"
                                  f" GeForce, TITAN or NVS GPUs (CUDA error 804): {WAYS_OUT}, or use the runtime"
                                  " image",))
    floor, major, toolkit_driver = variant.mvc_driver, (variant.stack or "").split(".")[0], variant.min_driver
    if toolkit_driver and compare_driver(driver, toolkit_driver) < 0:
        warning = (f"host driver {driver} is below the CUDA {variant.toolkit} toolkit driver {toolkit_driver}: "
                   f"it runs under minor-version compatibility (floor {floor}), which covers the compiled kernels "
                   "but not PTX JIT of newer code (torch.compile, Triton)")
        return Decision(warnings=(warning,), why=f"driver {driver} is above the CUDA {major}.x floor {floor}")
    return Decision(why=f"driver {driver} meets the CUDA {variant.toolkit} toolkit driver {toolkit_driver}")


def _below_floor(driver: str, variant: Variant, gpu_names: Sequence[str], compat: Compat) -> Decision:
    """Below the MVC floor only forward compatibility runs the image: a branch the base declares, its
    compat library present, a data-center GPU (CUDA error 804 elsewhere)."""
    major = (variant.stack or "").split(".")[0]
    below = f"host driver {driver} is below the CUDA {major}.x floor {variant.mvc_driver} (minor-version compatibility)"
    if driver.split(".")[0] not in compat.branches:
        scope = (f"; forward compatibility serves the driver branches R{'/'.join(compat.branches)} only"
                 if compat.branches else "")
        return Decision(refusals=(below + scope,))
    if not compat.driver:
        return Decision(refusals=(f"{below}; forward compatibility would serve it, but the image has no CUDA"
                                  " forward-compatibility library (/usr/local/cuda/compat)",))
    if consumer(gpu_names):
        return Decision(refusals=(below + ", and CUDA forward compatibility does not serve GeForce, TITAN or NVS GPUs "
                                  "(CUDA error 804)",))
    warning = (f"{below}: it runs through CUDA forward compatibility (the image's cuda-compat libcuda {compat.driver}),"
               " which NVIDIA supports on data-center GPUs only")
    why = f"driver {driver} runs CUDA {variant.toolkit} through forward compatibility"
    return Decision(warnings=(warning,), why=why, forward_compat=True)


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

