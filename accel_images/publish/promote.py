"""Promote on green: a built image reaches its real tags only after its smoke test passed.

For one variant:
1. push the local image as `<registry>/<repository>:<candidate tag>` (never pulled by users);
2. run the smoke workload on exactly that pushed image;
3. only when it is green, record that (`on_green`: accel_images.publish.tested and the catalogue's smoke record),
   then tag and push the real tags (full, dated, floating aliases); the
   layers are already there, so each is a manifest put of the same digest;
4. check that the registry's full tag now points at the smoke-tested digest;
5. always remove the candidate tag again (registry and local name), even after a failure
   or Ctrl-C; a Ctrl-C during this last step leaves the publication as it ended, and says
   whether the candidate is still there (`candidate_left`).
A failed push or a red smoke test moves no real tag: users keep the last good image. Ctrl-C
(or SIGTERM) during steps 3-4 first lets the push in flight end (a PUT the registry already
has lands whether or not we wait for its answer: accel_images.stopping.finish_in_flight),
then puts every real tag already moved back where it was before (or removes it, when it is
new) and reads every tag again, so a stopped run changes no real tag either, and the
publication attached to the interrupt (`stopped_publication`) says where each tag is.
Retries cover only transient registry failures, a few times with capped exponential backoff.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, TypeVar
from collections.abc import Callable, Mapping, Sequence

from accel_images import stopping
from accel_images.builder.engine import Pushed
from accel_images.errors import AccelError, RegistryError
from accel_images.registry import RemoteImage
from accel_images.smoke.judge import SmokeResult
from accel_images.model.tags import candidate_tag, full_tag
from accel_images.model.variant import Variant

if TYPE_CHECKING:
    from accel_images.supply.attest import Attestation

T = TypeVar("T")
SmokeRunner = Callable[[str, Variant], SmokeResult]
"""Runs the smoke workload in an image reference for a variant (accel_images.builder.builder.smoke_image)."""
Status = Callable[[Variant, str], None]
OnGreen = Callable[[str, SmokeResult], None]
"""Hears the smoke-tested digest and its result before any real tag moves (the nightly records both:
accel_images.publish.tested for its own decisions, accel_images.publish.catalogue for `recommend --registry`)."""
Attest = Callable[[str, str, SmokeResult], "Attestation"]
"""Attaches the SBOM and provenance of (candidate reference, pushed digest, green smoke result)."""

DATED = re.compile(r".+-\d{8}")
"""A dated tag, `<full tag>-YYYYMMDD` (accel_images.model.tags.dated_tag)."""

log = logging.getLogger(__name__)


class Pusher(Protocol):
    """The part of accel_images.builder.engine.Engine that publishing uses."""

    def tag(self, image: str, ref: str) -> None: ...

    def push(self, ref: str) -> str: ...

    def push_image(self, ref: str) -> Pushed: ...

    def remove_image(self, ref: str, force: bool = False) -> None: ...


class TagStore(Protocol):
    """The part of accel_images.registry.RegistryClient that publishing uses."""

    def manifest_digest(self, repository: str, tag: str) -> str | None: ...

    def delete_tag(self, repository: str, tag: str) -> bool: ...

    def copy_tag(self, repository: str, source: str, tag: str) -> str: ...

    def image(self, repository: str, tag: str) -> RemoteImage | None: ...


@dataclass(frozen=True)
class Target:
    """Where images go: `host/repository:tag`, as Docker spells the reference."""

    host: str
    repository: str

    def ref(self, tag: str) -> str:
        return f"{self.host}/{self.repository}:{tag}"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of transient registry failures: delays first, 2x first, ... up to max."""

    tries: int = 3
    first_delay_s: float = 2.0
    max_delay_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        return min(self.max_delay_s, self.first_delay_s * 2.0 ** (attempt - 1))


@dataclass(frozen=True)
class Publication:
    """What publishing one variant did."""

    candidate: str                         # the candidate reference
    digest: str | None = None              # pushed and smoke-tested
    smoke: SmokeResult | None = None
    promoted: tuple[str, ...] = ()         # real tags now pointing at `digest`
    error: str | None = None
    candidate_left: bool = False           # the candidate tag could not be removed from the registry
    exit_code: int = 1                     # of the failure: 4 when the registry was out of reach
    tags_after: Mapping[str, str | None] | None = None
    """After a stopped promotion: what each real tag serves, read back from the registry (None: absent)."""
    uploaded_layers: int = 0               # layers the candidate push sent (the registry lacked them)
    uploaded_bytes: int = 0                # their compressed size: what the push cost
    attestation: Attestation | None = None  # the SBOM and provenance attached to `digest`

    @property
    def ok(self) -> bool:
        return self.error is None


