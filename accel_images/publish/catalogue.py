"""A registry's catalogue: which images it publishes now, what each promises, and which passed.

`recommend`, `pull`, `run` and `catalogue` with `--registry` choose from this, not from what the
matrix could build: an image is offered only when it is in the registry under its full tag and a
smoke record vouches for that very digest, as the image of the platform the tag lists it under
(accel_images.supply.trust decides per (tag, platform): an index listing a platform twice, or an
image whose record saw another platform, is not offered). Everything is read over the registry HTTP API (tag list,
manifests, config blobs); nothing is pulled.

Two sources, both in the images' own repository:
- each image's labels (`io.accel-images.*`: vendor, stack, torch, Python, OS, flavor, driver floor,
  GPU architectures), read from its config blob, as accel_images.model.variant.Variant.labels wrote them;
  where the smoke record carries the image's facts (what its own torch said it holds at build time),
  those decide instead: its compiled architectures are what `recommend` judges a GPU against;
- one smoke record per image digest: an OCI artifact that `nightly` pushes under the tag
  `sha256-<hex>.smoke` (accel_images.model.tags.record_tag) after the candidate's smoke test passed and
  before any real tag moves. Its annotations say the result, the backend and device it ran on, the
  run and the time, and copy the image's labels (immutable under its digest); its layer is the
  workload's full JSON report. A tag derived from the digest (the
  convention cosign uses for `.sig` and `.att`) means each record is written by the one job that
  tested that digest, so CI's one-job-per-variant fan-out never races on a shared index, and a tag
  moved by hand onto an untested image has no record and is not offered. The manifest also names
  the image as its `subject`, so a registry with the OCI referrers API lists it there too.

Reading costs one tag list, then per image the digest its full tag serves (a HEAD) and the record's
manifest; only an image without a record costs its manifest and config blob instead. Images are
independent, so they are read in a thread pool (the client is thread-safe): with 50 ms added to
every request, 40 images take well under a second instead of 4 (benchmarks/pure_benches.py,
`catalogue`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from accel_images import untrusted, vendors
from accel_images.model import tags
from accel_images.errors import AccelError, IncompatibleError, MalformedAnswer, RegistryError
from accel_images.registry import Artifact, RemoteImage, index_entries, is_index, parse_time
from accel_images.model.imagefacts import ImageFacts
from accel_images.model.platforms import DEFAULT as DEFAULT_PLATFORM
from accel_images.model.variant import LABEL_PREFIX, Variant
from accel_images.plan.variants import make_variant
from accel_images.supply import trust

if TYPE_CHECKING:
    from accel_images.kb.compat import KnowledgeBase
    from accel_images.smoke.judge import SmokeResult

ARTIFACT_TYPE = "application/vnd.accel-images.smoke.v1+json"
RECORD_PREFIX = f"{LABEL_PREFIX}.smoke"
CREATED = "org.opencontainers.image.created"
LABELS_ANNOTATION = f"{RECORD_PREFIX}.labels"
"""The image's own labels, as JSON, copied into its record."""
FACTS_ANNOTATION = f"{RECORD_PREFIX}.facts"
"""What the image's own torch said it holds at build time (/opt/accel-images/facts.json, the compact form:
torch, Python, backend, toolkit, compiled architectures, PTX, companions), as JSON."""
NO_RECORD = "published, but no smoke record vouches for its digest"
READ_WORKERS = 16
"""Concurrent registry reads; registries serve far more, and 16 keeps a 40-image read to 3 rounds."""


class CatalogueRegistry(Protocol):
    """The part of accel_images.registry.RegistryClient the catalogue reads and writes with."""

    host: str

    def tags(self, repository: str, page_size: int = 1000) -> list[str]: ...
    def image(self, repository: str, tag: str) -> RemoteImage | None: ...
    def manifest_digest(self, repository: str, tag: str) -> str | None: ...
    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None: ...
    def descriptor(self, repository: str, reference: str) -> dict[str, Any] | None: ...
    def put_artifact(self, repository: str, tag: str, artifact: Artifact) -> str: ...


