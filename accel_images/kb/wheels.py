"""Which binary wheels pip may install on a platform: the tags a glibc accepts.

PEP 600: a `manylinux_2_Y_<arch>` wheel runs on glibc 2.Y or newer. pip on a host accepts every such
tag from its own glibc down to 2.17 (2.5 on x86_64 and i686), each legacy alias right after the
manylinux_2_Y it names (PEP 599's manylinux2014 = 2.17; PEP 571's manylinux2010 = 2.12 and PEP
513's manylinux1 = 2.5, both x86_64 and i686 only), then `linux_<arch>`, in that order, most
specific first (packaging.tags.platform_tags, _manylinux.platform_tags; V). `pip download --platform`
matches only the tags it is given, so a download for another machine or glibc than the host's (the
run's wheelhouse, accel_images.builder.wheels; an offline wheelhouse, `kb wheel-tags`) must list that
whole range: torch 2.15.0's aarch64 closure pins nvidia-nccl-cu13 2.30.7, published for aarch64 as
manylinux_2_18 only, and nvidia-cuda-cupti 13.2.86 as manylinux_2_25 only (the package index,
2026-12: `--platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64 --platform
manylinux2014_aarch64` fails on NCCL; O, tests/data/wheels/).
"""

from __future__ import annotations

from accel_images.errors import InputError
from accel_images.model.knowledge import Knowledge

LEGACY_ALIASES = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
"""PEP 599, 571, 513: the names of glibc 2.17, 2.12 and 2.5 before PEP 600 (packaging's _LEGACY_MANYLINUX_MAP)."""
OLDEST_MINOR = {"x86_64": 5, "i686": 5}
"""The oldest glibc 2.X pip accepts a manylinux tag for, per machine: manylinux1's 2.5 where PEP 513
defined it; manylinux2014's 2.17 (`OLDEST_MINOR_ELSEWHERE`) for every other machine (packaging's
too_old_glibc2, 2.4 and 2.16: the minors above them)."""
OLDEST_MINOR_ELSEWHERE = 17


def manylinux_tags(machine: str, glibc: str) -> tuple[str, ...]:
    """`manylinux_2_36_aarch64` ... `manylinux_2_17_aarch64`, `manylinux2014_aarch64`, `linux_aarch64`:
    the platform tags pip accepts on a `machine` (uname -m) with this glibc, most specific first."""
    try:
        major, minor = (int(part) for part in glibc.split(".")[:2])
    except ValueError:
        raise InputError(f"'{glibc}' is not a glibc version like 2.36", field="glibc") from None
    if major != 2:
        raise InputError(f"glibc {glibc}: manylinux tags are defined for glibc 2.x (PEP 600)", field="glibc")
    tags: list[str] = []
    for glibc_minor in range(minor, OLDEST_MINOR.get(machine, OLDEST_MINOR_ELSEWHERE) - 1, -1):
        tags.append(f"manylinux_2_{glibc_minor}_{machine}")
        if glibc_minor in LEGACY_ALIASES:
            tags.append(f"{LEGACY_ALIASES[glibc_minor]}_{machine}")
    return (*tags, f"linux_{machine}")


def machine_of(kb: Knowledge, architecture: str) -> str:
    """`arm64` -> `aarch64`: the machine wheel tags name for an image's architecture (the engine's word,
    its config's `architecture`), as `uname -m` says it on such a host (data/kb.yaml `platforms:`, the
    first of each platform's machines); one the knowledge base does not know, as given."""
    platform = kb.platform_of_machine(architecture)
    return kb.platforms[platform].machines[0] if platform else architecture


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
