"""Dated-tag retention: which dated tags the policy keeps, and that a dry run deletes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path

import pytest

import requests

from accel_images.errors import RegistryError
from accel_images.publish.retention import (Pinned, Pruning, RetentionPolicy, dated_day, plan, prune, pruned_lines,
                                            stopped_pruning)
from accel_images.registry import OCI_INDEX, OCI_MANIFEST, IndexEntry, oci_index

from fakes import InMemoryRegistry, http_answer

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


REPOSITORY = "team/pytorch"
PROBE = f"/v2/{REPOSITORY}/manifests/sha256:{'0' * 64}"
"""The DELETE RegistryClient.check_deletes sends: a digest no manifest has."""


def registry_of(days: list[int], full: str = FULL, registry: InMemoryRegistry | None = None) -> InMemoryRegistry:
    """A registry serving an image of its own under each dated tag of `full` (InMemoryRegistry unless given)."""
    registry = registry if registry is not None else InMemoryRegistry()
    for day in days:
        registry.push_image({"io.accel-images.tag": dated(full, day)}, tag=dated(full, day))
    return registry


def put_dated_index(registry: InMemoryRegistry, day: int) -> tuple[str, str]:
    """Point the dated tag of `day` at an index of an amd64 and an arm64 image: (index digest, the arm64 image's)."""
    images = [(platform, registry.push_image({"day": str(day)}, platform)) for platform in ("linux/amd64", "linux/arm64")]
    data = oci_index([IndexEntry(platform, image, len(registry.manifests[image][1]), OCI_MANIFEST)
                      for platform, image in images])
    return registry.put_manifest(REPOSITORY, dated(FULL, day), data, OCI_INDEX)[0], images[1][1]


def changes(registry: InMemoryRegistry) -> list[tuple[str, str]]:
    """Every request that could change the registry (a delete, a manifest or blob put), the probe left out."""
    return [(method, path) for method, path in registry.requests
            if method in ("DELETE", "PUT", "POST") and path != PROBE]


class RefusingRegistry(InMemoryRegistry):
    """Answers 405 UNSUPPORTED to a manifest DELETE while one of the `refused` tags points at the manifest: a
    registry refusing one tag's delete, which InMemoryRegistry's deletes_enabled (all or none) cannot say."""

    refused: frozenset[str] = frozenset()

    def _send(self, method: str, url: str, headers: Mapping[str, str] | None, data: bytes | None,
              authorization: str | None, what: str) -> requests.Response:
        reference = url.rsplit("/manifests/", 1)[-1]
        if method == "DELETE" and any(self.tagged.get(tag) == reference for tag in self.refused):
            self.requests.append((method, url.split(self.base_url, 1)[-1]))
            return http_answer(method, url, 405, b'{"errors": [{"code": "UNSUPPORTED", "message": "unsupported"}]}')
        return super()._send(method, url, headers, data, authorization, what)


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
    registry = registry_of([1, 4])
    kept, arm64 = put_dated_index(registry, 2)
    put_dated_index(registry, 3)
    lock.write_text(f"reg/x@{arm64}\n")
    pruning = prune(registry, REPOSITORY, RetentionPolicy(keep=1), TODAY, pinned=Pinned.from_files([lock]))
    assert pruning.deleted == (dated(FULL, 3), dated(FULL, 1))
    assert sorted(registry.tagged) == [dated(FULL, 2), dated(FULL, 4)] and registry.serving(dated(FULL, 2)) == kept
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
    registry = registry_of([1, 2, 3])
    before = dict(registry.tagged)
    pruning = prune(registry, REPOSITORY, RetentionPolicy(keep=1), TODAY, dry_run=True)
    assert registry.tagged == before and changes(registry) == [] and pruning.pruned == (dated(FULL, 2), dated(FULL, 1))
    assert pruned_lines(pruning)[0] == f"would prune {dated(FULL, 2)} (older than the 1 newest)"


def test_prune_deletes_what_the_policy_says_and_goes_on_past_a_refusal() -> None:
    refusing = RefusingRegistry()
    refusing.refused = frozenset({dated(FULL, 1)})
    registry = registry_of([1, 2], OTHER, registry_of([1, 2, 3, 4], registry=refusing))
    before = dict(registry.tagged)
    pruning = prune(registry, REPOSITORY, RetentionPolicy(keep=1), TODAY, only={FULL}.__contains__)
    assert pruning.pruned == (dated(FULL, 3), dated(FULL, 2))
    assert registry.tagged == {tag: digest for tag, digest in before.items()   # OTHER is out of scope
                               if tag not in (dated(FULL, 3), dated(FULL, 2))}  # and the refused tag is put back
    assert pruning.errors == (f"{dated(FULL, 1)}: registry {registry.host} answered 405 (UNSUPPORTED: unsupported)"
                              f" while deleting {REPOSITORY}:{dated(FULL, 1)} (the registry does not allow deletes:"
                              " its setting storage.delete.enabled is off)",)


def test_a_registry_that_cannot_delete_is_found_out_before_any_tag_is_touched() -> None:
    registry = registry_of([1, 2, 3], registry=InMemoryRegistry(deletes_enabled=False))
    before = dict(registry.tagged)
    with pytest.raises(RegistryError) as caught:
        prune(registry, REPOSITORY, RetentionPolicy(keep=1), TODAY)
    assert "does not allow deletes" in caught.value.one_line()
    assert registry.tagged == before and changes(registry) == []
    assert prune(registry, REPOSITORY, RetentionPolicy(keep=1), TODAY, dry_run=True).pruned  # a dry run lists
    asked = len(registry.requests)
    assert prune(registry, REPOSITORY, RetentionPolicy(keep=5), TODAY).pruned == ()         # nothing to delete
    assert ("DELETE", PROBE) not in registry.requests[asked:]                               # nor asked to


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
    class Stopping(InMemoryRegistry):
        """Ctrl-C as the second delete begins: a stop, which no answer of the registry raises."""

        def delete_tag(self, repository: str, tag: str) -> bool:
            if any(method == "DELETE" and path != PROBE for method, path in self.requests):
                raise KeyboardInterrupt
            return super().delete_tag(repository, tag)

    registry = registry_of([1, 2, 3, 4], registry=Stopping())
    with pytest.raises(KeyboardInterrupt) as caught:
        prune(registry, REPOSITORY, RetentionPolicy(keep=1), TODAY)
    stopped = stopped_pruning(caught.value)
    assert isinstance(stopped, Pruning) and stopped.interrupted and stopped.deleted == (dated(FULL, 3),)
    assert sorted(registry.tagged) == [dated(FULL, day) for day in (1, 2, 4)]
    assert stopped_pruning(KeyboardInterrupt()) == "interrupted before any tag was deleted"
