"""accel_images.publish.promote: candidate -> smoke -> promotion, with the order, retries and cleanup checked
against an engine whose pushes land in the shared in-memory registry (tests/fakes.py PushingEngine and
InMemoryRegistry, read back through the real client), and the whole flow once against the real engine and
local registry.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_publish_integration.py.
"""

from __future__ import annotations

from collections.abc import Callable

from dataclasses import dataclass, field
from datetime import date

import pytest

from accel_images.kb import compat
from accel_images.model import tags
from accel_images.errors import EngineError, RegistryError
from accel_images.publish.promote import Publication, RetryPolicy, Target, publish, stopped_publication, with_retries
from accel_images.smoke.judge import SmokeResult
from accel_images.model.variant import Variant
from accel_images.plan.variants import make_variant
from fakes import InMemoryRegistry, PushingEngine

DIGEST = "sha256:" + "1" * 64
DAY = date(2026, 12, 2)
TARGET = Target("reg.example:5000", "team/pytorch")

GREEN = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=())
RED = SmokeResult(ok=False, ran_on="cpu", cpu_fallback=False, failures=("check mlp_training failed: loss rose",),
                  checks=())


@pytest.fixture(scope="module")
def variants() -> tuple[Variant, ...]:
    kb = compat.load_kb()
    return (make_variant(kb, "cpu", None, "2.14", "3.11", "debian12", "runtime"),
            make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime"))


def transient(message: str = "registry unreachable (connection refused)") -> RegistryError:
    error = RegistryError(message)
    error.transient = True
    return error


@dataclass
class Smoke:
    result: SmokeResult = GREEN
    seen: list[str] = field(default_factory=list)
    raises: BaseException | None = None

    def __call__(self, image: str, variant: Variant) -> SmokeResult:
        self.seen.append(image)
        if self.raises is not None:
            raise self.raises
        return self.result


def no_sleep() -> tuple[RetryPolicy, list[float]]:
    slept: list[float] = []
    return RetryPolicy(sleep=slept.append), slept


def run(variant: Variant, variants: tuple[Variant, ...], engine: PushingEngine, smoke: Smoke,
        retry: RetryPolicy | None = None) -> Publication:
    """Publish `variant` with `engine` into the registry its pushes land in."""
    return publish(engine, engine.registry, "sha256:image", variant, TARGET, tags.all_tags(variant, variants, DAY),
                   "run1", smoke, retry=retry or no_sleep()[0])


def pushes(engine: PushingEngine) -> list[str]:
    return [ref.rsplit(":", 1)[1] for call, ref in engine.calls if call == "push"]


def deletes(registry: InMemoryRegistry) -> list[str]:
    """The manifest DELETEs that reached the registry, check_deletes' probe of an unknown digest left out."""
    return [path for method, path in registry.requests if method == "DELETE" and not path.endswith("0" * 64)]


# ---- order and promotion ----------------------------------------------------------------------

def test_green_candidate_is_smoked_then_promoted_then_removed(variants: tuple[Variant, ...]) -> None:
    newest = variants[0]
    registry, smoke = InMemoryRegistry(), Smoke()
    engine = PushingEngine(registry)
    publication = run(newest, variants, engine, smoke)
    candidate = f"{newest.tag}-candidate-run1"
    real = (newest.tag, f"{newest.tag}-20261202", "2.14-cpu", "latest-cpu")
    assert publication.ok and publication.digest is not None and not publication.candidate_left
    assert smoke.seen == [TARGET.ref(candidate)]                        # the pushed image was the one tested
    assert pushes(engine) == [candidate, *real]
    assert publication.promoted == real
    assert registry.tagged == dict.fromkeys(real, publication.digest)  # the candidate alone was deleted
    assert len(deletes(registry)) == 1
    assert ("remove", TARGET.ref(candidate)) in engine.calls
    assert ("remove", TARGET.ref(f"{newest.tag}-20261202")) in engine.calls   # no local name per day
    assert engine.calls.index(("push", TARGET.ref(candidate))) < engine.calls.index(("push", TARGET.ref(newest.tag)))


def test_the_smoke_record_is_written_after_the_green_smoke_and_before_any_real_tag(
        variants: tuple[Variant, ...]) -> None:
    registry, smoke = InMemoryRegistry(), Smoke()
    engine = PushingEngine(registry)
    vouched: list[tuple[str, int, dict[str, str]]] = []
    publication = publish(engine, registry, "sha256:image", variants[0], TARGET,
                          tags.all_tags(variants[0], variants, DAY), "run1", smoke, retry=no_sleep()[0],
                          on_green=lambda digest, result: vouched.append((digest, len(pushes(engine)),
                                                                          dict(registry.tagged))))
    candidate = f"{variants[0].tag}-candidate-run1"
    assert publication.ok and vouched == [(publication.digest, 1, {candidate: publication.digest})]  # no real tag yet


def test_a_smoke_record_that_cannot_be_written_promotes_nothing(variants: tuple[Variant, ...]) -> None:
    registry = InMemoryRegistry()
    engine = PushingEngine(registry)

    def refuse(digest: str, result: SmokeResult) -> None:
        raise RegistryError("registry HOST denied access (forbidden) while writing REPO:sha256-x.smoke")

    publication = publish(engine, registry, "sha256:image", variants[0], TARGET,
                          tags.all_tags(variants[0], variants, DAY), "run1", Smoke(), retry=no_sleep()[0],
                          on_green=refuse)
    assert publication.error == "registry HOST denied access (forbidden) while writing REPO:sha256-x.smoke"
    assert publication.promoted == () and pushes(engine) == [f"{variants[0].tag}-candidate-run1"]
    assert registry.tagged == {}                                   # no real tag, and the candidate went


def test_older_variant_gets_only_its_own_aliases(variants: tuple[Variant, ...]) -> None:
    older = variants[1]
    registry = InMemoryRegistry()
    publication = run(older, variants, PushingEngine(registry), Smoke())
    assert publication.promoted == (older.tag, f"{older.tag}-20261202", "2.13-cpu")
    assert sorted(registry.tagged) == sorted(publication.promoted)


def test_red_smoke_moves_no_real_tag(variants: tuple[Variant, ...]) -> None:
    registry = InMemoryRegistry()
    engine = PushingEngine(registry)
    publication = run(variants[0], variants, engine, Smoke(RED))
    assert not publication.ok
    assert publication.error == "smoke: check mlp_training failed: loss rose"
    assert publication.promoted == ()
    assert pushes(engine) == [f"{variants[0].tag}-candidate-run1"]
    assert registry.tagged == {} and len(deletes(registry)) == 1   # the candidate was pushed, then deleted


def test_failed_candidate_push_runs_no_smoke_and_deletes_nothing_remote(variants: tuple[Variant, ...]) -> None:
    candidate = TARGET.ref(f"{variants[0].tag}-candidate-run1")
    registry, smoke = InMemoryRegistry(), Smoke()
    engine = PushingEngine(registry, push_failures={candidate: [RegistryError("push of x failed: access denied")]})
    publication = run(variants[0], variants, engine, smoke)
    assert publication.error == "push of x failed: access denied"
    assert smoke.seen == [] and publication.promoted == () and registry.requests == []   # not even asked
    assert len(pushes(engine)) == 1  # permanent: not retried


def test_promotion_landing_on_another_digest_stops(variants: tuple[Variant, ...]) -> None:
    newest = variants[0]
    dated = TARGET.ref(f"{newest.tag}-20261202")

    class Retagged(PushingEngine):
        """The dated tag's local name is on another image by the time it is pushed."""

        def tag(self, image: str, ref: str) -> None:
            super().tag("sha256:another" if ref == dated else image, ref)

    registry = InMemoryRegistry()
    engine = Retagged(registry)
    publication = run(newest, variants, engine, Smoke())
    other = registry.serving(f"{newest.tag}-20261202")
    assert other is not None and other != publication.digest
    assert not publication.ok and f"was pushed as {other}, not as the smoke-tested {publication.digest}" in (
        publication.error or "")
    assert publication.promoted == (newest.tag,)
    assert "2.14-cpu" not in pushes(engine)


def test_promotion_is_verified_in_the_registry(variants: tuple[Variant, ...]) -> None:
    registry = InMemoryRegistry()

    class Raced(PushingEngine):
        """Another job moves the full tag as soon as the last alias was pushed."""

        def push(self, ref: str) -> str:
            pushed = super().push(ref)
            if ref == TARGET.ref("latest-cpu"):
                registry.push_image({"pushed by": "another job"}, tag=variants[0].tag)
            return pushed

    publication = run(variants[0], variants, Raced(registry), Smoke())
    other = registry.serving(variants[0].tag)
    assert not publication.ok and other != publication.digest
    assert f"points at {other}, not at the smoke-tested {publication.digest}" in (publication.error or "")


def test_candidate_that_cannot_be_deleted_is_reported_not_fatal(variants: tuple[Variant, ...]) -> None:
    registry = InMemoryRegistry(deletes_enabled=False)
    publication = run(variants[0], variants, PushingEngine(registry), Smoke())
    assert publication.ok and publication.candidate_left
    assert registry.serving(f"{variants[0].tag}-candidate-run1") == publication.digest   # still there, as said


def test_ctrl_c_during_the_smoke_still_removes_the_candidate(variants: tuple[Variant, ...]) -> None:
    registry = InMemoryRegistry()
    engine = PushingEngine(registry)
    with pytest.raises(KeyboardInterrupt):
        run(variants[0], variants, engine, Smoke(raises=KeyboardInterrupt()))
    assert pushes(engine) == [f"{variants[0].tag}-candidate-run1"]
    assert registry.tagged == {} and len(deletes(registry)) == 1   # the candidate was pushed, then deleted


@pytest.mark.parametrize("left", [True, False])
def test_ctrl_c_while_the_candidate_is_removed_reports_the_finished_promotion(variants: tuple[Variant, ...],
                                                                             left: bool) -> None:
    """Every real tag moved; the stop comes during the clean-up: the publication stands as it ended."""
    candidate = f"{variants[0].tag}-candidate-run1"

    class StoppedWhileDeleting(InMemoryRegistry):
        """Ctrl-C during the candidate's delete, before it landed or after: a stop, which no answer raises."""

        def delete_tag(self, repository: str, tag: str) -> bool:
            if not left:
                super().delete_tag(repository, tag)
            raise KeyboardInterrupt

    registry = StoppedWhileDeleting()
    with pytest.raises(KeyboardInterrupt) as caught:
        run(variants[0], variants, PushingEngine(registry), Smoke())
    stopped = stopped_publication(caught.value)
    assert stopped is not None and stopped.ok and stopped.digest is not None
    assert stopped.digest == registry.serving(variants[0].tag)
    assert stopped.promoted == tuple(tags.all_tags(variants[0], variants, DAY))
    assert stopped.candidate_left is left and stopped.tags_after is None
    assert (registry.serving(candidate) == stopped.digest) is left


def test_engine_failure_in_the_smoke_is_a_failed_publication(variants: tuple[Variant, ...]) -> None:
    publication = run(variants[0], variants, PushingEngine(InMemoryRegistry()),
                      Smoke(raises=EngineError("image x not found locally")))
    assert publication.error == "image x not found locally" and publication.promoted == ()


# ---- retries ------------------------------------------------------------------------------------

def test_transient_push_failures_are_retried_with_backoff(variants: tuple[Variant, ...]) -> None:
    candidate = TARGET.ref(f"{variants[0].tag}-candidate-run1")
    engine = PushingEngine(InMemoryRegistry(), push_failures={candidate: [transient(), transient()]})
    retry, slept = no_sleep()
    publication = run(variants[0], variants, engine, Smoke(), retry)
    assert publication.ok
    assert pushes(engine)[:3] == [f"{variants[0].tag}-candidate-run1"] * 3
    assert slept == [2.0, 4.0]


def test_retries_are_bounded_and_capped() -> None:
    slept: list[float] = []
    attempts: list[int] = []

    def always_down() -> None:
        attempts.append(1)
        raise transient()

    with pytest.raises(RegistryError):
        with_retries(always_down, RetryPolicy(tries=4, first_delay_s=10, max_delay_s=15, sleep=slept.append))
    assert len(attempts) == 4
    assert slept == [10, 15, 15]


def test_permanent_errors_are_not_retried() -> None:
    attempts: list[int] = []

    def denied() -> None:
        attempts.append(1)
        raise RegistryError("access denied")

    with pytest.raises(RegistryError):
        with_retries(denied, RetryPolicy(sleep=lambda s: pytest.fail("slept")))
    assert attempts == [1]


# ---- a stop while a registry call is in flight ------------------------------------------------

def until(condition: Callable[[], bool], what: str, bound_s: float = 30) -> None:
    """Wait for a condition another thread makes true (never for a time that a loaded machine may exceed)."""
    import time
    deadline = time.monotonic() + bound_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened")
        time.sleep(0.01)


def test_a_stop_waits_for_the_call_in_flight_then_goes_on_up(capsys: pytest.CaptureFixture[str]) -> None:
    """The interrupt is held until the call ended, and says so once; the call's own result is not lost, nor the
    stop. The call itself sends the interrupt, then ends only once the stop was taken: no timer decides the
    order."""
    import os
    import signal
    import time

    from accel_images import stopping

    ended: list[float] = []

    def slow_put() -> str:
        os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C while the call is in flight
        until(stopping.stop_requested, "the stop")
        ended.append(time.monotonic())
        return DIGEST

    try:
        with pytest.raises(KeyboardInterrupt):
            stopping.finish_in_flight(slow_put)
        raised = time.monotonic()
        assert ended and raised >= ended[0]
        assert stopping.stop_requested()
        assert capsys.readouterr().err == "accel-images: stopping once the registry request in flight has ended" \
                                          " (at most 120 s)\n"
    finally:
        stopping.reset()


def test_a_stop_waits_no_longer_than_its_bound() -> None:
    import os
    import signal
    import threading
    import time

    from accel_images import stopping

    release = threading.Event()

    def hanging_put() -> bool:
        os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C while the call is in flight, which then never ends
        return release.wait(30)

    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            stopping.finish_in_flight(hanging_put, max_wait_s=0.2)
        assert time.monotonic() - started < 5
    finally:
        release.set()
        stopping.reset()


def test_a_stopped_promotion_puts_tags_back_and_says_where_each_is(variants: tuple[Variant, ...]) -> None:
    """Ctrl-C after the full tag moved: rolled back, read back, and the publication on the interrupt says so."""
    newest = variants[0]
    real = tags.all_tags(newest, variants, DAY)

    registry = InMemoryRegistry()
    previous = registry.push_image({"io.accel-images.built": "last night's"}, tag=newest.tag)

    class Stopping(PushingEngine):
        """Ctrl-C as the dated tag's push lands."""

        def push(self, ref: str) -> str:
            pushed = super().push(ref)
            if ref == TARGET.ref(real[1]):
                raise KeyboardInterrupt
            return pushed

    engine = Stopping(registry)
    with pytest.raises(KeyboardInterrupt) as caught:
        publish(engine, registry, "sha256:image", newest, TARGET, real, "run1", Smoke(), retry=no_sleep()[0])
    stopped = stopped_publication(caught.value)
    assert stopped is not None and stopped.error == "interrupted"
    assert pushes(engine)[1:] == [newest.tag, real[1]]                 # both real tags had moved
    assert registry.tagged == {newest.tag: previous}  # put back, the new dated tag and the candidate deleted
    assert stopped.promoted == ()
    assert stopped.tags_after == {newest.tag: previous, **{tag: None for tag in real[1:]}}
