"""NVIDIA CUDA: cuXY wheels on nvidia/cuda bases, `--gpus all`, driver and architecture rules.

References (each rule below names its section of compat-facts.md and the vendor source):
- wheel indexes, toolkits and SASS targets per torch: PyTorch RELEASE.md
  https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix
- toolkit -> driver: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
- minor-version compatibility floors: https://docs.nvidia.com/deploy/cuda-compatibility/
- forward compatibility (cuda-compat, data-center GPUs only; CUDA error 804 elsewhere):
  https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html; the branches each
  nvidia/cuda base serves: its NVIDIA_REQUIRE_CUDA (cuda.yaml forward_compat, families.compat_branches);
  the container toolkit loads the compat libraries unless nvidia-container-runtime.modes.legacy.cuda-compat-mode
  is `disabled` (NVIDIA/nvidia-container-toolkit api/config/v1/runtime.go)
- the driver under /usr/local/nvidia on GKE: GoogleCloudPlatform/container-engine-accelerators
  cmd/nvidia_gpu/nvidia_gpu.go (-container-path /usr/local/nvidia)
- device flags: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Mapping, Sequence

from accel_images.model.devices import (APPTAINER_GPU_DOCS, K8S_GPU_DOCS, SLURM_GRES_DOCS, DeviceOptions,
                                         GpuRequest, SessionSettings, under)
from accel_images.model.hostinfo import (DOTTED, Gpu, HostInfo, Runner, answer, exit_code, host_from, listing,
                                          pci_vendor_absent, quote, read, said, summary, unusable_host)
from accel_images.model import platforms as platform_names
from accel_images.model.imagefacts import Claim, kb_row
from accel_images.model.knowledge import Combo, Resolution, minor_of, version_matches
from accel_images.vendors.base import ALTERNATIVES_ENV, Fit, VendorBase, alternatives
from accel_images.versions import compare_driver, parse

if TYPE_CHECKING:
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.model.knowledge import Knowledge, TorchRelease
    from accel_images.model.variant import Variant

NVIDIA_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"
NGC_PYTORCH_DOCS = "https://docs.nvidia.com/deeplearning/frameworks/user-guide/index.html"
NVIDIA_CDI_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"


@dataclass(frozen=True)
class CudaFacts:
    """The CUDA tables of the knowledge base (data/vendors/cuda.yaml)."""

    toolkits: Mapping[str, Mapping[str, str]]        # torch minor -> cuXY -> exact toolkit
    archs: Mapping[str, Mapping[str, tuple[str, ...]]]  # torch minor -> cuXY -> SASS targets
    drivers: Mapping[str, str]                      # toolkit X.Y.Z -> its driver
    families: Mapping[str, Mapping[str, Any]]       # X.Y -> mvc_floor, min_compute, base_version, base_os,
                                                    # compat_branches
    compat_brands: tuple[str, ...] = ()             # forward_compat.brands: NVIDIA_REQUIRE_CUDA's brand keys
    platform_archs: Mapping[str, Mapping[str, Mapping[str, tuple[str, ...]]]] = field(default_factory=dict)
    """platform -> torch minor -> cuXY -> SASS targets, where they differ from `archs` (linux/arm64)."""
    not_served: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """platform -> compute capability -> the GPU that has it but which these builds do not run on (Jetson)."""
    elsewhere: Mapping[str, str] = field(default_factory=dict)
    """platform -> where the GPUs of `not_served` get their images instead."""
    package_index: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """platform -> torch minor -> the CUDA of the package index's default wheel (`package_index.builds`)."""
    package_index_os: tuple[str, ...] = ()
    """The OSes whose images take torch from the package index (`package_index.os`)."""

    def package_index_build(self, platform: str | None, torch_minor: str) -> str | None:
        """The CUDA of the package index's default torch wheel for this platform and release, if known."""
        return self.package_index.get(platform or platform_names.DEFAULT, {}).get(torch_minor)

    def archs_on(self, platform: str | None, torch_minor: str, cuda: str) -> tuple[str, ...]:
        """The SASS targets of the cuXY wheel for `platform` (the default platform's `archs` elsewhere)."""
        table = self.platform_archs.get(platform or platform_names.DEFAULT) or self.archs
        return table.get(torch_minor, {}).get(cuda, ())

    def toolkit(self, torch_minor: str, cuda: str) -> str:
        """The exact toolkit inside torch's cuXY wheel (RELEASE.md), else the family's GA."""
        return self.toolkits.get(torch_minor, {}).get(cuda) or f"{cuda}.0"

    def driver_min(self, toolkit: str) -> str | None:
        return self.drivers.get(toolkit)

    def mvc_floor(self, cuda: str) -> str:
        return str(self.families[cuda]["mvc_floor"])

    def compat_branches(self, cuda: str) -> tuple[str, ...]:
        """Driver branches nvidia/cuda's base for this CUDA serves through its cuda-compat package."""
        return tuple(str(b) for b in self.families.get(cuda, {}).get("compat_branches", ()))

    def compat_driver(self, cuda: str) -> str | None:
        """The driver whose libcuda nvidia/cuda's base for this CUDA puts under /usr/local/cuda/compat, where
        the base declares forward-compatibility branches: its toolkit release's driver (cuda-compat-X-Y
        carries the driver branch of its toolkit: the 12.8.1 base's compat libcuda is 570.124.06,
        NVIDIA/nvidia-container-toolkit#1084; a later point release of that branch may be what is
        installed, so only the branch is compared). Inferred beyond that one reading."""
        family = self.families.get(cuda, {})
        if not family.get("compat_branches"):
            return None
        return self.driver_min(str(family["base_version"]))

    def require_cuda(self, cuda: str, devel: bool) -> str:
        """NVIDIA_REQUIRE_CUDA: `cuda>=X.0`, the major this CUDA's wheels run on under minor-version
        compatibility (R525 reports 12.0, R580 13.0), OR'ed, where the image sits on nvidia/cuda
        (devel), with NVIDIA's own clauses for the older branches its cuda-compat serves, brand by
        brand, in NVIDIA's order: `brand=tesla,driver>=535,driver<536 ...` (space is OR, comma AND:
        NVIDIA/libnvidia-container src/cli/dsl.c)."""
        clauses = [f"cuda>={cuda.split('.')[0]}.0"]
        if devel:
            clauses += [f"brand={brand},driver>={branch},driver<{int(branch) + 1}"
                        for branch in self.compat_branches(cuda) for brand in self.compat_brands]
        return " ".join(clauses)


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
            compat_brands=_strs(raw.get("forward_compat", {}).get("brands", ())),
            platform_archs={str(p): {str(m): {str(k): _strs(v) for k, v in row.items()}
                                     for m, row in (section.get("archs") or {}).items()}
                            for p, section in (raw.get("platforms") or {}).items() if section.get("archs")},
            not_served={str(p): {str(cc): str(name) for cc, name in (section.get("not_served") or {}).items()}
                        for p, section in (raw.get("platforms") or {}).items() if section.get("not_served")},
            elsewhere={str(p): str(section["jetson"]) for p, section in (raw.get("platforms") or {}).items()
                       if section.get("jetson")},
            package_index={str(p): {str(m): str(cuda) for m, cuda in (row or {}).items()}
                           for p, row in (raw.get("package_index", {}).get("builds") or {}).items()},
            package_index_os=_strs(raw.get("package_index", {}).get("os") or ()),
        )

    def facts(self, kb: Knowledge) -> CudaFacts:
        facts: CudaFacts = self.section(kb).facts
        return facts

    # ---- knowledge base ------------------------------------------------------------------

    def os_extra_reasons(self, kb: Knowledge, combo: Combo) -> list[str]:
        """The devel flavor sits on nvidia/cuda, which publishes each CUDA for some Ubuntu releases only;
        an OS whose images take torch from the package index has the stack that index serves, or none."""
        if combo.os in self.facts(kb).package_index_os:
            return self._package_index_reasons(kb, combo)
        families = self.facts(kb).families
        if combo.flavor == "runtime" or not combo.stack or combo.stack not in families:
            return []
        bases = families[combo.stack]["base_os"]
        if combo.os not in bases:
            return [f"nvidia/cuda has no CUDA {combo.stack} image for {combo.os} (CUDA {combo.stack} bases:"
                    f" {', '.join(bases)})"]
        return []

    def _package_index_reasons(self, kb: Knowledge, combo: Combo, platform: str | None = None) -> list[str]:
        """Why a combination on a package-index OS (debian12) has no image: nvidia/cuda has no base for
        it, so no devel flavor (nvcc and the CUDA headers come from that base); and the package index
        serves one CUDA per torch release (`package_index.builds`): any other stack is not there.
        `platform` None: on no platform at all; else on that one."""
        facts = self.facts(kb)
        if combo.flavor and combo.flavor != "runtime":
            return [f"{combo.os} images are runtime only: nvidia/cuda, whose devel images bring nvcc and the"
                    f" CUDA headers, publishes Ubuntu bases only; the runtime flavor takes CUDA from the wheels"]
        if not combo.stack:
            return []
        minor = kb.release(combo.torch).minor
        platforms = (platform,) if platform else tuple(facts.package_index) or (platform_names.DEFAULT,)
        served = {p: facts.package_index_build(p, minor) for p in platforms}
        if any(cuda is not None and version_matches(combo.stack, cuda) for cuda in served.values()):
            return []
        where = f" for {platform}" if platform else ""
        found = next((cuda for cuda in served.values() if cuda), None)
        what = (f"is the CUDA {found} build (cu{found.replace('.', '')})" if found
                else "is not known to the knowledge base")
        return [f"{combo.os} images take torch from the package index, whose torch {minor} wheel{where} {what},"
                f" not CUDA {combo.stack} (PyTorch's cu{combo.stack.replace('.', '')} index: an Ubuntu image)"]

    def platform_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        """The rules every vendor has, then, on a package-index OS, whether that index serves the stack on
        this platform (the package index's aarch64 wheel may be another build than its x86_64 one)."""
        reasons = super().platform_reasons(kb, combo, row)
        if reasons or combo.os not in self.facts(kb).package_index_os:
            return reasons
        return self._package_index_reasons(kb, combo, combo.platform or platform_names.DEFAULT)

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
        # The aarch64 (SBSA) wheels are compiled for other GPUs than the x86_64 ones (data/vendors/cuda.yaml).
        archs = facts.archs_on(combo.platform, kb.release(base.torch).minor, stack)
        return Resolution(torch=base.torch, stack=stack, base_image=image,
                          wheel_index=base.wheel_index, toolkit=toolkit, min_driver=facts.driver_min(toolkit),
                          mvc_driver=facts.mvc_floor(stack), gpu_archs=archs,
                          package_index=combo.os in facts.package_index_os)

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

    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """The CUDA the wheel was built for (torch.version.cuda, `builds`), the exact toolkit its
        Requires-Dist installed (the cuda-toolkit distribution, `toolkits`; not checked where a wheel
        predates that package), and the SASS and PTX targets (torch._C._cuda_getArchFlags()) where the
        image's machine is its platform's: `archs` rows are the x86_64 wheels', a platform's own rows
        (`platforms."linux/arm64".archs`) its wheels'."""
        minor, stack = variant.torch_minor, variant.stack or ""
        claims = [Claim("stack", kb_row(self.kb_file, "builds", minor), stack, facts.toolkit.get("cuda"), "release")]
        if variant.toolkit:
            claims.append(Claim("toolkit", kb_row(self.kb_file, "toolkits", minor, stack), variant.toolkit,
                                facts.distributions.get("cuda-toolkit"), "release"))
        claims += self._compat_claims(kb, variant, facts)
        platform = variant.platform
        machines = kb.platforms[platform].machines if platform in kb.platforms else ()
        if variant.gpu_archs and facts.platform.get("machine") in machines:
            sass, ptx = split_archs(variant.gpu_archs)
            own = platform in self.facts(kb).platform_archs
            row = kb_row(self.kb_file, *(("platforms", platform) if own else ()), "archs", minor, stack)
            claims.append(Claim("archs", row, tuple(SASS_PREFIX + _digits(a) for a in sass), facts.archs))
            claims.append(Claim("ptx", row, (PTX_PREFIX + _digits(ptx),) if ptx else (), facts.ptx))
        return claims

    def _compat_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """A devel image whose base the knowledge base says serves older driver branches (`compat_branches`)
        holds the cuda-compat libcuda of its toolkit's driver branch (facts.json cuda_compat): nvidia/cuda
        installs it only "if available" (its base Dockerfiles), and without it the guard and recommend
        would admit hosts the image fails on. The branch is compared, as the container toolkit compares it."""
        driver = self.compat_driver(kb, variant)
        if driver is None:
            return []
        row = kb_row(self.kb_file, "families", variant.stack or "", "compat_branches")
        return [Claim("compat", row, driver.split(".")[0], facts.cuda_compat, "release")]

    def archs_of(self, facts: ImageFacts) -> tuple[str, ...] | None:
        """sm_75 ... sm_120 (+ compute_120) -> 7.5 ... 12.0 (+ 12.0+PTX); arch-specific targets (sm_90a)
        run on that one GPU alone and are left out, as the knowledge base's rows leave them out."""
        if not facts.archs:
            return None
        sass = [_capability(flag, SASS_PREFIX) for flag in facts.archs]
        ptx = [_capability(flag, PTX_PREFIX) for flag in facts.ptx or ()]
        found = [cc for cc in sass if cc]
        newest_ptx = max((cc for cc in ptx if cc), key=parse, default=None)
        if newest_ptx:
            found = [cc for cc in found if cc != newest_ptx] + [newest_ptx + PTX_MARK]
        return tuple(found) or None

    # ---- hardware -------------------------------------------------------------------------

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(
            vendor=self.name,
            device_requests=(GpuRequest(),),      # --gpus all
            # NVIDIA's CDI page: "podman run --rm --device nvidia.com/gpu=all --security-opt=label=disable" (V)
            cdi_devices=("nvidia.com/gpu=all",),
            # Apptainer's GPU page: --nv binds the /dev/nvidia* entries and the host's driver libraries (V)
            apptainer_flags=("--nv",),
            k8s_resource="nvidia.com/gpu",        # Kubernetes "Schedule GPUs": nvidia.com/gpu (V)
            slurm_gres="gpu",                     # Slurm gres.html: GRES "gpu", AutoDetect=nvml (V)
            sources=(NVIDIA_DOCS, NVIDIA_CDI_DOCS, APPTAINER_GPU_DOCS, K8S_GPU_DOCS, SLURM_GRES_DOCS),
        )

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
        the newest CUDA the driver reports (moot when forward compatibility serves the host)."""
        elsewhere = self.not_served(kb, variant, host.gpu_archs)
        if elsewhere:
            return Fit(variant, (elsewhere,))
        decision = decide(host.driver_version, host.gpu_archs, variant, host.gpu_names,
                          self.compat_branches(kb, variant), self.compat_driver(kb, variant))
        rejections, caveats = list(decision.refusals), list(decision.warnings)
        if not rejections and host.stack_version and not decision.forward_compat:
            rejections += _reported_cuda_rules(host.stack_version, variant.stack or "")
        if decision.forward_compat and host.driver_version and (unverified := self.unverified_native(
                kb, variant.platform, host.driver_version)):
            caveats.append(unverified)
        return Fit(variant, tuple(rejections), tuple(caveats), decision.exact_arch, decision.why,
                   FORWARD_COMPAT if decision.forward_compat else "")

    def unverified_native(self, kb: Knowledge, platform: str, driver: str) -> str | None:
        """For a host this platform's images serve only through forward compatibility: the builds that would
        run on its driver natively (their CUDA major's floor met) but which the knowledge base leaves
        unverified for the platform (`platforms.<p>.unverified`), newest torch per CUDA, and what would
        verify one. Only releases whose wheels the knowledge base knows (`archs`) are named. The package
        index cannot stand in: its aarch64 wheels of 2.9.1 and 2.10.0 are +cpu builds, 2.11.0's is
        +cu130 (torch/version.py read from pypi.org's cp312 manylinux_2_28_aarch64 wheels; cuda.yaml
        package_index); the cuXY index's own wheel for the platform is what says (its torch/version.py
        `cuda` and the arch list torch._C._cuda_getArchFlags() returns)."""
        found = self.section(kb).platforms.get(platform)
        if found is None or not found.unverified:
            return None
        facts, newest = self.facts(kb), {}
        for minor in sorted(found.unverified, key=parse):
            listed = found.unverified[minor]
            for cuda in (self.stacks(kb, minor) if "*" in listed else listed):
                if cuda in facts.archs.get(minor, {}) and compare_driver(driver, facts.mvc_floor(cuda)) >= 0:
                    newest[cuda] = minor
        if not newest:
            return None
        order = sorted(newest, key=parse)
        builds = ", ".join(f"CUDA {cuda} (torch {newest[cuda]})" for cuda in order)
        indexes = " or ".join(f"download.pytorch.org/whl/cu{cuda.replace('.', '')}" for cuda in order)
        machine = kb.platforms[platform].machines[0] if platform in kb.platforms else platform
        return (f"no {platform} image runs on driver {driver} without forward compatibility; builds that would are"
                f" unverified ({kb_row(self.kb_file, 'platforms', platform, 'unverified')}): {builds}; what would"
                f" verify one: torch/version.py and the arch list of its {machine} wheel on {indexes} (the package"
                f" index's {machine} wheels are other builds: cuda.yaml package_index)")

    def compat_branches(self, kb: Knowledge, variant: Variant) -> tuple[str, ...]:
        """The older driver branches the image serves through CUDA forward compatibility: those
        nvidia/cuda declares for its base (cuda.yaml families.compat_branches); none for the runtime
        flavor, whose plain Ubuntu base has no cuda-compat package."""
        if variant.flavor == "runtime":
            return ()
        return self.facts(kb).compat_branches(variant.stack or "")

    def compat_driver(self, kb: Knowledge, variant: Variant) -> str | None:
        """The driver of the image's CUDA forward-compatibility libcuda (`CudaFacts.compat_driver`); None
        for the runtime flavor, whose plain Ubuntu base has none."""
        if variant.flavor == "runtime":
            return None
        return self.facts(kb).compat_driver(variant.stack or "")

    def not_served(self, kb: Knowledge, variant: Variant, gpu_archs: Sequence[str]) -> str | None:
        """Why the GPU is not served at all on the variant's platform (a Jetson module, whose compute
        capability the arch rules alone would pass: 8.7 runs 8.0 code), with where its images are;
        None otherwise. The guard reads the same facts (ACCEL_IMAGES_GPU_NOT_SERVED)."""
        facts = self.facts(kb)
        unserved = facts.not_served.get(variant.platform, {})
        found = next((cc for cc in gpu_archs if cc in unserved), None)
        if found is None:
            return None
        return (f"compute capability {found} is a {unserved[found]} GPU: the {variant.platform} CUDA images are"
                f" SBSA builds, which do not run on Jetson; use {facts.elsewhere.get(variant.platform, 'JetPack')}")

    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]:
        """What the guard decides with (the same facts `fit` uses; the compiled architectures are
        a fallback for an image without its facts file), and the sibling images a refusal may name
        with the facts the guard tries them by (vendors.base.alternatives)."""
        def facts(v: Variant) -> tuple[str, ...]:
            return (v.mvc_driver or "", ",".join(v.gpu_archs), ",".join(self.compat_branches(kb, v)),
                    self.compat_driver(kb, v) or "")

        unserved = self.facts(kb).not_served.get(variant.platform, {})
        env = {
            "ACCEL_IMAGES_GPU_NOT_SERVED": ",".join(f"{cc}:{name}" for cc, name in unserved.items()),
            "ACCEL_IMAGES_GPU_ELSEWHERE": self.facts(kb).elsewhere.get(variant.platform, "") if unserved else "",
            "ACCEL_IMAGES_CUDA": variant.toolkit or "",
            "ACCEL_IMAGES_MIN_DRIVER": variant.min_driver or "",
            "ACCEL_IMAGES_DRIVER_FLOOR": variant.mvc_driver or "",
            "ACCEL_IMAGES_GPU_ARCHS": ",".join(variant.gpu_archs),
            "ACCEL_IMAGES_COMPAT_BRANCHES": ",".join(self.compat_branches(kb, variant)),
            "ACCEL_IMAGES_COMPAT_DRIVER": self.compat_driver(kb, variant) or "",
            ALTERNATIVES_ENV: alternatives(variant, variants, facts),
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
SASS_PREFIX = "sm_"
PTX_PREFIX = "compute_"
"""How torch._C._cuda_getArchFlags() names a SASS target (sm_90) and a PTX one (compute_90)."""


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

    The guard's shell `decide` (GUARD below) is the same rule, read from the same facts.
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


# ---------------------------------------------------------------------------------------------
# The in-image guard (accel_images/smoke/guard.sh calls check_vendor)
# ---------------------------------------------------------------------------------------------

GUARD = r"""# find_smi: nvidia-smi on PATH, else where the GKE device plugin mounts the host driver's tools
# (-container-path /usr/local/nvidia: GoogleCloudPlatform/container-engine-accelerators
# cmd/nvidia_gpu/nvidia_gpu.go; pytorch/pytorch's and nvidia/cuda's Dockerfiles put its bin on PATH).
find_smi() {
    smi=$(command -v nvidia-smi 2> /dev/null) && return 0
    smi="${ACCEL_IMAGES_DEV_ROOT:-}/usr/local/nvidia/bin/nvidia-smi"
    [ -x "$smi" ]
}

