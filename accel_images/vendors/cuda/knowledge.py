"""What the knowledge base says about CUDA: its tables (data/vendors/cuda.yaml) and what follows from them.

`CudaFacts` holds the tables; `CudaKnowledge` answers from them which combinations work, how a
variant resolves (toolkit, driver floors, SASS targets, base image), which driver branches an
image serves through forward compatibility and which GPUs a platform's builds do not serve. Nothing
here looks at a host or an image. References (each rule names its section of compat-facts.md):
- wheel indexes, toolkits and SASS targets per torch: PyTorch RELEASE.md
  https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix
- toolkit -> driver: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
- minor-version compatibility floors: https://docs.nvidia.com/deploy/cuda-compatibility/
- forward compatibility: https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html;
  the branches each nvidia/cuda base serves: its NVIDIA_REQUIRE_CUDA (cuda.yaml forward_compat,
  families.compat_branches)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from collections.abc import Mapping, Sequence

from accel_images.model import platforms as platform_names
from accel_images.model.imagefacts import kb_row
from accel_images.model.knowledge import Combo, Resolution, minor_of, version_matches
from accel_images.vendors.base import VendorBase
from accel_images.versions import compare_driver, parse

if TYPE_CHECKING:
    from accel_images.model.knowledge import Knowledge, TorchRelease
    from accel_images.model.variant import Variant


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



class CudaKnowledge(VendorBase):
    """The CUDA vendor's knowledge layer: see the module docstring for its references."""

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
