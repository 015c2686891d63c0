"""The registry's catalogue: what `recommend --registry`, `pull`, `run` and `catalogue` choose from.

Unit tests read the shared in-memory registry (tests/fakes.py InMemoryRegistry) through the real client; the
integration tests publish layer-less images (a config
blob with a variant's labels, made over the registry's HTTP API) and smoke records into a
repository of their own in the local registry, then read them back through accel-images, directly
and through the fault proxy with 50 ms added to every request.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_catalogue_integration.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from accel_images.kb import compat
from accel_images.model import tags
from accel_images.publish.catalogue import (ARTIFACT_TYPE, Entry, SmokeRecord, read_catalogue, read_record, variant_of,
                                             write_record)
from accel_images.host.choosing import load_expansion
from accel_images.registry import OCI_INDEX, OCI_MANIFEST, IndexEntry, oci_index
from accel_images.smoke.judge import SmokeResult
from accel_images.model.imagefacts import ImageFacts
from accel_images.model.variant import Variant
from fakes import InMemoryRegistry
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
KB = compat.load_kb()
VARIANTS = {v.tag: v for v in load_expansion(str(FROZEN_MATRIX), KB).variants if v.platform == "linux/amd64"}
ARM64 = {v.tag: v for v in load_expansion(str(FROZEN_MATRIX), KB).variants if v.platform == "linux/arm64"}
CPU_NEW, CPU_OLD = "2.15.0-cpu-py3.12-ubuntu24.04", "2.13.0-cpu-py3.11-debian12"
CUDA = "2.14.1-cuda13.0-py3.12-ubuntu24.04"
PASSED = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=(),
                     raw={"backend": "cpu", "device_name": ""})


def digest_of(tag: str) -> str:
    return "sha256:" + (tag.encode().hex() * 8)[:64]


# ---- the registry's contents, through tests/fakes.py InMemoryRegistry -------------------------------

def registry_at() -> InMemoryRegistry:
    """An empty registry at reg.example, the host the commands below are pointed at."""
    return InMemoryRegistry(host="reg.example")


def publish(registry: InMemoryRegistry, variant: Variant, tag: str | None = None, salt: str = "") -> str:
    """Push an image of `variant` (its labels, its platform) under `tag`, its full tag unless named; its digest.
    `salt` makes another image of the same variant (one pushed by hand)."""
    return registry.push_image(variant.labels(), variant.platform, tag=tag or variant.tag, salt=salt)


def put_index(registry: InMemoryRegistry, tag: str, entries: Sequence[tuple[str, str]]) -> str:
    """Point `tag` at an image index of (platform, image digest) entries, in that order; the index's digest."""
    data = oci_index([IndexEntry(platform, image, len(registry.manifests[image][1]), OCI_MANIFEST)
                      for platform, image in entries])
    return registry.put_manifest("r", tag, data, OCI_INDEX)[0]


def publish_index(registry: InMemoryRegistry, variants: list[Variant]) -> tuple[str, dict[str, str]]:
    """One tag, an index of one image per platform: (index digest, platform -> image digest)."""
    images = {variant.platform: registry.push_image(variant.labels(), variant.platform) for variant in variants}
    return put_index(registry, variants[0].tag, list(images.items())), images


def record_of(registry: InMemoryRegistry, digest: str) -> tuple[dict, bytes]:
    """The manifest of the smoke record of image `digest`, as the registry holds it, and its payload."""
    found = registry.manifest("r", tags.record_tag(digest))
    assert found is not None, f"no smoke record of {digest}"
    return found[1], registry.blob("r", found[1]["layers"][0]["digest"])


def reads(registry: InMemoryRegistry) -> set[str]:
    """Every tag or digest whose manifest the registry was asked for."""
    return {path.rsplit("/manifests/", 1)[1] for _, path in registry.requests if "/manifests/" in path}


