"""One tag, one image index: what a multi-platform tag serves now, and the index a nightly puts there.

A variant built for several platforms (linux/amd64 and linux/arm64) is one tag whose manifest is an
OCI image index listing one image per platform (image-spec image-index.md). The nightly
(accel_images.publish.nightly) decides, builds, smoke-tests and attests each platform's image by
itself, as it does a single image, then assembles the index from them and promotes it: the tag moves
as a whole, once, onto an index whose every image was smoke-tested on its platform.

Promotion is per platform: a platform whose build or smoke test failed keeps, in the new index, the
image the tag served for it before (when that index is one this tool recorded), so a broken arm64
build never holds back the amd64 image's security updates, and never reaches arm64 users. A run that
builds some platforms only (a CI job per platform: `nightly --platform linux/arm64`) keeps the others
the same way. Trust follows the index: its digest must be in the tag's tested record
(accel_images.publish.tested), written only after every image in it passed; an index pushed by other
means, or any image in it, is never trusted and every platform is rebuilt. Even then an image is
carried into the new index only where it is trusted as the tag's image of its platform
(accel_images.supply.trust: listed once, and with a key its signed provenance names this tag, variant
and platform); one that is not is left out, and the run says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from accel_images.errors import RegistryError
from accel_images.model import platforms as platform_names
from accel_images.registry import OCI_INDEX, IndexEntry, RemoteImage, index_entries, is_index, oci_index
from accel_images.supply import trust


class IndexRegistry(Protocol):
    """The part of accel_images.registry.RegistryClient a tag's index is read and written with."""

    host: str

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None: ...
    def image(self, repository: str, tag: str, platform: str | None = None) -> RemoteImage | None: ...
    def descriptor(self, repository: str, reference: str) -> dict[str, Any] | None: ...
    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> tuple[str, bool]: ...


@dataclass(frozen=True)
class Served:
    """What a tag serves: its digest (an index's, or a single image's) and the image of each platform."""

    digest: str
    images: Mapping[str, IndexEntry] = field(default_factory=dict)
    """The image a host of each platform pulls: the index's first entry of that platform."""
    is_index: bool = False
    entries: tuple[IndexEntry, ...] = ()
    """Every entry, in the index's order, a platform listed twice included (`images` keeps the first)."""

    def listed(self, platform: str) -> trust.Listed | None:
        """The image a host of `platform` pulls, knowing how many entries list that platform; None when none."""
        return next((image for image in trust.listed(self.entries or tuple(self.images.values()))
                     if image.platform == platform), None)


def served(registry: IndexRegistry, repository: str, tag: str) -> Served | None:
    """The images `tag` serves by platform; None when the tag is absent. A single image (a tag published
    before it had several platforms) counts as the image of its config's platform."""
    found = registry.manifest(repository, tag)
    if found is None:
        return None
    digest, manifest = found
    if is_index(manifest):
        entries = index_entries(manifest, f"{registry.host}/{repository}:{tag}")
        first: dict[str, IndexEntry] = {}
        for entry in entries:
            first.setdefault(entry.platform, entry)
        return Served(digest, first, True, entries)
    image = registry.image(repository, digest)
    platform = (image.platform if image is not None else "") or platform_names.DEFAULT
    described = registry.descriptor(repository, digest) or {}
    return Served(digest, {platform: IndexEntry(platform, digest, int(described.get("size") or 0),
                                                str(described.get("mediaType") or ""))})


def entry_of(registry: IndexRegistry, repository: str, platform: str, digest: str) -> IndexEntry:
    """The index entry of a pushed image: its descriptor as the registry serves it (media type, size)."""
    described = registry.descriptor(repository, digest)
    if described is None:
        raise RegistryError(f"registry {registry.host} gives no descriptor of {repository}@{digest[:19]}")
    return IndexEntry(platform, digest, int(described["size"]), str(described["mediaType"]))


def assemble(images: Mapping[str, IndexEntry]) -> tuple[bytes, str]:
    """The index of `images` (platforms in listing order) and its digest."""
    data = oci_index([images[platform] for platform in platform_names.sort(list(images))])
    return data, "sha256:" + hashlib.sha256(data).hexdigest()


def put_index(registry: IndexRegistry, repository: str, data: bytes, digest: str) -> None:
    """Store the index under its own digest (no tag): the tags move onto it afterwards, one by one."""
    put = registry.put_manifest(repository, digest, data, OCI_INDEX)[0]
    if put != digest:
        raise RegistryError(f"registry {registry.host} stored the index of {repository} as {put}, not {digest}")