# cc_of NAME: facts.json's 'sm_90' / 'compute_120' as a compute capability (9.0 / 12.0); '9.0' as is.
cc_of() {
    case "$1" in
        sm_*|compute_*)
            digits=${1#*_}
            digits=${digits%%[!0-9]*}
            printf '%s.%s' "${digits%?}" "${digits#"${digits%?}"}" ;;
        *) printf '%s' "$1" ;;
    esac
}

# own_archs: the compute capabilities this image has kernels for, PTX ones marked +PTX: from the
# facts file (archs, ptx) when it was read, else the list rendered from the knowledge base.
own_archs() {
    read_facts
    if [ -z "$facts_read" ]; then
        printf '%s' "${ACCEL_IMAGES_GPU_ARCHS:-}"
        return
    fi
    list=""
    for name in $(printf '%s' "$facts_archs" | tr ',' ' '); do list="$list,$(cc_of "$name")"; done
    for name in $(printf '%s' "$facts_ptx" | tr ',' ' '); do list="$list,$(cc_of "$name")+PTX"; done
    printf '%s' "${list#,}"
}

# arch_runs CC ARCHS: an image compiled for ARCHS has kernels a GPU of compute capability CC can
# run: SASS for CC or a lower minor of the same major, or PTX not above CC (JIT compiled).
arch_runs() {
    for arch in $(printf '%s' "$2" | tr ',' ' '); do
        target=${arch%+PTX}
        if [ "$target" = "$1" ]; then return 0; fi
        if [ "${target%%.*}" = "${1%%.*}" ] && version_lt "$target" "$1"; then return 0; fi
        if [ "$target" != "$arch" ] && version_lt "$target" "$1"; then return 0; fi
    done
    return 1
}

