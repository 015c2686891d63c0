"""Detect which accelerator this host has, so a build or a pull can pick the matching vendor.

Every vendor's probe (accel_images/vendors/<name>.py, or <name>/detect.py where the vendor is a
package of layers) runs, in the vendors' detection order (NVIDIA, then AMD ROCm, then Intel XPU,
then Intel Gaudi, else CPU, as design.md says), so the evidence also names what lost. A probe that
finds nothing says why in a line of evidence; none raises. The shared tools (running a command
under a timeout, reading driver files) are in accel_images/model/hostinfo.py.

A probe may find its vendor's driver present but broken (HostInfo.unusable: nvidia-smi's "Driver/library
version mismatch"); a working accelerator of any vendor wins over a broken one, and a broken one
over none, so the report says "accelerator present but unusable" rather than "no accelerator".

Files are read under `/`, or under the tree ACCEL_IMAGES_DEV_ROOT names: the variable the images'
guard reads for the same purpose, so one fake node (a PATH of recorded tools, a device tree) serves
both the guard and the commands that detect, `host describe` among them.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from accel_images import vendors
from accel_images.model.hostinfo import HostInfo, Runner, answer, run_command
from accel_images.versions import compare_driver

__all__ = ["HostInfo", "compare_driver", "detect_host", "detection_root", "run_command"]

DEV_ROOT_ENV = "ACCEL_IMAGES_DEV_ROOT"


def detection_root() -> Path:
    """Where /dev, /sys and /proc are read: `/`, or the tree DEV_ROOT_ENV names (a fake node)."""
    return Path(os.environ.get(DEV_ROOT_ENV) or "/")


def detect_host(run: Runner = run_command, root: Path | None = None) -> HostInfo:
    """Which accelerator this host has, with the evidence for the choice; CPU when there is none.
    The CPU architecture (`uname -m`) is read too: it decides which platform's image runs here.
    `root`: where the device files are read (default: detection_root())."""
    root = detection_root() if root is None else root
    notes: list[str] = []
    order = vendors.by_detection_order()
    found = [host for vendor in order if (host := vendor.probe(run, root, notes)) is not None]
    machine = detect_machine(run, notes)
    if not found:
        fallback = vendors.fallback()
        return HostInfo(vendor=fallback, evidence=(*notes, f"chose {fallback}: no accelerator found"),
                        machine=machine)
    chosen = sorted(found, key=lambda host: host.unusable is not None)[0]  # stable: detection order within each
    return replace(chosen, evidence=(*notes, _verdict(chosen, found, order)), machine=machine)


def detect_machine(run: Runner, notes: list[str]) -> str | None:
    """What `uname -m` prints (x86_64, aarch64): the kernel's name for the CPU architecture; None when
    it does not answer one word."""
    said = answer(run(["uname", "-m"]))
    words = (said or "").split()
    if len(words) != 1:
        notes.append("machine: `uname -m` gave no answer; x86_64 assumed")
        return None
    notes.append(f"machine: {words[0]} (uname -m)")
    return words[0]


def _verdict(chosen: HostInfo, found: list[HostInfo], order: list[vendors.Vendor]) -> str:
    """'chose cuda over rocm (order: ...)'; a broken accelerator says so."""
    if chosen.unusable:
        return f"chose {chosen.vendor}: accelerator present but unusable: {chosen.unusable}"
    others = [host.vendor + (" (unusable)" if host.unusable else "") for host in found if host is not chosen]
    ranked = ", ".join(vendor.name for vendor in order if vendor.accelerator)
    return f"chose {chosen.vendor}" + (f" over {', '.join(others)} (order: {ranked})" if others else "")
