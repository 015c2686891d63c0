"""Dated-tag retention: which dated tags the policy keeps, and that a dry run deletes nothing."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from accel_images.errors import RegistryError
from accel_images.publish.retention import (Pinned, Pruning, RetentionPolicy, dated_day, plan, prune, pruned_lines,
                                            stopped_pruning)

from fakes import FakeTagRegistry, InMemoryRegistry

FULL = "2.13.0-cpu-py3.11-debian12"
OTHER = "2.14.1-cpu-py3.12-ubuntu24.04"
TODAY = date(2026, 12, 10)


def digest(n: int) -> str:
    return f"sha256:{n:064x}"


def dated(full: str, day: int) -> str:
    return f"{full}-202612{day:02d}"


def tags_of(days: list[int], full: str = FULL, start: int = 100) -> dict[str, str | None]:
    return {dated(full, day): digest(start + day) for day in days}


def pruned(decisions: list) -> list[str]:
    return sorted(d.tag for d in decisions if d.prune)


def test_keeps_exactly_the_n_newest_dated_tags_of_each_full_tag() -> None:
    digests = {**tags_of([1, 2, 3, 4, 5]), **tags_of([6, 7], full=OTHER, start=200)}
    decisions = plan(digests, RetentionPolicy(keep=2), TODAY)
    assert pruned(decisions) == [dated(FULL, 1), dated(FULL, 2), dated(FULL, 3)]
    assert len(decisions) == 7


def test_never_prunes_a_digest_a_full_tag_or_an_alias_serves() -> None:
    digests = {**tags_of([1, 2, 3, 4]), FULL: digest(102), "latest-cpu": digest(101)}
    assert pruned(plan(digests, RetentionPolicy(keep=1), TODAY)) == [dated(FULL, 3)]


def test_lock_files_pin_tags_and_digests(tmp_path: Path) -> None:
    lock = tmp_path / "images.lock"
    lock.write_text(f'{{"pinned": "{dated(FULL, 1)}", "image": "reg/x@{digest(102)}"}}\n')
    pinned = Pinned.from_files([lock])
    assert pruned(plan(tags_of([1, 2, 3, 4]), RetentionPolicy(keep=1), TODAY, pinned)) == [dated(FULL, 3)]


def test_a_lock_pinning_one_platforms_image_keeps_the_dated_index_that_lists_it(tmp_path: Path) -> None:
    """One tag is an image index: a lock naming the arm64 image's own digest (what `docker pull` on an
    arm64 host records) keeps the dated tag whose index lists it; the index's other dated tags go."""
    lock = tmp_path / "images.lock"
    lock.write_text(f"reg/x@{digest(902)}\n")
    registry = FakeTagRegistry(tags_of([1, 2, 3, 4]), indexes={digest(102): [digest(802), digest(902)],
                                                              digest(103): [digest(803), digest(903)]})
    pruning = prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY, pinned=Pinned.from_files([lock]))
    assert registry.deleted == [dated(FULL, 3), dated(FULL, 1)]
    assert [d.reason for d in pruning.decisions if d.tag == dated(FULL, 2)] == [
        "its image is still served under another tag or pinned"]


def test_keep_days_keeps_the_young_beyond_the_count() -> None:
    assert pruned(plan(tags_of([1, 5, 8, 9]), RetentionPolicy(keep=1, keep_days=3), TODAY)) == [dated(FULL, 1),
                                                                                                dated(FULL, 5)]


@pytest.mark.parametrize("tag,parsed", [
    (dated(FULL, 3), (FULL, date(2026, 12, 3))),
    (FULL, None),
    ("latest-cpu", None),
    (f"{FULL}-candidate-20261203T030000-12345678", None),
    (f"{FULL}-20261399", None),
])
def test_only_real_dated_tags_count(tag: str, parsed: tuple[str, date] | None) -> None:
    assert dated_day(tag) == parsed


def test_dry_run_lists_and_deletes_nothing() -> None:
    registry = FakeTagRegistry(tags_of([1, 2, 3]))
    pruning = prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY, dry_run=True)
    assert registry.deleted == [] and pruning.pruned == (dated(FULL, 2), dated(FULL, 1))
    assert pruned_lines(pruning)[0] == f"would prune {dated(FULL, 2)} (older than the 1 newest)"


def test_prune_deletes_what_the_policy_says_and_goes_on_past_a_refusal() -> None:
    registry = FakeTagRegistry({**tags_of([1, 2, 3, 4]), **tags_of([1, 2], full=OTHER, start=200)},
                            refuse={dated(FULL, 1)})
    pruning = prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY, only={FULL}.__contains__)
    assert registry.deleted == [dated(FULL, 3), dated(FULL, 2)]          # OTHER is out of scope
    assert pruning.pruned == (dated(FULL, 3), dated(FULL, 2))
    assert pruning.errors == (f"{dated(FULL, 1)}: registry r answered 405 while deleting"
                              f" team/pytorch:{dated(FULL, 1)}",)


def test_a_registry_that_cannot_delete_is_found_out_before_any_tag_is_touched() -> None:
    registry = FakeTagRegistry(tags_of([1, 2, 3]), no_deletes=True)
    with pytest.raises(RegistryError) as caught:
        prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY)
    assert "does not allow deletes" in caught.value.one_line() and registry.deleted == []
    assert prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY, dry_run=True).pruned  # a dry run lists
    assert prune(registry, "team/pytorch", RetentionPolicy(keep=5), TODAY).pruned == ()         # nothing to delete


@pytest.mark.parametrize("deletes_enabled", [False, True])
def test_a_405_on_delete_is_refused_by_the_real_client_before_retention_touches_a_tag(deletes_enabled: bool) -> None:
    """The registry client itself (only its HTTP exchange in memory): a registry answering 405 to the
    probe DELETE stops retention with the setting to change, and not one tag is deleted or moved."""
    registry = InMemoryRegistry(deletes_enabled=deletes_enabled)
    for day in (1, 2, 3):
        registry.push_image({"day": str(day)}, tag=dated(FULL, day))
    before = dict(registry.tagged)
    if deletes_enabled:
        assert prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY).pruned == (dated(FULL, 2),
                                                                                          dated(FULL, 1))
        return
    with pytest.raises(RegistryError) as caught:
        prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY)
    assert "answered 405" in caught.value.one_line() and "storage.delete.enabled is off" in caught.value.one_line()
    assert registry.tagged == before
    assert [path for method, path in registry.requests if method in ("DELETE", "PUT")] == [
        f"/v2/team/pytorch/manifests/sha256:{'0' * 64}"]   # the probe alone


def test_a_stop_during_retention_says_what_was_deleted() -> None:
    class Stopping(FakeTagRegistry):
        def delete_tag(self, repository: str, tag: str) -> bool:
            if self.deleted:
                raise KeyboardInterrupt
            return super().delete_tag(repository, tag)

    registry = Stopping(tags_of([1, 2, 3, 4]))
    with pytest.raises(KeyboardInterrupt) as caught:
        prune(registry, "team/pytorch", RetentionPolicy(keep=1), TODAY)
    stopped = stopped_pruning(caught.value)
    assert isinstance(stopped, Pruning) and stopped.interrupted and stopped.deleted == (dated(FULL, 3),)
    assert stopped_pruning(KeyboardInterrupt()) == "interrupted before any tag was deleted"
