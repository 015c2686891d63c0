"""Which binary wheels pip may install on a platform: the tags a glibc accepts, for `pip download`.

PEP 600: a `manylinux_2_Y_<arch>` wheel runs on glibc 2.Y or newer; pip on a host accepts every such
tag from its own glibc down to 2.17 (`manylinux2014`, PEP 599's alias of 2.17; x86_64 also takes
PEP 571's manylinux2010 and PEP 513's manylinux1), then `linux_<arch>`
(packaging.tags._manylinux_tags). `pip download --platform` matches only the tags it is given, so
a wheelhouse for another platform (filled on an x86_64 host for an aarch64 image) must list that
whole range: torch 2.15.0's aarch64 closure pins nvidia-nccl-cu13 2.30.7, published for aarch64
as manylinux_2_18 only, and nvidia-cuda-cupti 13.2.86 as manylinux_2_25 only (the package index,
2026-12: `--platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64 --platform
manylinux2014_aarch64` fails on NCCL; tests/data/wheels/).
"""

from __future__ import annotations

from accel_images.errors import InputError
from accel_images.model.knowledge import Knowledge

OLDEST_MANYLINUX_MINOR = 17
"""manylinux2014, the oldest glibc (2.17) a tag list for these images needs to name (PEP 599)."""
LEGACY_ALIASES = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
"""PEP 599, 571, 513: the names of glibc 2.17, 2.12 and 2.5 before PEP 600."""
LEGACY_ARCHES = {"manylinux2014": ("x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x"),
                 "manylinux2010": ("x86_64", "i686"), "manylinux1": ("x86_64", "i686")}


def manylinux_tags(machine: str, glibc: str) -> tuple[str, ...]:
    """`manylinux_2_36_aarch64` ... `manylinux_2_17_aarch64`, `manylinux2014_aarch64`, `linux_aarch64`:
    what pip accepts on a `machine` (uname -m) with this glibc, newest first."""
    try:
        major, minor = (int(part) for part in glibc.split(".")[:2])
    except ValueError:
        raise InputError(f"'{glibc}' is not a glibc version like 2.36", field="glibc") from None
    if major != 2:
        raise InputError(f"glibc {glibc}: manylinux tags are defined for glibc 2.x", field="glibc")
    tags = [f"manylinux_2_{m}_{machine}" for m in range(minor, OLDEST_MANYLINUX_MINOR - 1, -1)]
    tags += [f"{alias}_{machine}" for m, alias in LEGACY_ALIASES.items()
             if m <= minor and machine in LEGACY_ARCHES[alias]]
    return (*tags, f"linux_{machine}")


def platform_tags(kb: Knowledge, platform: str, os: str) -> tuple[str, ...]:
    """The wheel platform tags an image of `platform` on the base OS `os` installs (its glibc)."""
    info = kb.platforms.get(platform)
    if info is None:
        raise InputError(f"unknown platform '{platform}' (known: {', '.join(kb.platforms)})", field="--platform")
    base = kb.os.get(os)
    if base is None:
        raise InputError(f"unknown OS '{os}' (known: {', '.join(kb.os)})", field="--os")
    if platform not in base.platforms:
        raise InputError(f"{base.image} ({os}) has no {platform} image", field="--platform")
    return manylinux_tags(info.machines[0], base.glibc)


def pip_platform_args(tags: tuple[str, ...]) -> list[str]:
    """`--platform TAG` for each tag, then `--platform any` (pure-Python wheels)."""
    return [word for tag in (*tags, "any") for word in ("--platform", tag)]
