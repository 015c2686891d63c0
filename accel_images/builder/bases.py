"""Base images as the builder sees them: the digest a build pins, and what to move to when one is gone.

A build of one platform of a multi-platform tag names its base by that platform's own manifest
digest (`platform_base`), read from the base's registry (its mirror, where one is given): an engine
without a multi-platform image store keeps one image per name, and Docker 20.10's classic builder
takes a base found locally by name whatever its platform (seen here: a `--platform linux/arm64`
build FROM a local amd64 image ran x86_64). A digest names one platform's image, and a pull by
digest leaves every tag alone, so builds of both platforms can share one engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from docker.utils import parse_repository_tag

from accel_images import vendors
from accel_images.kb.compat import KnowledgeBase
from accel_images.builder.engine import ImageInfo, pull_through_a_mirror
from accel_images.errors import EngineError, NotInRegistry, RegistryError
from accel_images.model.reference import Mirror, mirrored
from accel_images.model.variant import Variant
from accel_images.registry import RemoteImage, index_entries, is_index


class ManifestReader(Protocol):
    """The part of accel_images.registry.RegistryClient a platform's base is found with."""

    host: str

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None: ...
    def image(self, repository: str, tag: str, platform: str | None = None) -> RemoteImage | None: ...


def platform_base(registry: ManifestReader, ref: str, platform: str) -> str:
    """`name@sha256:...`: the manifest of `platform` that the base `ref` (a tag, or a digest from a
    lock) names in its registry, an image index's entry or a single image of that platform."""
    from accel_images.builder.pin import repository_of
    from accel_images.model.reference import split_reference
    path = split_reference(ref)[1]
    repository, reference = _repository_and_reference(path)
    found = registry.manifest(repository, reference)
    if found is None:
        raise NotInRegistry(f"base image {ref} not found in registry {registry.host}")
    digest, manifest = found
    if is_index(manifest):
        entries = index_entries(manifest, f"{registry.host}/{path}")
        chosen = next((entry for entry in entries if entry.platform == platform), None)
        if chosen is None:
            listed = ", ".join(entry.platform for entry in entries) or "none"
            raise NotInRegistry(f"base image {ref} has no {platform} image (its index lists: {listed})")
        return f"{repository_of(ref)}@{chosen.digest}"
    single = registry.image(repository, digest)
    if single is not None and single.platform and single.platform != platform:
        raise NotInRegistry(f"base image {ref} is a {single.platform} image only, not {platform}")
    return f"{repository_of(ref)}@{digest}"


def _repository_and_reference(path: str) -> tuple[str, str]:
    """`library/debian:bookworm-slim` -> (`library/debian`, `bookworm-slim`); a digest stays one."""
    if "@" in path:
        repository, digest = path.split("@", 1)
        return repository, digest
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        repository, tag = path.rsplit(":", 1)
        return repository, tag
    return path, "latest"


def check_platform(image: ImageInfo, platform: str, what: str) -> None:
    """An image of another platform than the one a build is for is a failure, never silently used."""
    if image.platform and image.platform != platform:
        raise EngineError(f"{what} is a {image.platform} image, not {platform}")


def pinned_base(base: ImageInfo, ref: str) -> str:
    """`repo@sha256:...` of the base as pulled by `ref`, else its image ID.

    An image known under several names carries one repo digest per name, listed in name
    order, so the first one changes whenever another name comes or goes; the digest of the
    repository the build pulls from does not.
    """
    repository = parse_repository_tag(ref)[0]
    own = [digest for digest in base.repo_digests if digest.startswith(repository + "@")]
    return (own or list(base.repo_digests) or [base.id])[0]


def newer_bases(kb: KnowledgeBase, variant: Variant) -> list[str]:
    """Base tags of the same image family the knowledge base knows, newest first (the vendor decides).

    Vendors delete end-of-life tags (nvidia/cuda drops old patch releases), so a missing base
    usually means "move to one of these".
    """
    return vendors.get(variant.vendor).base_upgrades(kb, variant)


def with_newer_bases(error: RegistryError, variant: Variant, kb: KnowledgeBase,
                     pulled_from: str | None = None, mirrors: Sequence[Mirror] = (),
                     other_bases: Mapping[str, str] | None = None) -> RegistryError:
    """A missing base's error: the base as the matrix names it, where it was looked for, what to do.

    `pulled_from` is the reference the pull used; when a `--registry-mirror` rewrote it, the tag
    is missing from the mirror, which says nothing about upstream (a mirror holds what was copied
    into it), so the advice is to copy it there, not that upstream withdrew it; and a mirror out of
    reach is named with the mapping that pointed there (the engine's hint, "pull through a mirror",
    would suggest mirroring the mirror). The message never names the variant: every variant on this
    base fails for the same cause, shown once. `other_bases` (OS -> base image: the matrix's other
    bases of this vendor) turn into the other way out on a mirrored machine: `--os debian12`, a base
    the mirror may hold.
    """
    mapping = next((m for m in mirrors if pulled_from and mirrored(variant.base_image, (m,)) == pulled_from), None)
    if error.transient and mapping is not None:
        unreachable = RegistryError(error.message, hint=f"the --registry-mirror {mapping.registry}={mapping.prefix}"
                                                        " points there: start that mirror or correct the mapping")
        unreachable.transient, unreachable.detail = True, error.detail
        return unreachable
    if error.transient and error.hint is None and "unreachable" in error.message and pulled_from == variant.base_image:
        direct = RegistryError(error.message, hint=pull_through_a_mirror(_registry_of(pulled_from)))
        direct.transient, direct.detail = True, error.detail
        return direct
    if error.transient or "not found" not in error.message:
        return error
    newer = newer_bases(kb, variant)
    known = f"newer bases the knowledge base knows: {', '.join(newer)}" if newer else ""
    base = variant.base_image
    mirror_registry = _registry_of(pulled_from) if pulled_from and pulled_from != base else None
    if mirror_registry:
        message = f"base image {base} not found in mirror {mirror_registry}"
        others = ", ".join(f"--os {os_name} ({base})" for os_name, base in sorted((other_bases or {}).items()))
        elsewhere = f"; or choose a base the mirror may hold: {others}" if others else ""
        hint = "; ".join(filter(None, (f"push it there as {pulled_from}, or drop that --registry-mirror{elsewhere}",
                                       known)))
    else:
        message = f"base image {base} not found in registry {_registry_of(base)}"
        hint = "; ".join(filter(None, ("the tag may have been withdrawn upstream",
                                       known or "the knowledge base knows no newer base for it")))
    better = NotInRegistry(message, hint=hint)
    better.detail = error.detail
    return better


def _registry_of(ref: str) -> str:
    from accel_images.model.reference import split_reference
    return split_reference(ref)[0]
