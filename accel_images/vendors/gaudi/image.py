"""What an Intel Gaudi image holds: the guard's environment rendered into its Dockerfile, and the claims
its facts.json is checked against.

`image_env` gives the in-image guard the image's Intel Gaudi software release (compared with the host
driver's, as host.py `fit` does); `facts_claims` holds the image's own record (torch, Python, the
habana-torch-plugin release) against the `releases` rows of data/vendors/gaudi.yaml (`kb_file`).
References:
- releases, bundled torch, OS/Python: https://docs.habana.ai/en/latest/Support_Matrix/Support_Matrix.html
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from collections.abc import Mapping, Sequence

from accel_images.model.imagefacts import Claim, kb_row
from accel_images.vendors.base import ALTERNATIVES_ENV, alternatives
from accel_images.vendors.gaudi.knowledge import GaudiKnowledge

if TYPE_CHECKING:
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant


class GaudiImage(GaudiKnowledge):
    """The Intel Gaudi vendor's image layer: the guard's environment and the facts.json claims."""

    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]:
        """The image's Intel Gaudi software release, which the guard compares with the host driver's
        as `fit` does, and the sibling images a refusal may name with theirs."""
        env = {"ACCEL_IMAGES_GAUDI": variant.stack or "",
               ALTERNATIVES_ENV: alternatives(variant, variants, lambda v: (v.stack or "",))}
        return {key: value for key, value in env.items() if value}

    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """A Gaudi image's torch, Python and release all come from its `releases` row: Intel's torch
        build (its public version), the base's python3, and the habana-torch-plugin distribution
        (1.24.1.482 is release 1.24.1)."""
        stack = variant.stack or ""
        return [Claim("torch", kb_row(self.kb_file, "releases", stack, "torch"), variant.torch, facts.public,
                      "release"),
                Claim("python", kb_row(self.kb_file, "releases", stack, "os", variant.os), variant.python,
                      facts.python, "release"),
                Claim("stack", kb_row(self.kb_file, "releases", stack), stack, facts.toolkit.get("gaudi") or "",
                      "release")]
