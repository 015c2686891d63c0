"""Platforms: the OS/architecture an image is built for, in the words of an OCI image index.

An image index (https://github.com/opencontainers/image-spec/blob/main/image-index.md) lists one
manifest per `platform` (`os`, `architecture`, optional `variant`), and an image config says the
same of itself (config.md: "architecture ... Go Language document for GOARCH"). One tag of this
project is one index: the same tag serves `linux/amd64` and, where a vendor publishes arm64 builds,
`linux/arm64`. A host names its architecture the kernel's way (`uname -m`: `x86_64`, `aarch64`);
the knowledge base maps one onto the other (data/kb.yaml `platforms:`).

Plain strings (`linux/arm64`) throughout, as `docker --platform`, buildx bake and the Engine API
spell them; the helpers here take them apart. What an OCI document or the engine says (os,
architecture, variant) becomes such a string in one place only, accel_images.registry.platform_name,
so `arm64/v8` and `arm64` compare equal wherever a platform is read.
"""

from __future__ import annotations

import re

DEFAULT = "linux/amd64"
"""The platform of every image before platforms were an axis, and of a variant that names none."""

PLATFORM_RE = re.compile(r"^(?P<os>[a-z0-9]+)/(?P<arch>[a-z0-9_]+)(/(?P<variant>[a-z0-9]+))?\Z")
ORDER = ("linux/amd64", "linux/arm64")
"""Listing order: the default first."""


def is_platform(text: str) -> bool:
    return PLATFORM_RE.match(text) is not None


def architecture(platform: str) -> str:
    """`linux/arm64` -> `arm64`: the image config's `architecture`, Docker's TARGETARCH."""
    found = PLATFORM_RE.match(platform)
    return found["arch"] if found else platform


def os_of(platform: str) -> str:
    """`linux/arm64` -> `linux`."""
    found = PLATFORM_RE.match(platform)
    return found["os"] if found else platform


def variant_of(platform: str) -> str:
    """`linux/arm/v7` -> `v7`; '' when the platform names none."""
    found = PLATFORM_RE.match(platform)
    return (found["variant"] or "") if found else ""


def suffix(platform: str) -> str:
    """What sets a local name apart: '' for the default platform, `-arm64` for linux/arm64."""
    return "" if platform == DEFAULT else "-" + "-".join(platform.split("/")[1:])


def rank(platform: str) -> int:
    """Sort position: known platforms in ORDER, others after them."""
    return ORDER.index(platform) if platform in ORDER else len(ORDER)


def sort(platforms: list[str] | tuple[str, ...] | set[str]) -> tuple[str, ...]:
    return tuple(sorted(set(platforms), key=lambda p: (rank(p), p)))


def short(platforms: tuple[str, ...] | list[str]) -> str:
    """`amd64, arm64`: the architectures, for one-line messages."""
    return ", ".join(architecture(p) for p in platforms)
