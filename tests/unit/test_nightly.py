"""The nightly rebuild: what is skipped and why, promote on green, the lock, and the command.

The end-to-end tests use a tiny template set (tests/nightly_fixture/templates: the base image
plus a stub smoke workload that reports what the image promises) on top of local/debian:bookworm,
published under a repository of their own in the local registry; each run takes seconds.
Registry state is checked over the registry's HTTP API directly, not through accel_images.registry.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_nightly_integration.py.
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from securesystemslib.signer import CryptoSigner

from accel_images.kb import compat
from accel_images.builder.builder import BASE_DIGEST_LABEL, CREATED_LABEL, Builder, Prepared
from accel_images.cli import nightly as cli_nightly
from accel_images.cli.nightly import nightly_command
from accel_images.cli.options import load_expansion
from accel_images.builder.outcome import Outcome
from accel_images.builder.settings import BuildSettings
from accel_images.state import StateDir
from accel_images.builder.engine import ImageInfo, Pushed
from accel_images.errors import InputError, RegistryError
from accel_images.builder.fingerprint import FINGERPRINT_LABEL
from accel_images.lock import LockBusy, held
from accel_images.publish.retention import Pruning
from accel_images.publish.nightly import (NightlyOptions, NightlyOutcome, describe, nightly_record, read_verified,
                                           rebuild_reason, run_nightly, write_verified)
from accel_images.publish.promote import RetryPolicy, Target
from accel_images.registry import RemoteImage
from accel_images.smoke.judge import SmokeResult
from accel_images.publish.tested import RECORD_LABEL, SmokedRecord
from accel_images.plan.variants import Expansion
import fakeimage
from accel_images.smoke.integrity import Inventory
from accel_images.smoke.records import remember_build
from fakes import FakeEngine, Fault, InMemoryRegistry, PushingEngine

FIXTURE = Path(__file__).parents[1] / "nightly_fixture"
TEMPLATES = FIXTURE / "templates"
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=timezone.utc)
MATRIX = """schema: 1
image: {image}
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
    - torch: ["2.14"]
      python: ["3.12"]
      os: [ubuntu24.04]
      flavor: [runtime]
"""
DEBIAN = "2.13.0-cpu-py3.11-debian12"
UBUNTU = "2.14.1-cpu-py3.12-ubuntu24.04"
GREEN = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=())
NO_WAIT = RetryPolicy(sleep=lambda seconds: None)


def write_matrix(directory: Path, image: str) -> Path:
    path = directory / "matrix.yaml"
    path.write_text(MATRIX.format(image=image))
    return path


# ---- why a variant is rebuilt ----------------------------------------------------------------------

def prepared(fingerprint: str = "sha256:new", base: str = "base@sha256:bbb") -> Prepared:
    return Prepared(variant=None, ref="x", context_dir=Path("."), args={},
                    fingerprint=fingerprint, base_digest=base)


def remote(labels: dict[str, str], created: datetime | None = None) -> RemoteImage:
    return RemoteImage("team/img", "tag", "sha256:" + "d" * 64, labels, created)


@pytest.mark.parametrize("image,reason", [
    (None, "first publication"),
    (remote({}), "the registry's image has no fingerprint label"),
    (remote({FINGERPRINT_LABEL: "sha256:old", BASE_DIGEST_LABEL: "base@sha256:aaa"}),
     "base image changed (sha256:aaa -> sha256:bbb)"),
    (remote({FINGERPRINT_LABEL: "sha256:old", BASE_DIGEST_LABEL: "base@sha256:bbb"}),
     "template, build context or build args changed"),
    (remote({FINGERPRINT_LABEL: "sha256:new", CREATED_LABEL: "2026-11-01T00:00:00Z"}),
     "older than 7 days (built 2026-11-01)"),
    (remote({FINGERPRINT_LABEL: "sha256:new"}, created=NOW - timedelta(days=8)), "older than 7 days (built 2026-11-24)"),
    (remote({FINGERPRINT_LABEL: "sha256:new"}), "the registry's image has no build date"),
    (remote({FINGERPRINT_LABEL: "sha256:new", CREATED_LABEL: "2026-11-30T00:00:00Z"}), None),
    (remote({FINGERPRINT_LABEL: "sha256:new"}, created=NOW - timedelta(days=1)), None),
])
def test_rebuild_reason(image: RemoteImage | None, reason: str | None) -> None:
    assert rebuild_reason(image, prepared(), 7, NOW) == reason


def test_max_age_zero_rebuilds_everything() -> None:
    fresh = remote({FINGERPRINT_LABEL: "sha256:new", CREATED_LABEL: "2026-12-02T02:59:00Z"})
    assert rebuild_reason(fresh, prepared(), 0, NOW) == "older than 0 days (built 2026-12-02)"


def test_a_build_date_in_the_future_is_an_unknown_age_and_rebuilds() -> None:
    """A clock behind the builder's (or a label written to look fresh) gives a negative age: not current."""
    ahead = remote({FINGERPRINT_LABEL: "sha256:new", CREATED_LABEL: "2026-12-09T04:00:00Z"})
    assert rebuild_reason(ahead, prepared(), 7, NOW) == (
        "its build date 2026-12-09 04:00 UTC is in the future: its age is unknown")
    assert rebuild_reason(remote({FINGERPRINT_LABEL: "sha256:new"}, created=NOW + timedelta(seconds=1)),
                          prepared(), 7, NOW) is not None
    assert rebuild_reason(remote({FINGERPRINT_LABEL: "sha256:new"}, created=NOW), prepared(), 7, NOW) is None


# ---- the run, against a fake engine and the in-memory registry ------------------------------------

