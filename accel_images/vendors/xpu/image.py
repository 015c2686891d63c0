"""What an Intel XPU image holds: the claims its facts.json is checked against.

`facts_claims` holds the image's own record (torch.version.xpu) against the `builds` rows of
data/vendors/xpu.yaml they are cited by (`kb_file`); `oneapi_release` reads the SYCL compiler's
YYYYMMPP as the oneAPI release, as the smoke workload does. References:
- +xpu wheels per torch: https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accel_images.model.imagefacts import Claim, kb_row
from accel_images.vendors.xpu.knowledge import XpuKnowledge

if TYPE_CHECKING:
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant


class XpuImage(XpuKnowledge):
    """The Intel GPU vendor's image layer: the facts.json claims."""

    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """The oneAPI release the +xpu wheel was built with (`builds`): torch.version.xpu is the SYCL
        compiler's YYYYMMPP, whose year.month is the oneAPI release (20260100 -> 2026.1, the reading the
        smoke workload also makes). The knowledge base states no XPU architecture list to check."""
        return [Claim("stack", kb_row(self.kb_file, "builds", variant.torch_minor), variant.stack or "",
                      oneapi_release(facts.toolkit.get("xpu")), "release")]


def oneapi_release(torch_xpu: str | None) -> str | None:
    """torch.version.xpu, the SYCL compiler version YYYYMMPP, as a release: '20260100' -> '2026.1.0'."""
    if not torch_xpu:
        return None
    digits = torch_xpu.strip()
    if re.fullmatch(r"\d{8}", digits):
        return f"{int(digits[:4])}.{int(digits[4:6])}.{int(digits[6:])}"
    return digits