def with_retries(action: Callable[[], T], policy: RetryPolicy, what: str = "registry call") -> T:
    """`action()`, retried after transient RegistryErrors only; the last error when tries run out."""
    for attempt in range(1, policy.tries + 1):
        try:
            return action()
        except RegistryError as error:
            if not error.transient or attempt >= policy.tries:
                raise
            delay = policy.delay(attempt)
            log.info("%s failed (%s); retry %d/%d in %.0f s", what, error.one_line(), attempt,
                     policy.tries - 1, delay)
            policy.sleep(delay)
    raise AssertionError("unreachable: tries must be at least 1")


def publish(engine: Pusher, registry: TagStore, image_id: str, variant: Variant, target: Target,
            real_tags: Sequence[str], run_id: str, smoke: SmokeRunner, *,
            retry: RetryPolicy = RetryPolicy(), status: Status | None = None,
            on_green: OnGreen | None = None, attest: Attest | None = None) -> Publication:
    """Candidate -> smoke -> promotion of one built image; failures are in the Publication.

    `real_tags` are the tags a green image is promoted to, the full tag first
    (accel_images.model.tags.all_tags). `attest`, when given, attaches the SBOM and provenance to
    the green digest; then `on_green` hears the smoke-tested digest and result (the nightly
    records them: accel_images.publish.tested and the catalogue's smoke record, accel_images.publish.catalogue).
    Both run before any real tag moves; when either fails, nothing is promoted. Ctrl-C still
    removes the candidate, then propagates.
    """
    say = status or (lambda v, text: None)
    steps = _Steps(target.ref(candidate_tag(variant, run_id)))
    try:
        publication = _publish(engine, registry, image_id, variant, target, real_tags, smoke, retry, say, steps,
                               on_green or (lambda digest, result: None), attest)
    except AccelError as error:
        publication = replace(steps.failed(error.one_line()), exit_code=error.exit_code)
    except BaseException as error:
        left = _remove_candidate(engine, registry, target, candidate_tag(variant, run_id), steps, retry)
        if isinstance(error, KeyboardInterrupt):
            setattr(error, _STOPPED, replace(steps.failed(STOPPED_ERROR), candidate_left=left))
        raise
    try:
        left = _remove_candidate(engine, registry, target, candidate_tag(variant, run_id), steps, retry)
    except KeyboardInterrupt as interrupt:
        # Stopped after the publication ended (every real tag moved, or none): it stands as it is,
        # and the candidate is reported as the registry has it now.
        left = _candidate_remains(registry, target, candidate_tag(variant, run_id), steps)
        setattr(interrupt, _STOPPED, replace(publication, candidate_left=left))
        raise
    return replace(publication, candidate_left=left)


_STOPPED = "accel_images_publication"
STOPPED_ERROR = "interrupted"
"""The error of a publication a stop cut short (`stopped_publication`): any other ended before the stop."""


def stopped_publication(interrupt: BaseException) -> Publication | None:
    """What a publication stopped by this interrupt did (tags read back after the rollback)."""
    found = getattr(interrupt, _STOPPED, None)
    return found if isinstance(found, Publication) else None


@dataclass
class _Steps:
    """What has happened so far, so a failure part-way still reports it."""

    candidate: str
    digest: str | None = None
    smoke: SmokeResult | None = None
    promoted: list[str] = field(default_factory=list)
    tags_after: dict[str, str | None] | None = None
    uploaded_layers: int = 0
    uploaded_bytes: int = 0
    attestation: Attestation | None = None

    def failed(self, error: str) -> Publication:
        return Publication(self.candidate, self.digest, self.smoke, tuple(self.promoted), error,
                           tags_after=self.tags_after, uploaded_layers=self.uploaded_layers,
                           uploaded_bytes=self.uploaded_bytes, attestation=self.attestation)

    def done(self) -> Publication:
        return Publication(self.candidate, self.digest, self.smoke, tuple(self.promoted),
                           uploaded_layers=self.uploaded_layers, uploaded_bytes=self.uploaded_bytes,
                           attestation=self.attestation)