REPOSITORY = "team/pytorch"


def record_labels(*digests: str, day: str = "20261201") -> dict[str, str]:
    """The labels of the record a nightly leaves under `<full tag>-tested` (accel_images.publish.tested)."""
    return {RECORD_LABEL: json.dumps([{"digest": digest, "day": day, "run": "r0"} for digest in digests])}


def write_tested(registry: InMemoryRegistry, *digests: str, labels: dict[str, str] | None = None) -> None:
    """The Debian variant's tested record listing `digests` (or carrying `labels`), as anyone who can push
    can write it."""
    registry.put_labels_image(REPOSITORY, f"{DEBIAN}-tested", labels or record_labels(*digests))


def publish_by_hand(registry: InMemoryRegistry, fingerprint: str, created: str = "2026-12-01T00:00:00Z",
                    layers: tuple[tuple[str, int], ...] = (), salt: str = "published") -> str:
    """An image under the Debian variant's full tag with `fingerprint` and the build date `created`; its digest."""
    return registry.push_image({FINGERPRINT_LABEL: fingerprint, CREATED_LABEL: created}, tag=DEBIAN, salt=salt,
                               layers=layers)


def copied(registry: InMemoryRegistry) -> list[tuple[str, str]]:
    """(source, tag) of each tag the client copied (RegistryClient.copy_tag: the source's manifest read,
    then put under the tag), in order."""
    return [(read.rsplit("/", 1)[1], put.rsplit("/", 1)[1])
            for (first, read), (then, put) in itertools.pairwise(registry.requests)
            if (first, then) == ("GET", "PUT") and "/manifests/" in read and "/manifests/" in put]


@pytest.fixture
def expansion(tmp_path: Path) -> Expansion:
    return load_expansion(str(write_matrix(tmp_path, "team/pytorch")))


def fake_run(expansion: Expansion, engine: PushingEngine, registry: InMemoryRegistry, tmp_path: Path,
             jobs: int = 1, run_id: str = "r1", signer: CryptoSigner | None = None) -> list[NightlyOutcome]:
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), jobs=jobs)
    # attest=False: the stub images have no torch to inventory (tests/unit/test_supply.py attests)
    options = NightlyOptions(Target(registry.host, REPOSITORY), now=NOW, run_id=run_id, retry=NO_WAIT,
                             attest=False, signer=signer)
    return run_nightly(engine, compat.load_kb(), expansion, expansion.variants, registry,  # type: ignore[arg-type]
                       settings, options, smoke=lambda image, variant: GREEN, templates_dir=TEMPLATES)


def first_night(expansion: Expansion, tmp_path: Path, engine: FakeEngine | None = None) -> NightlyOutcome:
    """The Debian variant's night of a first run into a registry of its own: what a later run's registry
    is then made to hold is up to the test."""
    registry = InMemoryRegistry()
    pushing = PushingEngine(registry) if engine is None else engine
    assert isinstance(pushing, PushingEngine)
    [_, debian] = fake_run(expansion, pushing, registry, tmp_path)
    return debian


def test_unreachable_registry_stops_the_run_before_any_build(expansion: Expansion, tmp_path: Path) -> None:
    registry = InMemoryRegistry()
    registry.faults.append(Fault("^/v2/$", None))     # nothing answers: connection refused
    engine = PushingEngine(registry)
    with pytest.raises(RegistryError, match=re.escape("registry reg.example:5000 unreachable (connection refused)")):
        fake_run(expansion, engine, registry, tmp_path)
    assert engine.calls == []
    assert registry.requests == [("GET", "/v2/")] * NO_WAIT.tries   # retried (transient), nothing else asked


def unchanged(expansion: Expansion, tmp_path: Path, created: str, alias: str | None = None) -> InMemoryRegistry:
    """A registry whose Debian image has this run's fingerprint, the build date `created` and a tested
    record; its dated tag serves it, and 2.13-cpu serves it too unless `alias` names another image's salt."""
    debian = first_night(expansion, tmp_path)
    registry = InMemoryRegistry()
    image = publish_by_hand(registry, debian.outcome.fingerprint or "", created)
    write_tested(registry, image)
    registry.tagged[f"{DEBIAN}-20261201"] = image
    registry.tagged["2.13-cpu"] = image if alias is None else registry.push_image({}, salt=alias)
    return registry


def test_unchanged_variant_is_skipped_and_the_other_published(expansion: Expansion, tmp_path: Path) -> None:
    first_registry = InMemoryRegistry()
    first = fake_run(expansion, PushingEngine(first_registry), first_registry, tmp_path)
    assert [night.status for night in first] == ["built", "built"]
    registry = unchanged(expansion, tmp_path, "2026-12-01T00:00:00Z")
    before = dict(registry.tagged)
    engine = PushingEngine(registry)
    second = fake_run(expansion, engine, registry, tmp_path)
    assert [(n.outcome.variant.tag, n.status) for n in second] == [(UBUNTU, "built"), (DEBIAN, "skipped")]
    assert second[1].reason == "unchanged since 2026-12-01"
    assert second[1].realigned == () and copied(registry) == []
    assert {tag: registry.serving(tag) for tag in before} == before     # no Debian tag moved, nor its record
    assert ("pull", "ubuntu:24.04") in engine.calls and ("pull", "debian:bookworm-slim") in engine.calls
    assert [ref for call, ref in engine.calls if call == "build"] == [f"team/pytorch:{UBUNTU}"]


