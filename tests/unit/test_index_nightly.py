"""The nightly's image index without an engine or a registry: one tag of two platforms, published through
the real registry client into an in-memory registry (tests/fakes.py InMemoryRegistry), every decision per
(tag, platform) read back from what the registry serves afterwards.

What is carried into a new index, what a promotion that failed part-way reports, and what happens when
another job moves the tag while this one assembles its index. The end-to-end run (real builds, arm64
under emulation) is tests/integration/test_platforms_integration.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from accel_images.builder import builder as builder_module
from accel_images.builder.builder import CREATED_LABEL
from accel_images.builder.fingerprint import FINGERPRINT_LABEL
from accel_images.builder.settings import BuildSettings
from accel_images.cli.options import load_expansion
from accel_images.kb import compat
from accel_images.publish.nightly import NightlyOptions, NightlyOutcome, nightly_record, run_nightly
from accel_images.publish.promote import Target
from accel_images.publish.tested import SmokedDigest, SmokedRecord
from accel_images.registry import OCI_INDEX, OCI_MANIFEST, IndexEntry, oci_index
from accel_images.state import StateDir
from accel_images.supply.provenance import load_signer
from fakes import InMemoryRegistry, PushingEngine
from test_nightly import GREEN, NO_WAIT, NOW, TEMPLATES
from test_platforms import AMD64, ARM64, Manifests, index_of
from test_supply import probe_output, write_key

KB = compat.load_kb()
REPOSITORY = "team/pytorch"
TAG = "2.14.1-cpu-py3.11-debian12"
DATED = f"{TAG}-{NOW:%Y%m%d}"
MATRIX = f"""schema: 1
image: {REPOSITORY}
platform: [linux/amd64, linux/arm64]
vendors:
  cpu:
    - torch: ["2.14"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
"""
BOTH = ("linux/amd64", "linux/arm64")


@dataclass(frozen=True)
class Site:
    """A matrix of one tag on two platforms, a state directory, a signing key, and the registry."""

    tmp_path: Path
    registry: InMemoryRegistry
    key: Path
    engines: list[PushingEngine] = field(default_factory=list)
    """The engine of each night, in order: what it built, and how."""

    @property
    def target(self) -> Target:
        return Target(self.registry.host, REPOSITORY)

    def night(self, *, platforms: Sequence[str] = BOTH, salt: str = "", signed: bool = False, days: int = 0,
              failing: Sequence[str] = ()) -> list[NightlyOutcome]:
        """One nightly of the tag's `platforms` (`--platform`), `days` after NOW; builds named in `failing`
        (local tags) fail; `salt` sets this run's images apart from another run's."""
        matrix = self.tmp_path / "matrix.yaml"
        matrix.write_text(MATRIX)
        expansion = load_expansion(str(matrix))
        variants = [variant for variant in expansion.variants if variant.platform in platforms]
        engine = PushingEngine(self.registry, probe_output(), salt=salt, failing_builds=set(failing))
        self.engines.append(engine)
        now = NOW + timedelta(days=days)
        options = NightlyOptions(self.target, now=now, run_id=f"{now:%Y%m%dT%H%M%S}-{salt or 'a'}0", retry=NO_WAIT,
                                 signer=load_signer(self.key) if signed else None)
        return run_nightly(engine, KB, expansion, variants, self.registry,  # type: ignore[arg-type]
                           BuildSettings(state_dir=StateDir(self.tmp_path / "state")), options,
                           smoke=lambda image, variant: GREEN, templates_dir=TEMPLATES)

@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    """The base image's index (amd64 and arm64) is read from a stand-in, never from Docker Hub."""
    bases = Manifests(by_reference={"bookworm-slim": ("sha256:" + "1" * 64, index_of(amd64=AMD64, arm64=ARM64))})
    monkeypatch.setattr(builder_module, "_registry_client", lambda host: bases)
    key, _ = write_key(tmp_path)
    return Site(tmp_path, InMemoryRegistry(), key)


def put_index(registry: InMemoryRegistry, entries: Sequence[tuple[str, str]], tag: str | None = None) -> str:
    """An index of (platform, image digest) entries, in that order, stored under `tag` (or its digest only)."""
    data = oci_index([IndexEntry(platform, digest, len(registry.manifests[digest][1]), OCI_MANIFEST)
                      for platform, digest in entries])
    digest = registry.put_manifest(REPOSITORY, tag or "sha256:" + "0" * 64, data, OCI_INDEX)[0]
    return digest


def forge_record(registry: InMemoryRegistry, *digests: str) -> None:
    """The tag's tested record rewritten to list `digests`: anyone who can push can write it."""
    record = SmokedRecord(tuple(SmokedDigest(digest, NOW.date(), "forged") for digest in digests))
    registry.put_labels_image(REPOSITORY, f"{TAG}-tested", record.labels())


def hand_pushed(registry: InMemoryRegistry, platform: str, labels: dict[str, str] | None = None) -> str:
    return registry.push_image(labels or {"io.accel-images.tag": TAG}, platform, salt=f"by hand {platform}")


def serving_indexes(site: Site) -> dict[str, list[tuple[str, str]]]:
    """What every tag that serves an index lists."""
    found = {}
    for tag, digest in site.registry.tagged.items():
        if not tag.startswith("sha256-") and json.loads(site.registry.manifests[digest][1]).get("mediaType") == OCI_INDEX:
            found[tag] = site.registry.index_of(tag)
    return found


# ---- what is carried into a new index -----------------------------------------------------------

@pytest.mark.parametrize("how", ["one platform's job", "a platform that fails"])
def test_an_entry_that_does_not_verify_is_not_carried_into_the_new_index(site: Site, how: str) -> None:
    """A signed nightly of amd64 alone (or one whose arm64 build fails) keeps the index's arm64 entry only where
    it verifies: an unsigned, hand-pushed arm64 image behind a forged tested record is left out, and said."""
    first = site.night(signed=True)
    assert [night.status for night in first] == ["built", "built"]
    amd64 = dict(site.registry.index_of(TAG))["linux/amd64"]
    forged = hand_pushed(site.registry, "linux/arm64")
    index = put_index(site.registry, [("linux/amd64", amd64), ("linux/arm64", forged)], TAG)
    forge_record(site.registry, index)

    if how == "one platform's job":
        nights = site.night(signed=True, platforms=["linux/amd64"], salt="2", days=1)
    else:
        nights = site.night(signed=True, salt="2", days=1, failing=[f"{TAG}-arm64"])
    served = serving_indexes(site)
    assert all(forged not in dict(entries).values() for entries in served.values()), served
    assert [platform for platform, _ in served[TAG]] == ["linux/amd64"]
    amd64_night = next(night for night in nights if night.outcome.variant.platform == "linux/amd64")
    assert amd64_night.ok
    note = next(note for note in amd64_night.outcome.notes if "linux/arm64" in note)
    assert note.startswith(f"linux/arm64 left out of the index of {TAG}: the image {forged[:19]} it served"
                           " does not verify: no provenance refers to"), note


def test_an_entry_that_verifies_is_carried_and_the_aliases_follow(site: Site) -> None:
    """The genuine arm64 image of the last run is carried into the index of an amd64-only job."""
    site.night(signed=True)
    arm64 = dict(site.registry.index_of(TAG))["linux/arm64"]
    nights = site.night(signed=True, platforms=["linux/amd64"], salt="2", days=1)
    assert [night.status for night in nights] == ["built"] and not nights[0].outcome.notes
    assert dict(site.registry.index_of(TAG))["linux/arm64"] == arm64
    assert site.registry.serving("latest-cpu") == site.registry.serving(TAG)


# ---- the trust edge: an index this tool did not test ------------------------------------------------

def test_an_index_whose_entries_this_tool_did_not_test_is_never_kept_or_skipped(site: Site) -> None:
    """Hand-pushed images with the very fingerprints and a fresh build date, under an index the tested record
    does not list: every platform is built, tested and published anew. The same index, once recorded, is
    skipped: the record is the only difference."""
    first = site.night()
    fingerprints = {night.outcome.variant.platform: night.outcome.fingerprint or "" for night in first}
    created = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pushed = {platform: hand_pushed(site.registry, platform, {FINGERPRINT_LABEL: fingerprint, CREATED_LABEL: created})
              for platform, fingerprint in fingerprints.items()}
    index = put_index(site.registry, list(pushed.items()), TAG)

    nights = site.night(salt="2")
    assert [night.status for night in nights] == ["built", "built"] and not any(night.kept for night in nights)
    assert not set(pushed.values()) & set(dict(site.registry.index_of(TAG)).values())

    put_index(site.registry, list(pushed.items()), TAG)
    forge_record(site.registry, index)
    assert [night.status for night in site.night(salt="3")] == ["skipped", "skipped"]


@pytest.mark.parametrize("days", [0, 40])
def test_a_distrusted_index_is_rebuilt_without_the_layer_cache_only_when_its_age_calls_for_it(site: Site,
                                                                                            days: int) -> None:
    """Distrust is no reason to refuse the layer cache (it holds this machine's own builds, never the registry's
    image), as for a single image; age is (today's packages): both platforms decide as one image does."""
    first = site.night()
    created = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pushed = [(night.outcome.variant.platform, hand_pushed(site.registry, night.outcome.variant.platform, {
        FINGERPRINT_LABEL: night.outcome.fingerprint or "", CREATED_LABEL: created})) for night in first]
    put_index(site.registry, pushed, TAG)

    nights = site.night(salt="2", days=days)
    assert [night.status for night in nights] == ["built", "built"]
    why = "older than 7 days" if days else "which this tool never smoke-tested"
    assert all(why in night.reason for night in nights), [night.reason for night in nights]
    engine = site.engines[-1]
    built = [tag for call, tag in engine.calls if call == "build"]
    assert len(built) == 2 and engine.uncached == (built if days else []), engine.uncached


# ---- a promotion that fails part-way ------------------------------------------------------------------

def test_a_promotion_that_fails_part_way_reports_the_tags_that_moved_and_what_each_serves(site: Site) -> None:
    """A 500 on every PUT of the dated tag: the full tag already serves the new index. The report says so
    (its digest, the full tag pushed, each tag's digest now), and the error names the tag that did not move."""
    site.night()
    old = site.registry.serving(TAG)
    dated = f"{TAG}-{NOW + timedelta(days=1):%Y%m%d}"
    site.registry.put_hooks[dated] = [lambda reference, media_type: 500]
    nights = site.night(salt="2", days=1)
    new = site.registry.serving(TAG)
    assert new != old and site.registry.serving("latest-cpu") == old and dated not in site.registry.tagged
    for night in nights:
        record = nightly_record(night, site.target)
        assert record["status"] == "failed" and record["digest"] == new, record
        assert record["pushed_tags"] == [TAG] and record["tags_after_stop"] == {TAG: new, dated: None,
                                                                               "2.14-cpu": old, "latest-cpu": old}
        assert f"registry {site.registry.host} answered 500" in night.outcome.error
        assert night.outcome.error.endswith(f"; moved: {TAG} (now {new[:19]}); not moved: {dated} (absent),"
                                            f" 2.14-cpu ({old[:19]}), latest-cpu ({old[:19]})"), night.outcome.error
        assert night.outcome.exit_code == 4


# ---- two jobs of one tag at once ----------------------------------------------------------------------

def other_job(site: Site, salt: str) -> Any:
    """A hook that plays the other platform's job of the same tag: when this run stores its index, the other
    publishes an index with a new arm64 image (and records it tested, as a nightly does) under the full tag."""
    state: dict[str, Any] = {"published": []}

    def publish(reference: str, media_type: str) -> None:
        if media_type != OCI_INDEX or not reference.startswith("sha256:") or state.get("done"):
            return None
        current = dict(site.registry.index_of(TAG))
        arm64 = hand_pushed(site.registry, "linux/arm64", {"io.accel-images.tag": TAG + salt + str(len(state["published"]))})
        index = put_index(site.registry, [("linux/amd64", current["linux/amd64"]), ("linux/arm64", arm64)], TAG)
        forge_record(site.registry, index)
        state["published"].append(arm64)
        return None
    return state, publish


def test_an_index_that_another_job_moved_meanwhile_is_read_again_and_keeps_its_platform(site: Site) -> None:
    """The arm64 job publishes while the amd64 job assembles its index: the amd64 job sees the tag moved before
    its PUT, reads it again, and its index carries the other job's arm64 image (no lost update)."""
    site.night()
    state, publish = other_job(site, "x")

    def once(reference: str, media_type: str) -> None:
        if media_type == OCI_INDEX and reference.startswith("sha256:") and not state.get("done"):
            publish(reference, media_type)
            state["done"] = True
    site.registry.put_hooks["*"] = [once]
    nights = site.night(platforms=["linux/amd64"], salt="2", days=1)
    assert [night.status for night in nights] == ["built"], nights[0].outcome.error
    listed = dict(site.registry.index_of(TAG))
    assert listed["linux/arm64"] == state["published"][0]
    assert listed["linux/amd64"] == nights[0].platform_digest


def test_a_tag_that_keeps_moving_fails_in_one_line_and_reports_nothing_published(site: Site) -> None:
    site.night()
    state, publish = other_job(site, "y")
    site.registry.put_hooks["*"] = [publish]
    nights = site.night(platforms=["linux/amd64"], salt="2", days=1)
    [night] = nights
    assert night.status == "failed" and night.outcome.exit_code == 4
    assert night.outcome.error.startswith(f"{site.target.ref(TAG)} moved while this run assembled its index"), \
        night.outcome.error
    assert "\n" not in night.outcome.error and nightly_record(night, site.target)["pushed_tags"] == []
    assert night.platform_digest not in dict(site.registry.index_of(TAG)).values()
    assert dict(site.registry.index_of(TAG))["linux/arm64"] == state["published"][-1]  # the other job's index stays


def test_a_platform_the_tag_does_not_serve_after_promotion_is_not_reported_published(site: Site) -> None:
    """Another job overwrites the full tag while this run moves its aliases: the run must not report its amd64
    image published when the tag serves another one."""
    site.night()
    moved: dict[str, bool] = {}

    def after_last(reference: str, media_type: str) -> None:
        if reference == "latest-cpu" and not moved:
            moved["yes"] = True
            current = dict(site.registry.index_of(TAG))
            amd64 = hand_pushed(site.registry, "linux/amd64")
            put_index(site.registry, [("linux/amd64", amd64), ("linux/arm64", current["linux/arm64"])], TAG)
    site.registry.put_hooks["latest-cpu"] = [after_last]
    [night] = site.night(platforms=["linux/amd64"], salt="2", days=1)
    assert night.status == "failed" and night.platform_digest not in dict(site.registry.index_of(TAG)).values()
    assert nightly_record(night, site.target)["digest"] == site.registry.serving(TAG)
