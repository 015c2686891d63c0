"""The Intel XPU part of the in-image guard: `check_vendor` and its helpers, the shell in guard.sh.

accel_images/smoke/guard.sh calls `check_vendor`; render puts this text in its place
(render/contexts.py). guard.sh is the shell as written, with marks filled in here from the
Python side, so the guard and `recommend` share one table and one wording: @MAX_IDS@
(decision.DATA_CENTER_MAX_IDS), @REASON@ (decision.DATA_CENTER_MAX_REASON), @INTEL@
(detect.INTEL_PCI_VENDOR), @VALIDATED_IDS@ (detect.validated_families: every id of the families PyTorch
validates) and @INTEGRATED_SLOT@ (where processor graphics sits). The shell applies `XpuHost.fit`'s
and `accelerator_present`'s rules (host.py) and detection's `integrated`; references, in the shell beside
each rule: the kernel's Documentation/ABI/testing/sysfs-bus-pci, include/linux/pci_ids.h
(PCI_VENDOR_ID_INTEL) and include/drm/intel/pciids.h.
"""

from __future__ import annotations

from pathlib import Path

from accel_images.vendors.xpu.decision import DATA_CENTER_MAX_IDS, DATA_CENTER_MAX_REASON
from accel_images.vendors.xpu.detect import INTEGRATED_SLOT, INTEL_PCI_VENDOR, validated_families

SOURCE = Path(__file__).with_name("guard.sh")


def guard_check(source: str) -> str:
    """The shell `check_vendor` for the guard: `source` (guard.sh's text) with its marks filled in."""
    validated = sorted({pci_id for family in validated_families() for pci_id in family.ids})
    marks = {"@MAX_IDS@": " ".join(DATA_CENTER_MAX_IDS), "@REASON@": DATA_CENTER_MAX_REASON,
             "@INTEL@": INTEL_PCI_VENDOR, "@VALIDATED_IDS@": " ".join(validated), "@INTEGRATED_SLOT@": INTEGRATED_SLOT}
    for mark, text in marks.items():
        source = source.replace(mark, text)
    return source


GUARD = guard_check(SOURCE.read_text(encoding="utf-8"))
