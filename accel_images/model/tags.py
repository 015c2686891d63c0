"""The tag scheme, in one place.

Full tag (immutable):  `<torch>-<vendor><stack>-py<python>-<os>[-<flavor>]`,
                       e.g. `2.14.0-cuda13.2-py3.12-ubuntu24.04`, `2.13.0-cpu-py3.11-debian12`;
                       the runtime flavor carries no suffix, others do (`-devel`).
Dated tag (nightly):   `<full>-YYYYMMDD`.
Candidate tag:         `<full>-candidate-<run id>`: pushed before the smoke test, never pulled by users.
Smoke record:          `sha256-<digest hex>.smoke`: the smoke result of one image digest
                       (accel_images.publish.catalogue).
Tested record:         `<full>-tested`: the digests this tool smoke-tested for the full tag
                       (accel_images.publish.tested); a config-only image, never pulled by users.
Floating aliases:      `<torch minor>-<vendor><stack>`, `<torch minor>-<vendor>`, `latest-<vendor>`
                       (each with the flavor suffix), given to the preferred variant of its group:
                       newest torch, newest stack, newest Python, newest OS.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Protocol, TypeVar
from collections.abc import Iterable


class Tagged(Protocol):
    """What the tag scheme reads of an image (accel_images.model.variant.Variant is one); a protocol,
    so the scheme needs nothing from the module that builds on it."""

    @property
    def vendor(self) -> str: ...
    @property
    def stack(self) -> str | None: ...
    @property
    def torch(self) -> str: ...
    @property
    def python(self) -> str: ...
    @property
    def os(self) -> str: ...
    @property
    def flavor(self) -> str: ...
    @property
    def torch_minor(self) -> str: ...
    def sort_key(self) -> tuple[Any, ...]: ...


TaggedT = TypeVar("TaggedT", bound=Tagged)

TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
FULL_TAG_RE = re.compile(r"^\d+\.\d+\.\d+-[a-z]+[0-9.]*-py\d+\.\d+-[a-z]+[0-9.]+(-(?!tested\Z)[a-z]+)?\Z")
"""What full_tag() writes, and neither a dated, a candidate, a tested record (tested_tag) nor an alias tag."""
RECORD_SUFFIX = ".smoke"


def is_full_tag(tag: str) -> bool:
    """Whether a tag found in a registry is a variant's full tag (the one each image has exactly once)."""
    return FULL_TAG_RE.match(tag) is not None


def vendor_in_tag(tag: str) -> str | None:
    """The vendor part of a full tag (`2.14.0-cuda13.2-py3.12-...` -> `cuda`); None for any other tag."""
    if not is_full_tag(tag):
        return None
    return re.match(r"^[^-]+-([a-z]+)", tag).group(1)  # type: ignore[union-attr]  # FULL_TAG_RE matched


def record_tag(digest: str) -> str:
    """`sha256:<hex>` -> `sha256-<hex>.smoke`: a tag derived from the digest it speaks for, as cosign
    names its signature (`.sig`) and attestation (`.att`) tags."""
    return digest.replace(":", "-", 1) + RECORD_SUFFIX


def _suffix(variant: Tagged) -> str:
    return "" if variant.flavor == "runtime" else f"-{variant.flavor}"


def full_tag(variant: Tagged) -> str:
    stack = variant.stack or ""
    return f"{variant.torch}-{variant.vendor}{stack}-py{variant.python}-{variant.os}{_suffix(variant)}"


def dated_tag(variant: Tagged, day: _dt.date) -> str:
    return f"{full_tag(variant)}-{day:%Y%m%d}"


def candidate_tag(variant: Tagged, run_id: str) -> str:
    return f"{full_tag(variant)}-candidate-{run_id}"


CANDIDATE_RE = re.compile(r"^(?P<full>.+)-candidate-(?P<run>\d{8}T\d{6}-[0-9a-f]+)\Z")
"""A candidate tag and its parts; the run id starts with its UTC start time
(accel_images.publish.nightly.new_run_id)."""


def tested_tag(variant: Tagged) -> str:
    return f"{full_tag(variant)}-tested"


def alias_groups(variant: Tagged) -> tuple[str, ...]:
    """The floating aliases this variant competes for."""
    minor, vendor, suffix = variant.torch_minor, variant.vendor, _suffix(variant)
    stacked = f"{minor}-{vendor}{variant.stack}{suffix}" if variant.stack else None
    names = [stacked, f"{minor}-{vendor}{suffix}", f"latest-{vendor}{suffix}"]
    return tuple(n for n in names if n)


def aliases(variants: Iterable[TaggedT]) -> dict[str, TaggedT]:
    """Map every floating alias to the variant that wears it (the newest of its group)."""
    winners: dict[str, TaggedT] = {}
    for variant in sorted(variants, key=lambda v: v.sort_key(), reverse=True):
        for alias in alias_groups(variant):
            winners[alias] = variant  # later (= newer, by sort_key) wins
    return winners


def aliases_of(variant: TaggedT, variants: Iterable[TaggedT]) -> tuple[str, ...]:
    """The floating aliases the variant's tag wears (the same for every platform of its index)."""
    return tuple(sorted(a for a, v in aliases(variants).items() if full_tag(v) == full_tag(variant)))


DATED_SUFFIX_RE = re.compile(r"^-\d{8}\Z")


def wears(tag: str, variant: Tagged) -> bool:
    """Whether `tag` is one the variant's image may be published under: its full tag, a dated tag of it,
    or a floating alias its group competes for (which image of the group wears an alias now is the
    matrix's call, not the tag's)."""
    full = full_tag(variant)
    dated = tag.startswith(full) and DATED_SUFFIX_RE.match(tag[len(full):]) is not None
    return tag == full or dated or tag in alias_groups(variant)


def all_tags(variant: TaggedT, variants: Iterable[TaggedT], day: _dt.date) -> tuple[str, ...]:
    """Every real tag a green build of this variant is promoted to."""
    return (full_tag(variant), dated_tag(variant, day), *aliases_of(variant, variants))
