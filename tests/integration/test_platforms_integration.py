"""One tag, one image index: a nightly publishes linux/amd64 and linux/arm64, the arm64 image built
and smoke-tested under emulation (qemu-user-static, registered by .ci/setup-host.sh).

One test, so the arm64 image is built once per session: the fixture's stub template
(tests/nightly_fixture; here with a torch distribution's metadata, so the SBOM lists the torch the
stub's smoke report names) on the two Debian 12 stand-ins, pushed as one index under a namespace of
the test's own in the local registry. Everything published is read back over the registry's API.

Here: the tests that need the real engine and registry; the index logic alone is in
tests/unit/test_platforms.py.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import docker
import pytest

import containers
from accel_images.builder.engine import Engine
from accel_images.builder.settings import BuildSettings
from accel_images.cli.options import load_expansion
from accel_images.kb import compat
from accel_images.model import tags
from accel_images.model.reference import Mirror
from accel_images.publish.catalogue import read_catalogue
from accel_images.publish import nightly as nightly_module
from accel_images.publish.nightly import NightlyOptions, NightlyOutcome, run_nightly
from accel_images.publish.promote import Target
from accel_images.publish.tested import SmokedRecord
from accel_images.model.variant import Variant
from accel_images.registry import IndexEntry, RegistryClient, oci_index
from accel_images.smoke.judge import SmokeResult
from accel_images.render.contexts import RenderOptions
from accel_images.state import StateDir
from accel_images.supply import attach
from accel_images.supply.provenance import load_public_key, load_signer
from accel_images.supply.verify import ImageName, verify_image
from nightly_fixture import stubsmoke
from nightly_fixture.cleanup import remove_local_names
from nightly_fixture.rawregistry import OCI_INDEX, RawRegistry, sha256
from test_nightly import NO_WAIT, TEMPLATES
from test_supply import write_key

ARM64_BASE = "local/debian-arm64:bookworm"
"""The arm64 stand-in .ci/setup-host.sh builds (debootstrap --arch=arm64, Python included)."""
TAG = "2.14.1-cpu-py3.11-debian12"
MATRIX = """schema: 1
image: {image}
platform: [linux/amd64, linux/arm64]
vendors:
  cpu:
    - torch: ["2.14"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
"""
TORCH_METADATA = """    && mkdir -p "/usr/lib/python3/dist-packages/torch-{{ v.torch }}+cpu.dist-info" \\
    && printf 'Metadata-Version: 2.1\\nName: torch\\nVersion: %s+cpu\\n' "{{ v.torch }}" \\
       > "/usr/lib/python3/dist-packages/torch-{{ v.torch }}+cpu.dist-info/METADATA" \\
"""


@dataclass(frozen=True)
class Site:
    registry: str
    namespace: str
    matrix: Path
    templates: Path
    state: Path
    key: Path
    pub: Path

    @property
    def repository(self) -> str:
        return f"{self.namespace}/pytorch"

    @property
    def raw(self) -> RawRegistry:
        return RawRegistry(self.registry)

    def digests(self) -> dict[str, str | None]:
        return {tag: self.raw.digest(self.repository, tag) for tag in self.raw.tags(self.repository)}


@pytest.fixture
def site(registry: str, docker_client: docker.DockerClient, base_images, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    arm64_base(docker_client)
    stubsmoke.install(monkeypatch)
    namespace = f"test-{uuid.uuid4().hex[:12]}"
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    template = templates / "vendors" / "cpu.Dockerfile.j2"
    template.write_text(template.read_text().replace('    && echo "{{ verdict }}"', TORCH_METADATA
                                                     + '    && echo "{{ verdict }}"'))
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.format(image=f"{namespace}/pytorch"))
    key, pub = write_key(tmp_path)
    here = Site(registry, namespace, matrix, templates, tmp_path / "state", key, pub)
    push_index(docker_client, registry, f"{namespace}/library/debian", "bookworm-slim",
               {"amd64": base_images.python, "arm64": ARM64_BASE})
    yield here
    for repository in ("pytorch", "library/debian"):
        here.raw.delete_repository(f"{namespace}/{repository}")
    remove_local_names(docker_client, f"{registry}/{namespace}/", f"{namespace}/")


def arm64_base(client: docker.DockerClient) -> None:
    """The arm64 stand-in, present and arm64; fails under CI like every missing piece of the machine."""
    from conftest import unavailable
    try:
        image = client.images.get(ARM64_BASE)
    except docker.errors.ImageNotFound:
        unavailable(f"local image {ARM64_BASE} missing")
        return
    if image.attrs.get("Architecture") != "arm64":
        unavailable(f"{ARM64_BASE} is {image.attrs.get('Architecture')}, not arm64")


def push_index(client: docker.DockerClient, registry: str, repository: str, tag: str,
               images: dict[str, str]) -> str:
    """Each local image pushed under `<tag>-<arch>`, then `tag` an OCI index of them; its digest."""
    raw, entries = RawRegistry(registry), []
    for arch, source in images.items():
        client.images.get(source).tag(f"{registry}/{repository}", f"{tag}-{arch}")
        for line in client.images.push(f"{registry}/{repository}", tag=f"{tag}-{arch}", stream=True, decode=True):
            assert "error" not in line, line
        manifest = raw.manifest(repository, f"{tag}-{arch}")
        entries.append(IndexEntry(f"linux/{arch}", sha256(manifest), len(manifest),
                                  json.loads(manifest)["mediaType"]))
    return RegistryClient(registry).put_manifest(repository, tag, oci_index(entries), OCI_INDEX)[0]


def nightly(site: Site) -> list[NightlyOutcome]:
    expansion = load_expansion(str(site.matrix))
    options = NightlyOptions(Target(site.registry, site.repository), retry=NO_WAIT, signer=load_signer(site.key))
    mirror = RenderOptions(mirrors=(Mirror("docker.io", f"{site.registry}/{site.namespace}"),))
    return run_nightly(Engine.connect(), compat.load_kb(), expansion, expansion.variants,
                       RegistryClient(site.registry),
                       BuildSettings(options=mirror, state_dir=StateDir(site.state), network_mode="none"),
                       options, templates_dir=site.templates)


@pytest.mark.engine
@pytest.mark.registry
def test_a_nightly_publishes_one_index_of_both_platforms_and_the_next_pushes_nothing(
        site: Site, docker_client: docker.DockerClient) -> None:
    first = nightly(site)
    assert [(n.outcome.variant.platform, n.status, n.ok) for n in first] == [
        ("linux/amd64", "built", True), ("linux/arm64", "built", True)], [n.outcome.error for n in first]

    # The full tag is an OCI image index of one manifest per platform, each the image that was tested.
    top = json.loads(site.raw.manifest(site.repository, TAG))
    assert top["mediaType"] == OCI_INDEX
    platforms = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in top["manifests"]}
    assert platforms == {n.outcome.variant.platform: n.platform_digest for n in first}
    index = site.raw.digest(site.repository, TAG)
    assert {n.registry_digest for n in first} == {index}
    for tag in tags.all_tags(first[0].outcome.variant, load_expansion(str(site.matrix)).variants, NightlyOptions(
            Target("", "")).day):
        assert site.raw.digest(site.repository, tag) == index, tag          # full, dated and aliases: the index
    record = SmokedRecord.from_labels(site.raw.labels(site.repository, tags.tested_tag(first[0].outcome.variant)))
    assert [entry.digest for entry in record.entries] == [index]          # what the next run trusts
    assert not [t for t in site.raw.tags(site.repository) if "-candidate-" in t]

    # Each platform's image has its own smoke record, SBOM and signed provenance; arm64's ran as aarch64.
    client = RegistryClient(site.registry)
    entries = {entry.platform: entry for entry in read_catalogue(client, site.repository).entries}
    assert set(entries) == {"linux/amd64", "linux/arm64"} and all(e.offered for e in entries.values())
    assert entries["linux/arm64"].digest == platforms["linux/arm64"] and entries["linux/arm64"].index == index
    assert entries["linux/arm64"].smoke is not None and entries["linux/arm64"].smoke.device == "aarch64"
    assert entries["linux/amd64"].smoke is not None and entries["linux/amd64"].smoke.device == "x86_64"
    for platform, digest in platforms.items():
        listed = json.loads(site.raw.manifest(site.repository, attach.referrers_tag(digest)))["manifests"]
        assert {m["artifactType"] for m in listed} == {"application/vnd.cyclonedx+json",
                                                       "application/vnd.in-toto+json"}, platform
    verdict = verify_image(client, ImageName.parse(f"{site.registry}/{site.repository}:{TAG}"),
                           load_public_key(site.pub))
    assert verdict.ok and set(verdict.platforms) == {"linux/amd64", "linux/arm64"}, verdict.reason
    assert {v.smoke.get("torch") for v in verdict.platforms.values()} == {"2.14.1+cpu"}

    # docker run --platform linux/arm64 TAG uname -m: the index's arm64 image, emulated; its facts, written
    # at build time, name the machine the build ran on (the stand-in's uname -m, as facts.py's platform.machine()).
    ref = f"{site.registry}/{site.repository}:{TAG}"
    docker_client.images.pull(ref, platform="linux/arm64")
    assert docker_client.images.get(ref).attrs["Architecture"] == "arm64"
    machine, facts = containers.output(docker_client, ref, ["sh", "-c", "uname -m; cat /opt/accel-images/facts.json"]
                                       ).split("\n", 1)
    assert machine == "aarch64" and json.loads(facts)["platform"] == {"os": "linux", "machine": "aarch64"}

    # The second night: both platforms unchanged and tested, nothing pushed, no tag moved.
    before = site.digests()
    second = nightly(site)
    assert [(n.outcome.variant.platform, n.status) for n in second] == [("linux/amd64", "skipped"),
                                                                        ("linux/arm64", "skipped")]
    assert sum(n.uploaded_bytes for n in second) == 0 and all(n.publication is None for n in second)
    assert site.digests() == before

    # A change both platforms rebuild for, and the arm64 smoke test fails: promotion is per platform.
    template = site.templates / "vendors" / "cpu.Dockerfile.j2"
    template.write_text(template.read_text() + "LABEL io.accel-images.test-change=1\n")
    failing = stubsmoke.stub_smoke_image
    def arm64_fails(engine: Engine, image: str, variant: Variant, settings: BuildSettings) -> SmokeResult:
        result = failing(engine, image, variant, settings)
        return result if variant.platform != "linux/arm64" else replace(result, ok=False, failures=("arm64 broke",))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nightly_module, "smoke_image", arm64_fails)
        third = nightly(site)
    assert [(n.outcome.variant.platform, n.status) for n in third] == [("linux/amd64", "built"),
                                                                       ("linux/arm64", "failed")]
    now = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"]
           for m in json.loads(site.raw.manifest(site.repository, TAG))["manifests"]}
    assert now == {"linux/amd64": third[0].platform_digest, "linux/arm64": platforms["linux/arm64"]}
    assert now["linux/amd64"] != platforms["linux/amd64"]  # amd64 users get the new image, arm64 keep theirs


@pytest.mark.engine
def test_the_smoke_workload_runs_as_aarch64_in_the_arm64_stand_in(docker_client: docker.DockerClient,
                                                                   tmp_path: Path) -> None:
    """The part of the real workload that needs no torch: it starts on the image's own (arm64) Python,
    finds no torch and says so in its one JSON report, as on any host."""
    arm64_base(docker_client)
    workload = Path(__file__).resolve().parents[2] / "accel_images" / "smoke" / "workload.py"
    shutil.copy(workload, tmp_path / "smoke.py")
    output = containers.output(docker_client, ARM64_BASE, [
        "sh", "-c", "uname -m && python3 /w/smoke.py --expect-python 3.11; true"],
        volumes={str(tmp_path): {"bind": "/w", "mode": "ro"}})
    machine, report = output.split("\n", 1)
    result = json.loads(report.strip().splitlines()[-1])
    assert machine == "aarch64" and result["python"].startswith("3.11.")
    assert result["ok"] is False and result["checks"][0]["name"] == "import_torch"
