"""Base images as the builder sees them: the digest a build pins, and what to move to when one is gone."""

from __future__ import annotations

from docker.utils import parse_repository_tag

from accel_images import vendors
from accel_images.compat import KnowledgeBase
from accel_images.engine import ImageInfo
from accel_images.errors import RegistryError
from accel_images.variant import Variant


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


def with_newer_bases(error: RegistryError, variant: Variant, kb: KnowledgeBase) -> RegistryError:
    """A missing base's error, naming the upstream tag and the newer tags to move to."""
    if error.transient or "not found" not in error.message:
        return error
    newer = newer_bases(kb, variant)
    hint = (f"newer bases the knowledge base knows: {', '.join(newer)}" if newer
            else "the knowledge base knows no newer base for it")
    better = RegistryError(f"base image {variant.base_image} of {variant.key}: {error.message}",
                           hint=f"the tag may have been withdrawn upstream; {hint}")
    better.transient = False  # type: ignore[misc]
    return better