@dataclass(frozen=True)
class SmokeRecord:
    """What a smoke record says about one image digest."""

    ok: bool
    ran_on: str
    cpu_mode: bool = False
    device: str = ""
    run_id: str = ""
    checked: datetime | None = None
    facts: Mapping[str, Any] | None = None   # ImageFacts.compact() of the image, where it has facts
    platform: str = DEFAULT_PLATFORM
    """The platform of the image the record is about (records written before platforms say nothing: amd64)."""

    def summary(self) -> str:
        where = self.ran_on + (" (CPU mode)" if self.cpu_mode else "") + (f", {self.device}" if self.device else "")
        return f"{'passed' if self.ok else 'failed'} on {where}"

    def annotations(self) -> dict[str, str]:
        stamp = (self.checked or datetime.now(timezone.utc)).astimezone(timezone.utc)
        facts = {FACTS_ANNOTATION: json.dumps(self.facts, sort_keys=True)} if self.facts is not None else {}
        return {f"{RECORD_PREFIX}.ok": "true" if self.ok else "false", f"{RECORD_PREFIX}.ran-on": self.ran_on,
                f"{RECORD_PREFIX}.cpu-mode": "true" if self.cpu_mode else "false",
                f"{RECORD_PREFIX}.device": self.device, f"{RECORD_PREFIX}.run": self.run_id,
                f"{RECORD_PREFIX}.platform": self.platform, CREATED: stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), **facts}

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> SmokeRecord | None:
        """None unless the annotations are a smoke record's."""
        if f"{RECORD_PREFIX}.ok" not in annotations:
            return None
        return cls(ok=annotations[f"{RECORD_PREFIX}.ok"] == "true",
                   ran_on=annotations.get(f"{RECORD_PREFIX}.ran-on", "") or "unknown",
                   cpu_mode=annotations.get(f"{RECORD_PREFIX}.cpu-mode") == "true",
                   device=annotations.get(f"{RECORD_PREFIX}.device", ""),
                   run_id=annotations.get(f"{RECORD_PREFIX}.run", ""), checked=parse_time(annotations.get(CREATED)),
                   facts=_facts(annotations.get(FACTS_ANNOTATION)),
                   platform=annotations.get(f"{RECORD_PREFIX}.platform") or DEFAULT_PLATFORM)


