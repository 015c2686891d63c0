"""What a ROCm image holds: the guard's environment rendered into its Dockerfile, and the claims its
facts.json is checked against.

`image_env` turns the knowledge base's answers (`RocmKnowledge`: the compiled gfx targets, the amdgpu
driver window of the image's ROCm) into the ACCEL_IMAGES_* variables the in-image guard decides with;
`facts_claims` holds the image's own record (torch.version.hip, torch._C._cuda_getArchFlags()) against
the rows of data/vendors/rocm.yaml they are cited by (`kb_file`). References:
- wheel builds per torch: PyTorch RELEASE.md; gfx targets: pytorch/pytorch#164854, #167299
- the amdgpu driver window: AMD's user and kernel-space support matrix (rocm.yaml kernel_driver)
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Mapping, Sequence

from accel_images.model.imagefacts import Claim, kb_row
from accel_images.vendors.base import ALTERNATIVES_ENV, alternatives
from accel_images.vendors.rocm.knowledge import RocmKnowledge

if TYPE_CHECKING:
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant


class RocmImage(RocmKnowledge):
    """The ROCm vendor's image layer: the guard's environment and the facts.json claims."""

    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]:
        """The compiled gfx targets (the guard's fallback when the image has no facts file), the amdgpu
        kernel driver versions its ROCm is supported on and who says so, and the sibling images a refusal
        may name, each with its targets and driver window (vendors.base.alternatives)."""
        window = self.driver_window(kb, variant.stack)
        env = {"ACCEL_IMAGES_GPU_ARCHS": ",".join(variant.gpu_archs),
               "ACCEL_IMAGES_AMDGPU_WINDOW": window.env() if window else "",
               "ACCEL_IMAGES_AMDGPU_SUPPORT": window.text if window else "",
               ALTERNATIVES_ENV: alternatives(variant, variants, lambda v: self._guard_facts(kb, v))}
        return {key: value for key, value in env.items() if value}

    def _guard_facts(self, kb: Knowledge, variant: Variant) -> tuple[str, ...]:
        """What the guard decides an image by: its gfx targets and its kernel-driver window ('-': any)."""
        window = self.driver_window(kb, variant.stack)
        return ",".join(variant.gpu_archs), window.env() if window else "-"

    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """The ROCm the wheel was built for (torch.version.hip starts with it, `builds`; TheRock's 7.14
        HIP numbering is unverified) and its gfx targets (torch._C._cuda_getArchFlags() of a ROCm
        build, `archs.streams` where the stream has its own list, less `archs.since`)."""
        stack = variant.stack or ""
        claims = [Claim("stack", kb_row(self.kb_file, "builds", variant.torch_minor), stack,
                        facts.toolkit.get("hip"), "release")]
        if variant.gpu_archs:
            keys = ("archs", "streams", stack) if stack in self.facts(kb).streams else ("archs",)
            claims.append(Claim("archs", kb_row(self.kb_file, *keys), variant.gpu_archs, facts.archs))
        return claims
