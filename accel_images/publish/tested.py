"""Which digests this tool smoke-tested, kept in the registry beside the images it published.

The fingerprint label on an image says what it was built from, not that it passed anything:
an image pushed by hand under a variant's full tag can carry a copied label and broken content.
So a nightly skips an unchanged image, and moves floating aliases onto it, only when the full
tag points at a digest this record lists; anything else is rebuilt and smoke-tested.

The record of a variant is a config-only image under `<full tag>-tested` (accel_images.model.tags)
whose label `io.accel-images.tested` holds JSON: the last few smoke-tested digests, newest
first, each with the day of the run that tested it (the day of its dated tag) and the run id.
It lives in the registry rather than in the state directory because nightly runs fan out over
CI runners that share nothing but the registry. It is written after the candidate's smoke test
passed and before any real tag moves, so every digest a real tag was ever promoted to is in it.

Trust boundary: the record is as strong as the registry's push permission. It stops an image
that reached the full tag some other way (a hand push, another tool, a half-finished run) from
being trusted; someone who can push may also forge the record, which no label can prevent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from accel_images import untrusted
from accel_images.registry import RemoteImage

RECORD_LABEL = "io.accel-images.tested"
KEEP = 8
"""Digests kept per variant: enough to put a tag back on any image of the last week of runs."""

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")


class RecordStore(Protocol):
    """The part of accel_images.registry.RegistryClient the record needs."""

    def image(self, repository: str, tag: str) -> RemoteImage | None: ...

    def put_labels_image(self, repository: str, tag: str, labels: dict[str, str]) -> str: ...


@dataclass(frozen=True)
class SmokedDigest:
    digest: str
    day: date
    run_id: str


@dataclass(frozen=True)
class SmokedRecord:
    """The smoke-tested digests of one variant, newest first."""

    entries: tuple[SmokedDigest, ...] = ()

    def find(self, digest: str | None) -> SmokedDigest | None:
        return next((entry for entry in self.entries if entry.digest == digest), None)

    def adding(self, entry: SmokedDigest) -> SmokedRecord:
        kept = tuple(e for e in self.entries if e.digest != entry.digest)
        return SmokedRecord((entry, *kept)[:KEEP])

    def labels(self) -> dict[str, str]:
        return {RECORD_LABEL: json.dumps([{"digest": e.digest, "day": f"{e.day:%Y%m%d}", "run": e.run_id}
                                          for e in self.entries], separators=(",", ":"))}

    @classmethod
    def from_labels(cls, labels: object) -> SmokedRecord:
        """The record a label holds; an absent or malformed one lists nothing (so nothing is trusted)."""
        text = labels.get(RECORD_LABEL) if isinstance(labels, dict) else None
        try:
            items = untrusted.loads(text) if isinstance(text, str) else []
        except ValueError:
            return cls()
        entries = []
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            digest, day, run = item.get("digest"), item.get("day"), item.get("run")
            if not (isinstance(digest, str) and _DIGEST.match(digest) and isinstance(day, str)
                    and isinstance(run, str)):
                continue
            try:
                entries.append(SmokedDigest(digest, datetime.strptime(day, "%Y%m%d").date(), run))
            except ValueError:
                continue
        return cls(tuple(entries[:KEEP]))


def read_record(store: RecordStore, repository: str, tag: str) -> SmokedRecord:
    """The record under `tag` (accel_images.model.tags.tested_tag); empty when there is none."""
    found = store.image(repository, tag)
    return SmokedRecord.from_labels(dict(found.labels)) if found is not None else SmokedRecord()


def write_record(store: RecordStore, repository: str, tag: str, record: SmokedRecord) -> None:
    store.put_labels_image(repository, tag, record.labels())


def untested_reason(tag: str, digest: str, record: SmokedRecord) -> str:
    """Why an image with the right fingerprint is rebuilt all the same."""
    last = f"; last tested: {record.entries[0].digest[:19]}" if record.entries else "; no smoke-tested digest recorded"
    return f"{tag} points at {digest[:19]}, which this tool never smoke-tested{last}"