@dataclass(frozen=True)
class Entry:
    """One image the registry publishes under its full tag."""

    tag: str
    digest: str
    labels: Mapping[str, str]
    created: datetime | None = None
    smoke: SmokeRecord | None = None
    platform: str = DEFAULT_PLATFORM
    """The image's platform: one manifest of the tag's index (or the tag's only image)."""
    index: str | None = None
    """The digest of the image index the full tag points at; None when it points at this image alone."""
    platforms: tuple[str, ...] = (DEFAULT_PLATFORM,)
    """Every platform the tag's index lists."""
    copies: int = 1
    """How many entries of the tag's index list this entry's platform (a second one is never trusted)."""

    def label(self, name: str) -> str:
        return self.labels.get(f"{LABEL_PREFIX}.{name}", "")

    @property
    def facts(self) -> ImageFacts | None:
        """What the image's torch said it holds, from its smoke record; None for an image without facts."""
        return ImageFacts.from_compact(self.smoke.facts) if self.smoke is not None and self.smoke.facts else None

    def holds(self) -> str:
        """What the catalogue's table says the image holds: '2.15.0+cu132 sm_75..sm_120 torchvision 0.29.2',
        'without torchvision'; '-' when the image published neither facts nor a left-out companion."""
        facts, parts = self.facts, []
        if facts is not None:
            parts.append(facts.torch)
            if facts.archs:
                parts.append(facts.archs[0] if len(facts.archs) == 1 else f"{facts.archs[0]}..{facts.archs[-1]}")
            parts += [f"{name} {version}" for name, version in sorted(facts.companions.items()) if name != "numpy"]
        if self.without_companions:
            parts.append(f"without {', '.join(self.without_companions)}")
        return " ".join(parts) or "-"

    @property
    def without_companions(self) -> list[str]:
        """Companions the image was built without on purpose (its io.accel-images.without-companions label)."""
        return [name for name in self.label("without-companions").split(",") if name]

    @property
    def gpu_archs(self) -> tuple[str, ...]:
        """The compiled GPU targets: from the image's facts where published, else from its label."""
        facts, vendor = self.facts, self.label("vendor")
        measured = vendors.get(vendor).archs_of(facts) if facts is not None and vendor in vendors.names() else None
        return measured if measured is not None else tuple(a for a in self.label("gpu-archs").split(",") if a)

    @property
    def offered(self) -> bool:
        return self.why_not is None

    @property
    def why_not(self) -> str | None:
        """Why the image is not offered; None when it is: accel_images.supply.trust's decision for this (tag,
        platform), its smoke record the evidence."""
        return trust.distrust(trust.Listed(self.platform, self.digest, self.copies), self.evidence())

    def evidence(self) -> trust.Evidence:
        """What vouches for the image: its smoke record, and the platform the record says it tested."""
        if self.smoke is None:
            return trust.Evidence(False, "", NO_RECORD)
        return trust.Evidence(self.smoke.ok, self.smoke.platform, f"its smoke test {self.smoke.summary()}",
                              "its smoke record")

    def record(self) -> dict[str, object]:
        """As `catalogue --json` prints it."""
        smoke = self.smoke
        return {"tag": self.tag, "digest": self.digest, "platform": self.platform, "index": self.index,
                "platforms": list(self.platforms), "vendor": self.label("vendor"),
                "stack": self.label("stack") or None, "torch": self.label("torch"), "python": self.label("python"),
                "os": self.label("os"), "flavor": self.label("flavor"), "min_driver": self.label("mvc-driver")
                or self.label("min-driver") or None, "gpu_archs": list(self.gpu_archs),
                "created": self.created.isoformat() if self.created else None, "offered": self.offered,
                "why_not": self.why_not, "facts": dict(smoke.facts) if smoke is not None and smoke.facts else None,
                "without_companions": self.without_companions,
                "smoke": None if smoke is None else {
                    "ok": smoke.ok, "ran_on": smoke.ran_on, "cpu_mode": smoke.cpu_mode, "device": smoke.device,
                    "run_id": smoke.run_id, "checked": smoke.checked.isoformat() if smoke.checked else None}}


@dataclass(frozen=True)
class Catalogue:
    """What one repository of one registry publishes, newest first."""

    host: str
    repository: str
    entries: tuple[Entry, ...]
    unreadable: tuple[str, ...] = ()
    """`TAG: why` for each image under a full tag whose manifest or config the registry serves malformed."""

    @property
    def where(self) -> str:
        return f"{self.host}/{self.repository}"

    def offered(self) -> tuple[Entry, ...]:
        return tuple(entry for entry in self.entries if entry.offered)

    def nothing_published(self, hint: str) -> IncompatibleError:
        """What `catalogue`, `recommend`, `pull` and `run` answer alike for a repository without an
        accel-images image (most often a mistyped namespace or --image): exit 1, with the way out."""
        return IncompatibleError(f"registry {self.where} publishes no accel-images image", hint=hint)


CATALOGUE_COLUMNS = (("tag", 11), ("platform", 10), ("torch", 7), ("stack", 6), ("python", 5), ("os", 4), ("driver", 3),
                     ("archs", 1), ("holds", 2), ("smoke", 8), ("offered", 9), ("built", 0))
"""The catalogue's table: the labels README promises, what the image's torch holds (its facts), then the
smoke result and the verdict; with the rank of each on a narrow page (accel_images.formatting.fit_widths:
the lowest goes first)."""