def _publish(engine: Pusher, registry: TagStore, image_id: str, variant: Variant, target: Target,
             real_tags: Sequence[str], smoke: SmokeRunner, retry: RetryPolicy, say: Status,
             steps: _Steps, on_green: OnGreen, attest: Attest | None = None) -> Publication:
    stopping.checkpoint()
    say(variant, f"pushing candidate {steps.candidate}")
    engine.tag(image_id, steps.candidate)
    pushed = with_retries(lambda: engine.push_image(steps.candidate), retry, f"push of {steps.candidate}")
    steps.digest = pushed.digest
    steps.uploaded_layers, steps.uploaded_bytes = len(pushed.uploaded), uploaded_bytes(
        registry, target.repository, steps.candidate.rsplit(":", 1)[-1], pushed, retry)
    stopping.checkpoint()
    say(variant, "smoke test of the candidate")
    steps.smoke = smoke(steps.candidate, variant)
    if not steps.smoke.ok:
        return steps.failed("smoke: " + "; ".join(steps.smoke.failures))
    if attest is not None:
        stopping.checkpoint()
        say(variant, "attaching the SBOM and provenance")
        steps.attestation = attest(steps.candidate, steps.digest, steps.smoke)
    stopping.checkpoint()
    on_green(steps.digest, steps.smoke)
    if not real_tags:  # one platform's image of an index: the index is promoted as a whole (promote_index)
        return steps.done()
    say(variant, "promoting")
    before = {tag: with_retries(lambda: registry.manifest_digest(target.repository, tag), retry,
                                f"reading {target.ref(tag)}") for tag in real_tags}
    try:
        promote(engine, image_id, target, real_tags, steps.digest, retry, steps.promoted)
        verify(registry, target, full_tag(variant), steps.digest, retry)
    except KeyboardInterrupt:
        say(variant, "stopped: putting the real tags back")
        steps.tags_after = roll_back(registry, target, before, steps.digest)
        steps.promoted[:] = [tag for tag in real_tags
                             if steps.tags_after.get(tag) == steps.digest != before.get(tag)]
        raise
    return steps.done()


class IndexStore(TagStore, Protocol):
    """What promoting an image index needs of accel_images.registry.RegistryClient: manifest puts."""

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> tuple[str, bool]: ...


@dataclass(frozen=True)
class IndexPromotion:
    """What promoting one image index did: the tags now on it, and after a stop where each tag is."""

    digest: str
    promoted: tuple[str, ...] = ()
    tags_after: Mapping[str, str | None] | None = None


def promote_index(registry: IndexStore, target: Target, real_tags: Sequence[str], index: bytes, digest: str,
                  media_type: str, retry: RetryPolicy = RetryPolicy()) -> IndexPromotion:
    """Put the image index `index` (whose every platform's image passed its smoke test, already
    recorded) under every real tag, the full tag first, and check the full tag serves it.

    As `publish` promotes one image: each put must land on `digest`; Ctrl-C puts every tag already
    moved back (roll_back) and the interrupt carries the IndexPromotion with the tags read back. A failure
    part-way (a 500 on the dated tag after the full tag moved) leaves the tags that moved where they are,
    and the error carries the IndexPromotion too (`failed_index`): which tags moved, what each serves now."""
    before = {tag: with_retries(lambda: registry.manifest_digest(target.repository, tag), retry,
                                f"reading {target.ref(tag)}") for tag in real_tags}
    promoted: list[str] = []
    try:
        for tag in real_tags:
            stopping.checkpoint()
            put = with_retries(lambda: stopping.finish_in_flight(
                lambda: registry.put_manifest(target.repository, tag, index, media_type)[0]), retry,
                f"writing {target.ref(tag)}")
            if put != digest:
                raise RegistryError(f"{target.ref(tag)} was written as {put}, not as the smoke-tested index {digest}")
            promoted.append(tag)
        if real_tags:
            verify(registry, target, real_tags[0], digest, retry)
    except KeyboardInterrupt as interrupt:
        after = roll_back(registry, target, before, digest)
        setattr(interrupt, _STOPPED_INDEX, IndexPromotion(digest, tuple(
            tag for tag in real_tags if after.get(tag) == digest != before.get(tag)), after))
        raise
    except AccelError as error:
        after = _read_tags(registry, target, before)
        moved = tuple(tag for tag in real_tags if after.get(tag) == digest)
        setattr(error, _FAILED_INDEX, IndexPromotion(digest, moved, after))
        raise
    return IndexPromotion(digest, tuple(promoted))


_STOPPED_INDEX = "accel_images_index_promotion"
_FAILED_INDEX = "accel_images_failed_index_promotion"


def failed_index(error: BaseException) -> IndexPromotion | None:
    """What an index promotion that failed with this error did: the tags on the new index, each tag read back."""
    found = getattr(error, _FAILED_INDEX, None)
    return found if isinstance(found, IndexPromotion) else None


def stopped_index(interrupt: BaseException) -> IndexPromotion | None:
    """What an index promotion stopped by this interrupt did (tags read back after the rollback)."""
    found = getattr(interrupt, _STOPPED_INDEX, None)
    return found if isinstance(found, IndexPromotion) else None


def uploaded_bytes(registry: TagStore, repository: str, tag: str, pushed: Pushed, retry: RetryPolicy) -> int:
    """The compressed bytes of the layers a push uploaded, read from the manifest it wrote.

    The engine names the layers it sent but reports progress in uncompressed bytes; the
    manifest holds what actually crossed the wire. Nothing uploaded costs no registry call.
    """
    if not pushed.uploaded:
        return 0
    remote = with_retries(lambda: registry.image(repository, tag), retry, f"reading {repository}:{tag}")
    return sum(remote.layer_size(short) for short in pushed.uploaded) if remote else 0


