"""The nightly rebuild: rebuild only what changed, publish only what passed.

For every variant: render its context and resolve its base with pull policy `always` (so a
base image that moved under its tag is seen), fingerprint the result, and compare it with
the fingerprint label of the image the registry serves under the variant's full tag. An
unchanged image younger than the maximum age is skipped only when its digest is one this tool
smoke-tested (accel_images.publish.tested: a label can be copied onto anything), and then every other
real tag of it is healed onto that digest (the floating aliases the matrix now gives it, the
dated tag a killed run left behind); an unchanged image past that age is rebuilt
without the layer cache; anything else is built, or taken from a fresh local build with the
same fingerprint that this state directory recorded building, then pushed as a candidate,
smoke-tested, given its SBOM and provenance (accel_images.supply), recorded
(accel_images.publish.tested, and the catalogue's smoke record, accel_images.publish.catalogue)
and promoted (accel_images.publish.promote). A rebuild for age alone whose layers equal the
published ones (the layers are reproducible: templates/partials/reproducible.j2) pushes nothing
and keeps the published digest, so users download nothing and the registry stores nothing new;
like a skip, that needs the published digest to be one this tool smoke-tested (and, with a
key, one that verifies). One variant's failure never stops the others; the caller turns the
outcomes into reports and an exit code.

With a signing key, "unchanged" also means "verifies": an image under the full tag whose
digest has no provenance signed by that key (say, one pushed by hand with a copied
fingerprint label and a forged tested record) is rebuilt, never skipped, and floating aliases
only move onto digests that verify.
"""

from __future__ import annotations

import logging
import json
import uuid
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping, Sequence

from securesystemslib.signer import CryptoSigner

from accel_images import untrusted
from accel_images.publish import catalogue, index
from accel_images.model import tags
from accel_images.builder.builder import BASE_DIGEST_LABEL, CREATED_LABEL, Builder, Prepared, smoke_image
from accel_images.kb.compat import KnowledgeBase
from accel_images.builder.engine import Engine
from accel_images.errors import AccelError, RegistryError
from accel_images.builder.fingerprint import FINGERPRINT_LABEL, load_digest_cache, save_digest_cache
from accel_images.formatting import human_size
from accel_images.builder.outcome import Outcome, outcome_record, smoke_text
from accel_images.publish.promote import (STOPPED_ERROR, IndexPromotion, Publication, RetryPolicy, SmokeRunner,
                                           Target, failed_index, promote_index, publish, stopped_index,
                                           stopped_publication, with_retries)
from accel_images.registry import OCI_INDEX, IndexEntry, RegistryClient, RemoteImage, parse_time
from accel_images.builder.settings import BuildSettings, image_ref
from accel_images.smoke.judge import SmokeResult
from accel_images.smoke.records import built_here
from accel_images.publish.tested import SmokedDigest, SmokedRecord, read_record, untested_reason, write_record
from accel_images.state import StateDir
from accel_images.supply.attest import Attester, BuildInputs, Source
from accel_images.supply import trust
from accel_images.supply.verify import Verdict, verify_platform
from accel_images.plan.variants import Expansion, by_tag
from accel_images.model.variant import Variant
from accel_images.builder.wheels import RunWheelhouse
from accel_images.builder.workers import run_each

DEFAULT_MAX_AGE_DAYS = 7.0
INDEX_TRIES = 3
"""Assemblies of one tag's index while another job keeps moving the tag, before the run gives up on it."""
log = logging.getLogger(__name__)
Status = Callable[[Variant, str], None]


