"""The registry's catalogue: what `recommend --registry`, `pull`, `run` and `catalogue` choose from.

Unit tests read an in-memory registry; the integration tests publish layer-less images (a config
blob with a variant's labels, made over the registry's HTTP API) and smoke records into a
repository of their own in the local registry, then read them back through accel-images, directly
and through the fault proxy with 50 ms added to every request.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from faultproxy import FaultProxy
from nightly_fixture.rawregistry import RawRegistry

from accel_images import compat, tags
from accel_images.catalogue import (
    ARTIFACT_TYPE,
    Entry,
    SmokeRecord,
    read_catalogue,
    read_record,
    variant_of,
    write_record,
)
from accel_images.choosing import load_expansion
from accel_images.cli import fanout as cli_fanout
from accel_images.cli import session as cli_session
from accel_images.hostinfo import HostInfo
from accel_images.registry import Artifact, RegistryClient, RemoteImage
from accel_images.smoke.judge import SmokeResult
from accel_images.variant import Variant

ROOT = Path(__file__).resolve().parents[1]
KB = compat.load_kb()
VARIANTS = {v.tag: v for v in load_expansion(str(ROOT / "matrix.yaml"), KB).variants}
CPU_NEW, CPU_OLD = "2.15.0-cpu-py3.12-ubuntu24.04", "2.13.0-cpu-py3.11-debian12"
CUDA = "2.14.1-cuda13.0-py3.12-ubuntu24.04"
PASSED = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=(),
                     raw={"backend": "cpu", "device_name": ""})


def digest_of(tag: str) -> str:
    return "sha256:" + (tag.encode().hex() * 8)[:64]


# ---- an in-memory registry --------------------------------------------------------------------

@dataclass
class MemoryRegistry:
    """Tags -> (digest, labels); artifacts as put; every read counted."""

    host: str = "reg.example"
    images: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)

    def publish(self, variant: Variant, tag: str | None = None, digest: str | None = None) -> str:
        digest = digest or digest_of(variant.tag)
        self.images[tag or variant.tag] = (digest, variant.labels())
        return digest

    def tags(self, repository: str, page_size: int = 1000) -> list[str]:
        return [*self.images, *self.artifacts]

    def image(self, repository: str, tag: str) -> RemoteImage | None:
        self.reads.append(tag)
        found = self.images.get(tag) or next((image for image in self.images.values() if image[0] == tag), None)
        return RemoteImage(repository, tag, found[0], found[1]) if found else None

    def manifest_digest(self, repository: str, tag: str) -> str | None:
        self.reads.append(tag)
        found = self.images.get(tag)
        return found[0] if found else None

    def manifest(self, repository: str, reference: str) -> tuple[str, dict] | None:
        self.reads.append(reference)
        artifact = self.artifacts.get(reference)
        if artifact is None:
            return None
        return "sha256:" + "f" * 64, {"artifactType": artifact.artifact_type, "annotations": dict(artifact.annotations)}

    def descriptor(self, repository: str, reference: str) -> dict | None:
        return {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": reference, "size": 10}

    def put_artifact(self, repository: str, tag: str, artifact: Artifact) -> str:
        self.artifacts[tag] = artifact
        return "sha256:" + "f" * 64


def test_a_smoke_record_says_what_it_was_written_from() -> None:
    registry = MemoryRegistry()
    digest = registry.publish(VARIANTS[CUDA])
    result = SmokeResult(ok=True, ran_on="cuda", cpu_fallback=False, failures=(), checks=(),
                         raw={"backend": "cuda", "device_name": "NVIDIA H100 80GB HBM3"})
    write_record(registry, "team/pytorch", digest, result, "20261202T030000-abc123",
                 now=datetime(2026, 12, 2, 3, 4, 5, tzinfo=timezone.utc))
    artifact = registry.artifacts[tags.record_tag(digest)]
    assert artifact.artifact_type == ARTIFACT_TYPE and artifact.subject == {
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": 10}
    assert json.loads(artifact.payload)["image"] == digest
    found = read_record(registry, "team/pytorch", tags.record_tag(digest))
    assert found is not None
    record, labels = found
    assert labels == VARIANTS[CUDA].labels()          # the image's labels, copied: readers need no config blob
    assert record == SmokeRecord(ok=True, ran_on="cuda", device="NVIDIA H100 80GB HBM3", run_id="20261202T030000-abc123",
                                 checked=datetime(2026, 12, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert record.summary() == "passed on cuda, NVIDIA H100 80GB HBM3"


def test_only_images_whose_digest_a_passing_record_vouches_for_are_offered() -> None:
    registry = MemoryRegistry()
    for tag in (CPU_NEW, CPU_OLD, CUDA):
        registry.publish(VARIANTS[tag])
    write_record(registry, "r", digest_of(CPU_OLD), PASSED, "r1")
    write_record(registry, "r", digest_of(CUDA), replace(PASSED, ok=False, failures=("check matmul failed",)), "r1")
    registry.publish(VARIANTS[CPU_NEW], tag="latest-cpu")                    # an alias: never read
    registry.publish(VARIANTS[CPU_NEW], tag=f"{CPU_NEW}-20261202")           # a dated tag: never read
    registry.publish(VARIANTS[CPU_NEW], tag=f"{CPU_NEW}-candidate-r1-abc")   # a candidate: never read
    registry.images["2.14.0-cpu-py3.12-ubuntu22.04"] = (digest_of("x"), {"some": "label"})  # not ours

    catalogue = read_catalogue(registry, "r")
    by_tag = {entry.tag: entry for entry in catalogue.entries}
    assert sorted(by_tag) == sorted([CPU_NEW, CPU_OLD, CUDA])
    assert [entry.tag for entry in catalogue.offered()] == [CPU_OLD]
    assert by_tag[CPU_NEW].why_not == "published, but no smoke record vouches for its digest"
    assert by_tag[CUDA].why_not == "its smoke test failed on cpu"
    assert not {"latest-cpu", f"{CPU_NEW}-20261202", f"{CPU_NEW}-candidate-r1-abc"} & set(registry.reads)
    assert tags.record_tag(digest_of(CPU_NEW)) not in registry.reads   # no record in the tag list: not asked


def test_a_tag_moved_onto_an_untested_image_loses_its_record() -> None:
    registry = MemoryRegistry()
    write_record(registry, "r", registry.publish(VARIANTS[CPU_OLD]), PASSED, "r1")
    registry.publish(VARIANTS[CPU_OLD], digest="sha256:" + "9" * 64)        # pushed by hand over it
    [entry] = read_catalogue(registry, "r").entries
    assert not entry.offered


def test_the_variant_of_an_entry_is_the_knowledge_base_s_with_the_image_s_own_floor() -> None:
    variant = VARIANTS[CUDA]
    labels = {**variant.labels(), "io.accel-images.mvc-driver": "999.1"}
    got = variant_of(Entry(CUDA, digest_of(CUDA), labels), KB)
    assert got == replace(variant, mvc_driver="999.1", line=got.line)
    unknown = {**variant.labels(), "io.accel-images.torch": "9.9.0", "io.accel-images.tag": "9.9.0-cuda13.0-py3.12-ubuntu24.04"}
    described = variant_of(Entry("9.9.0-cuda13.0-py3.12-ubuntu24.04", "sha256:" + "1" * 64, unknown), KB)
    assert described is not None and described.tag == "9.9.0-cuda13.0-py3.12-ubuntu24.04"
    assert described.gpu_archs == variant.gpu_archs and described.mvc_driver == variant.mvc_driver
    assert variant_of(Entry("x", "d", {"io.accel-images.vendor": "tpu"}), KB) is None


# ---- against the local registry ----------------------------------------------------------------

@dataclass(frozen=True)
class Published:
    registry: str
    namespace: str

    @property
    def repository(self) -> str:
        return f"{self.namespace}/pytorch"

    def add(self, tag: str, *, smoke: SmokeResult | None = PASSED) -> str:
        raw = RawRegistry(self.registry)
        digest = raw.push_config_image(self.repository, tag, VARIANTS[tag].labels())
        if smoke is not None:
            write_record(RegistryClient(self.registry), self.repository, digest, smoke, "test")
        return digest

    def args(self, *more: str) -> list[str]:
        return ["--registry", f"{self.registry}/{self.namespace}", "--image", "pytorch", *more]


@pytest.fixture
def published(registry: str) -> Iterator[Published]:
    here = Published(registry, f"test-{uuid.uuid4().hex[:12]}")
    yield here
    RawRegistry(registry).delete_repository(here.repository)


def host_file(tmp_path: Path, host: HostInfo) -> str:
    path = tmp_path / "host.json"
    path.write_text(json.dumps({key: list(value) if isinstance(value, tuple) else value
                                for key, value in host.__dict__.items()}))
    return str(path)


@pytest.mark.registry
def test_recommend_with_a_registry_offers_only_published_green_images(published: Published, tmp_path: Path) -> None:
    published.add(CPU_NEW, smoke=None)            # published, never smoke-tested
    published.add(CPU_OLD)
    result = CliRunner().invoke(cli_fanout.recommend_command,
                                published.args("--host-json", host_file(tmp_path, HostInfo())))
    assert result.exit_code == 0, result.output
    ref = f"{published.registry}/{published.repository}:{CPU_OLD}"
    assert result.stdout.strip() == f"docker run --rm -it --ipc host {ref}"
    assert f"from: chosen from registry {published.registry}/{published.repository}: 2 image(s) published," \
           f" 1 passed their smoke test; {CPU_OLD} passed on cpu" in result.stderr
    assert f"not: {CPU_NEW}: published, but no smoke record vouches for its digest" in result.stderr

    as_json = CliRunner().invoke(cli_fanout.recommend_command,
                                 published.args("--host-json", host_file(tmp_path, HostInfo()), "--json"))
    record = json.loads(as_json.stdout)
    assert record["image"] == ref and record["source"]["kind"] == "registry"


@pytest.mark.registry
def test_a_gpu_host_gets_the_published_gpu_image(published: Published, tmp_path: Path) -> None:
    published.add(CPU_OLD)
    published.add(CUDA, smoke=replace(PASSED, ran_on="cpu", cpu_fallback=True))
    a100 = HostInfo(vendor="cuda", driver_version="580.126.09", stack_version="13.0",
                    gpu_names=("NVIDIA A100-SXM4-40GB",), gpu_archs=("8.0",), device_count=1)
    result = CliRunner().invoke(cli_fanout.recommend_command, published.args("--host-json", host_file(tmp_path, a100)))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith(f"{published.repository}:{CUDA}")
    assert f"warning: {CUDA} was smoke-tested in CPU mode only: no cuda runner ran it" in result.stderr


@pytest.mark.registry
def test_an_empty_repository_is_one_line_naming_the_way_out(published: Published, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli_fanout.recommend_command,
                                published.args("--host-json", host_file(tmp_path, HostInfo())))
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"accel-images: error: registry {published.registry}/{published.repository}"
                                     " publishes no accel-images image (check --registry and --image, or pass"
                                     " --from-matrix)")


@pytest.mark.registry
def test_catalogue_command_lists_every_image_with_its_smoke_result(published: Published) -> None:
    published.add(CPU_OLD)
    published.add(CPU_NEW, smoke=replace(PASSED, ok=False))
    result = CliRunner().invoke(cli_session.catalogue_command, published.args("--json"))
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    images = {image["tag"]: image for image in document["images"]}
    assert images[CPU_OLD]["offered"] and images[CPU_OLD]["smoke"]["ran_on"] == "cpu"
    assert not images[CPU_NEW]["offered"] and images[CPU_NEW]["why_not"] == "its smoke test failed on cpu"
    table = CliRunner().invoke(cli_session.catalogue_command, published.args())
    assert f" {CPU_OLD}  " in table.stdout and "passed on cpu" in table.stdout


@pytest.mark.registry
def test_forty_images_behind_50_ms_per_request_are_read_concurrently(published: Published) -> None:
    """81 requests (a tag list, then a HEAD and a record per image) at 50 ms each are 4 s one after the
    other; read concurrently they take a fraction. The 1 s bound itself is measured, beside the
    sequential time, by `benchmarks/run.py --only catalogue` (a shared CI machine's load would make
    it a flaky assertion here); this test holds the shape that makes it possible."""
    names = [f"2.{minor}.0-cpu-py3.{py}-ubuntu24.04" for minor in range(20) for py in (11, 12)]
    raw, client = RawRegistry(published.registry), RegistryClient(published.registry)
    for name in names:
        labels = {**VARIANTS[CPU_NEW].labels(), "io.accel-images.tag": name}
        write_record(client, published.repository, raw.push_config_image(published.repository, name, labels),
                     PASSED, "bench")
    with FaultProxy(published.registry) as proxy:
        proxy.faults.delay_s = 0.05
        started = time.perf_counter()
        catalogue = read_catalogue(RegistryClient(proxy.host), published.repository)
        elapsed = time.perf_counter() - started
    assert len(catalogue.offered()) == 40
    assert len(proxy.faults.seen) == 81                   # one tag list, then two requests per image
    assert proxy.faults.peak_in_flight >= 12              # READ_WORKERS (16) at once, give or take the start
    assert elapsed < 81 * 0.05 / 2, f"{elapsed:.2f} s"     # at least twice what one-at-a-time allows
