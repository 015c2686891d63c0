"""Pinning base images: tags move, digests do not.

`--pin` resolves every base image of the chosen variants to the manifest digest the registry
(or the mirror standing in for it) serves today and records it in a lock file; `--lock FILE`
renders each base as `repository@sha256:...` from that file, so a rebuild months later starts
from exactly the same bases. The lock is keyed by the upstream reference the knowledge base
names (`debian:bookworm-slim`), not by a mirror's, so one lock serves every mirror of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol
from collections.abc import Iterable, Mapping, Sequence

from accel_images import untrusted
from accel_images.errors import InputError, RegistryError
from accel_images.model.reference import Mirror, mirrored
from accel_images.model.variant import Variant

LOCK_FILE = Path("accel-images.lock")
LOCK_SCHEMA = 1
DIGEST_PREFIX = "sha256:"


class PulledImage(Protocol):
    """What a pull answers (engine.ImageInfo); read-only, so a frozen dataclass satisfies it."""

    @property
    def repo_digests(self) -> tuple[str, ...]: ...


class Puller(Protocol):
    """The part of accel_images.builder.engine.Engine pinning uses."""

    def pull(self, ref: str) -> PulledImage: ...


@dataclass(frozen=True)
class PinnedBase:
    """One base: the upstream reference, its digest, and the reference it was resolved through."""

    ref: str
    digest: str
    resolved_from: str


@dataclass(frozen=True)
class Lock:
    """Base reference -> digest, as of `created` (UTC, ISO 8601)."""

    created: str
    bases: tuple[PinnedBase, ...]

    def digest_of(self, ref: str) -> str | None:
        return next((base.digest for base in self.bases if base.ref == ref), None)


def repository_of(ref: str) -> str:
    """`nvidia/cuda:13.0.3-runtime-ubuntu24.04` -> `nvidia/cuda`; a digest or a port stays intact."""
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        last[-1] = last[-1].split(":", 1)[0]
    return "/".join(last)


def pinned_ref(ref: str, digest: str) -> str:
    """The reference a pinned build uses: `repository@sha256:...` (no tag: the digest decides)."""
    return f"{repository_of(ref)}@{digest}"


def digest_from(repo_digests: Sequence[str], pulled_ref: str) -> str:
    """The digest of `pulled_ref` among an image's RepoDigests (`repository@sha256:...`)."""
    wanted = repository_of(pulled_ref)
    candidates = [entry for entry in repo_digests if "@" in entry]
    for entry in candidates:
        repository, digest = entry.split("@", 1)
        if repository == wanted or repository.endswith("/" + wanted):
            return digest
    if candidates:
        return candidates[0].split("@", 1)[1]
    raise RegistryError(f"{pulled_ref} has no registry digest: it was never pulled from or pushed to a registry")


def resolve(engine: Puller, refs: Iterable[str], mirrors: Sequence[Mirror] = (),
            now: datetime | None = None) -> Lock:
    """Pull each base (through its mirror) and record the digest it has today."""
    bases = []
    for ref in sorted(set(refs)):
        source = mirrored(ref, mirrors)
        image = engine.pull(source)
        bases.append(PinnedBase(ref, digest_from(image.repo_digests, source), source))
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return Lock(moment.strftime("%Y-%m-%dT%H:%M:%SZ"), tuple(bases))


def merged(old: Lock | None, new: Lock) -> Lock:
    """`new` plus the bases of `old` it did not resolve (pinning a few variants keeps the rest)."""
    if old is None:
        return new
    refreshed = {base.ref for base in new.bases}
    kept = tuple(base for base in old.bases if base.ref not in refreshed)
    return Lock(new.created, tuple(sorted(new.bases + kept, key=lambda base: base.ref)))


def write_lock(lock: Lock, path: Path) -> Path:
    document = {"schema": LOCK_SCHEMA, "created": lock.created,
                "bases": {base.ref: {"digest": base.digest, "resolved_from": base.resolved_from}
                          for base in lock.bases}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return path


MAX_LOCK_BYTES = 16 << 20
"""A lock names each base image once, in about 200 bytes: a few thousand bases stay far below this."""


def read_lock(path: Path) -> Lock:
    """The lock at `path`; a missing or malformed one is an InputError naming the file."""
    try:
        document = untrusted.loads(untrusted.read_limited(path, MAX_LOCK_BYTES))
    except FileNotFoundError:
        raise InputError("lock file not found (create it with --pin)", file=str(path), field="--lock") from None
    except OSError as error:
        raise InputError(f"not a readable lock file: {error.strerror}", file=str(path), field="--lock") from None
    except ValueError as error:
        raise InputError(f"not a readable lock file: {error}", file=str(path), field="--lock") from None
    if not isinstance(document, Mapping) or document.get("schema") != LOCK_SCHEMA \
            or not isinstance(document.get("bases"), Mapping):
        raise InputError(f"not an accel-images lock file (schema {LOCK_SCHEMA} with 'bases')", file=str(path),
                         field="--lock")
    bases = []
    for ref, entry in document["bases"].items():
        digest = entry.get("digest") if isinstance(entry, Mapping) else None
        if not isinstance(digest, str) or not digest.startswith(DIGEST_PREFIX):
            raise InputError(f"base {ref} has no sha256 digest", file=str(path), field="--lock")
        bases.append(PinnedBase(str(ref), digest, str(entry.get("resolved_from", ref))))
    return Lock(str(document.get("created", "")), tuple(bases))


def apply(lock: Lock, variants: Iterable[Variant], lock_path: Path | str = LOCK_FILE) -> tuple[Variant, ...]:
    """The variants with every base replaced by its pinned `repository@digest`."""
    pinned = []
    for variant in variants:
        digest = lock.digest_of(variant.base_image)
        if digest is None:
            raise InputError(f"base image {variant.base_image} of {variant.key} is not in the lock:"
                             " refresh it with --pin", file=str(lock_path), field="--lock")
        pinned.append(replace(variant, base_image=pinned_ref(variant.base_image, digest)))
    return tuple(pinned)


def pin(engine: Puller, variants: Sequence[Variant], mirrors: Sequence[Mirror], path: Path) -> Lock:
    """Resolve the variants' bases now, merge them into the lock at `path` and write it."""
    old = read_lock(path) if path.exists() else None
    lock = merged(old, resolve(engine, (v.base_image for v in variants), mirrors))
    write_lock(lock, path)
    return lock
