"""What the knowledge base says of Intel XPU: the tables of data/vendors/xpu.yaml (`XpuFacts`) and what
follows from them (which combinations work, how a variant resolves).

References:
- +xpu wheels per torch and the driver packages: https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html
- devel bases: intel/deep-learning-essentials, per oneAPI release and OS (xpu.yaml devel_images)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from collections.abc import Mapping

from accel_images.model.knowledge import Combo, Resolution
from accel_images.vendors.base import VendorBase

if TYPE_CHECKING:
    from accel_images.model.knowledge import Knowledge, TorchRelease


@dataclass(frozen=True)
class XpuFacts:
    runtime_packages: tuple[str, ...]
    runtime_repository: str
    devel_images: Mapping[str, Mapping[str, str]]


class XpuKnowledge(VendorBase):
    """The Intel GPU vendor's knowledge layer: its tables, the devel bases, resolution and details."""

    def load_facts(self, raw: Mapping[str, Any]) -> XpuFacts:
        return XpuFacts(tuple(str(p) for p in raw["runtime_packages"]), str(raw["runtime_repository"]),
                        {str(k): dict(v) for k, v in raw.get("devel_images", {}).items()})

    def facts(self, kb: Knowledge) -> XpuFacts:
        facts: XpuFacts = self.section(kb).facts
        return facts

    def flavor_reasons(self, kb: Knowledge, combo: Combo) -> list[str]:
        reasons = super().flavor_reasons(kb, combo)
        if reasons or combo.flavor != "devel" or not combo.stack or not combo.os:
            return reasons
        if combo.os not in self.facts(kb).devel_images.get(combo.stack, {}):
            return [f"no intel/deep-learning-essentials image for oneAPI {combo.stack} on {combo.os}"]
        return []

    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution:
        base = super().resolve(kb, combo)
        if combo.flavor != "devel":
            return base
        image = self.facts(kb).devel_images[base.stack or ""][combo.os or ""]
        return Resolution(**{**base.__dict__, "base_image": image})

    def details(self, kb: Knowledge, stack: str | None, row: TorchRelease) -> dict[str, Any]:
        return {"oneapi": list(self.stacks(kb, row.minor)), "wheel_index": self.wheel_index(kb, stack)}
