"""What the knowledge base says about ROCm: its tables (data/vendors/rocm.yaml) and what follows from them.

`RocmFacts` holds the tables: the gfx targets of each stream, the rocm/dev-ubuntu devel images and
the rows of AMD's user and kernel-space support matrix (`DriverRelease`), from which `driver_window`
and `kernel_driver_reason` tell which amdgpu kernel drivers an image's ROCm is supported on.
`RocmKnowledge` answers which combinations work and how a variant resolves. Nothing here looks at a
host or an image. References:
- wheel indexes per torch: PyTorch RELEASE.md; gfx targets: pytorch/pytorch#164854, #167299
- the host's amdgpu kernel driver against the image's ROCm: AMD's user and kernel-space support matrix
  (rocm.yaml kernel_driver, SUPPORT_MATRIX_DOCS)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from collections.abc import Mapping, Sequence

from accel_images.model.hostinfo import DOTTED
from accel_images.model.knowledge import Combo, Resolution, minor_of
from accel_images.vendors.base import VendorBase
from accel_images.versions import parse

if TYPE_CHECKING:
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant

SUPPORT_MATRIX_DOCS = "https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/compatibility/compatibility-matrix.html"
SUPPORT_MATRIX = "AMD's user and kernel-space support matrix"
"""What the kernel-driver rule cites in its messages (rocm.yaml kernel_driver: the rows and their source)."""
_DOTTED_RE = re.compile(DOTTED)


@dataclass(frozen=True)
class DriverRelease:
    """A row of AMD's user and kernel-space support matrix (rocm.yaml kernel_driver): an AMD GPU Driver
    release, the amdgpu module series its package carries (what a host reports), the ROCm it supports."""

    driver: str                 # '30.10'
    module: str                 # '6.14': the amdgpu module versions from 6.14 on are this release's
    rocm: tuple[str, ...]       # '7.14', ...: the ROCm releases (major.minor) supported on it


@dataclass(frozen=True)
class DriverWindow:
    """The amdgpu module versions a ROCm release is supported on: from `low` on (None: from the first row)
    and below `high` (None: no newer row drops it); `text` names the driver releases for people."""

    low: str | None
    high: str | None
    text: str

    def admits(self, module_version: str) -> bool:
        """Whether a host's amdgpu module version (dotted, as detection reads it) lies inside."""
        version = parse(module_version)
        return (self.low is None or version >= parse(self.low)) and (self.high is None or version < parse(self.high))

    def env(self) -> str:
        """'LOW-HIGH' for the guard (either side empty: unbounded), the form its in_window reads."""
        return f"{self.low or ''}-{self.high or ''}"


@dataclass(frozen=True)
class RocmFacts:
    archs: Mapping[str, tuple[str, ...]]            # 'all' and 'since_7_0': streams before 7.2
    devel_images: Mapping[str, Mapping[str, str]]   # ROCm -> os -> image, plus rocm_path
    streams: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # ROCm -> PYTORCH_ROCM_ARCH
    since: Mapping[str, str] = field(default_factory=dict)               # gfx target -> first torch minor
    drivers: tuple[DriverRelease, ...] = ()                              # oldest first, by module series


def load_drivers(raw: Mapping[str, Any]) -> tuple[DriverRelease, ...]:
    """rocm.yaml's kernel_driver releases, ordered by their module series (the order a host's version is read in)."""
    rows = [DriverRelease(str(row["driver"]), str(row["module"]), tuple(str(r) for r in row["rocm"]))
            for row in raw.get("releases") or ()]
    return tuple(sorted(rows, key=lambda row: parse(row.module)))


def driver_window(drivers: Sequence[DriverRelease], stack: str) -> DriverWindow | None:
    """The rows that support ROCm `stack` (a contiguous run, as AMD's matrix has them), as module bounds;
    None where no row lists the release (nothing to check against)."""
    release = minor_of(stack)
    supported = [index for index, row in enumerate(drivers) if release in row.rocm]
    if not supported:
        return None
    first, last = supported[0], supported[-1]
    low = drivers[first].module if first > 0 else None
    high = drivers[last + 1].module if last + 1 < len(drivers) else None
    releases = (f"AMD GPU Driver {drivers[first].driver} or later" if high is None
                else f"AMD GPU Driver {drivers[first].driver} to {drivers[last].driver}")
    modules = f"amdgpu {low or 'any'}" + (f" to below {high}" if high else " or later")
    return DriverWindow(low, high, f"{releases} ({modules})")