def roll_back(registry: TagStore, target: Target, before: Mapping[str, str | None],
              digest: str) -> dict[str, str | None]:
    """Point every real tag a stopped promotion moved onto `digest` back at what it served `before`.

    A tag that did not exist before is removed. Every tag is checked in the registry, not
    only those whose push returned: a push the interrupt cut short may still have landed.
    Then every tag is read again (and put back once more if one moved meanwhile); returns
    what each serves at the end, leaving out a tag that could not be read. Never raises an
    expected failure: the interrupt on its way up must not be hidden.
    """
    after: dict[str, str | None] = {}
    for _ in range(2):
        for tag, previous in before.items():
            try:
                if previous == digest or registry.manifest_digest(target.repository, tag) != digest:
                    continue
                if previous is None:
                    registry.delete_tag(target.repository, tag)
                else:
                    registry.copy_tag(target.repository, previous, tag)
            except AccelError as error:
                log.warning("%s left on %s after the stop: %s", target.ref(tag), digest, error.one_line())
        after = _read_tags(registry, target, before)
        if all(tag in after and after[tag] == before[tag] for tag in before):
            break
    for tag, previous in before.items():
        if tag in after and after[tag] != previous:
            log.warning("%s serves %s after the stop, not %s as before", target.ref(tag), after[tag], previous)
    return after


def _read_tags(registry: TagStore, target: Target, tags: Mapping[str, object]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for tag in tags:
        try:
            found[tag] = registry.manifest_digest(target.repository, tag)
        except AccelError as error:
            log.warning("%s could not be read after the stop: %s", target.ref(tag), error.one_line())
    return found


def promote(engine: Pusher, image_id: str, target: Target, real_tags: Sequence[str], digest: str,
            retry: RetryPolicy, promoted: list[str]) -> None:
    """Tag and push each real tag; every push must land on the smoke-tested digest.

    Tags that only mark a day are pushed, then their local names dropped, so old images do
    not stay alive on the build host under a date.
    """
    for tag in real_tags:
        stopping.checkpoint()  # inside the caller's rollback: a stop here puts moved tags back
        ref = target.ref(tag)
        engine.tag(image_id, ref)
        pushed = with_retries(lambda: stopping.finish_in_flight(lambda: engine.push(ref)), retry, f"push of {ref}")
        if pushed != digest:
            raise RegistryError(f"{ref} was pushed as {pushed}, not as the smoke-tested {digest}")
        promoted.append(tag)
        if DATED.fullmatch(tag) and tag.startswith(real_tags[0]):
            engine.remove_image(ref)


def verify(registry: TagStore, target: Target, tag: str, digest: str, retry: RetryPolicy) -> None:
    """The registry, asked directly, must serve `digest` under `tag`."""
    found = with_retries(lambda: registry.manifest_digest(target.repository, tag), retry,
                         f"reading {target.ref(tag)}")
    if found != digest:
        raise RegistryError(f"after promotion {target.ref(tag)} points at {found or 'nothing'},"
                            f" not at the smoke-tested {digest}")


def _remove_candidate(engine: Pusher, registry: TagStore, target: Target, tag: str, steps: _Steps,
                      retry: RetryPolicy) -> bool:
    """Drop the candidate everywhere; True when it may still be in the registry.

    Never raises an expected failure: a leftover candidate must not hide the outcome.
    """
    try:
        engine.remove_image(steps.candidate)
    except AccelError as error:
        log.warning("local name %s left behind: %s", steps.candidate, error.one_line())
    if steps.digest is None:
        return False  # never pushed: the manifest is the last thing a push writes
    try:
        # A stop waits for a delete under way: its tag is pointed at a tombstone first (RegistryClient.delete_tag).
        with_retries(lambda: stopping.finish_in_flight(lambda: registry.delete_tag(target.repository, tag)), retry,
                     f"deleting {steps.candidate}")
    except AccelError as error:
        log.warning("candidate %s left in the registry: %s", steps.candidate, error.one_line())
        return True
    return False


def _candidate_remains(registry: TagStore, target: Target, tag: str, steps: _Steps) -> bool:
    """Whether the candidate tag is still in the registry after a stop cut its removal short (True when
    it cannot be told). Never raises an expected failure: the interrupt on its way up must not be hidden."""
    if steps.digest is None:
        return False
    try:
        return registry.manifest_digest(target.repository, tag) is not None
    except AccelError as error:
        log.warning("candidate %s may be left in the registry: %s", steps.candidate, error.one_line())
        return True
