"""SBOM, provenance, OCI artifacts and `verify`: unit tests on an in-memory registry, then the
real thing against the local registry with the published CPU image.

The unit tests run in a second or two; the integration tests (marked engine/registry) push the
CPU image the suite built once (tests/conftest.py published_build, under a name only this run gives it)
into a repository of their own and read everything back over the
registry's HTTP API with urllib, not through accel_images.registry, and check the signature
with bare pyca/cryptography and the SBOM with the CycloneDX schema.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_supply.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import docker
import pytest

from conftest import SUITE_REPOSITORY
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from accel_images.registry import RegistryClient
from accel_images.supply import attach, provenance
from accel_images.supply.attest import Attester
from test_supply import NOW, digest_of, write_key, green_smoke, VARIANT, inputs, pae

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# Against the local registry, with the published CPU image
# ---------------------------------------------------------------------------------------------

def http_get(registry: str, path: str, accept: str | None = None) -> tuple[bytes, dict[str, str]]:
    request = urllib.request.Request(f"http://{registry}{path}", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read(), dict(response.headers)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800, check=False)  # a nightly may have to build the CPU image


@pytest.fixture
def cpu_image(published_build: dict) -> str:
    """The suite's CPU image (tests/conftest.py published_build), under the name only this run gives it."""
    return str(published_build["image"])


@pytest.fixture
def namespace(registry: str) -> str:
    return f"test-supply-{uuid.uuid4().hex[:10]}"


@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.slow  # reuses the local CPU image when its fingerprint is current, else builds it
def test_nightly_attaches_what_independent_readers_find_and_verify_passes(
        registry: str, wheelhouse: Path, base_images: object, cpu_image: str, suite_matrix: Path, namespace: str,
        tmp_path: Path, docker_client: docker.DockerClient) -> None:
    """The acceptance run: nightly publishes the CPU image, the registry API alone yields a valid
    CycloneDX SBOM with the torch the smoke test saw and a DSSE-signed SLSA provenance, `verify`
    passes; a hand-pushed image under the same tag with the copied labels fails `verify`, and the
    next nightly does not skip it but puts a verified image back."""
    key, pub = write_key(tmp_path)
    state = tmp_path / "state"
    # The tag is an index of amd64 and arm64; the wheelhouse holds x86_64 wheels: amd64 only, as a CI job
    # of that platform publishes it (the index keeps the other platforms' images).
    args = ["nightly", "--registry", f"{registry}/{namespace}", "--matrix", str(suite_matrix), "--vendor", "cpu",
            "--torch", "2.13", "--python", "3.11", "--os", "debian12", "--flavor", "runtime", "--platform", "linux/amd64",
            "--registry-mirror", f"docker.io={registry}", "--pip-find-links", str(wheelhouse),
            "--without-companion", "torchvision", "--state-dir", str(state), "--sign-key", str(key)]
    first = cli(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    [record] = json.loads((state / "reports" / "nightly-latest" / "report.json").read_text())["variants"]
    repository, tag = f"{namespace}/{SUITE_REPOSITORY}", record["tag"]
    digest = record["platform_digest"]  # the amd64 image's own: the full tag serves the index listing it
    assert record["provenance"]["signed"] is True and record["verified"]["ok"] is True

    # Everything below reads the registry's HTTP API directly.
    index, _ = http_get(registry, f"/v2/{repository}/manifests/{attach.referrers_tag(digest)}", attach.OCI_INDEX)
    by_type = {entry["artifactType"]: entry for entry in json.loads(index)["manifests"]}
    assert set(by_type) == {"application/vnd.cyclonedx+json", "application/vnd.in-toto+json"}
    documents = {}
    for artifact_type, entry in by_type.items():
        raw, _ = http_get(registry, f"/v2/{repository}/manifests/{entry['digest']}", attach.OCI_MANIFEST)
        assert digest_of(raw) == entry["digest"] and len(raw) == entry["size"]
        manifest = json.loads(raw)
        assert manifest["subject"]["digest"] == digest and manifest["artifactType"] == artifact_type
        documents[artifact_type], _ = http_get(registry, f"/v2/{repository}/blobs/{manifest['layers'][0]['digest']}")

    bom = documents["application/vnd.cyclonedx+json"].decode()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(bom) is None
    components = {c["name"]: c for c in json.loads(bom)["components"]}
    seen_torch = record["torch_in_sbom"]
    assert seen_torch == components["torch"]["version"] == "2.13.0+cpu"
    assert {"bash", "libc6", "python3"} <= set(components) and len(components) > 100

    envelope = json.loads(documents["application/vnd.in-toto+json"])
    body = base64.b64decode(envelope["payload"])
    public = serialization.load_pem_public_key(pub.read_bytes())
    assert isinstance(public, Ed25519PublicKey)
    public.verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae(envelope["payloadType"].encode(), body))
    statement = json.loads(body)
    assert statement["subject"][0]["digest"]["sha256"] == digest.split(":")[1]
    smoke = provenance.byproduct(statement, "smoke-test")
    assert smoke is not None and smoke["annotations"]["passed"] is True
    assert smoke["annotations"]["torch"] == seen_torch  # the SBOM lists what the smoke test saw
    assert provenance.byproduct(statement, "sbom")["digest"]["sha256"] == hashlib.sha256(bom.encode()).hexdigest()

    verified = cli("verify", f"{registry}/{repository}:{tag}", "--key", str(pub))
    assert verified.returncode == 0 and verified.stdout.startswith("verified: "), verified.stdout + verified.stderr
    # A downgrade: another variant's full tag, and an alias of another vendor, made to serve this signed image.
    for other in ("2.14.1-cpu-py3.12-ubuntu24.04", "latest-cuda"):
        RegistryClient(registry).copy_tag(repository, tag, other)
        downgraded = cli("verify", f"{registry}/{repository}:{other}", "--key", str(pub))
        assert downgraded.returncode == 1, downgraded.stdout + downgraded.stderr
        assert downgraded.stdout.startswith(f"not verified: {registry}/{repository}:{other}: linux/amd64: the signed"
                                            f" provenance is about {tag}, which does not wear the tag {other}"
                                            ), downgraded.stdout  # the tag is an index: each platform's image

    # Someone with push access puts another image under the tag, with the fingerprint label copied.
    # (from the registry's image: the local name is shared with every other run on this engine)
    labels = dict(RegistryClient(registry).image(repository, tag).labels)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "Dockerfile").write_text("FROM local/debian:bookworm\n" + "".join(
        f'LABEL "{name}"="{value}"\n' for name, value in labels.items()))
    fake_ref = f"{registry}/{repository}:{tag}"
    image, _ = docker_client.images.build(path=str(fake), tag=fake_ref, network_mode="none", rm=True, forcerm=True)
    try:
        docker_client.images.push(f"{registry}/{repository}", tag=tag)
        raw, _ = http_get(registry, f"/v2/{repository}/manifests/{tag}",
                          "application/vnd.docker.distribution.manifest.v2+json")
        fake_digest = digest_of(raw)
        assert fake_digest != digest
        # ...and, with the same push access, adds the copy to the tested record (accel_images.publish.tested).
        from accel_images.publish.tested import SmokedDigest, read_record, write_record
        client, record_tag = RegistryClient(registry), f"{tag}-tested"
        forged = read_record(client, repository, record_tag).adding(SmokedDigest(fake_digest, NOW.date(), "forged"))
        write_record(client, repository, record_tag, forged)
        refused = cli("verify", fake_ref, "--key", str(pub))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stdout.startswith("not verified: ") and "no provenance refers to" in refused.stdout
        assert len(refused.stdout.strip().splitlines()) == 1 and not refused.stderr

        second = cli(*args)
        assert second.returncode == 0, second.stdout + second.stderr
        [again] = json.loads((state / "reports" / "nightly-latest" / "report.json").read_text())["variants"]
        assert again["status"] == "built" and again["reason"].startswith("the registry's image does not verify")
        assert again["digest"] not in (None, fake_digest) and again["verified"]["ok"] is True
        assert cli("verify", fake_ref, "--key", str(pub)).returncode == 0
        # No tag at all (full, dated, alias) serves the hand-pushed digest any more.
        listed, _ = http_get(registry, f"/v2/{repository}/tags/list")
        for name in json.loads(listed)["tags"]:
            _, headers = http_get(registry, f"/v2/{repository}/manifests/{name}", ", ".join(attach.MANIFEST_ACCEPT))
            assert headers.get("Docker-Content-Digest") != fake_digest, name
    finally:
        docker_client.images.remove(image.id, force=True)


