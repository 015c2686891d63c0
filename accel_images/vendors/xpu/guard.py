"""The Intel XPU part of the in-image guard: `check_vendor` and its helpers, the shell in guard.sh.

accel_images/smoke/guard.sh calls `check_vendor`; render puts this text in its place
(render/contexts.py). guard.sh is the shell as written, with three marks filled in here from the
Python side, so the guard and `recommend` share one table and one wording: @MAX_IDS@
(decision.DATA_CENTER_MAX_IDS), @REASON@ (decision.DATA_CENTER_MAX_REASON) and @INTEL@
(detect.INTEL_PCI_VENDOR). The shell applies `XpuHost.fit`'s and `accelerator_present`'s rules
(host.py); references, in the shell beside each rule: the kernel's Documentation/ABI/testing/sysfs-bus-pci
and include/linux/pci_ids.h (PCI_VENDOR_ID_INTEL).
"""

from __future__ import annotations

from pathlib import Path

from accel_images.vendors.xpu.decision import DATA_CENTER_MAX_IDS, DATA_CENTER_MAX_REASON
from accel_images.vendors.xpu.detect import INTEL_PCI_VENDOR

SOURCE = Path(__file__).with_name("guard.sh")


def guard_check(source: str) -> str:
    """The shell `check_vendor` for the guard: `source` (guard.sh's text) with its marks filled in."""
    return source.replace("@MAX_IDS@", " ".join(DATA_CENTER_MAX_IDS)).replace(
        "@REASON@", DATA_CENTER_MAX_REASON).replace("@INTEL@", INTEL_PCI_VENDOR)


GUARD = guard_check(SOURCE.read_text(encoding="utf-8"))