def test_an_image_built_in_the_future_is_rebuilt_with_a_warning_naming_it_and_its_date(
        expansion: Expansion, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A tested, unchanged image whose build date lies ahead of this clock is not skipped as fresh."""
    registry = unchanged(expansion, tmp_path, "2027-03-01T00:00:00Z")
    engine = PushingEngine(registry)
    with caplog.at_level("WARNING", logger="accel_images.publish.nightly"):
        [_, night] = fake_run(expansion, engine, registry, tmp_path)
    assert night.status == "built" and ("build", f"team/pytorch:{DEBIAN}") in engine.calls
    assert night.reason == "its build date 2027-03-01 00:00 UTC is in the future: its age is unknown"
    [warning] = [record.getMessage() for record in caplog.records if "age is unknown" in record.getMessage()]
    assert f"{registry.host}/team/pytorch:{DEBIAN}" in warning and "2027-03-01 00:00 UTC" in warning
    assert "\n" not in warning


def test_an_unchanged_image_inherits_the_aliases_it_now_wins(expansion: Expansion, tmp_path: Path) -> None:
    registry = unchanged(expansion, tmp_path, "2026-12-01T00:00:00Z", alias="elsewhere")
    tested = registry.serving(DEBIAN)
    [_, night] = fake_run(expansion, PushingEngine(registry), registry, tmp_path)
    assert night.status == "skipped" and night.realigned == ("2.13-cpu",)
    assert copied(registry) == [(tested, "2.13-cpu")]      # the tested digest, not whatever the tag serves
    assert registry.serving("2.13-cpu") == tested


@pytest.mark.parametrize("record", [None, record_labels("sha256:" + "f" * 64), {RECORD_LABEL: "[{]"}],
                         ids=["no-record", "another-digest", "malformed-record"])
def test_an_image_this_tool_never_smoke_tested_is_rebuilt_and_gets_no_alias(
        expansion: Expansion, tmp_path: Path, record: dict[str, str] | None) -> None:
    debian = first_night(expansion, tmp_path)
    registry = InMemoryRegistry()
    image = publish_by_hand(registry, debian.outcome.fingerprint or "")
    if record is not None:
        write_tested(registry, labels=record)
    registry.push_image({}, tag="2.13-cpu", salt="elsewhere")
    engine = PushingEngine(registry)
    [_, night] = fake_run(expansion, engine, registry, tmp_path)
    assert night.status == "built", night.outcome.error
    assert night.reason.startswith(f"{DEBIAN} points at {image[:19]}, which this tool never smoke-tested")
    assert ("build", f"team/pytorch:{DEBIAN}") in engine.calls
    assert copied(registry) == []
    assert night.publication is not None and night.publication.digest not in (None, image)
    assert registry.serving(DEBIAN) == registry.serving("2.13-cpu") == night.publication.digest   # pushed anew
    tested = registry.image(REPOSITORY, f"{DEBIAN}-tested")
    assert tested is not None and SmokedRecord.from_labels(tested.labels).find(night.publication.digest) is not None
    assert SmokedRecord.from_labels(tested.labels).find(image) is None


def test_the_tested_digest_is_recorded_before_any_real_tag_moves(expansion: Expansion, tmp_path: Path) -> None:
    order: list[str] = []

    class Watching(InMemoryRegistry):
        def put_labels_image(self, repository: str, tag: str, labels: Mapping[str, str]) -> str:
            order.append(f"record {tag}")
            return super().put_labels_image(repository, tag, labels)

    class Pushing(PushingEngine):
        def push_image(self, ref: str) -> Pushed:
            order.append(f"push {ref.rsplit(':', 1)[1]}")
            return super().push_image(ref)

    registry = Watching()
    fake_run(expansion, Pushing(registry), registry, tmp_path)
    debian = [step for step in order if DEBIAN in step]
    assert debian[:3] == [f"push {DEBIAN}-candidate-r1", f"record {DEBIAN}-tested", f"push {DEBIAN}"]
    record = registry.image(REPOSITORY, f"{DEBIAN}-tested")
    assert record is not None
    [entry] = SmokedRecord.from_labels(record.labels).entries
    assert (entry.digest, entry.day, entry.run_id) == (registry.serving(DEBIAN), NOW.date(), "r1")


def test_candidates_of_earlier_runs_are_swept_and_later_ones_left(expansion: Expansion, tmp_path: Path) -> None:
    older, newer = "20261201T030000-aaaaaa", "20261202T040000-bbbbbb"
    left = [f"{DEBIAN}-candidate-{older}", f"{DEBIAN}-candidate-{newer}", f"{UBUNTU}-candidate-{older}",
            f"{DEBIAN}-candidate-not-a-run"]
    registry = InMemoryRegistry()
    candidate = registry.push_image({}, salt="an earlier candidate")
    registry.tagged.update(dict.fromkeys(left, candidate))
    nights = fake_run(expansion, PushingEngine(registry), registry, tmp_path, run_id="20261202T030000-cccccc")
    assert {night.outcome.variant.tag: night.swept for night in nights} == {
        UBUNTU: (f"{UBUNTU}-candidate-{older}",), DEBIAN: (f"{DEBIAN}-candidate-{older}",)}
    assert registry.serving(f"{DEBIAN}-candidate-{older}") is None and registry.serving(f"{UBUNTU}-candidate-{older}") is None
    assert registry.serving(f"{DEBIAN}-candidate-{newer}") == candidate
    assert registry.serving(f"{DEBIAN}-candidate-not-a-run") == candidate


def test_a_record_the_registry_cannot_take_promotes_nothing(expansion: Expansion, tmp_path: Path) -> None:
    registry = InMemoryRegistry()
    registry.faults.append(Fault("/manifests/[^/]*-tested$", 403, method="PUT"))   # denied: the record's tag
    engine = PushingEngine(registry)
    nights = fake_run(expansion, engine, registry, tmp_path)
    assert [night.status for night in nights] == ["failed", "failed"]
    assert all(night.publication is not None and night.publication.promoted == () for night in nights)
    assert all("denied access" in (night.outcome.error or "") for night in nights)
    assert {ref.rsplit(":", 1)[1] for call, ref in engine.calls if call == "push"} == {
        f"{UBUNTU}-candidate-r1", f"{DEBIAN}-candidate-r1"}
    assert registry.serving(DEBIAN) is None and registry.serving(UBUNTU) is None


LOCAL_LAYERS = ("sha256:" + "7" * 64, "sha256:" + "8" * 64)


def recorded_local(tmp_path: Path, fingerprint: str, image_id: str = "sha256:local",
                   layers: tuple[str, ...] = LOCAL_LAYERS) -> None:
    """The state directory's record of a build of `fingerprint` (accel_images.smoke.records)."""
    remember_build(StateDir(tmp_path / "state"), fingerprint, image_id, Inventory("/opt/venv/bin/python", {}, ()),
                   layers)


@pytest.mark.parametrize("built_at,reused", [("2026-12-02T02:00:00Z", True), ("2026-11-01T00:00:00Z", False),
                                             ("2026-12-05T00:00:00Z", False)],   # ahead of the clock: age unknown
                         ids=["fresh", "aged", "future"])
def test_a_fresh_local_build_with_the_same_fingerprint_is_published_as_is(expansion: Expansion, tmp_path: Path,
                                                                          built_at: str, reused: bool) -> None:
    first = PushingEngine(InMemoryRegistry())
    debian = first_night(expansion, tmp_path, first)
    fingerprint = debian.outcome.fingerprint or ""
    recorded_local(tmp_path, fingerprint)
    labels = {FINGERPRINT_LABEL: fingerprint, CREATED_LABEL: built_at}
    registry = InMemoryRegistry()
    engine = PushingEngine(registry, local={f"team/pytorch:{DEBIAN}": ImageInfo("sha256:local", (), labels, 1, "", (),
                                                                                LOCAL_LAYERS)},
                           facts={"sha256:local": first.facts[f"sha256:built-team/pytorch:{DEBIAN}"]})
    [_, night] = fake_run(expansion, engine, registry, tmp_path)
    assert night.status == "built" and night.publication is not None and night.publication.ok
    assert (("build", f"team/pytorch:{DEBIAN}") in engine.calls) is not reused
    assert (night.outcome.image_id == "sha256:local") is reused
    assert registry.serving(DEBIAN) == night.publication.digest


def test_an_image_whose_facts_contradict_the_knowledge_base_is_refused_before_its_smoke_test(
        expansion: Expansion, tmp_path: Path) -> None:
    """Its torch says it holds torch 2.13.1: a failed build, named by the knowledge-base row, and nothing
    of it is pushed; the other variant is published as usual."""
    registry = InMemoryRegistry()
    engine = PushingEngine(registry, facts={f"sha256:built-team/pytorch:{DEBIAN}": json.dumps(
        fakeimage.facts_document(torch="2.13.1+cpu", companions={"torchvision": "0.28.0"})).encode()})
    ubuntu, debian = fake_run(expansion, engine, registry, tmp_path)
    assert debian.status == "failed" and debian.publication is None
    assert debian.outcome.error == ('the image\'s facts contradict the knowledge base: accel_images/data/kb.yaml'
                                    ' torch."2.13".versions says 2.13.0; the image has 2.13.1')
    assert not any(DEBIAN in ref for call, ref in engine.calls if call == "push")
    assert not any(DEBIAN in tag for tag in registry.tagged)
    assert ubuntu.status == "built" and ubuntu.publication is not None and ubuntu.publication.ok
    assert ubuntu.outcome.facts is not None and ubuntu.outcome.facts.torch == "2.14.1+cpu"


def test_a_fresh_local_build_whose_facts_contradict_is_not_published(expansion: Expansion, tmp_path: Path) -> None:
    debian = first_night(expansion, tmp_path)
    recorded_local(tmp_path, debian.outcome.fingerprint or "")   # this state directory built it
    labels = {FINGERPRINT_LABEL: debian.outcome.fingerprint or "", CREATED_LABEL: "2026-12-02T02:00:00Z"}
    registry = InMemoryRegistry()
    engine = PushingEngine(registry, local={f"team/pytorch:{DEBIAN}": ImageInfo("sha256:local", (), labels, 1, "", (),
                                                                                LOCAL_LAYERS)},
                           facts={"sha256:local": json.dumps(fakeimage.facts_document(python="3.12.3")).encode()})
    [_, night] = fake_run(expansion, engine, registry, tmp_path)
    assert night.status == "failed" and night.publication is None
    assert "accel_images/data/kb.yaml os.debian12.python says 3.11; the image has 3.12.3" in (night.outcome.error or "")
    assert not any(DEBIAN in tag for tag in registry.tagged)


@pytest.mark.parametrize("record", ["none", "another-image", "other-layers"])
def test_a_local_image_this_state_directory_did_not_build_is_never_published(
        expansion: Expansion, tmp_path: Path, record: str) -> None:
    """A derived image carrying the label (its guard.sh replaced), or another user's build on a shared
    engine: same name, same fingerprint label, fresh; the state directory has no record of it."""
    fingerprint = first_night(expansion, tmp_path).outcome.fingerprint or ""
    if record == "another-image":
        recorded_local(tmp_path, fingerprint, image_id="sha256:the-build")
    elif record == "other-layers":
        recorded_local(tmp_path, fingerprint, layers=LOCAL_LAYERS[:1])
    else:
        StateDir(tmp_path / "state").build_record(fingerprint).unlink()
    labels = {FINGERPRINT_LABEL: fingerprint, CREATED_LABEL: "2026-12-02T02:00:00Z"}
    registry = InMemoryRegistry()
    engine = PushingEngine(registry, local={f"team/pytorch:{DEBIAN}": ImageInfo("sha256:local", (), labels, 1, "", (),
                                                                                LOCAL_LAYERS)})
    [_, night] = fake_run(expansion, engine, registry, tmp_path)
    assert night.status == "built" and night.publication is not None and night.publication.ok
    assert ("build", f"team/pytorch:{DEBIAN}") in engine.calls
    assert night.outcome.image_id == f"sha256:built-team/pytorch:{DEBIAN}"
    assert describe(night).startswith("published (first publication): built in ")


@pytest.mark.parametrize("recorded,skipped", [(True, True), (False, False)])
def test_build_skips_only_an_unchanged_image_this_state_directory_built(expansion: Expansion, tmp_path: Path,
                                                                        recorded: bool, skipped: bool) -> None:
    """`build` alike: a local image with the fingerprint label that the state directory has no record of
    (another user's, a derived one) is built, never taken as this run's unchanged image."""
    first = PushingEngine(InMemoryRegistry())
    fingerprint = first_night(expansion, tmp_path, first).outcome.fingerprint or ""
    if recorded:
        recorded_local(tmp_path, fingerprint)
    labels = {FINGERPRINT_LABEL: fingerprint}
    engine = FakeEngine(local={f"team/pytorch:{DEBIAN}": ImageInfo("sha256:local", (), labels, 1, "", (),
                                                                   LOCAL_LAYERS)},
                        facts={"sha256:local": first.facts[f"sha256:built-team/pytorch:{DEBIAN}"]})
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke=False)
    [outcome] = Builder(engine, compat.load_kb(), expansion, settings,  # type: ignore[arg-type]
                        templates_dir=TEMPLATES).run([v for v in expansion.variants if v.tag == DEBIAN])
    assert (outcome.status == "skipped") is skipped, outcome.error
    assert (("build", f"team/pytorch:{DEBIAN}") in engine.calls) is not skipped


