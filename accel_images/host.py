"""Detect which accelerator this host has, so a build or a pull can pick the matching vendor.

Every vendor's probe (accel_images/vendors/<name>.py) runs, in the vendors' detection order
(NVIDIA, then AMD ROCm, then Intel XPU, then Intel Gaudi, else CPU, as design.md says), so the
evidence also names what lost. A probe that finds nothing says why in a line of evidence; none
raises. The shared tools (running a command under a timeout, reading driver files) are in
accel_images/hostinfo.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from accel_images import vendors
from accel_images.hostinfo import HostInfo, Runner, run_command
from accel_images.versions import compare_driver

__all__ = ["HostInfo", "compare_driver", "detect_host", "run_command"]


def detect_host(run: Runner = run_command, root: Path = Path("/")) -> HostInfo:
    """Which accelerator this host has, with the evidence for the choice; CPU when there is none."""
    notes: list[str] = []
    order = vendors.by_detection_order()
    found = [host for vendor in order if (host := vendor.probe(run, root, notes)) is not None]
    fallback = next(vendor.name for vendor in order if not vendor.accelerator)
    if not found:
        return HostInfo(vendor=fallback, evidence=(*notes, f"chose {fallback}: no accelerator found"))
    chosen, others = found[0], [host.vendor for host in found[1:]]
    ranked = ", ".join(vendor.name for vendor in order if vendor.accelerator)
    verdict = f"chose {chosen.vendor}" + (f" over {', '.join(others)} (order: {ranked})" if others else "")
    return replace(chosen, evidence=(*notes, verdict))