@pytest.mark.engine
@pytest.mark.registry
def test_skopeo_reads_the_artifacts_when_it_is_installed(registry: str, cpu_image: str, namespace: str,
                                                         tmp_path: Path, docker_client: docker.DockerClient) -> None:
    """An independent OCI client (skopeo, in Debian) sees the artifact manifests by digest."""
    import shutil
    skopeo = shutil.which("skopeo")
    if skopeo is None:   # .ci/setup-host.sh installs it: missing under CI is a failure, not a skip
        pytest.skip("skopeo is not installed")   # .ci/setup-host.sh installs it: a failure under CI (conftest)
    from accel_images.builder.engine import Engine
    from accel_images.registry import RegistryClient
    key, _ = write_key(tmp_path)
    ref = f"{registry}/{namespace}/pytorch:{VARIANT.tag}"
    docker_client.images.get(cpu_image).tag(ref)
    engine = Engine.connect()
    try:
        digest = engine.push(ref)
        store = RegistryClient(registry)
        done = Attester(engine, store, registry, f"{namespace}/pytorch", "r1", NOW,
                        provenance.load_signer(key))(ref, digest, inputs(), green_smoke())
        for artifact in (done.sbom, done.provenance):
            shown = subprocess.run([skopeo, "inspect", "--raw", "--tls-verify=false",
                                    f"docker://{registry}/{namespace}/pytorch@{artifact.manifest_digest}"],
                                   capture_output=True, text=True, timeout=60, check=False)
            assert shown.returncode == 0, shown.stderr
            assert json.loads(shown.stdout)["subject"]["digest"] == digest
    finally:
        engine.remove_image(ref)