LAYERS = ("sha256:" + "1" * 64, "sha256:" + "2" * 64)
SIZED_LAYERS = tuple(zip(LAYERS, (100, 200), strict=True))
"""The registry's image's layers: (diff ID, compressed size)."""


def aged(registry: InMemoryRegistry, fingerprint: str) -> str:
    """The registry's image with the variant's fingerprint, built a month ago, with LAYERS; its digest."""
    return publish_by_hand(registry, fingerprint, "2026-11-01T00:00:00Z", SIZED_LAYERS)


def rebuilt_with(registry: InMemoryRegistry, layers: tuple[str, ...]) -> PushingEngine:
    """An engine whose build of the Debian variant comes out with `layers`."""
    built = f"sha256:built-team/pytorch:{DEBIAN}"
    return PushingEngine(registry, local={built: ImageInfo(built, (), {}, 1, "", (), layers)})


@pytest.mark.parametrize("rebuilt_layers,kept", [(LAYERS, True), ((LAYERS[0], "sha256:" + "3" * 64), False)])
def test_an_aged_rebuild_with_the_published_layers_pushes_nothing(expansion: Expansion, tmp_path: Path,
                                                                  rebuilt_layers: tuple[str, ...],
                                                                  kept: bool) -> None:
    fingerprint = first_night(expansion, tmp_path).outcome.fingerprint or ""
    registry = InMemoryRegistry()
    published = aged(registry, fingerprint)
    write_tested(registry, published)
    engine = rebuilt_with(registry, rebuilt_layers)
    [_, night] = fake_run(expansion, engine, registry, tmp_path)
    assert night.reason == "older than 7 days (built 2026-11-01)"
    assert ("build", f"team/pytorch:{DEBIAN}") in engine.calls
    pushed = [ref for call, ref in engine.calls if call == "push" and DEBIAN in ref]
    assert night.kept is kept and (pushed == []) is kept
    if kept:
        assert night.registry_digest == published and night.publication is None
        assert registry.serving(DEBIAN) == published
        assert describe(night) == (f"rebuilt, identical content, kept {published}"
                                   " (older than 7 days (built 2026-11-01))")
        assert nightly_record(night, Target(registry.host, REPOSITORY))["uploaded_bytes"] == 0
    else:
        assert night.publication is not None and registry.serving(DEBIAN) == night.publication.digest != published