def table_row(entry: Entry) -> tuple[str, ...]:
    """One image as `catalogue` shows it, in CATALOGUE_COLUMNS' order; '-' for a label it lacks."""
    floor = entry.label("mvc-driver") or entry.label("min-driver")
    return (entry.tag, entry.platform, entry.label("torch") or "-", entry.label("stack") or "-",
            entry.label("python") or "-", entry.label("os") or "-", f">= {floor}" if floor else "-",
            entry.label("gpu-archs").replace(",", " ") or "-", entry.holds(),
            entry.smoke.summary() if entry.smoke else "no smoke record", "yes" if entry.offered else "no",
            entry.created.strftime("%Y-%m-%d") if entry.created else "-")


def read_catalogue(registry: CatalogueRegistry, repository: str, workers: int = READ_WORKERS) -> Catalogue:
    """Every image published under a full tag in `repository`, with its labels and smoke record.

    Tags that are not full tags (aliases, dated, candidates, records) are not read: each image has
    exactly one full tag, and its labels name it. An image without accel-images labels is left out;
    so is one the registry serves malformed (its tag and why in `unreadable`), and a malformed smoke
    record vouches for nothing. A registry out of reach still fails the whole read.
    A tag that is an image index gives one entry per platform, each with its own digest and smoke
    record (the nightly tests and records every platform's image by itself).
    """
    found = registry.tags(repository)
    records = {tag for tag in found if tag.endswith(tags.RECORD_SUFFIX)}
    full = [tag for tag in found if tags.is_full_tag(tag)]

    def one(tag: str) -> list[Entry] | str:
        try:
            return _entries(tag)
        except MalformedAnswer as error:
            return f"{tag}: {error.message}"

    def _entries(tag: str) -> list[Entry]:
        top = registry.manifest(repository, tag)
        if top is None:
            return []
        digest, manifest = top
        if is_index(manifest):
            listed = trust.listed(index_entries(manifest, f"{registry.host}/{repository}:{tag}"))
            platforms = tuple(dict.fromkeys(image.platform for image in listed))
            found = [_entry(registry, repository, records, tag, image.digest, image.platform, digest, platforms,
                            image.copies) for image in listed]
            return [entry for entry in found if entry is not None]
        single = _entry(registry, repository, records, tag, digest, None, None, ())
        return [single] if single is not None else []

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(full) or 1))) as pool:
        read = list(pool.map(one, full))
    entries = [entry for found in read if not isinstance(found, str) for entry in found]
    return Catalogue(registry.host, repository, tuple(sorted(entries, key=_newest_first)),
                     tuple(entry for entry in read if isinstance(entry, str)))


def _entry(registry: CatalogueRegistry, repository: str, records: set[str], tag: str, digest: str,
           platform: str | None, index: str | None, platforms: tuple[str, ...], copies: int = 1) -> Entry | None:
    """The entry of one image (`digest`) published under `tag`: from its smoke record when it has one
    for this tag, else from its own config. Its platform is the one the index lists it under (what a
    host of that platform pulls); whether the record saw that platform is Entry.why_not's question."""
    record = _record_or_none(registry, repository, tags.record_tag(digest)) \
        if tags.record_tag(digest) in records else None
    if record is not None and record[1].get(f"{LABEL_PREFIX}.tag") == tag:
        labels, found_platform = record[1], record[0].platform
    else:  # no record (or not one for this tag): the image's own config says what it is
        image = registry.image(repository, digest)
        if image is None:
            return None
        labels, record, found_platform = dict(image.labels), None, image.platform or DEFAULT_PLATFORM
    if labels.get(f"{LABEL_PREFIX}.tag") != tag:
        return None
    platform = platform or found_platform
    return Entry(tag, digest, labels, parse_time(labels.get(CREATED)), record[0] if record else None,
                 platform, index, platforms or (platform,), copies)


def _record_or_none(registry: CatalogueRegistry, repository: str,
                    record_tag: str) -> tuple[SmokeRecord, dict[str, str]] | None:
    """read_record, with a record the registry serves malformed counted as none: it vouches for nothing."""
    try:
        return read_record(registry, repository, record_tag)
    except MalformedAnswer:
        return None