def driver_release(drivers: Sequence[DriverRelease], module_version: str) -> DriverRelease | None:
    """The release a host's amdgpu module version belongs to: the newest row whose series it has reached."""
    version = parse(module_version)
    reached = [row for row in drivers if parse(row.module) <= version]
    return reached[-1] if reached else None


def kernel_driver_reason(drivers: Sequence[DriverRelease], module_version: str | None, stack: str) -> str | None:
    """Why the host's amdgpu kernel driver cannot serve ROCm `stack` by AMD's support matrix; None when it
    can, or cannot be told (no version: the in-kernel driver has none; no row lists the release)."""
    window = driver_window(drivers, stack)
    if window is None or not module_version or not _DOTTED_RE.fullmatch(module_version):
        return None
    if window.admits(module_version):
        return None
    row = driver_release(drivers, module_version)
    which = f" (AMD GPU Driver {row.driver})" if row else ""
    return (f"amdgpu kernel driver {module_version}{which} is outside what ROCm {stack} supports: {window.text},"
            f" by {SUPPORT_MATRIX}")


class RocmKnowledge(VendorBase):
    """The ROCm vendor's knowledge layer: see the module docstring for its references."""

    def load_facts(self, raw: Mapping[str, Any]) -> RocmFacts:
        archs = raw["archs"]
        return RocmFacts(archs={str(k): tuple(str(a) for a in archs[k]) for k in ("all", "since_7_0")},
                         devel_images={str(k): dict(v) for k, v in raw["devel_images"].items()},
                         streams={str(k): tuple(str(a) for a in v) for k, v in archs.get("streams", {}).items()},
                         since={str(k): str(v) for k, v in archs.get("since", {}).items()},
                         drivers=load_drivers(raw.get("kernel_driver") or {}))

    def facts(self, kb: Knowledge) -> RocmFacts:
        facts: RocmFacts = self.section(kb).facts
        return facts

    def flavor_reasons(self, kb: Knowledge, combo: Combo) -> list[str]:
        reasons = super().flavor_reasons(kb, combo)
        if reasons or combo.flavor != "devel" or not combo.stack or not combo.os:
            return reasons
        images = self.facts(kb).devel_images.get(combo.stack, {})
        if combo.os not in images:
            where = ", ".join(k for k in images if k.startswith(("ubuntu", "debian"))) or "none"
            return [f"no rocm/dev-ubuntu image for ROCm {combo.stack} on {combo.os} (available: {where})"]
        return []

    def wheel_index(self, kb: Knowledge, stack: str | None) -> str | None:
        return f"rocm{stack}"

    def gpu_archs(self, kb: Knowledge, torch: str, stack: str | None) -> tuple[str, ...]:
        """PyTorch's PYTORCH_ROCM_ARCH for the stream (rocm.yaml archs), less the targets its
        release branch did not have yet."""
        if not stack:
            return ()
        facts = self.facts(kb)
        if stack in facts.streams:
            listed = facts.streams[stack]
        else:
            listed = facts.archs["all"] + (facts.archs["since_7_0"] if parse(stack) >= (7, 0) else ())
        release = parse(minor_of(torch))
        return tuple(a for a in listed if parse(facts.since.get(a, "0")) <= release)

    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution:
        base = super().resolve(kb, combo)
        if combo.flavor != "devel":
            return base
        image = self.facts(kb).devel_images[base.stack or ""][combo.os or ""]
        return Resolution(**{**base.__dict__, "base_image": image})

    def driver_window(self, kb: Knowledge, stack: str | None) -> DriverWindow | None:
        """The amdgpu module versions AMD's support matrix supports ROCm `stack` on (rocm.yaml kernel_driver)."""
        return driver_window(self.facts(kb).drivers, stack) if stack else None

    def base_upgrades(self, kb: Knowledge, variant: Variant) -> list[str]:
        if variant.flavor != "devel":
            return []
        images = [by_os[variant.os] for stack, by_os in self.facts(kb).devel_images.items()
                  if variant.os in by_os and parse(stack) > parse(variant.stack or "0")]
        return sorted(images, reverse=True)