@pytest.mark.parametrize("record", [None, "another-digest", "unsigned"])
def test_an_aged_image_this_tool_never_tested_is_published_anew_even_when_the_rebuild_equals_it(
        expansion: Expansion, tmp_path: Path, record: str | None) -> None:
    """A hand-pushed image under the full tag: copied fingerprint label, an old `created`, layers equal
    to a rebuild's, a replaced entry point. Not in the tested record (or, with a key, unsigned): it
    is never kept; the rebuild (without the layer cache: it is due to age) is smoke-tested and published."""
    fingerprint = first_night(expansion, tmp_path).outcome.fingerprint or ""
    registry = InMemoryRegistry()
    published = aged(registry, fingerprint)
    if record is not None:
        write_tested(registry, "sha256:" + "f" * 64 if record == "another-digest" else published)
    engine = rebuilt_with(registry, LAYERS)
    signer = CryptoSigner.generate_ed25519() if record == "unsigned" else None
    [_, night] = fake_run(expansion, engine, registry, tmp_path, signer=signer)
    assert night.kept is False and night.status == "built", night.outcome.error
    if record == "unsigned":
        assert night.reason.startswith("the registry's image does not verify: "), night.reason
    else:
        assert night.reason.startswith(f"{DEBIAN} points at {published[:19]}, which this tool never "
                                       "smoke-tested"), night.reason
    assert night.publication is not None and night.publication.promoted[0] == DEBIAN
    assert night.registry_digest == night.publication.digest == registry.serving(DEBIAN) != published
    assert engine.uncached == [f"team/pytorch:{DEBIAN}"]   # due to its age too: today's packages