def read_record(registry: CatalogueRegistry, repository: str,
                record_tag: str) -> tuple[SmokeRecord, dict[str, str]] | None:
    """The smoke record under `record_tag`, and the labels of the image it vouches for."""
    found = registry.manifest(repository, record_tag)
    if found is None or found[1].get("artifactType") != ARTIFACT_TYPE:
        return None
    annotations = found[1].get("annotations") or {}
    record = SmokeRecord.from_annotations(annotations)
    try:
        labels = untrusted.loads(annotations.get(LABELS_ANNOTATION, "{}"))
    except ValueError:  # not JSON, or nested past any sane depth: the record vouches for nothing
        return None
    if record is None or not isinstance(labels, dict):
        return None
    return record, {str(key): str(value) for key, value in labels.items()}


def write_record(registry: CatalogueRegistry, repository: str, digest: str, smoke: SmokeResult,
                 run_id: str, now: datetime | None = None) -> str:
    """Push the smoke record of image `digest` (the smoke-tested candidate's); the record's digest.

    The record carries a copy of the image's labels, read from its config now: they can never change
    under the digest, and a reader then needs the record alone, not the config blob too.
    """
    image = registry.image(repository, digest)
    if image is None:
        raise RegistryError(f"registry {registry.host} lacks {repository}@{digest}, whose smoke record this is")
    raw = smoke.raw or {}
    facts = smoke.facts.compact() if smoke.facts is not None else None
    record = SmokeRecord(ok=smoke.ok, ran_on=smoke.ran_on or "unknown", cpu_mode=smoke.cpu_fallback,
                         device=str(raw.get("device_name") or raw.get("device") or ""), run_id=run_id,
                         checked=now or datetime.now(timezone.utc), facts=facts,
                         platform=image.platform or DEFAULT_PLATFORM)
    labels = {key: value for key, value in image.labels.items() if key.startswith(f"{LABEL_PREFIX}.")
              or key == CREATED}
    annotations = {**record.annotations(), LABELS_ANNOTATION: json.dumps(labels, sort_keys=True)}
    payload = json.dumps({"image": digest, "smoke": raw, "failures": list(smoke.failures), "facts": facts},
                         sort_keys=True).encode()
    artifact = Artifact(ARTIFACT_TYPE, payload, "application/json", annotations,
                        registry.descriptor(repository, digest))
    return registry.put_artifact(repository, tags.record_tag(digest), artifact)


def variant_of(entry: Entry, kb: KnowledgeBase) -> Variant | None:
    """The Variant an image's labels describe: the knowledge base's facts for it, with the driver floor
    and GPU architectures the image itself carries. An image the installed knowledge base does not
    know (built by a newer accel-images) is described from its labels alone; an unknown vendor: None."""
    vendor, stack = entry.label("vendor"), entry.label("stack") or None
    if vendor not in vendors.names():
        return None
    axes = (entry.label("torch"), entry.label("python"), entry.label("os"), entry.label("flavor") or "runtime")
    try:
        variant = make_variant(kb, vendor, stack, *axes, platform=entry.platform)
    except (AccelError, KeyError, ValueError, LookupError):
        variant = None
    if variant is None or variant.tag != entry.tag:
        variant = Variant(vendor=vendor, stack=stack, torch=axes[0], python=axes[1], os=axes[2], flavor=axes[3],
                          base_image=entry.labels.get("org.opencontainers.image.base.name", ""), toolkit=stack)
    return replace(variant, min_driver=entry.label("min-driver") or None, mvc_driver=entry.label("mvc-driver") or None,
                   gpu_archs=entry.gpu_archs, platform=entry.platform, platforms=entry.platforms)


def _facts(text: str | None) -> Mapping[str, Any] | None:
    """A record's facts annotation; None when absent or not the compact facts (a damaged one counts as none)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and ImageFacts.from_compact(value) is not None else None


def _newest_first(entry: Entry) -> tuple[Any, ...]:
    from accel_images.versions import newest_first
    return (vendors.rank(entry.label("vendor")) if entry.label("vendor") in vendors.names() else 99,
            newest_first(entry.label("torch")), newest_first(entry.label("stack")),
            newest_first(entry.label("python")), entry.tag, entry.platform)
