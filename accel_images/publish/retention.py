"""Dated-tag retention: each nightly adds `<full tag>-YYYYMMDD`; this module decides which go.

The policy keeps, for every full tag, its `keep` newest dated tags, and with `keep_days` also
every dated tag younger than that; the rest are pruned. A dated tag is never pruned while it
shares its digest with a tag users name directly (a full tag, a floating alias, any tag that
is not dated and not a candidate), or while a lock file names it or its digest: deleting the
tag would not free the image then, and someone relies on that exact digest. Deletion goes
through RegistryClient.delete_tag, which points the tag at a tombstone of its own first, so
no other tag on the same digest moves. The decision (`plan`) is pure; `prune` carries it out,
or only reports it for a dry run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Callable, Iterable, Mapping, Sequence

from accel_images import stopping, untrusted
from accel_images.errors import AccelError, InputError
from accel_images.registry import index_entries, is_index

DEFAULT_KEEP_DATED = 7
"""A week of nightlies that changed something: enough to roll back past a bad week."""

MAX_PINNED_BYTES = 16 << 20
"""A file --keep-pinned reads (a lock, a deployment manifest naming digests): large, but not endless."""

DATED_TAG = re.compile(r"^(?P<full>.+)-(?P<day>\d{8})$")
CANDIDATE_MARK = "-candidate-"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep the `keep` newest dated tags of each full tag, and any younger than `keep_days`."""

    keep: int = DEFAULT_KEEP_DATED
    keep_days: float | None = None

    def __post_init__(self) -> None:
        if self.keep < 0 or (self.keep_days is not None and self.keep_days < 0):
            raise InputError("retention counts and days must not be negative", field="--keep-dated")


@dataclass(frozen=True)
class Decision:
    """One dated tag and what the policy does with it, with the reason people read."""

    tag: str
    digest: str | None
    prune: bool
    reason: str


