"""What a CUDA image holds: the guard's environment rendered into its Dockerfile, and the claims
its facts.json is checked against.

`image_env` turns the knowledge base's answers (`CudaKnowledge`) into the ACCEL_IMAGES_* variables
the in-image guard decides with; `facts_claims` and `archs_of` hold the image's own record
(torch.version.cuda, the cuda-toolkit distribution, torch._C._cuda_getArchFlags(), the cuda-compat
libcuda) against the rows of data/vendors/cuda.yaml they are cited by (`kb_file`). References:
- wheel builds, toolkits and SASS/PTX targets per torch: PyTorch RELEASE.md
  https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix
- forward compatibility (the cuda-compat library nvidia/cuda's bases install "if available"):
  https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from collections.abc import Mapping, Sequence

from accel_images.model.imagefacts import Claim, kb_row
from accel_images.vendors.base import ALTERNATIVES_ENV, alternatives
from accel_images.vendors.cuda.decision import PTX_MARK, split_archs
from accel_images.vendors.cuda.knowledge import CudaKnowledge
from accel_images.versions import parse

if TYPE_CHECKING:
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant

SASS_PREFIX = "sm_"
PTX_PREFIX = "compute_"
"""How torch._C._cuda_getArchFlags() names a SASS target (sm_90) and a PTX one (compute_90)."""


class CudaImage(CudaKnowledge):
    """The CUDA vendor's image layer: the guard's environment and the facts.json claims."""

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


def _digits(capability: str) -> str:
    """'7.5' -> '75', '12.0' -> '120': a compute capability as nvcc's arch names spell it."""
    return capability.replace(".", "")


def _capability(flag: str, prefix: str) -> str | None:
    """'sm_120' -> '12.0', 'compute_90' -> '9.0'; None for another prefix or an arch-specific 'sm_90a'."""
    found = re.fullmatch(re.escape(prefix) + r"(\d+)(\d)", flag)
    return f"{found.group(1)}.{found.group(2)}" if found else None