def test_a_kept_image_is_not_rebuilt_again_before_its_age_runs_out(expansion: Expansion, tmp_path: Path) -> None:
    fingerprint = first_night(expansion, tmp_path).outcome.fingerprint or ""
    registry = InMemoryRegistry()
    published = aged(registry, fingerprint)
    write_tested(registry, published)
    write_verified(StateDir(tmp_path / "state"), published, NOW - timedelta(days=2))
    engine = PushingEngine(registry)
    [_, night] = fake_run(expansion, engine, registry, tmp_path)
    assert night.status == "skipped" and ("build", f"team/pytorch:{DEBIAN}") not in engine.calls
    assert read_verified(StateDir(tmp_path / "state"), published) == NOW - timedelta(days=2)
    assert registry.serving(DEBIAN) == published


def test_a_publication_reports_the_compressed_bytes_it_uploaded(expansion: Expansion, tmp_path: Path) -> None:
    class Uploading(PushingEngine):
        """Its images have two layers (SIZED_LAYERS); a candidate's push sent the second, the registry
        lacking it, and a real tag's push sent nothing."""

        def push_image(self, ref: str) -> Pushed:
            self.calls.append(("push", ref))
            image = self.named.get(ref, ref)
            digest = self.registry.push_image({"io.accel-images.built": image}, tag=ref.rsplit(":", 1)[-1],
                                              salt=image, layers=SIZED_LAYERS)
            return Pushed(digest, ("2" * 12,) if "candidate" in ref else ())

    registry = InMemoryRegistry()
    nights = fake_run(expansion, Uploading(registry), registry, tmp_path)
    assert [night.uploaded_bytes for night in nights] == [200, 200]
    assert [night.publication.uploaded_layers for night in nights if night.publication] == [1, 1]
    assert describe(nights[0]).endswith("uploaded 1 layer(s), 200 B")


def test_a_failed_build_does_not_stop_the_others(expansion: Expansion, tmp_path: Path) -> None:
    registry = InMemoryRegistry()
    engine = PushingEngine(registry, failing_builds={UBUNTU})
    nights = fake_run(expansion, engine, registry, tmp_path, jobs=2)
    assert [(n.outcome.variant.tag, n.status) for n in nights] == [(UBUNTU, "failed"), (DEBIAN, "built")]
    assert "RUN false" in (nights[0].outcome.error or "")
    pushed = {ref.rsplit(":", 1)[1] for call, ref in engine.calls if call == "push"}
    assert not any(tag.startswith(UBUNTU) for tag in pushed)
    assert pushed == {f"{DEBIAN}-candidate-r1", DEBIAN, f"{DEBIAN}-20261202", "2.13-cpu"}
    assert not any(tag.startswith(UBUNTU) for tag in registry.tagged)


def test_transient_registry_reads_are_retried(expansion: Expansion, tmp_path: Path) -> None:
    registry = InMemoryRegistry()
    blips = Fault(f"/manifests/{UBUNTU}$", 503, method="GET", times=2)   # a registry under load, twice
    registry.faults.append(blips)
    nights = fake_run(expansion, PushingEngine(registry), registry, tmp_path)
    assert [night.status for night in nights] == ["built", "built"]
    assert blips.times == 0


def test_permanent_registry_read_failure_fails_that_variant(expansion: Expansion, tmp_path: Path) -> None:
    registry = InMemoryRegistry()
    registry.faults.append(Fault(f"/manifests/{UBUNTU}$", 403, method="GET", times=1))
    nights = fake_run(expansion, PushingEngine(registry), registry, tmp_path)
    assert [night.status for night in nights] == ["failed", "built"]
    assert nights[0].outcome.error == (f"registry reg.example:5000 denied access (DENIED: denied) while reading"
                                       f" team/pytorch:{UBUNTU} (log in with `docker login reg.example:5000`)")
    assert registry.serving(UBUNTU) is None


def test_ctrl_c_leaves_a_partial_report(expansion: Expansion, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def first_then_interrupted(*args: object, on_done, **kwargs: object) -> list[NightlyOutcome]:
        on_done(NightlyOutcome(Outcome(expansion.variants[1], "skipped", "x"), "unchanged since 2026-12-01"))
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_nightly, "run_nightly", first_then_interrupted)
    monkeypatch.setattr("accel_images.cli.nightly.Engine.connect", classmethod(lambda cls: None))
    monkeypatch.setattr(cli_nightly, "reclaim", lambda engine, started: [])
    # attest=False: the stub images have no torch to inventory (tests/unit/test_supply.py attests)
    options = NightlyOptions(Target("reg.example:5000", "team/pytorch"), now=NOW, attest=False)
    with pytest.raises(KeyboardInterrupt):
        cli_nightly.run_and_report(InMemoryRegistry(), expansion, expansion.variants,
                                   BuildSettings(state_dir=StateDir(tmp_path)), options, None, tmp_path / "reports")
    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    assert report["meta"]["partial"] is True
    assert [(r["tag"], r["status"]) for r in report["variants"]] == [(UBUNTU, "interrupted"), (DEBIAN, "skipped")]