# consumer_gpu: a visible GPU is of a brand CUDA forward compatibility does not serve (CUDA error
# 804 "forward compatibility was attempted on non supported HW"): GeForce, TITAN, NVS, the NVML
# brands that nvidia/cuda's NVIDIA_REQUIRE_CUDA never lists. `nvidia-smi -q` names each GPU's
# "Product Brand"; without it, the GPU names say GeForce or TITAN. Asked once, only when needed.
consumer_gpu() {
    if [ -z "${brands:-}" ]; then
        brands=$("$smi" -q 2> /dev/null | while IFS= read -r line; do
            case "$line" in *"Product Brand"*:*) printf '%s\n' "${line#*: }" ;; esac
        done)
        [ -n "$brands" ] || brands=$("$smi" --query-gpu=name --format=csv,noheader 2> /dev/null)
        brands=$(printf '%s\n' "${brands:-unknown}" | tr 'A-Z' 'a-z')
    fi
    for word in $brands; do
        case "$word" in @CONSUMER@) return 0 ;; esac
    done
    return 1
}

# not_served CC: the GPU of compute capability CC these builds do not run on at all (a Jetson module:
# ACCEL_IMAGES_GPU_NOT_SERVED="8.7:Jetson Orin,..." in the linux/arm64 images), or nothing.
not_served() {
    rest="${ACCEL_IMAGES_GPU_NOT_SERVED:-}"
    while [ -n "$rest" ]; do
        entry=${rest%%,*}
        if [ "${entry%%:*}" = "$1" ]; then printf '%s' "${entry#*:}"; return 0; fi
        [ "$rest" = "$entry" ] && return 0
        rest=${rest#*,}
    done
}

# jetson_capabilities: a Jetson's nvidia-smi reports no compute capability; its integrated GPU's name
# (`Orin (nvgpu)`) says it, as host detection reads it (JETSON_GPU_CC).
jetson_capabilities() {
    for model in $("$smi" --query-gpu=name --format=csv,noheader 2> /dev/null | cut -d' ' -f1); do
        case "$model" in
            @JETSON_CASES@
        esac
    done
}

# refuse_jetson: a visible GPU is a Jetson's, which the SBSA builds do not run on: say where to go.
refuse_jetson() {
    for capability in $capabilities; do
        jetson=$(not_served "$capability")
        if [ -n "$jetson" ]; then
            refuse "GPU compute capability $capability is a $jetson GPU: ${ACCEL_IMAGES_TAG:-this image} is an SBSA build, which does not run on Jetson; use ${ACCEL_IMAGES_GPU_ELSEWHERE:-the NVIDIA L4T/JetPack containers}"
        fi
    done
}

# compat_loaded COMPAT: the container toolkit puts the image's compat libcuda (driver COMPAT) ahead of the
# host's: its driver branch is newer than the host driver's (the majors alone, as NVIDIA/nvidia-container-toolkit
# cmd/nvidia-cdi-hook/cudacompat/cudacompat.go compares them; the GPU is not asked: #1426, fixed by #1784).
compat_loaded() {
    is_version "$1" && [ -n "$driver" ] && version_lt "${driver%%.*}" "${1%%.*}"
}

# decide FLOOR ARCHS BRANCHES COMPAT: whether an image whose wheel needs the driver FLOOR (minor-version
# compatibility), has kernels for ARCHS, declares the driver BRANCHES for forward compatibility and holds
# the compat libcuda of driver COMPAT (empty: none) runs on this host. Sets `problem` (arch, driver,
# no_compat, consumer, compat_consumer; empty when it runs) and `forward` (1 when it runs only through
# forward compatibility). `vendor.decide` is the same rule.
decide() {
    problem="" forward=""
    if [ -n "$2" ] && [ -n "$capabilities" ]; then
        runs=""
        for capability in $capabilities; do
            if arch_runs "$capability" "$2"; then runs=1; fi
        done
        if [ -z "$runs" ]; then problem=arch; return 1; fi
    fi
    if [ -z "$driver" ] || [ -z "$1" ]; then return 0; fi
    if ! version_lt "$driver" "$1"; then
        if compat_loaded "$4" && consumer_gpu; then problem=compat_consumer; return 1; fi
        return 0
    fi
    if ! in_list "${driver%%.*}" "$3"; then problem=driver; return 1; fi
    if [ -z "$4" ]; then problem=no_compat; return 1; fi
    if consumer_gpu; then problem=consumer; return 1; fi
    forward=1
}

# admits "FLOOR|ARCHS|BRANCHES|COMPAT": decide, for an entry of ACCEL_IMAGES_ALTERNATIVES.
admits() {
    a_rest=${1#*|}
    a_archs=${a_rest%%|*}
    a_rest=${a_rest#*|}
    decide "${1%%|*}" "$a_archs" "${a_rest%%|*}" "${a_rest#*|}"
}

# own_compat: the driver of this image's CUDA forward-compatibility libcuda, empty when it has none: what
# its build found under /usr/local/cuda/compat (facts.json cuda_compat) when the facts file was read (an
# older branch is admitted only on the image's own word), else the knowledge base's (rendered) value.
own_compat() {
    read_facts
    if [ -n "$facts_read" ]; then printf '%s' "$facts_compat"; else printf '%s' "${ACCEL_IMAGES_COMPAT_DRIVER:-}"; fi
}

check_vendor() {
    if ! find_smi; then
        missing "no NVIDIA GPU visible in the container: run with --gpus all (NVIDIA Container Toolkit)"
        return
    fi
    # nvidia-smi prints its own failures on stdout: only a zero exit makes the answer a version.
    if ! answer=$("$smi" --query-gpu=driver_version --format=csv,noheader 2>&1); then
        missing "nvidia-smi cannot reach the NVIDIA driver ($(printf '%s\n' "$answer" | head -n1))"
        return
    fi
    driver=$(printf '%s\n' "$answer" | head -n1 | tr -d ' ')
    is_version "$driver" || driver=""
    # compute_cap is unknown to old drivers: no answer means no architecture check.
    capabilities=""
    for capability in $("$smi" --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | tr -d ' '); do
        if is_version "$capability"; then capabilities="$capabilities $capability"; fi
    done
    [ -n "$capabilities" ] || jetson_capabilities
    refuse_jetson
    read_facts  # here, not in the subshells below: once a container start
    archs=$(own_archs)
    compat_driver=$(own_compat)
    floor="${ACCEL_IMAGES_DRIVER_FLOOR:-}"
    branches="${ACCEL_IMAGES_COMPAT_BRANCHES:-}"
    tag="${ACCEL_IMAGES_TAG:-this image}"
    major="${ACCEL_IMAGES_CUDA:-}"
    major="CUDA ${major%%.*}.x"
    if decide "$floor" "$archs" "$branches" "$compat_driver"; then
        warn_runs
        return 0
    fi
    reason=$problem
    pick_alternative
    install="install an NVIDIA driver >= $floor$(or_use)"
    below="host NVIDIA driver $driver is below $floor, the $major floor (minor-version compatibility) of $tag"
    case "$reason" in
        arch) refuse_arch ;;
        consumer) refuse "$below, and CUDA forward compatibility does not serve GeForce, TITAN or NVS GPUs (CUDA error 804): $install" ;;
        compat_consumer) refuse "host NVIDIA driver $driver is older than the CUDA forward-compatibility driver $compat_driver of $tag, @COMPAT_LOADED@, and CUDA forward compatibility does not serve GeForce, TITAN or NVS GPUs (CUDA error 804): @WAYS_OUT@, or use ${alt:-a runtime image}" ;;
        no_compat) refuse "$below; forward compatibility would serve it, but the image has no CUDA forward-compatibility library (/usr/local/cuda/compat, facts.json cuda_compat): $install" ;;
        *) refuse "$below$(compat_scope): $install" ;;
    esac
}

