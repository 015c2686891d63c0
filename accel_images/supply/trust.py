"""Whether one image a tag serves is to be trusted as that tag's image of one platform.

A tag is one image, or an OCI image index that lists one image per platform; `docker pull` on a
host takes the first entry of the host's platform. Every reader that decides trust decides it per
(tag, platform), here: `verify` (its evidence: the signed provenance, accel_images.supply.verify),
`catalogue` and so `recommend`, `pull` and `run` (the smoke record, accel_images.publish.catalogue),
and the nightly before it keeps, skips or carries an image into a new index
(accel_images.publish.nightly). Whatever the evidence says, an image is not trusted as the tag's
image of a platform when

- the index lists that platform more than once: the client pulls the first entry, while a reader
  that kept one verdict per platform may have judged another (a hand-pushed image listed first, the
  genuine one after it);
- the evidence saw another platform than the one the index lists it under: an amd64 image listed as
  linux/arm64 is pulled by arm64 hosts and dies there with `exec format error`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from accel_images.registry import IndexEntry


@dataclass(frozen=True)
class Listed:
    """One image as a tag serves it: the platform it is listed under, its digest, and how many entries
    of the tag's index name that platform (1 for a tag that is one image)."""

    platform: str
    digest: str
    copies: int = 1


@dataclass(frozen=True)
class Evidence:
    """What vouches for one image: whether the check passed (a signed provenance, a smoke record), the
    platform it saw the image as, and why it did not pass."""

    ok: bool
    platform: str
    reason: str = ""
    what: str = "the evidence"
    """How a message names the evidence: 'its signed provenance', 'its smoke record'."""


def listed(entries: Sequence[IndexEntry]) -> tuple[Listed, ...]:
    """Every entry of an index as a Listed image, in the index's order, each knowing how many entries
    share its platform: a duplicate is never collapsed into one verdict."""
    counts = Counter(entry.platform for entry in entries)
    return tuple(Listed(entry.platform, entry.digest, counts[entry.platform]) for entry in entries)


def distrust(image: Listed, evidence: Evidence) -> str | None:
    """Why `image` is not to be trusted as its tag's image of `image.platform`, in one line; None when it is.

    The listing is judged before the evidence, so a duplicated platform fails whatever vouches for
    either of its images."""
    if image.copies > 1:
        return duplicated(image.platform, image.copies)
    if not evidence.ok:
        return evidence.reason
    return other_platform(image.platform, evidence.platform, evidence.what)


def duplicated(platform: str, copies: int) -> str:
    """The refusal of an index that lists a platform more than once."""
    return (f"the index lists {platform} {copies} times: a client pulls the first entry, which need not be the"
            " one vouched for")


def other_platform(listed_as: str, seen: str, what: str) -> str | None:
    """The refusal of an image whose evidence is about another platform than the one it is listed under."""
    if seen == listed_as:
        return None
    shown = seen if seen.isprintable() and len(seen) <= 40 else repr(seen[:40])
    return f"the index lists this image as {listed_as}, but {what} is about a '{shown}' image"