def finished_run(expansion: Expansion, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_and_report's engine and run replaced: the first variant failed, the second was skipped."""
    def run(*args: object, on_done, **kwargs: object) -> list[NightlyOutcome]:
        nights = [NightlyOutcome(Outcome(expansion.variants[0], "failed", "x", error="boom"), "changed"),
                  NightlyOutcome(Outcome(expansion.variants[1], "skipped", "x"), "unchanged since 2026-12-01")]
        for night in nights:
            on_done(night)
        return nights
    monkeypatch.setattr(cli_nightly, "run_nightly", run)
    monkeypatch.setattr("accel_images.cli.nightly.Engine.connect", classmethod(lambda cls: None))
    monkeypatch.setattr(cli_nightly, "reclaim", lambda engine, started: [])


def test_a_damaged_previous_report_still_ends_in_this_runs_report(expansion: Expansion, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    finished_run(expansion, monkeypatch)
    state = StateDir(tmp_path / "state")
    previous = state.reports / "nightly-20261201T020000Z"
    previous.mkdir(parents=True)
    (previous / "report.json").write_text(json.dumps({"meta": {"started": "2026-12-01T02:00:00+00:00"}, "variants": [
        {"variant": f"cpu/{UBUNTU}", "status": "failed", "smoke": {"failures": 5, "checks": 5}}]}))
    state.link_latest("nightly", previous)
    options = NightlyOptions(Target("reg.example:5000", "team/pytorch"), now=NOW, attest=False)
    _, _, paths = cli_nightly.run_and_report(InMemoryRegistry(), expansion, expansion.variants,
                                             BuildSettings(state_dir=state), options, None,
                                             state.run_reports("nightly", NOW))
    report = json.loads(paths["json"].read_text())
    assert report["changes"]["still_failing"] == [f"cpu/{UBUNTU}"]
    assert (state.reports / "nightly-latest").resolve() == paths["json"].parent.resolve()


def test_ctrl_c_during_retention_still_writes_the_whole_report(expansion: Expansion, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    finished_run(expansion, monkeypatch)

    def stopped_retention(*args: object, **kwargs: object) -> Pruning:
        raise KeyboardInterrupt
    monkeypatch.setattr(cli_nightly, "apply_retention", stopped_retention)
    state = StateDir(tmp_path / "state")
    reports = state.run_reports("nightly", NOW)
    options = NightlyOptions(Target("reg.example:5000", "team/pytorch"), now=NOW, attest=False)
    with pytest.raises(KeyboardInterrupt):
        cli_nightly.run_and_report(InMemoryRegistry(), expansion, expansion.variants,
                                   BuildSettings(state_dir=state), options, None, reports)
    report = json.loads((reports / "report.json").read_text())
    assert [r["status"] for r in report["variants"]] == ["failed", "skipped"]
    assert report["meta"]["retention"] == {"error": "interrupted before any tag was deleted"}
    assert (state.reports / "nightly-latest").resolve() == reports.resolve()


def command_args(tmp_path: Path, *more: str) -> list[str]:
    """nightly's arguments against a registry nothing listens on (retention: not applied)."""
    return ["--registry", "127.0.0.1:1", "--matrix", str(write_matrix(tmp_path, "team/pytorch")),
            "--state-dir", str(tmp_path / "state"), *more]


def previous_run(state: StateDir, started: datetime, text: str = '{"variants": []}') -> Path:
    """The reports of a run that started at `started`, linked from nightly-latest."""
    directory = state.run_reports("nightly", started)
    directory.mkdir(parents=True)
    (directory / "report.json").write_text(text)
    state.link_latest("nightly", directory)
    return directory


def test_a_run_that_waited_for_the_lock_gets_a_report_directory_of_its_own(
        expansion: Expansion, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two nightlies started in the same second (the second with --lock-wait): while the second waits,
    the first writes its reports into the directory of that second; the second must not write there."""
    finished_run(expansion, monkeypatch)
    monkeypatch.setattr(cli_nightly, "NightlyOptions", functools.partial(NightlyOptions, now=NOW))
    state = StateDir(tmp_path / "state")
    firsts: list[Path] = []

    def first_run_finishes_while_we_wait(path: Path, wait_s: float = 0, **kwargs: Any):
        firsts.append(previous_run(state, NOW, '{"variants": [], "first": true}'))
        return held(path, wait_s, **kwargs)

    monkeypatch.setattr(cli_nightly, "held", first_run_finishes_while_we_wait)
    result = CliRunner().invoke(nightly_command, command_args(tmp_path, "--lock-wait", "60"))
    assert result.exit_code == 1, result.output           # the fake run's failed variant
    [first] = firsts
    assert json.loads((first / "report.json").read_text()) == {"variants": [], "first": True}
    latest = (state.reports / "nightly-latest").resolve()
    assert latest != first.resolve() and latest.name == f"{first.name}-2"
    assert json.loads((latest / "report.json").read_text())["meta"]["started"].startswith("2026-12-02T03:00:00")


def test_report_dir_pointed_at_the_latest_link_or_an_earlier_run_is_refused(
        expansion: Expansion, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = StateDir(tmp_path / "state")
    earlier = previous_run(state, NOW - timedelta(days=1))
    for target in (state.reports / "nightly-latest", earlier):
        result = CliRunner().invoke(nightly_command, command_args(tmp_path, "--report-dir", str(target)))
        assert result.exit_code == 2, result.output
        [line] = result.output.splitlines()
        assert line.startswith("accel-images: error: --report-dir: ") and "an earlier run's reports" in line
    assert (earlier / "report.json").read_text() == '{"variants": []}'
    assert (state.reports / "nightly-latest").resolve() == earlier.resolve()
    finished_run(expansion, monkeypatch)                   # a new directory, in the state directory or not, is fine
    result = CliRunner().invoke(nightly_command, command_args(tmp_path, "--report-dir", str(state.reports / "mine")))
    assert result.exit_code == 1 and (state.reports / "nightly-latest").resolve() == (state.reports / "mine").resolve()


@pytest.mark.parametrize("bad", ["sign-key", "keep-pinned"])
def test_a_bad_key_or_pin_file_writes_nothing(tmp_path: Path, bad: str) -> None:
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("not a key\n")
    more = ["--sign-key", str(not_a_key)] if bad == "sign-key" else ["--keep-pinned", str(tmp_path / "absent.lock")]
    result = CliRunner().invoke(nightly_command, command_args(tmp_path, *more))
    assert result.exit_code == 2, result.output
    [line] = result.output.splitlines()
    assert f"--{bad}" in line or "cannot read the lock file" in line
    assert not (tmp_path / "state").exists()


# ---- the lock ----------------------------------------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from accel_images.lock import held
with held(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def holder() -> Iterator[Callable[[Path, float], subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def hold(path: Path, seconds: float) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE,
                                   text=True)
        started.append(process)
        assert process.stdout is not None and process.stdout.readline().strip() == "held"
        return process

    yield hold
    for process in started:
        process.kill()
        process.wait()


def test_lock_refuses_at_once_naming_the_holder(tmp_path: Path, holder) -> None:
    lock = tmp_path / "state" / "nightly.lock"
    process = holder(lock, 60)
    with pytest.raises(LockBusy) as caught, held(lock):
        pytest.fail("got a lock another process holds")
    assert f"(PID {process.pid}) holds {lock}" in caught.value.one_line()
    assert "--lock-wait" in caught.value.one_line()


def test_lock_wait_gets_the_lock_once_it_is_released(tmp_path: Path, holder) -> None:
    lock = tmp_path / "nightly.lock"
    holder(lock, 0.2)
    with held(lock, wait_s=120, poll_s=0.02) as path:
        assert path == lock


def test_lock_wait_gives_up_at_its_deadline(tmp_path: Path, holder) -> None:
    lock = tmp_path / "nightly.lock"
    holder(lock, 60)
    clock = iter(range(0, 1000, 2))
    slept: list[float] = []
    with pytest.raises(LockBusy, match="after waiting 5 s"), \
            held(lock, wait_s=5, clock=lambda: next(clock), sleep=slept.append):
        pass
    assert slept and all(0 < s <= 0.2 for s in slept)


def test_lock_is_released_after_an_exception(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    with pytest.raises(RuntimeError), held(lock):
        raise RuntimeError("boom")
    probe = subprocess.run([sys.executable, "-c", HOLDER, str(lock), "0"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and probe.stdout.strip() == "held"


def full_disk(*args: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_lock_that_cannot_be_written_on_a_full_disk_is_one_error_and_is_released(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "nightly.lock"
    monkeypatch.setattr("accel_images.lock.os.pwrite", full_disk)
    with pytest.raises(InputError) as caught, held(lock):
        pytest.fail("held a lock whose holder could not be written")
    assert caught.value.one_line() == (f"{lock}: cannot write the lock file: No space left on device (free space"
                                       " on its file system, or choose another --state-dir)")
    monkeypatch.undo()
    with held(lock):  # released: the next run takes it
        pass


@pytest.mark.parametrize("command", ["nightly", "build"])
def test_nightly_and_build_on_a_full_disk_are_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  command: str) -> None:
    from accel_images.cli.build import build_command
    monkeypatch.setattr("accel_images.lock.os.pwrite", full_disk)
    args = command_args(tmp_path) if command == "nightly" else command_args(tmp_path)[2:]
    result = CliRunner(env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}).invoke(
        nightly_command if command == "nightly" else build_command, args)
    assert result.exit_code == 2, result.output
    [line] = result.output.splitlines()
    assert line.endswith("nightly.lock: cannot write the lock file: No space left on device (free space on its file"
                         " system, or choose another --state-dir)")


def test_command_refuses_while_another_nightly_runs(tmp_path: Path, holder) -> None:
    state = tmp_path / "state"
    process = holder(state / "nightly.lock", 60)
    result = CliRunner().invoke(nightly_command, ["--registry", "127.0.0.1:1", "--matrix",
                                                  str(write_matrix(tmp_path, "team/pytorch")),
                                                  "--state-dir", str(state)])
    assert result.exit_code == 75
    assert f"accel-images: error: another nightly (PID {process.pid}) holds" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("registry", ["not a host", "127.0.0.1:99999", "127.0.0.1:0", "[::1]:70000"])
def test_command_rejects_a_malformed_registry(tmp_path: Path, registry: str) -> None:
    result = CliRunner().invoke(nightly_command, ["--registry", registry, "--matrix",
                                                  str(write_matrix(tmp_path, "team/pytorch")),
                                                  "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2, result.output
    assert f"--registry: '{registry}' is not" in result.output


def test_build_refuses_while_a_nightly_holds_the_state_directory(tmp_path: Path, holder) -> None:
    """A build would rewrite the contexts the running nightly builds from."""
    from accel_images.cli.build import build_command
    state = tmp_path / "state"
    process = holder(state / "nightly.lock", 60)
    result = CliRunner(env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}).invoke(
        build_command, ["--matrix", str(write_matrix(tmp_path, "team/pytorch")), "--state-dir", str(state)])
    assert result.exit_code == 75, result.output
    assert f"accel-images: error: another run of accel-images (PID {process.pid}) holds" in result.output
    assert not (state / "contexts").exists()