def new_run_id(now: datetime | None = None) -> str:
    """`YYYYMMDDTHHMMSS-xxxxxx`: sortable, unique per run, valid inside a tag."""
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{moment:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class NightlyOptions:
    """What a nightly run needs beyond the build settings."""

    target: Target
    max_age_days: float = DEFAULT_MAX_AGE_DAYS
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    run_id: str = field(default_factory=new_run_id)
    retry: RetryPolicy = RetryPolicy()
    signer: CryptoSigner | None = field(default=None, compare=False, repr=False)
    """Signs each provenance; its public key is also what the registry's images must verify with."""
    source: Source = field(default_factory=Source)
    attestation_dir: Path | None = None
    """Where each image's SBOM and statement are also written, for keyless signing in CI."""
    attest: bool = True
    """Attach an SBOM and a provenance statement to every published digest (off only in tests of other steps)."""

    @property
    def day(self) -> date:
        """The date in dated tags: the run's start, in UTC, for every variant alike."""
        return self.now.astimezone(timezone.utc).date()


@dataclass(frozen=True)
class NightlyOutcome:
    """One variant's night: the build outcome, why it was (not) built, and what was published."""

    outcome: Outcome
    reason: str
    publication: Publication | None = None
    registry_digest: str | None = None     # what the full tag serves after this run
    realigned: tuple[str, ...] = ()        # tags moved onto an unchanged image (new aliases, a stopped run's leftovers)
    swept: tuple[str, ...] = ()            # candidate tags of earlier runs this run deleted
    kept: bool = False                     # rebuilt with layers equal to the published ones: nothing pushed
    platform_digest: str | None = None     # one platform of an index: its own image's digest in it

    @property
    def uploaded_bytes(self) -> int:
        """Compressed layer bytes this run sent to the registry for the variant."""
        return self.publication.uploaded_bytes if self.publication else 0
    verdict: Verdict | None = None         # the registry image's check, when a key was given

    @property
    def status(self) -> str:
        return self.outcome.status

    @property
    def ok(self) -> bool:
        return self.outcome.ok


FIRST_PUBLICATION = "first publication"
"""The reason for a tag the registry does not serve yet: the outcome's one word is still `published`."""


def rebuild_reason(remote: RemoteImage | None, prepared: Prepared, max_age_days: float,
                   now: datetime, verified: datetime | None = None) -> str | None:
    """Why the variant must be rebuilt; None when the registry's image is current.

    `verified` is when a rebuild last found the registry's image identical
    (accel_images.state.StateDir.verified): its age counts from then, so an image kept
    unchanged is rebuilt again after `max_age_days`, not every night.
    """
    if remote is None:
        return FIRST_PUBLICATION
    labels = remote.labels
    published = labels.get(FINGERPRINT_LABEL)
    if not published:
        return "the registry's image has no fingerprint label"
    if published != prepared.fingerprint:
        old_base = labels.get(BASE_DIGEST_LABEL)
        if old_base and old_base != prepared.base_digest:
            return f"base image changed ({_short(old_base)} -> {_short(prepared.base_digest)})"
        return "template, build context or build args changed"
    created = build_date(remote, verified)
    if created is None:
        return "the registry's image has no build date"
    age = build_age(created, now)
    if age is None:
        return f"its build date {created.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC is in the future: its age is" \
               " unknown"
    if age > timedelta(days=max_age_days):
        return f"older than {max_age_days:g} days (built {created:%Y-%m-%d})"
    return None


def build_date(image: RemoteImage, verified: datetime | None = None) -> datetime | None:
    """When the image was built (its label, else the config's date), or when a rebuild last found it
    identical (`verified`), whichever is later: the moment its age counts from."""
    created = parse_time(image.labels.get(CREATED_LABEL)) or image.created
    if created is not None and verified is not None and verified > created:
        return verified
    return created


def build_age(created: datetime, now: datetime) -> timedelta | None:
    """How old an image built at `created` is at `now`; None (unknown) when `created` lies ahead of `now`.

    A negative age is no age at all: this clock is behind the builder's, or the date was written to make
    the image look fresh. Taking it as young would keep the image for as long as the clock lags.
    """
    age = now - created
    return age if age >= timedelta(0) else None


def future_date_warning(ref: str, created: datetime | None, now: datetime) -> str | None:
    """The warning for an image whose build date lies ahead of this clock, naming it and the date; else None."""
    if created is None or build_age(created, now) is not None:
        return None
    return (f"{ref} says it was built {created.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC, after this"
            f" clock's {now.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC: its age is unknown, so it is rebuilt"
            " (check this machine's clock, and who pushed the image)")


def aged_only(remote: RemoteImage | None, prepared: Prepared) -> bool:
    """True when the registry's image has this very fingerprint: a rebuild is due to its age alone.

    Such a rebuild must not come from the layer cache, which would hand back the same old
    layers: the point of rebuilding an unchanged image is to fetch today's package updates.
    """
    return remote is not None and remote.labels.get(FINGERPRINT_LABEL) == prepared.fingerprint


def run_nightly(engine: Engine, kb: KnowledgeBase, expansion: Expansion, variants: Sequence[Variant],
                registry: RegistryClient, settings: BuildSettings, options: NightlyOptions, *,
                status: Status | None = None, smoke: SmokeRunner | None = None,
                templates_dir: Path | None = None,
                on_done: Callable[[NightlyOutcome], None] | None = None,
                wheels: RunWheelhouse | None = None) -> list[NightlyOutcome]:
    """Rebuild, smoke-test and promote what changed; one outcome per variant, in order.

    An unreachable or refusing registry fails the whole run at once (RegistryError), before
    anything is built. Base images are always pulled; the local smoke of Builder is off,
    because the smoke test runs on the pushed candidate instead. `on_done` hears of each
    variant as it finishes, so a run stopped by Ctrl-C can still report what it did. `wheels` is the
    run's wheelhouse (accel_images.builder.wheels), given where the caller reports what it fetched.
    """
    settings = replace(settings, pull="always", smoke=False)
    with_retries(registry.ping, options.retry, f"checking registry {registry.host}")
    attester = Attester(engine, registry, options.target.host, options.target.repository, options.run_id,
                        options.now, options.signer, options.source, settings.require_accelerator,
                        options.attestation_dir)
    night = _Night(engine, registry, expansion, settings, options, status or (lambda v, text: None),
                   smoke or (lambda image, variant: smoke_image(engine, image, variant, settings)),
                   Builder(engine, kb, expansion, settings, status=status, templates_dir=templates_dir, wheels=wheels),
                   on_done or (lambda outcome: None), attester)
    cache = settings.state_dir.digest_cache
    load_digest_cache(cache)
    try:
        return [night for nights in run_each(night.one_tag, by_tag(variants), settings.jobs) for night in nights]
    finally:
        try:
            save_digest_cache(cache)
        except OSError:
            pass  # only a speed-up, as in Builder.run
        night.builder.prune_wheels()


@dataclass(frozen=True)
class _Night:
    engine: Engine
    registry: RegistryClient
    expansion: Expansion
    settings: BuildSettings
    options: NightlyOptions
    status: Status
    smoke: SmokeRunner
    builder: Builder
    on_done: Callable[[NightlyOutcome], None]
    attester: Attester

    def one_tag(self, group: tuple[Variant, ...]) -> list[NightlyOutcome]:
        """One tag: a single image, or an image index of one image per platform (accel_images.publish.index)."""
        if len(group) == 1 and not group[0].multi_platform:
            return [self.one(group[0])]
        return self._index_tag(group)

    def one(self, variant: Variant) -> NightlyOutcome:
        """Decide, build and publish one variant; expected failures end up in the outcome."""
        night = NightlyOutcome(Outcome(variant, "failed", image_ref(self.expansion, variant)), "")
        try:
            night = self._one(variant, night)
        except AccelError as error:
            night = replace(night, outcome=replace(night.outcome, status="failed", error=error.one_line(),
                                                   exit_code=error.exit_code))
        self.status(variant, describe(night))
        self.on_done(night)
        return night

    def _one(self, variant: Variant, night: NightlyOutcome) -> NightlyOutcome:
        target = self.options.target
        prepared = self.builder.prepare(variant)
        self.status(variant, "reading the registry")
        remote = with_retries(lambda: self.registry.image(target.repository, variant.tag), self.options.retry,
                              f"reading {target.ref(variant.tag)}")
        swept = self._sweep(variant)
        return replace(self._decide(prepared, remote, night), swept=swept)

    def _decide(self, prepared: Prepared, remote: RemoteImage | None, night: NightlyOutcome) -> NightlyOutcome:
        """Skip, rebuild-and-maybe-keep, or rebuild-and-publish.

        Every path that leaves the registry's image where it is (skipped as current, or kept
        because a rebuild for age came out with its very layers) first checks that this tool
        smoke-tested its digest and, with a key, that it verifies: an image with a copied
        fingerprint label is otherwise rebuilt, smoke-tested and published like any changed one.
        """
        variant = prepared.variant
        verified = read_verified(self.settings.state_dir, remote.digest) if remote else None
        reason = rebuild_reason(remote, prepared, self.options.max_age_days, self.options.now, verified)
        if remote is not None:
            self._warn_if_future(variant, self.options.target.ref(variant.tag), build_date(remote, verified))
        same_inputs = remote if remote is not None and aged_only(remote, prepared) else None
        fresh, verdict = reason is not None and same_inputs is not None, None
        if same_inputs is not None:
            entry, verdict, distrust = self._trusted(variant, same_inputs)
            if entry is not None and distrust is None and reason is None:
                return replace(self._skipped(prepared, same_inputs, entry), verdict=verdict)
            if distrust is not None:
                reason, same_inputs = distrust, None
        night = replace(night, reason=reason or "", registry_digest=remote.digest if remote else None,
                        verdict=verdict)
        return self._rebuilt(prepared, night, fresh=fresh, keepable=same_inputs)

    def _warn_if_future(self, variant: Variant, what: str, created: datetime | None) -> None:
        """Say so, on stderr and in the variant's progress, when an image's build date lies ahead of this
        clock: it is rebuilt however young it looks (build_age), and a wrong clock or a forged date is news."""
        warning = future_date_warning(what, created, self.options.now)
        if warning is not None:
            log.warning("accel-images: warning: %s", warning)
            self.status(variant, f"warning: {warning}")

    def _trusted(self, variant: Variant, remote: RemoteImage) -> tuple[SmokedDigest | None, Verdict | None, str | None]:
        """(its entry in the tested record, its verdict with a key, why it is not trusted or None)."""
        record = self._record(variant)
        entry = record.find(remote.digest)
        if entry is None:
            return None, None, untested_reason(variant.tag, remote.digest, record)
        verdict = self._verify(variant, trust.Listed(variant.platform, remote.digest))
        if verdict is not None and not verdict.ok:
            return entry, verdict, f"the registry's image does not verify: {verdict.reason}"
        return entry, verdict, None

    def _verify(self, variant: Variant, listed: trust.Listed) -> Verdict | None:
        """The registry image's verdict under the signing key's public half, as the tag's image of the platform
        it is listed under (accel_images.supply.verify.verify_platform); None without a key.

        The tested record (accel_images.publish.tested) says this tool smoke-tested the digest, but
        anyone who can push can write it; a signature only the key's holder can make.
        """
        if self.options.signer is None:
            return None
        self.status(variant, "verifying the registry's image")
        key = self.options.signer.public_key
        return with_retries(lambda: verify_platform(self.registry, self.options.target.repository, listed, key,
                                                    variant.tag),
                            self.options.retry, f"verifying {self.options.target.ref(variant.tag)}")

    def _sweep(self, variant: Variant) -> tuple[str, ...]:
        """Delete the variant's candidate tags that runs started before this one left behind.

        A run killed outright (SIGKILL, a lost CI runner) or one that could not reach the
        registry to clean up leaves its candidate; nobody else removes it. Candidates of runs
        started later are left alone: they may be mid-smoke-test. Best effort: a failure here
        is logged and fails nothing.
        """
        mine = _run_started(self.options.run_id)
        if not mine:
            return ()
        target, retry, swept = self.options.target, self.options.retry, []
        try:
            names = with_retries(lambda: self.registry.tags(target.repository), retry,
                                 f"listing the tags of {target.host}/{target.repository}")
        except AccelError as error:
            log.warning("old candidates of %s not swept: %s", variant.tag, error.one_line())
            return ()
        for name in names:
            found = tags.CANDIDATE_RE.match(name) if isinstance(name, str) else None
            if found is None or found["full"] != variant.tag or _run_started(found["run"]) >= mine:
                continue
            try:
                with_retries(lambda: self.registry.delete_tag(target.repository, name), retry,
                             f"deleting {target.ref(name)}")
            except AccelError as error:
                log.warning("old candidate %s not swept: %s", target.ref(name), error.one_line())
                continue
            swept.append(name)
        return tuple(swept)

    def _record(self, variant: Variant) -> SmokedRecord:
        """The digests this tool smoke-tested for the variant (accel_images.publish.tested)."""
        target = self.options.target
        return with_retries(lambda: read_record(self.registry, target.repository, tags.tested_tag(variant)),
                            self.options.retry, f"reading {target.ref(tags.tested_tag(variant))}")

    def _record_tested(self, variant: Variant, digest: str) -> None:
        """Add a smoke-tested digest to the variant's record, before any real tag moves onto it."""
        target, tag = self.options.target, tags.tested_tag(variant)
        record = self._record(variant).adding(SmokedDigest(digest, self.options.day, self.options.run_id))
        with_retries(lambda: write_record(self.registry, target.repository, tag, record), self.options.retry,
                     f"writing {target.ref(tag)}")

    def _skipped(self, prepared: Prepared, remote: RemoteImage, entry: SmokedDigest) -> NightlyOutcome:
        variant = prepared.variant
        created = parse_time(remote.labels.get(CREATED_LABEL)) or remote.created
        skipped = Outcome(variant, "skipped", self.options.target.ref(variant.tag),
                          fingerprint=prepared.fingerprint, base_digest=prepared.base_digest,
                          earlier_smoke=f"in the run of {entry.day:%Y-%m-%d}", notes=prepared.notes,
                          without_companions=prepared.left_out)
        return NightlyOutcome(skipped, f"unchanged since {created:%Y-%m-%d}" if created else "unchanged",
                              registry_digest=remote.digest, realigned=self._heal(variant, entry))

    def _rebuilt(self, prepared: Prepared, night: NightlyOutcome, *, fresh: bool,
                 keepable: RemoteImage | None, platform_only: bool = False) -> NightlyOutcome:
        """Build, then candidate -> smoke -> promotion; the registry's last good image stays on failure.

        `fresh` when only its age calls for the rebuild: then the build runs without the layer
        cache and never takes a local build, which may itself have come from that cache.
        `keepable` is the registry's image when it may stay (its fingerprint is this one and this
        tool smoke-tested it): when the build's layers come out equal to its layers, nothing is
        pushed and the published digest stays (`kept`).
        `platform_only`: one platform's image of an index, pushed, tested and attested but not
        promoted (the index is: _index_tag); its green digest is `platform_digest`.
        """
        variant, target = prepared.variant, self.options.target
        local = None if fresh else self._local_build(prepared)
        built = replace(local or self.builder.build_prepared(prepared, nocache=fresh), notes=prepared.notes,
                        without_companions=prepared.left_out)
        if not built.ok or built.image_id is None:
            return replace(night, outcome=built)
        if keepable is not None and self._identical(built.image_id, keepable):
            write_verified(self.settings.state_dir, keepable.digest, self.options.now)
            return replace(night, outcome=replace(built, image=target.ref(variant.tag)),
                           registry_digest=night.registry_digest if platform_only else keepable.digest, kept=True,
                           platform_digest=keepable.digest if platform_only else None)
        real_tags = () if platform_only else tags.all_tags(variant, self.expansion.variants, self.options.day)
        green = self._green_image if platform_only else self._green
        inputs = BuildInputs(variant, prepared.fingerprint, prepared.base_digest, prepared.args, prepared.wheels)
        try:
            publication = publish(self.engine, self.registry, built.image_id, variant, target, real_tags,
                                  self.options.run_id, self.smoke, retry=self.options.retry, status=self.status,
                                  on_green=lambda digest, smoke: green(variant, digest, smoke),
                                  attest=(lambda image, digest, smoke: self.attester(image, digest, inputs, smoke))
                                  if self.options.attest else None)
        except KeyboardInterrupt as interrupt:
            self._stopped(night, built, stopped_publication(interrupt), platform_only)
            raise
        return self._published(night, built, publication, platform_only)

    def _published(self, night: NightlyOutcome, built: Outcome, publication: Publication,
                   platform_only: bool = False) -> NightlyOutcome:
        """The variant's night after its publication ended: published, or failed with the publication's error
        (`platform_only`: one platform's image of an index, whose green digest is `platform_digest`)."""
        variant = night.outcome.variant
        serving = publication.digest if variant.tag in publication.promoted else night.registry_digest
        night = replace(night, publication=publication, registry_digest=serving,
                        platform_digest=publication.digest if platform_only and publication.ok else None)
        if not publication.ok:
            return replace(night, outcome=replace(built, status="failed", smoke=publication.smoke,
                                                  error=publication.error, exit_code=publication.exit_code))
        return replace(night, outcome=replace(built, image=self.options.target.ref(variant.tag),
                                              smoke=publication.smoke))

    def _stopped(self, night: NightlyOutcome, built: Outcome, publication: Publication | None,
                 platform_only: bool = False) -> None:
        """Report a publication the stop cut short as it ended: interrupted, with the tags read back. A stop
        that came after it ended (while its candidate was removed) leaves it as it ended: published, with
        every tag it moved, the new digest and whether the candidate is left."""
        if publication is not None and publication.error != STOPPED_ERROR:
            stopped = self._published(night, built, publication, platform_only)
            self.status(stopped.outcome.variant, describe(stopped))
            self.on_done(stopped)
            return
        serving = night.registry_digest
        if publication is not None and publication.tags_after is not None:
            serving = publication.tags_after.get(night.outcome.variant.tag, serving)
        stopped = replace(night, publication=publication, registry_digest=serving,
                          outcome=replace(built, status="interrupted", error="interrupted during publication"))
        self.status(stopped.outcome.variant, "interrupted")
        self.on_done(stopped)

    def _green(self, variant: Variant, digest: str, smoke: SmokeResult) -> None:
        """Before any real tag moves: this tool's own record of the tested digest, then the smoke record
        that `recommend --registry` reads (accel_images.publish.catalogue)."""
        self._record_tested(variant, digest)
        self._green_image(variant, digest, smoke)

    def _green_image(self, variant: Variant, digest: str, smoke: SmokeResult) -> None:
        """The smoke record of one image's digest (every platform of an index has its own); the tested
        record of an index is written when the index is (_index_tag)."""
        with_retries(lambda: catalogue.write_record(self.registry, self.options.target.repository, digest, smoke,
                                                    self.options.run_id),
                     self.options.retry, f"writing the smoke record of {self.options.target.ref(variant.tag)}")

    # ---- a tag of several platforms: one image index (accel_images.publish.index) ---------------

    def _index_tag(self, group: tuple[Variant, ...]) -> list[NightlyOutcome]:
        """Decide and publish each platform's image as `one` does a single image (never promoted alone),
        then put the index of the green ones (and, for a platform that failed or is not in this run, the
        image it served before, where that image is still trusted) under every real tag. An unchanged tag
        pushes nothing."""
        first = group[0]
        try:
            listing = self._listing(first)
        except AccelError as error:
            return self._all_failed(group, error)
        swept = self._sweep(first)
        nights = [self._platform_night(variant, listing) for variant in group]
        try:
            nights = self._publish_index(group, nights, listing)
        except AccelError as error:
            nights = self._index_failed(first, nights, error)
        nights = [replace(night, swept=swept) for night in nights]
        for night in nights:
            self.status(night.outcome.variant, describe(night))
            self.on_done(night)
        return nights

    def _listing(self, variant: Variant) -> _Listing:
        """What the tag serves now, and its tested record (read after it: a record lists an index before
        any tag moves onto it)."""
        target = self.options.target
        current = with_retries(lambda: index.served(self.registry, target.repository, variant.tag), self.options.retry,
                               f"reading {target.ref(variant.tag)}")
        return _Listing(current, self._record(variant))

    def _all_failed(self, group: tuple[Variant, ...], error: AccelError) -> list[NightlyOutcome]:
        nights = [NightlyOutcome(Outcome(variant, "failed", image_ref(self.expansion, variant), error=error.one_line(),
                                         exit_code=error.exit_code), "") for variant in group]
        for night in nights:
            self.status(night.outcome.variant, describe(night))
            self.on_done(night)
        return nights

    def _distrust(self, variant: Variant, listing: _Listing, platform: str) -> tuple[_Distrust | None, Verdict | None]:
        """Why the image the tag's index lists for `platform` is not trusted as the tag's image of that
        platform (None when it is), and its verdict where a key was given.

        The one decision behind skipping, keeping and carrying an image over: the index must be in the tag's
        tested record, and accel_images.supply.trust decides per (tag, platform), with the signed provenance
        as the evidence where there is a key (its variant must wear the tag and be of the platform), and the
        listing alone without one (a platform listed twice is never trusted)."""
        current = listing.current
        listed = current.listed(platform) if current is not None else None
        if current is None or listed is None:
            return _Distrust(f"{variant.tag} serves no {platform} image"), None
        if not listing.trusted:
            return _Distrust(untested_reason(variant.tag, current.digest, listing.record)), None
        verdict = self._verify(variant, listed)
        if verdict is None:
            why = trust.distrust(listed, trust.Evidence(True, platform))
            return (None if why is None else _Distrust(why)), None
        return (None if verdict.ok else _Distrust(verdict.reason, unverified=True)), verdict

    def _platform_night(self, variant: Variant, listing: _Listing) -> NightlyOutcome:
        """One platform's image: skipped when the tag's index (one this tool recorded) holds it unchanged
        and it is trusted as the tag's image of the platform; else built, pushed as a candidate,
        smoke-tested and attested."""
        current = listing.current
        night = NightlyOutcome(Outcome(variant, "failed", image_ref(self.expansion, variant)), "",
                               registry_digest=current.digest if current else None)
        try:
            return self._platform_decide(variant, listing, night)
        except AccelError as error:
            return replace(night, outcome=replace(night.outcome, status="failed", error=error.one_line(),
                                                  exit_code=error.exit_code))

    def _platform_decide(self, variant: Variant, listing: _Listing, night: NightlyOutcome) -> NightlyOutcome:
        """Skip, rebuild-and-maybe-keep, or rebuild one platform's image: as _decide does a single image, the
        registry's image stays only where _distrust finds nothing against it."""
        target = self.options.target
        prepared = self.builder.prepare(variant)
        served = listing.current.images.get(variant.platform) if listing.current else None
        self.status(variant, "reading the registry")
        remote = with_retries(lambda: self.registry.image(target.repository, served.digest), self.options.retry,
                              f"reading the {variant.platform} image of {target.ref(variant.tag)}") if served else None
        verified = read_verified(self.settings.state_dir, served.digest) if served else None
        reason = rebuild_reason(remote, prepared, self.options.max_age_days, self.options.now, verified)
        if remote is not None and served is not None:
            self._warn_if_future(variant, f"the {variant.platform} image of {target.ref(variant.tag)}"
                                          f" ({served.digest})", build_date(remote, verified))
        same_inputs = remote is not None and aged_only(remote, prepared)
        fresh = reason is not None and same_inputs   # its age alone calls for the rebuild, not distrust (_decide)
        keepable = remote if same_inputs else None
        if keepable is not None:
            distrust, verdict = self._distrust(variant, listing, variant.platform)
            if distrust is None and reason is None:
                return replace(self._platform_skipped(prepared, keepable, listing), verdict=verdict,
                               registry_digest=night.registry_digest)
            if distrust is not None:
                keepable, reason = None, reason or distrust.reason(variant.platform)
        return self._rebuilt(prepared, replace(night, reason=reason or ""), fresh=fresh, keepable=keepable,
                             platform_only=True)

    def _platform_skipped(self, prepared: Prepared, remote: RemoteImage, listing: _Listing) -> NightlyOutcome:
        """The night of a platform whose image the tag's index holds unchanged and trusted."""
        variant = prepared.variant
        created = parse_time(remote.labels.get(CREATED_LABEL)) or remote.created
        entry = listing.record.find(listing.current.digest) if listing.current else None
        skipped = Outcome(variant, "skipped", self.options.target.ref(variant.tag), fingerprint=prepared.fingerprint,
                          base_digest=prepared.base_digest,
                          earlier_smoke=f"in the run of {entry.day:%Y-%m-%d}" if entry else None)
        return NightlyOutcome(skipped, f"unchanged since {created:%Y-%m-%d}" if created else "unchanged",
                              platform_digest=remote.digest)

    def _entry(self, variant: Variant, digest: str, held: IndexEntry | None) -> IndexEntry:
        """The index entry of the platform's green image: the one the index already lists, or read."""
        if held is not None and held.digest == digest:
            return held
        target = self.options.target
        return with_retries(lambda: index.entry_of(self.registry, target.repository, variant.platform, digest),
                            self.options.retry, f"reading the {variant.platform} image of {target.ref(variant.tag)}")

    def _index_images(self, first: Variant, nights: list[NightlyOutcome],
                      listing: _Listing) -> tuple[dict[str, IndexEntry], tuple[str, ...]]:
        """The entries of the new index: each green platform's image, and for each other platform of the tag
        the image the index serves for it now, where that image is trusted as the tag's image of its platform
        (_distrust); with the notes of the platforms left out, and why."""
        images: dict[str, IndexEntry] = {}
        for night in nights:
            if night.ok and night.platform_digest is not None:
                platform = night.outcome.variant.platform
                held = listing.current.images.get(platform) if listing.current else None
                images[platform] = self._entry(night.outcome.variant, night.platform_digest, held)
        left_out = []
        for platform, entry in (listing.current.images.items() if listing.current else ()):
            if platform in images or platform not in first.platforms:
                continue
            distrust, _ = self._distrust(first, listing, platform)
            if distrust is None:
                images[platform] = entry
            else:
                left_out.append(f"{platform} left out of the index of {first.tag}: the image {entry.digest[:19]} it"
                                f" served {distrust.note()}")
        return images, tuple(left_out)

    def _publish_index(self, group: tuple[Variant, ...], nights: list[NightlyOutcome],
                       listing: _Listing) -> list[NightlyOutcome]:
        """The index of every green platform's image and the trusted images it carries over, recorded as
        tested, then put under every real tag.

        The tag may be moved meanwhile by another job of the same tag (a CI job per platform): just before
        the first tag moves, the tag must still serve the index this run read. When it does not, the tag is
        read again and the index assembled anew from what it serves now, up to INDEX_TRIES times; then the
        run fails in one line rather than drop the other job's image (a lost update)."""
        first = group[0]
        for _ in range(INDEX_TRIES):
            images, notes = self._index_images(first, nights, listing)
            nights = self._noted(first, nights, notes)
            if not images:
                return nights
            data, digest = index.assemble(images)
            if listing.trusted and listing.current is not None and digest == listing.current.digest:
                return self._unchanged_index(first, nights, listing, digest)
            self._store_index(first, images, data, digest)
            now = self._listing(first)
            if _digest_of(now.current) == _digest_of(listing.current):
                return self._promote_index(first, nights, data, digest)
            self.status(first, f"{first.tag} moved while this run assembled its index: reading it again")
            listing = now
        raise RegistryError(f"{self.options.target.ref(first.tag)} moved while this run assembled its index "
                            f"{INDEX_TRIES} times (it serves {_digest_of(listing.current) or 'nothing'} now): another "
                            "job publishes the same tag at the same time; nothing promoted",
                            hint="run the per-platform jobs of one tag one after another")

    def _noted(self, first: Variant, nights: list[NightlyOutcome], notes: tuple[str, ...]) -> list[NightlyOutcome]:
        """Each night with the notes of the platforms the new index leaves out; each said once, as a warning."""
        fresh = [note for note in notes if note not in nights[0].outcome.notes]
        for note in fresh:
            log.warning("accel-images: warning: %s", note)
            self.status(first, f"warning: {note}")
        return [replace(night, outcome=replace(night.outcome, notes=(*night.outcome.notes, *fresh)))
                for night in nights]

    def _unchanged_index(self, first: Variant, nights: list[NightlyOutcome], listing: _Listing,
                         digest: str) -> list[NightlyOutcome]:
        """The tag already serves this very index, every entry of it trusted: heal its other tags."""
        entry = listing.record.find(digest)
        moved = self._heal(first, entry) if entry is not None else ()
        return [replace(night, registry_digest=digest, realigned=moved if night is nights[0] else ())
                for night in nights]

    def _store_index(self, first: Variant, images: Mapping[str, IndexEntry], data: bytes, digest: str) -> None:
        """Put the index under its digest and add it to the tag's tested record, before any tag moves."""
        target = self.options.target
        self.status(first, f"putting the index of {', '.join(sorted(images))} under {first.tag}")
        with_retries(lambda: index.put_index(self.registry, target.repository, data, digest), self.options.retry,
                     f"writing the index of {target.ref(first.tag)}")
        self._record_tested(first, digest)

    def _promote_index(self, first: Variant, nights: list[NightlyOutcome], data: bytes,
                       digest: str) -> list[NightlyOutcome]:
        """Every real tag onto the index; a stop puts them back and reports each night as interrupted."""
        target = self.options.target
        real_tags = tags.all_tags(first, self.expansion.variants, self.options.day)
        try:
            promotion = promote_index(self.registry, target, real_tags, data, digest, OCI_INDEX, self.options.retry)
        except KeyboardInterrupt as interrupt:
            stopped = stopped_index(interrupt)
            for night in nights:
                self.on_done(replace(night, outcome=replace(night.outcome, status="interrupted",
                                                            error="interrupted during publication"),
                                     registry_digest=(stopped.tags_after or {}).get(first.tag) if stopped else None))
            raise
        return [replace(night, registry_digest=digest,
                        publication=replace(night.publication, promoted=promotion.promoted)
                        if night.publication is not None and night.ok else night.publication)
                for night in nights]

    def _index_failed(self, first: Variant, nights: list[NightlyOutcome], error: AccelError) -> list[NightlyOutcome]:
        """Each night after the index could not be published: failed with the error, and, where the promotion
        had moved some tags, which moved and what each tag serves now (read back from the registry)."""
        partial = failed_index(error)
        message = error.one_line() + (_moves(partial) if partial else "")
        serving = (partial.tags_after or {}).get(first.tag) if partial else self._serving_now(first)
        failed = []
        for night in nights:
            if night.ok:
                night = replace(night, outcome=replace(night.outcome, status="failed", error=message,
                                                       exit_code=error.exit_code))
                if partial is not None and night.publication is not None:
                    night = replace(night, publication=replace(night.publication, promoted=partial.promoted,
                                                               tags_after=partial.tags_after))
                elif partial is not None:
                    night = replace(night, realigned=partial.promoted)
            failed.append(replace(night, registry_digest=serving or night.registry_digest))
        return failed

    def _serving_now(self, first: Variant) -> str | None:
        """What the full tag serves now, for the report of a failed index; None when it cannot be read."""
        try:
            return self.registry.manifest_digest(self.options.target.repository, first.tag)
        except AccelError:
            return None

    def _identical(self, image_id: str, remote: RemoteImage) -> bool:
        """Whether the local image's layers are the registry image's, diff ID for diff ID."""
        local = self.engine.inspect_image(image_id)
        return bool(local and local.layers and remote.diff_ids and local.layers == remote.diff_ids)

    def _local_build(self, prepared: Prepared) -> Outcome | None:
        """A local image with this fingerprint that this state directory built, young enough to publish.

        `accel-images build` (or an earlier nightly whose push failed) may have built exactly
        this image already: publishing it saves the build. Only a build this state directory
        recorded counts, with the image ID and every layer it recorded (accel_images.smoke.records):
        a label can be copied onto an image derived from it, and on a shared engine another
        user's build carries the same name and label. What is published is then what the
        provenance says was built.
        """
        local = self.engine.inspect_image(prepared.ref)
        if local is None or local.labels.get(FINGERPRINT_LABEL) != prepared.fingerprint:
            return None
        if not built_here(self.settings.state_dir, prepared.fingerprint, local.id, local.layers):
            self.status(prepared.variant, f"not publishing the local {prepared.ref}: this state directory did not "
                                          "build it (no build record with its image ID and layers)")
            return None
        created = parse_time(local.labels.get(CREATED_LABEL)) or parse_time(local.created)
        self._warn_if_future(prepared.variant, f"the local build {prepared.ref} ({local.id})", created)
        age = build_age(created, self.options.now) if created is not None else None
        if age is None or age > timedelta(days=self.options.max_age_days):
            return None
        self.status(prepared.variant, f"publishing the local build of {created:%Y-%m-%d %H:%M}")
        return self.builder.check_facts(prepared, Outcome(prepared.variant, "built", prepared.ref, local.id,
                                                          local.size, None, prepared.fingerprint, prepared.base_digest))

    def _heal(self, variant: Variant, entry: SmokedDigest) -> tuple[str, ...]:
        """Point every other real tag of an unchanged, smoke-tested image at it; the tags moved.

        The dated tag of the run that tested it and the floating aliases the matrix now gives
        it: aliases follow the matrix (when a newer variant leaves it, an older one that is not
        rebuilt inherits `latest-<vendor>`), and a run killed part-way through its promotion
        (SIGKILL: no rollback) left some of them behind. Each copy is of the tested digest
        itself, never of whatever the full tag serves by then, so a tag can only move onto a
        digest this tool smoke-tested.
        """
        target, retry, moved = self.options.target, self.options.retry, []
        full = tags.full_tag(variant)
        for tag in tags.all_tags(variant, self.expansion.variants, entry.day):
            if tag == full:
                continue
            current = with_retries(lambda: self.registry.manifest_digest(target.repository, tag), retry,
                                   f"reading {target.ref(tag)}")
            if current != entry.digest:
                self.status(variant, f"moving {tag} onto the smoke-tested image")
                with_retries(lambda: self.registry.copy_tag(target.repository, entry.digest, tag), retry,
                             f"tagging {target.ref(tag)}")
                moved.append(tag)
        return tuple(moved)


@dataclass(frozen=True)
class _Listing:
    """What a tag of several platforms serves now, and its tested record read beside it."""

    current: index.Served | None
    record: SmokedRecord

    @property
    def trusted(self) -> bool:
        """Whether this tool recorded testing the index the tag serves (its entries are judged one by one still)."""
        return self.current is not None and self.record.find(self.current.digest) is not None


@dataclass(frozen=True)
class _Distrust:
    """Why an image a tag's index lists is not trusted as the tag's image of its platform."""

    why: str
    unverified: bool = False
    """The signed provenance was checked and failed (else: the index is untested, or the listing is wrong)."""

    def reason(self, platform: str) -> str:
        """As the reason a platform is rebuilt."""
        return f"the registry's image does not verify ({platform}): {self.why}" if self.unverified else self.why

    def note(self) -> str:
        """As the note on an image left out of the new index."""
        return ("does not verify: " if self.unverified else "is not trusted: ") + self.why


def _digest_of(served: index.Served | None) -> str | None:
    return served.digest if served is not None else None


def _moves(partial: IndexPromotion) -> str:
    """`; moved: TAG (now sha256:...); not moved: TAG (sha256:...|absent)`: what a promotion that failed part-way
    did, each tag with the digest it serves now, as read back (a tag that could not be read is left out)."""
    after = partial.tags_after or {}
    moved = [f"{tag} (now {(after.get(tag) or partial.digest)[:19]})" for tag in partial.promoted]
    stayed = [f"{tag} ({(after[tag] or 'absent')[:19]})" for tag in after if tag not in partial.promoted]
    return "; moved: " + (", ".join(moved) or "nothing") + ("; not moved: " + ", ".join(stayed) if stayed else "")


def _run_started(run_id: str) -> str:
    """`YYYYMMDDTHHMMSS` of a run id from new_run_id (sortable as text); '' for any other id."""
    stamp = run_id[:15]
    return stamp if len(stamp) == 15 and stamp[8] == "T" and (stamp[:8] + stamp[9:]).isdigit() else ""


def describe(night: NightlyOutcome) -> str:
    """A short status line for progress displays."""
    if night.status == "failed":
        return f"FAILED: {night.outcome.error}"
    if night.status == "skipped":
        moved = f"; moved {', '.join(night.realigned)} onto it" if night.realigned else ""
        return f"skipped: {night.reason}{moved}"
    if night.kept:
        return f"rebuilt, identical content, kept {night.registry_digest} ({night.reason})"
    return f"published ({night.reason}): {how_built(night)}, smoke {smoke_text(night.outcome)}, {uploaded(night)}"


def how_built(night: NightlyOutcome) -> str:
    """'built in 42 s', or 'the local build reused' for an image `build` had made already (not built here)."""
    seconds = night.outcome.build_s
    return "the local build reused" if seconds is None else f"built in {seconds:.0f} s"


def shown_status(night: NightlyOutcome) -> str:
    """The status column: 'published' (the word of the summary line and the report), 'reused local
    build' or 'kept', never 'published' for an image that was not pushed."""
    if not night.ok:
        return f"failed: {night.outcome.error}"
    if night.kept:
        return "rebuilt, identical content, kept"
    if night.status == "built" and night.outcome.build_s is None:
        return "reused local build"
    return "published" if night.status == "built" else night.status


def uploaded(night: NightlyOutcome) -> str:
    """`uploaded 2 layers, 31.4 MB` / `uploaded nothing`."""
    publication = night.publication
    if publication is None or not publication.uploaded_layers:
        return "uploaded no layers"
    return f"uploaded {publication.uploaded_layers} layer(s), {human_size(publication.uploaded_bytes)}"


def nightly_record(night: NightlyOutcome, target: Target) -> dict[str, Any]:
    """JSON-ready view of a nightly outcome: the build record plus what reached the registry."""
    record = dict(outcome_record(night.outcome))
    publication = night.publication
    record.update({
        "reason": night.reason,
        "registry": target.host,
        "repository": target.repository,
        "full_ref": target.ref(night.outcome.variant.tag),
        "digest": night.registry_digest,
        "pushed_tags": list(publication.promoted) if publication else list(night.realigned),
        "candidate": publication.candidate if publication else None,
        "candidate_digest": publication.digest if publication else None,
        "candidate_left": publication.candidate_left if publication else False,
        "swept_candidates": list(night.swept),
        "tags_after_stop": dict(publication.tags_after) if publication and publication.tags_after is not None
        else None,
        "smoke_ran_on": night.outcome.smoke.ran_on if night.outcome.smoke else None,
        "kept": night.kept,
        "platform_digest": night.platform_digest,
        "uploaded_layers": publication.uploaded_layers if publication else 0,
        "uploaded_bytes": night.uploaded_bytes,
    })
    attestation = publication.attestation if publication else None
    record.update(attestation.record() if attestation else {"sbom": None, "provenance": None})
    if attestation is not None and attestation.signed and night.ok:
        record["verified"] = {"ok": True, "reason": "signed by this run, read back from the registry", "provenance":
                              attestation.provenance.manifest_digest, "sbom": attestation.sbom.manifest_digest}
    elif night.verdict is not None:  # the registry's image, as this run found it
        record["verified"] = {"ok": night.verdict.ok, "reason": night.verdict.reason,
                              "provenance": night.verdict.provenance, "sbom": night.verdict.sbom}
    else:
        record["verified"] = None
    return record


def summary(nights: Sequence[NightlyOutcome]) -> Mapping[str, int]:
    """Counts per status; `kept` (rebuilt, identical, nothing pushed) apart from `built`."""
    counts = {"built": 0, "kept": 0, "skipped": 0, "failed": 0}
    for night in nights:
        status = "kept" if night.kept else night.status
        counts[status] = counts.get(status, 0) + 1
    return counts


def read_verified(state: StateDir, digest: str) -> datetime | None:
    """When a rebuild last found the registry's `digest` identical; None when never (or unreadable)."""
    try:
        return parse_time(untrusted.loads(state.verified(digest).read_text()).get("verified"))
    except (OSError, ValueError, AttributeError):
        return None


def write_verified(state: StateDir, digest: str, when: datetime) -> None:
    """Remember an identical rebuild; losing the record costs one more rebuild, so failures pass."""
    path = state.verified(digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"digest": digest, "verified": when.astimezone(timezone.utc).isoformat()}))
    except OSError:
        pass


def _short(digest: str) -> str:
    """`sha256:0123456789ab`, or the tail of `repo@sha256:...`."""
    return digest.rsplit("@", 1)[-1][:19]