# compat_scope: which older drivers this image serves through forward compatibility, if any.
compat_scope() {
    if [ -n "$branches" ]; then
        printf '; its forward compatibility serves the driver branches R%s on data-center GPUs only' \
            "$(printf '%s' "$branches" | tr ',' '/')"
    fi
}

# refuse_arch: no visible GPU has kernels in this image; the first one says which way it misses.
refuse_arch() {
    capability=$(first_of $capabilities)
    oldest=""
    for arch in $(printf '%s' "$archs" | tr ',' ' '); do
        if [ -z "$oldest" ] || version_lt "${arch%+PTX}" "$oldest"; then oldest=${arch%+PTX}; fi
    done
    if [ -n "$alt" ]; then use="; use $alt instead"; else use="; no sibling image has kernels for it"; fi
    if version_lt "$capability" "$oldest"; then
        refuse "GPU compute capability $capability is older than every architecture compiled into $tag ($archs)$use"
    fi
    refuse "no kernels for GPU compute capability $capability in $tag (compiled for $archs)$use"
}

first_of() {
    printf '%s' "${1:-}"
}

# warn_runs: what holds for a host this image runs on: GPUs it has no kernels for, forward
# compatibility, minor-version compatibility below the toolkit's own driver.
warn_runs() {
    served="" unserved=""
    for capability in $capabilities; do
        if arch_runs "$capability" "$archs"; then served="$served $capability"; else unserved="$unserved $capability"; fi
    done
    if [ -n "$archs" ] && [ -n "$unserved" ]; then
        warn "no kernels in $tag for the GPUs of compute capability${unserved}: only those of${served} can use it"
    fi
    if [ -n "$forward" ]; then
        warn "host NVIDIA driver $driver is below $floor, the $major floor of $tag: it runs through CUDA forward compatibility (the image's cuda-compat libcuda $compat_driver), which NVIDIA supports on data-center GPUs only and the container toolkit loads unless its cuda-compat mode is disabled (nvidia-container-runtime.modes.legacy.cuda-compat-mode)"
    elif [ -n "$driver" ] && [ -n "${ACCEL_IMAGES_MIN_DRIVER:-}" ] && version_lt "$driver" "$ACCEL_IMAGES_MIN_DRIVER"; then
        warn "host NVIDIA driver $driver is below the CUDA ${ACCEL_IMAGES_CUDA:-} toolkit driver $ACCEL_IMAGES_MIN_DRIVER: it runs under minor-version compatibility, which covers the compiled kernels but not PTX JIT of newer code (torch.compile, Triton)"
    fi
}
"""  # noqa: E501 - each message is one line of shell
GUARD = GUARD.replace("@COMPAT_LOADED@", COMPAT_LOADED).replace("@WAYS_OUT@", WAYS_OUT.replace('"', '\\"'))
GUARD = GUARD.replace("@CONSUMER@", "|".join(brand.lower() for brand in CONSUMER_BRANDS)).replace(
    "@JETSON_CASES@", "\n            ".join(f'{model}) capabilities="$capabilities {cc}" ;;'
                                          for model, cc in JETSON_GPU_CC.items()))

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


def _digits(capability: str) -> str:
    """'7.5' -> '75', '12.0' -> '120': a compute capability as nvcc's arch names spell it."""
    return capability.replace(".", "")


def _capability(flag: str, prefix: str) -> str | None:
    """'sm_120' -> '12.0', 'compute_90' -> '9.0'; None for another prefix or an arch-specific 'sm_90a'."""
    found = re.fullmatch(re.escape(prefix) + r"(\d+)(\d)", flag)
    return f"{found.group(1)}.{found.group(2)}" if found else None