def test_a_smoke_record_says_what_it_was_written_from() -> None:
    registry = registry_at()
    digest = publish(registry, VARIANTS[CUDA])
    result = SmokeResult(ok=True, ran_on="cuda", cpu_fallback=False, failures=(), checks=(),
                         raw={"backend": "cuda", "device_name": "NVIDIA H100 80GB HBM3"})
    write_record(registry, "team/pytorch", digest, result, "20261202T030000-abc123",
                 now=datetime(2026, 12, 2, 3, 4, 5, tzinfo=timezone.utc))
    manifest, payload = record_of(registry, digest)
    assert manifest["artifactType"] == ARTIFACT_TYPE and manifest["subject"] == {
        "mediaType": OCI_MANIFEST, "digest": digest, "size": len(registry.manifests[digest][1])}
    assert json.loads(payload)["image"] == digest
    found = read_record(registry, "team/pytorch", tags.record_tag(digest))
    assert found is not None
    record, labels = found
    assert labels == VARIANTS[CUDA].labels()          # the image's labels, copied: readers need no config blob
    assert record == SmokeRecord(ok=True, ran_on="cuda", device="NVIDIA H100 80GB HBM3", run_id="20261202T030000-abc123",
                                 checked=datetime(2026, 12, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert record.summary() == "passed on cuda, NVIDIA H100 80GB HBM3"


def test_only_images_whose_digest_a_passing_record_vouches_for_are_offered() -> None:
    registry = registry_at()
    digests = {tag: publish(registry, VARIANTS[tag]) for tag in (CPU_NEW, CPU_OLD, CUDA)}
    write_record(registry, "r", digests[CPU_OLD], PASSED, "r1")
    write_record(registry, "r", digests[CUDA], replace(PASSED, ok=False, failures=("check matmul failed",)), "r1")
    publish(registry, VARIANTS[CPU_NEW], tag="latest-cpu")                    # an alias: never read
    publish(registry, VARIANTS[CPU_NEW], tag=f"{CPU_NEW}-20261202")           # a dated tag: never read
    publish(registry, VARIANTS[CPU_NEW], tag=f"{CPU_NEW}-candidate-r1-abc")   # a candidate: never read
    registry.push_image({"some": "label"}, tag="2.14.0-cpu-py3.12-ubuntu22.04")  # not ours

    catalogue = read_catalogue(registry, "r")
    by_tag = {entry.tag: entry for entry in catalogue.entries}
    assert sorted(by_tag) == sorted([CPU_NEW, CPU_OLD, CUDA])
    assert [entry.tag for entry in catalogue.offered()] == [CPU_OLD]
    assert by_tag[CPU_NEW].why_not == "published, but no smoke record vouches for its digest"
    assert by_tag[CUDA].why_not == "its smoke test failed on cpu"
    assert not {"latest-cpu", f"{CPU_NEW}-20261202", f"{CPU_NEW}-candidate-r1-abc"} & reads(registry)
    assert tags.record_tag(digests[CPU_NEW]) not in reads(registry)   # no record in the tag list: not asked


def test_a_tag_moved_onto_an_untested_image_loses_its_record() -> None:
    registry = registry_at()
    write_record(registry, "r", publish(registry, VARIANTS[CPU_OLD]), PASSED, "r1")
    publish(registry, VARIANTS[CPU_OLD], salt="by hand")                     # pushed by hand over it
    [entry] = read_catalogue(registry, "r").entries
    assert not entry.offered


def test_an_index_is_one_entry_per_platform_each_offered_by_its_own_record() -> None:
    """One tag, one index: each platform's image is judged by the smoke record of its own digest; the
    entry names the index and every platform it lists, and the variant knows its platform."""
    registry = registry_at()
    index, images = publish_index(registry, [VARIANTS[CPU_OLD], ARM64[CPU_OLD]])
    write_record(registry, "r", images["linux/arm64"], PASSED, "r1")
    entries = read_catalogue(registry, "r").entries
    assert [(e.tag, e.platform, e.digest, e.index) for e in entries] == [
        (CPU_OLD, "linux/amd64", images["linux/amd64"], index), (CPU_OLD, "linux/arm64", images["linux/arm64"], index)]
    assert [e.platform for e in entries if e.offered] == ["linux/arm64"]  # amd64 has no record: not offered
    assert entries[1].smoke is not None and entries[1].smoke.platform == "linux/arm64"
    assert {e.platforms for e in entries} == {("linux/amd64", "linux/arm64")}
    assert entries[1].record()["platform"] == "linux/arm64" and entries[1].record()["index"] == index
    variant = variant_of(entries[1], KB)
    assert variant is not None and (variant.platform, variant.platforms) == ("linux/arm64", ("linux/amd64", "linux/arm64"))


def test_an_index_listing_a_platform_twice_offers_neither_entry(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """`docker pull` takes the first linux/amd64 entry (a hand-pushed image without a record); the green one
    listed after it must not get the tag offered, by `catalogue` nor by `recommend --registry`."""
    registry = registry_at()
    _, images = publish_index(registry, [VARIANTS[CPU_OLD]])
    write_record(registry, "team/accel-images/pytorch", images["linux/amd64"], PASSED, "r1")
    forged = registry.push_image(VARIANTS[CPU_OLD].labels(), "linux/amd64", salt="by hand")   # by digest only
    put_index(registry, CPU_OLD, [("linux/amd64", forged), ("linux/amd64", images["linux/amd64"])])
    entries = read_catalogue(registry, "team/accel-images/pytorch").entries
    assert [(e.platform, e.digest, e.offered) for e in entries] == [
        ("linux/amd64", forged, False), ("linux/amd64", images["linux/amd64"], False)]
    assert {e.why_not for e in entries} == {"the index lists linux/amd64 2 times: a client pulls the first entry,"
                                            " which need not be the one vouched for"}
    result = recommend_cli(monkeypatch, registry, tmp_path, '{"vendor": "cpu", "machine": "x86_64"}', "--torch", "2.13")
    assert result.exit_code == 1 and CPU_OLD not in result.stdout, result.output


def test_an_image_listed_under_another_platform_than_its_smoke_record_saw_is_not_offered(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An amd64 image (its record: linux/amd64) listed in the index as linux/arm64: an arm64 host would pull
    an image that cannot run there. The record's platform decides, not the index's label."""
    registry = registry_at()
    _, images = publish_index(registry, [VARIANTS[CPU_OLD]])
    write_record(registry, "team/accel-images/pytorch", images["linux/amd64"], PASSED, "r1")
    put_index(registry, CPU_OLD, [("linux/amd64", images["linux/amd64"]), ("linux/arm64", images["linux/amd64"])])
    entries = read_catalogue(registry, "team/accel-images/pytorch").entries
    assert [(e.platform, e.offered) for e in entries] == [("linux/amd64", True), ("linux/arm64", False)]
    assert entries[1].why_not == ("the index lists this image as linux/arm64, but its smoke record is about a"
                                  " 'linux/amd64' image")
    arm = recommend_cli(monkeypatch, registry, tmp_path, '{"vendor": "cpu", "machine": "aarch64"}', "--torch", "2.13")
    assert arm.exit_code == 1 and "docker run" not in arm.stdout, arm.output
    amd = recommend_cli(monkeypatch, registry, tmp_path, '{"vendor": "cpu", "machine": "x86_64"}', "--torch", "2.13")
    assert amd.exit_code == 0 and CPU_OLD in amd.stdout, amd.output


def recommend_cli(monkeypatch: pytest.MonkeyPatch, registry: InMemoryRegistry, tmp_path: Path, host: str,
                  *args: str) -> Result:
    """`accel-images recommend --registry reg.example/team` for the host `host` (JSON), read from `registry`."""
    from accel_images.cli import fanout as cli_fanout
    from accel_images.registry import RegistryClient
    monkeypatch.setattr(RegistryClient, "for_destination", classmethod(lambda cls, destination: registry))
    described = tmp_path / "host.json"
    described.write_text(host)
    return CliRunner().invoke(cli_fanout.recommend_command, ["--registry", "reg.example/team", "--matrix",
                                                             str(FROZEN_MATRIX), "--host-json", str(described),
                                                             *args])


def test_the_variant_of_an_entry_is_the_knowledge_base_s_with_the_image_s_own_floor() -> None:
    variant = VARIANTS[CUDA]
    labels = {**variant.labels(), "io.accel-images.mvc-driver": "999.1"}
    got = variant_of(Entry(CUDA, digest_of(CUDA), labels), KB)
    assert got == replace(variant, mvc_driver="999.1", line=got.line, platforms=("linux/amd64",))
    unknown = {**variant.labels(), "io.accel-images.torch": "9.9.0", "io.accel-images.tag": "9.9.0-cuda13.0-py3.12-ubuntu24.04"}
    described = variant_of(Entry("9.9.0-cuda13.0-py3.12-ubuntu24.04", "sha256:" + "1" * 64, unknown), KB)
    assert described is not None and described.tag == "9.9.0-cuda13.0-py3.12-ubuntu24.04"
    assert described.gpu_archs == variant.gpu_archs and described.mvc_driver == variant.mvc_driver
    assert variant_of(Entry("x", "d", {"io.accel-images.vendor": "tpu"}), KB) is None


# ---- the image's facts travel with its smoke record (accel_images/smoke/facts.py) ----------------------

CUDA_215 = "2.15.0-cuda13.2-py3.12-ubuntu24.04"
WHEEL_FACTS = ImageFacts.from_bytes((ROOT / "tests" / "data" / "facts" / "torch-2.15.0-cu132-x86_64.json").read_bytes())


def test_the_smoke_record_carries_the_images_facts_and_the_catalogue_shows_them() -> None:
    registry = registry_at()
    digest = publish(registry, VARIANTS[CUDA_215])
    write_record(registry, "r", digest, replace(PASSED, facts=WHEEL_FACTS), "r1")
    manifest, payload = record_of(registry, digest)
    assert json.loads(manifest["annotations"]["io.accel-images.smoke.facts"]) == WHEEL_FACTS.compact()
    assert json.loads(payload)["facts"] == WHEEL_FACTS.compact()
    [entry] = read_catalogue(registry, "r").entries
    assert entry.facts == ImageFacts.from_compact(WHEEL_FACTS.compact())
    assert entry.record()["facts"] == WHEEL_FACTS.compact()
    assert entry.holds() == "2.15.0+cu132 sm_75..sm_120 torchaudio 2.11.1 torchvision 0.29.2"


def test_recommend_judges_the_published_facts_architectures_not_the_label() -> None:
    """A label can say what the knowledge base predicted; the facts say what the image's torch holds: a
    GPU is judged against those (here a label that lost sm_75, and facts that have it)."""
    variant = VARIANTS[CUDA_215]
    labels = {**variant.labels(), "io.accel-images.gpu-archs": "8.0,8.6,9.0,10.0,12.0"}
    record = SmokeRecord(ok=True, ran_on="cuda", facts=WHEEL_FACTS.compact())
    with_facts = variant_of(Entry(CUDA_215, digest_of(CUDA_215), labels, smoke=record), KB)
    assert with_facts is not None and with_facts.gpu_archs == ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0")
    label_only = variant_of(Entry(CUDA_215, digest_of(CUDA_215), labels, smoke=replace(record, facts=None)), KB)
    assert label_only is not None and label_only.gpu_archs == ("8.0", "8.6", "9.0", "10.0", "12.0")


def test_a_record_without_facts_or_with_damaged_ones_reads_as_none() -> None:
    annotations = SmokeRecord(ok=True, ran_on="cpu").annotations()
    assert "io.accel-images.smoke.facts" not in annotations
    assert SmokeRecord.from_annotations({**annotations, "io.accel-images.smoke.facts": "{"}) == SmokeRecord(
        ok=True, ran_on="cpu", checked=datetime.fromisoformat(annotations["org.opencontainers.image.created"]))


def test_an_image_built_without_a_companion_says_so_in_the_catalogue() -> None:
    labels = {**VARIANTS[CPU_OLD].labels(), "io.accel-images.without-companions": "torchvision"}
    entry = Entry(CPU_OLD, digest_of(CPU_OLD), labels)
    assert entry.record()["without_companions"] == ["torchvision"]
    assert entry.holds() == "without torchvision"


def catalogue_cli(monkeypatch: pytest.MonkeyPatch, registry: InMemoryRegistry, *args: str) -> Result:
    """`accel-images catalogue --registry reg.example/team` read from `registry`, not over the network."""
    from accel_images.cli import session as cli_session
    from accel_images.registry import RegistryClient
    monkeypatch.setattr(RegistryClient, "for_destination", classmethod(lambda cls, destination: registry))
    return CliRunner().invoke(cli_session.catalogue_command, ["--registry", "reg.example/team", "--matrix",
                                                              str(FROZEN_MATRIX), *args])


def test_catalogue_shows_the_labels_readme_promises(monkeypatch: pytest.MonkeyPatch) -> None:
    """The platform (one row per image of a tag's index), torch, stack, Python, OS, driver floor and GPU
    architectures, the smoke result and whether it is offered."""
    registry = registry_at()
    write_record(registry, "team/accel-images/pytorch", publish(registry, VARIANTS[CUDA]), PASSED, "r1")
    publish(registry, VARIANTS[CPU_OLD])
    result = catalogue_cli(monkeypatch, registry)
    assert result.exit_code == 0, result.output
    header, *rows = [line.strip() for line in result.stdout.splitlines()]
    assert header.split() == ["tag", "platform", "torch", "stack", "python", "os", "driver", "archs", "holds", "smoke",
                              "offered", "built"]
    cuda = next(row for row in rows if row.startswith(CUDA))
    variant = VARIANTS[CUDA]
    floor = variant.mvc_driver or variant.min_driver
    for shown in ("2.14.1", "13.0", "3.12", "ubuntu24.04", f">= {floor}", variant.gpu_archs[0], "passed on cpu", "yes"):
        assert f" {shown} " in f" {cuda} ", (shown, cuda)
    cpu = next(row for row in rows if row.startswith(CPU_OLD))
    assert cpu.split()[1:6] == ["linux/amd64", "2.13.0", "-", "3.11", "debian12"] and "no smoke record" in cpu
    assert cpu.split()[-2:] == ["no", "-"]


def test_a_mistyped_namespace_is_the_same_answer_as_recommends(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Not "0 image(s)" and exit 0: exit 1 and the way out, as `recommend --registry` answers."""
    result = catalogue_cli(monkeypatch, registry_at())
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip() == ("accel-images: error: registry reg.example/team/accel-images/pytorch publishes"
                                     " no accel-images image (check --registry and --image)")
    from accel_images.cli import fanout as cli_fanout
    host = tmp_path / "host.json"
    host.write_text('{"vendor": "cpu"}')
    recommended = CliRunner().invoke(cli_fanout.recommend_command, ["--registry", "reg.example/team", "--matrix",
                                                                    str(FROZEN_MATRIX), "--host-json", str(host)])
    assert recommended.exit_code == result.exit_code
    assert recommended.stderr.strip().startswith(result.stderr.strip().removesuffix(")"))
