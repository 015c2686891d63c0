"""Image references and registry mirrors: where an image is, and where it is pulled from.

`nvidia/cuda:13.2.1-devel-ubuntu24.04` lives on docker.io; a mirror mapping
(`--registry-mirror docker.io=harbor.example.com/dockerhub`) pulls it from elsewhere. Rendering,
base pinning, the knowledge-base checks and `recommend` all read references the same way, here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Iterable

from accel_images.credentials import hide_credentials
from accel_images.errors import InputError

REGISTRY_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?\Z")
REPOSITORY_RE = re.compile(r"^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*\Z")
"""A repository name as the registry API takes it: lowercase path components (distribution-spec v1.1,
spec.md, "Pulling manifests": `<name>` MUST match this; V)."""
TAG_RE = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}\Z")
"""A tag: at most 128 characters, no space (distribution-spec v1.1, spec.md, "Pulling manifests"; V)."""
MIRROR_PREFIX_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?(/[a-z0-9._-]+)*\Z")


@dataclass(frozen=True)
class Mirror:
    """`docker.io=harbor.example.com/dockerhub`: images from `registry` are pulled via `prefix`."""

    registry: str
    prefix: str

    @classmethod
    def parse(cls, text: str) -> Mirror:
        registry, sep, prefix = text.partition("=")
        registry, prefix = registry.strip(), prefix.strip().rstrip("/")
        if (not (sep and REGISTRY_RE.match(registry) and MIRROR_PREFIX_RE.match(prefix))
                or any(c.isspace() for c in text)):
            raise InputError(f"'{hide_credentials(text)}' is not REGISTRY=HOST[/PATH] "
                             "(e.g. docker.io=mirror.example.com/dockerhub)",
                             field="--registry-mirror")
        return cls(registry, prefix)


def split_reference(ref: str) -> tuple[str, str]:
    """`debian:12` -> ('docker.io', 'library/debian:12'); `nvcr.io/x/y:1` -> ('nvcr.io', 'x/y:1')."""
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", ref if sep else f"library/{ref}"


def mirrored(ref: str, mirrors: Iterable[Mirror]) -> str:
    registry, path = split_reference(ref)
    for mirror in mirrors:
        if mirror.registry == registry:
            return f"{mirror.prefix}/{path}"
    return ref


def image_ref(image: str, tag: str, registry: str | None = None) -> str:
    """`[registry/]image:tag`: the registry is a prefix such as `ghcr.io/acme` or `127.0.0.1:5000`;
    a scheme (`https://`, which `nightly --registry` accepts) is not part of an image name."""
    where = (registry or "").strip().split("://", 1)[-1].rstrip("/")
    prefix = f"{where}/" if where else ""
    return f"{prefix}{image}:{tag}"