@dataclass(frozen=True)
class Pinned:
    """What lock files name: tags and digests that must stay."""

    tags: frozenset[str] = frozenset()
    digests: frozenset[str] = frozenset()

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> Pinned:
        """Every sha256 digest and every word that looks like a dated tag, in any text format."""
        tags: set[str] = set()
        digests: set[str] = set()
        for path in paths:
            try:
                text = untrusted.read_limited(path, MAX_PINNED_BYTES).decode("utf-8", errors="replace")
            except OSError as error:
                raise InputError(f"cannot read the lock file: {error.strerror}", file=str(path)) from None
            digests.update(DIGEST.findall(text))
            tags.update(word for word in re.findall(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", text) if DATED_TAG.match(word))
        return cls(frozenset(tags), frozenset(digests))


def dated_day(tag: str) -> tuple[str, date] | None:
    """(`full tag`, day) of a dated tag; None for any other tag (candidates included)."""
    found = DATED_TAG.match(tag)
    if found is None or CANDIDATE_MARK in tag:
        return None
    try:
        return found["full"], datetime.strptime(found["day"], "%Y%m%d").date()
    except ValueError:
        return None


def plan(digests: Mapping[str, str | None], policy: RetentionPolicy, today: date,
         pinned: Pinned = Pinned(), children: Mapping[str, tuple[str, ...]] | None = None) -> list[Decision]:
    """A decision for every dated tag in `digests` (tag -> manifest digest), newest first per full tag.

    `children` maps an image index's digest to the digests of the images it lists: a lock file that
    pins one platform's image (`image@sha256:<the arm64 manifest>`) keeps the dated index holding it."""
    protected = {digest for tag, digest in digests.items()
                 if digest and dated_day(tag) is None and CANDIDATE_MARK not in tag} | pinned.digests
    protected |= {index for index, images in (children or {}).items() if set(images) & pinned.digests}
    groups: dict[str, list[tuple[date, str]]] = {}
    for tag in digests:
        parsed = dated_day(tag)
        if parsed is not None:
            groups.setdefault(parsed[0], []).append((parsed[1], tag))
    decisions: list[Decision] = []
    for full in sorted(groups):
        for rank, (day, tag) in enumerate(sorted(groups[full], reverse=True)):
            decisions.append(_decide(tag, digests[tag], rank, today - day, policy, protected, pinned))
    return decisions


def _decide(tag: str, digest: str | None, rank: int, age: timedelta, policy: RetentionPolicy,
            protected: set[str], pinned: Pinned) -> Decision:
    if rank < policy.keep:
        return Decision(tag, digest, False, f"one of the {policy.keep} newest")
    if policy.keep_days is not None and age <= timedelta(days=policy.keep_days):
        return Decision(tag, digest, False, f"younger than {policy.keep_days:g} days")
    if tag in pinned.tags:
        return Decision(tag, digest, False, "named in a lock file")
    if digest in protected:
        return Decision(tag, digest, False, "its image is still served under another tag or pinned")
    return Decision(tag, digest, True, f"older than the {policy.keep} newest")


class TagRegistry(Protocol):
    """The part of accel_images.registry.RegistryClient retention uses."""

    def tags(self, repository: str) -> list[str]: ...

    def manifest_digest(self, repository: str, tag: str) -> str | None: ...

    def delete_tag(self, repository: str, tag: str) -> bool: ...

    def check_deletes(self, repository: str) -> None: ...
    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None: ...


@dataclass(frozen=True)
class Pruning:
    """What a retention pass did (or, in a dry run, would do)."""

    decisions: tuple[Decision, ...]
    dry_run: bool
    deleted: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    interrupted: bool = False        # Ctrl-C or SIGTERM before every delete was done

    @property
    def pruned(self) -> tuple[str, ...]:
        """The tags the policy removes: deleted, or in a dry run those that would be."""
        return tuple(d.tag for d in self.decisions if d.prune) if self.dry_run else self.deleted


def prune(registry: TagRegistry, repository: str, policy: RetentionPolicy, today: date, *,
          pinned: Pinned = Pinned(), dry_run: bool = False, only: Callable[[str], bool] = lambda full: True,
          say: Callable[[str], None] = lambda line: None) -> Pruning:
    """Apply the policy to the dated tags of `repository` whose full tag `only` accepts.

    A failed delete is recorded and the pass goes on: one stubborn tag must not keep the
    others. Every digest is read before anything is deleted, so the protection is judged
    on the registry as it was. A registry (or token) that cannot delete is found out before
    the first tag is touched, and raised: the pass is not applied at all.
    """
    names = [tag for tag in registry.tags(repository) if _in_scope(tag, only)]
    digests = {tag: registry.manifest_digest(repository, tag) for tag in names}
    decisions = tuple(plan(digests, policy, today, pinned, _children(registry, repository, digests, pinned)))
    if not dry_run and any(d.prune for d in decisions):
        registry.check_deletes(repository)
    deleted: list[str] = []
    errors: list[str] = []
    try:
        for decision in (d for d in decisions if d.prune):
            if dry_run:
                say(f"would prune {repository}:{decision.tag} ({decision.reason})")
                continue
            try:
                # A stop waits for the delete under way: it points the tag at a tombstone first.
                stopping.finish_in_flight(lambda: registry.delete_tag(repository, decision.tag))
            except AccelError as error:
                errors.append(f"{decision.tag}: {error.one_line()}")
                continue
            deleted.append(decision.tag)
            say(f"pruned {repository}:{decision.tag} ({decision.reason})")
    except KeyboardInterrupt as interrupt:
        setattr(interrupt, _STOPPED, Pruning(decisions, dry_run, tuple(deleted), tuple(errors), interrupted=True))
        raise
    return Pruning(decisions, dry_run, tuple(deleted), tuple(errors))


def _children(registry: TagRegistry, repository: str, digests: Mapping[str, str | None],
              pinned: Pinned) -> dict[str, tuple[str, ...]]:
    """The images each dated image index lists, read only when a lock file pins some digest."""
    if not pinned.digests:
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for tag, digest in digests.items():
        if digest is None or digest in found or dated_day(tag) is None:
            continue
        manifest = registry.manifest(repository, digest)
        if manifest is not None and is_index(manifest[1]):
            found[digest] = tuple(entry.digest for entry in index_entries(manifest[1], f"{repository}@{digest}"))
    return found


_STOPPED = "accel_images_pruning"


def stopped_pruning(interrupt: BaseException) -> Pruning | str:
    """What a retention pass this interrupt stopped had done; a line saying so when it had not begun deleting."""
    found = getattr(interrupt, _STOPPED, None)
    return found if isinstance(found, Pruning) else "interrupted before any tag was deleted"


def _in_scope(tag: str, only: Callable[[str], bool]) -> bool:
    """Every undated tag (it may protect a digest); a dated tag when its full tag is in scope."""
    parsed = dated_day(tag)
    return parsed is None or only(parsed[0])


def pruned_lines(pruning: Pruning) -> Sequence[str]:
    """One line per pruned tag, for the command's output and the Markdown report."""
    verb = "would prune" if pruning.dry_run else "pruned"
    return [f"{verb} {d.tag} ({d.reason})" for d in pruning.decisions if d.prune and
            (pruning.dry_run or d.tag in pruning.deleted)]
