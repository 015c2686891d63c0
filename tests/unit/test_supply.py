"""SBOM, provenance, OCI artifacts and `verify`: unit tests on an in-memory registry, then the
real thing against the local registry with the published CPU image.

The unit tests run in a second or two; the integration tests (marked engine/registry) push the
CPU image `accel-images/pytorch:2.13.0-cpu-py3.11-debian12` (built by .ci/run's earlier tests or
`make image-offline`) into a repository of their own and read everything back over the
registry's HTTP API with urllib, not through accel_images.registry, and check the signature
with bare pyca/cryptography and the SBOM with the CycloneDX schema.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_supply_integration.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from packageurl import PackageURL

from fakes import Fault, ForgetfulRegistry, InMemoryRegistry, PushingEngine

from accel_images.builder.builder import CREATED_LABEL
from accel_images.builder.engine import Pushed
from accel_images.cli import main
from accel_images.errors import InputError, RegistryError
from accel_images.smoke.judge import SmokeResult
from accel_images.supply import attach, probe, provenance, sbom
from accel_images.supply.attest import AttestationError, Attester, BuildInputs, Source, builder_identity
from accel_images.supply.verify import ImageName, verify_digest, verify_image
from accel_images.model.variant import Variant

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 3, 2, 17, tzinfo=timezone.utc)


# ---------------------------------------------------------------------------------------------
# The in-memory registry (tests/fakes.py InMemoryRegistry), with or without the referrers API
# ---------------------------------------------------------------------------------------------


def valid_cyclonedx(text: str) -> bool:
    """CycloneDX 1.6's strict JSON schema accepts the SBOM. Imported here, not at collection: the
    validator builds jsonschema's URI grammars on import (about a second of every test worker)."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    return JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None

def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push(store: InMemoryRegistry, tag: str, labels: dict[str, str] | None = None) -> str:
    """An image of its own under `tag` (a fresh digest each time, as a rebuild or a hand push makes)."""
    return store.push_image(labels or {}, tag=tag, salt=uuid.uuid4().hex)


def put_by_digest(store: InMemoryRegistry, data: bytes, media_type: str) -> str:
    """A manifest put under its own digest (no tag): an index, here."""
    return store.put_manifest("r", digest_of(data), data, media_type)[0]


# ---------------------------------------------------------------------------------------------
# Keys, an inventory, a smoke result
# ---------------------------------------------------------------------------------------------

def write_key(directory: Path, name: str = "sign") -> tuple[Path, Path]:
    private = Ed25519PrivateKey.generate()
    key = directory / f"{name}.pem"
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    pub = directory / f"{name}.pub"
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
    return key, pub


DPKG_STATUS = """Package: bash
Status: install ok installed
Architecture: amd64
Version: 5.2.15-2+b7
Description: GNU Bourne Again SHell
 Bash is an sh-compatible command language interpreter.
Source: bash (5.2.15-2)

Package: removed-thing
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u9
"""

INVENTORY = sbom.Inventory("debian", "12", "3.11.2", (
    sbom.Package("deb", "bash", "5.2.15-2+b7", "amd64", "bash"),
    sbom.Package("deb", "libc6", "2.36-9+deb12u9", "amd64"),
    sbom.Package("pypi", "torch", "2.13.0+cpu"),
    sbom.Package("pypi", "nvidia_cublas_cu12", "12.9.1.4"),
    sbom.Package("pypi", "typing_extensions", "4.16.0"),
))


def green_smoke(torch: str = "2.13.0+cpu") -> SmokeResult:
    return SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=(),
                       raw={"torch": torch, "python": "3.11.2", "device_name": "AMD EPYC", "device_count": 1})


VARIANT = Variant(vendor="cpu", stack=None, torch="2.13.0", python="3.11", os="debian12", flavor="runtime",
                  base_image="debian:bookworm-slim")


@dataclass
class ProbeEngine:
    """Answers the SBOM probe with an inventory, like the image would."""

    stdout: str
    exit_code: int = 0
    ran: list[str] = field(default_factory=list)

    def run(self, image: str, command: list[str], **kwargs: Any) -> Any:
        self.ran.append(image)
        assert command[:2] == ["python", "-c"] and kwargs["options"]["network_disabled"] is True

        @dataclass
        class Result:
            exit_code: int
            stdout: str
            stderr: str = ""
            timed_out: bool = False
        return Result(self.exit_code, self.stdout)


def probe_output(inventory: sbom.Inventory = INVENTORY) -> str:
    return json.dumps({"schema": 1, "os": {"id": inventory.os_id, "version_id": inventory.os_version},
                       "dpkg": [{"name": p.name, "version": p.version, "arch": p.arch, "source": p.source}
                                for p in inventory.packages if p.kind == "deb"],
                       "python": {"version": inventory.python_version,
                                  "packages": [{"name": p.name, "version": p.version}
                                               for p in inventory.packages if p.kind == "pypi"]}})


def attester(store: InMemoryRegistry, engine: ProbeEngine, key: Path | None, tmp_path: Path) -> Attester:
    return Attester(engine, store, "reg.example", "team/pytorch", "r1", NOW,
                    provenance.load_signer(key) if key else None,
                    Source("git+https://example.invalid/accel-images", "a" * 40, "b" * 64),
                    out_dir=tmp_path / "attestations", env={})


def inputs() -> BuildInputs:
    return BuildInputs(VARIANT, "sha256:" + "f" * 64, "127.0.0.1:5000/library/debian@sha256:" + "c" * 64,
                       {"USER_NAME": "dev", "USER_UID": "1000", "USER_GID": "1000"})


# ---------------------------------------------------------------------------------------------
# The probe and the SBOM
# ---------------------------------------------------------------------------------------------

def test_probe_reads_installed_packages_from_the_dpkg_status_file(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text(DPKG_STATUS)
    assert probe.dpkg_packages(str(status)) == [
        {"name": "bash", "version": "5.2.15-2+b7", "arch": "amd64", "source": "bash"},
        {"name": "libc6", "version": "2.36-9+deb12u9", "arch": "amd64", "source": ""}]
    assert probe.dpkg_packages(str(tmp_path / "absent")) == []


def test_probe_output_parses_and_a_broken_one_is_one_line() -> None:
    parsed = sbom.parse_probe("noise\n" + probe_output())
    assert set(parsed.packages) == set(INVENTORY.packages) and parsed.python_version == "3.11.2"
    assert (parsed.os_id, parsed.os_version) == ("debian", "12")
    with pytest.raises(sbom.SbomError, match="printed no usable inventory"):
        sbom.parse_probe("Traceback ...")


def test_a_distribution_installed_from_a_fetched_wheel_carries_its_hash_and_index_in_the_sbom() -> None:
    """The run fetched nvidia_cublas_cu12's wheel: its component names that file's sha256 and the index that
    served it; a distribution with no fetched wheel of its version (typing_extensions here) has no hash."""
    from accel_images.model.wheels import Wheel
    subject = sbom.Subject("reg.example/team/pytorch", "t", "sha256:" + "d" * 64)
    cublas = Wheel("nvidia_cublas_cu12-12.9.1.4-py3-none-manylinux_2_27_x86_64.whl", "c" * 64, 1, "https://pypi.org/simple")
    other = Wheel("typing_extensions-4.15.0-py3-none-any.whl", "e" * 64, 1, "https://pypi.org/simple")
    doc = json.loads(sbom.bom_json(INVENTORY, subject, wheels=(cublas, other)))
    assert valid_cyclonedx(json.dumps(doc))
    components = {c["name"]: c for c in doc["components"]}
    assert components["nvidia_cublas_cu12"]["hashes"] == [{"alg": "SHA-256", "content": "c" * 64}]
    assert {p["name"]: p["value"] for p in components["nvidia_cublas_cu12"]["properties"]} == {
        "accel-images:wheel": cublas.filename, "accel-images:index": "https://pypi.org/simple"}
    assert "hashes" not in components["typing_extensions"]   # 4.16.0 installed, 4.15.0 fetched: not that file


@pytest.mark.parametrize("listed, seen, same", [
    ("2.13.0+cpu", "2.13.0+cpu", True),
    ("2.15.0", "2.15.0+cu132", True),        # the package index's wheel: no local label in its metadata
    ("2.15.0+cu130", "2.15.0+cu132", False),
    ("2.14.1", "2.15.0+cu132", False),
    (None, "2.15.0", False),
])
def test_the_sboms_torch_is_the_one_the_smoke_test_saw(listed: str | None, seen: str, same: bool) -> None:
    from accel_images.supply.attest import same_torch
    assert same_torch(listed, seen) is same


def test_sbom_is_valid_cyclonedx_with_purls_and_local_version_labels() -> None:
    subject = sbom.Subject("reg.example/team/pytorch", "2.13.0-cpu-py3.11-debian12", "sha256:" + "d" * 64)
    text = sbom.bom_json(INVENTORY, subject)
    assert valid_cyclonedx(text)
    doc = json.loads(text)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    purls = {c["name"]: c["purl"] for c in doc["components"]}
    assert purls["torch"] == "pkg:pypi/torch@2.13.0%2Bcpu"
    assert purls["nvidia_cublas_cu12"] == "pkg:pypi/nvidia-cublas-cu12@12.9.1.4"
    assert purls["bash"] == "pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64&distro=debian-12"
    versions = {c["name"]: c["version"] for c in doc["components"]}
    assert versions["torch"] == "2.13.0+cpu"
    root = doc["metadata"]["component"]
    assert root["type"] == "container" and root["hashes"] == [{"alg": "SHA-256", "content": "d" * 64}]
    oci = PackageURL.from_string(root["purl"])
    assert (oci.type, oci.name, oci.version) == ("oci", "pytorch", "sha256:" + "d" * 64)
    assert oci.qualifiers == {"repository_url": "reg.example/team/pytorch", "tag": "2.13.0-cpu-py3.11-debian12"}
    [dependency] = [d for d in doc["dependencies"] if d["ref"] == root["bom-ref"]]
    assert len(dependency["dependsOn"]) == len(INVENTORY.packages)


def test_inventory_fails_in_one_line_when_the_probe_fails() -> None:
    with pytest.raises(sbom.SbomError, match="exited 127"):
        sbom.inventory(ProbeEngine("", exit_code=127), "img")


# ---------------------------------------------------------------------------------------------
# Provenance: statement, DSSE, keys
# ---------------------------------------------------------------------------------------------

def statement_for(digest: str, passed: bool = True) -> dict[str, Any]:
    smoke = provenance.SmokeFacts(passed, "cpu", False, "2.13.0+cpu", "3.11.2")
    return provenance.statement(provenance.BuildFacts(
        "reg.example/team/pytorch", digest, "2.13.0-cpu-py3.11-debian12", {"vendor": "cpu"}, "sha256:f",
        "127.0.0.1:5000/library/debian@sha256:" + "c" * 64, {"USER_UID": "1000"}, "b" * 64,
        {"uri": "git+https://example.invalid/x", "gitCommit": "a" * 40}, "urn:accel-images:host:h", "r1",
        NOW, NOW, smoke, sbom_sha256="e" * 64))


def pae(payload_type: bytes, body: bytes) -> bytes:
    """DSSE v1 PAE, written out from the spec (secure-systems-lab/dsse protocol.md)."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(body), body)


def test_statement_is_an_in_toto_slsa_provenance_about_the_digest() -> None:
    statement = statement_for("sha256:" + "d" * 64)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": "reg.example/team/pytorch", "digest": {"sha256": "d" * 64}}]
    definition = statement["predicate"]["buildDefinition"]
    assert definition["buildType"] and definition["externalParameters"]["buildArgs"] == {"USER_UID": "1000"}
    assert {"uri": "docker://127.0.0.1:5000/library/debian", "digest": {"sha256": "c" * 64}} in \
        definition["resolvedDependencies"]
    assert statement["predicate"]["runDetails"]["builder"]["id"] == "urn:accel-images:host:h"


def test_envelope_is_plain_dsse_that_bare_cryptography_verifies(tmp_path: Path) -> None:
    key, pub = write_key(tmp_path)
    envelope = json.loads(provenance.envelope(statement_for("sha256:" + "d" * 64), provenance.load_signer(key)))
    assert envelope["payloadType"] == "application/vnd.in-toto+json" and len(envelope["signatures"]) == 1
    body = base64.b64decode(envelope["payload"])
    public = serialization.load_pem_public_key(pub.read_bytes())
    assert isinstance(public, Ed25519PublicKey)
    public.verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae(b"application/vnd.in-toto+json", body))
    assert json.loads(body)["subject"][0]["digest"]["sha256"] == "d" * 64


def test_open_envelope_rejects_other_keys_tampering_and_no_signature(tmp_path: Path) -> None:
    key, pub = write_key(tmp_path)
    _, other = write_key(tmp_path, "other")
    signed = provenance.envelope(statement_for("sha256:" + "d" * 64), provenance.load_signer(key))
    assert provenance.open_envelope(signed, provenance.load_public_key(pub))["_type"]
    with pytest.raises(provenance.NotVerified, match="not signed by key"):
        provenance.open_envelope(signed, provenance.load_public_key(other))
    raw = json.loads(signed)
    raw["payload"] = base64.b64encode(json.dumps(statement_for("sha256:" + "0" * 64)).encode()).decode()
    with pytest.raises(provenance.NotVerified, match="not signed by key"):
        provenance.open_envelope(json.dumps(raw).encode(), provenance.load_public_key(pub))
    with pytest.raises(provenance.NotVerified, match="not signed"):
        provenance.open_envelope(provenance.envelope({"_type": "x"}, None), provenance.load_public_key(pub))


def test_check_statement_wants_the_digest_and_a_passed_smoke() -> None:
    digest = "sha256:" + "d" * 64
    assert provenance.check_statement(statement_for(digest), digest)["passed"] is True
    with pytest.raises(provenance.NotVerified, match="not sha256:000000000000"):
        provenance.check_statement(statement_for(digest), "sha256:" + "0" * 64)
    with pytest.raises(provenance.NotVerified, match="no passed smoke test"):
        provenance.check_statement(statement_for(digest, passed=False), digest)


def test_a_bad_key_file_is_one_line_with_exit_2(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key")
    with pytest.raises(InputError, match="not an unencrypted PEM private key") as caught:
        provenance.load_signer(junk)
    assert caught.value.exit_code == 2 and "\n" not in caught.value.one_line()
    with pytest.raises(InputError, match="cannot read"):
        provenance.load_public_key(tmp_path / "absent.pub")


def test_builder_identity_names_the_workflow_run_in_ci() -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/accel-images", "GITHUB_RUN_ID": "42",
           "GITHUB_WORKFLOW_REF": "acme/accel-images/.github/workflows/nightly.yml@refs/heads/main",
           "RUNNER_NAME": "gpu-nvidia-3"}
    builder, invocation = builder_identity("r1", env)
    assert builder == ("https://github.com/acme/accel-images/.github/workflows/nightly.yml@refs/heads/main"
                       "#runner=gpu-nvidia-3")
    assert invocation == "https://github.com/acme/accel-images/actions/runs/42/attempts/1"
    assert builder_identity("r1", {})[1] == "r1"


# ---------------------------------------------------------------------------------------------
# Artifacts: referrers API and the tag fallback
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("api", [False, True])
def test_artifacts_refer_to_the_digest_through_the_api_or_the_fallback_tag(api: bool) -> None:
    store = InMemoryRegistry(referrers_api=api)
    digest = push(store, "t")
    first = attach.attach(store, "r", digest, b'{"a":1}', artifact_type="application/x-a",
                          layer_media_type="application/x-a", title="a.json")
    second = attach.attach(store, "r", digest, b'{"b":2}', artifact_type="application/x-b",
                           layer_media_type="application/x-b", title="b.json")
    assert first.via == second.via == ("referrers-api" if api else "referrers-tag")
    assert (attach.referrers_tag(digest) in store.tagged) is not api
    found = attach.referrers(store, "r", digest)
    assert [entry["artifactType"] for entry in found] == ["application/x-a", "application/x-b"]
    assert [e["digest"] for e in attach.referrers(store, "r", digest, "application/x-b")] == [second.manifest_digest]
    manifest, data = attach.document(store, "r", found[1], digest)
    assert data == b'{"b":2}' and manifest["subject"]["digest"] == digest
    assert manifest["config"]["digest"] == attach.EMPTY_DIGEST == digest_of(attach.EMPTY_DATA)
    assert attach.referrers(store, "r", push(store, "other")) == []


def test_attaching_twice_lists_the_artifact_once() -> None:
    store = InMemoryRegistry()
    digest = push(store, "t")
    for _ in range(2):
        attach.attach(store, "r", digest, b"{}", artifact_type="application/x-a", layer_media_type="application/x-a",
                      title="a.json")
    assert len(attach.referrers(store, "r", digest)) == 1


def test_referrers_tag_follows_the_distribution_spec() -> None:
    assert attach.referrers_tag("sha256:" + "ab" * 32) == "sha256-" + "ab" * 32


# ---------------------------------------------------------------------------------------------
# The hook and the verdict
# ---------------------------------------------------------------------------------------------

def test_attested_image_verifies_and_a_copy_under_the_same_tag_does_not(tmp_path: Path) -> None:
    key, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, "2.13.0-cpu-py3.11-debian12", {"io.accel-images.fingerprint": "sha256:f"})
    done = attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    assert done.signed and done.components == 5 and done.torch == "2.13.0+cpu"
    verdict = verify_digest(store, "r", digest, provenance.load_public_key(pub))
    assert verdict.ok and verdict.provenance == done.provenance.manifest_digest and verdict.sbom == done.sbom.manifest_digest
    assert verdict.smoke["torch"] == "2.13.0+cpu"
    files = sorted(p.name for p in (tmp_path / "attestations" / VARIANT.tag).iterdir())
    assert files == ["packages.html", "provenance.dsse.json", "provenance.intoto.json", "provenance.predicate.json",
                     "sbom.cdx.json", "subject.txt"]
    assert done.record()["packages"] == f"attestations/{VARIANT.tag}/packages.html"
    tampered = push(store, "2.13.0-cpu-py3.11-debian12", {"io.accel-images.fingerprint": "sha256:f"})
    verdict = verify_digest(store, "r", tampered, provenance.load_public_key(pub))
    assert not verdict.ok and verdict.reason == f"no provenance refers to {tampered[:19]}"


NEWER = Variant(vendor="cpu", stack=None, torch="2.14.1", python="3.12", os="ubuntu24.04", flavor="runtime",
                base_image="ubuntu:24.04")


WORN = (VARIANT.tag, f"{VARIANT.tag}-20261202", "2.13-cpu", "latest-cpu")
NOT_WORN = (NEWER.tag, f"{NEWER.tag}-20261202", "2.14-cpu", "latest-cuda", "2.13-cpu-devel", "latest", "prod")


def test_a_tag_verifies_only_for_the_variant_its_signed_statement_names(tmp_path: Path) -> None:
    """A downgrade: the tag serves another variant's signed, green image. The statement is about that
    digest and signed, but it names 2.13.0-cpu-py3.11-debian12, which does not wear the tag asked for."""
    key, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, VARIANT.tag)
    attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    public = provenance.load_public_key(pub)
    for asked in (*WORN, *NOT_WORN):
        store.tagged[asked] = digest
        verdict = verify_image(store, ImageName("reg.example", "team/pytorch", asked), public)
        assert verdict.ok is (asked in WORN), (asked, verdict.reason)
        if asked in NOT_WORN:
            assert verdict.reason.startswith(f"the signed provenance is about {VARIANT.tag}, which does not "
                                             f"wear the tag {asked}"), verdict.reason
    assert verify_image(store, ImageName("reg.example", "team/pytorch", digest), public).ok  # by digest: no tag


def test_an_index_verifies_when_each_platforms_image_wears_the_tag_asked_for(tmp_path: Path) -> None:
    """An image index (one tag, several platforms) is verified image by image, each against the tag asked
    for: an index another variant's images are listed in does not verify under this variant's tags."""
    from accel_images.registry import OCI_INDEX, OCI_MANIFEST, IndexEntry, oci_index
    key, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, VARIANT.tag)
    attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    public = provenance.load_public_key(pub)
    size = len(store.manifests[digest][1])
    index = put_by_digest(store, oci_index([IndexEntry("linux/amd64", digest, size, OCI_MANIFEST)]), OCI_INDEX)
    for asked in (WORN[0], WORN[-1], NOT_WORN[0], NOT_WORN[-1]):
        store.tagged[asked] = index
        verdict = verify_image(store, ImageName("reg.example", "team/pytorch", asked), public)
        assert verdict.ok is (asked in WORN) and verdict.digest == index, (asked, verdict.reason)
        assert set(verdict.platforms) == {"linux/amd64"}
        if asked in NOT_WORN:
            assert verdict.reason.startswith(f"linux/amd64: the signed provenance is about {VARIANT.tag}, which does"
                                             f" not wear the tag {asked}"), verdict.reason


def test_an_index_entry_verifies_only_under_the_platform_its_statement_signs(tmp_path: Path) -> None:
    """An amd64 image, signed as linux/amd64, listed in an index as linux/arm64: an arm64 host would pull
    an image that cannot run there, so that entry does not verify."""
    from accel_images.registry import OCI_INDEX, OCI_MANIFEST, IndexEntry, oci_index
    key, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, VARIANT.tag)
    attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    size = len(store.manifests[digest][1])
    entries = [IndexEntry("linux/amd64", digest, size, OCI_MANIFEST), IndexEntry("linux/arm64", digest, size,
                                                                                  OCI_MANIFEST)]
    store.tagged[WORN[0]] = put_by_digest(store, oci_index(entries), OCI_INDEX)
    verdict = verify_image(store, ImageName("reg.example", "team/pytorch", WORN[0]), provenance.load_public_key(pub))
    assert not verdict.ok and verdict.platforms["linux/amd64"].ok
    assert verdict.reason == ("linux/arm64: the index lists this image as linux/arm64, but its signed provenance"
                              " is about a 'linux/amd64' image")


def test_an_index_listing_a_platform_twice_does_not_verify_whichever_entry_is_genuine(tmp_path: Path) -> None:
    """`docker pull` takes the first linux/amd64 entry, here a hand-pushed unsigned image; the genuine, signed
    one listed after it must not vouch for the tag (a verdict kept per platform let the later entry win)."""
    from accel_images.registry import OCI_INDEX, OCI_MANIFEST, IndexEntry, oci_index
    key, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    genuine = push(store, VARIANT.tag)
    attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", genuine, inputs(), green_smoke())
    forged = push(store, "hand-pushed")
    entries = [IndexEntry("linux/amd64", digest, len(store.manifests[digest][1]), OCI_MANIFEST)
               for digest in (forged, genuine)]
    store.tagged[VARIANT.tag] = put_by_digest(store, oci_index(entries), OCI_INDEX)
    verdict = verify_image(store, ImageName("reg.example", "team/pytorch", VARIANT.tag), provenance.load_public_key(pub))
    assert not verdict.ok
    assert verdict.reason == ("linux/amd64: the index lists linux/amd64 2 times: a client pulls the first entry,"
                              " which need not be the one vouched for")
    assert verdict.line("x").startswith("not verified: x: linux/amd64: the index lists linux/amd64 2 times")


def test_provenance_referring_elsewhere_through_the_fallback_tag_does_not_count(tmp_path: Path) -> None:
    """Anyone who can push can write the sha256-<hex> tag: its entries are checked, not trusted."""
    key, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    good = push(store, "good")
    attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", good, inputs(), green_smoke())
    tampered = push(store, "copy")
    store.tagged[attach.referrers_tag(tampered)] = store.tagged[attach.referrers_tag(good)]
    verdict = verify_digest(store, "r", tampered, provenance.load_public_key(pub))
    assert not verdict.ok and "does not refer to" in verdict.reason


def test_unsigned_provenance_and_a_missing_sbom_do_not_verify(tmp_path: Path) -> None:
    _, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, "t")
    attester(store, ProbeEngine(probe_output()), None, tmp_path)("cand", digest, inputs(), green_smoke())
    assert verify_digest(store, "r", digest, provenance.load_public_key(pub)).reason == "the provenance is not signed"
    key, pub = write_key(tmp_path, "k2")
    digest = push(store, "t2")
    attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    for entry in attach.referrers(store, "r", digest, sbom.MEDIA_TYPE):
        del store.manifests[entry["digest"]]
    verdict = verify_digest(store, "r", digest, provenance.load_public_key(pub))
    assert not verdict.ok and "is listed as a referrer but is missing" in verdict.reason


def test_an_sbom_that_disagrees_with_the_smoke_test_stops_the_attestation(tmp_path: Path) -> None:
    key, _ = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, "t")
    with pytest.raises(AttestationError, match=r"lists torch 2.13.0\+cpu, the smoke test saw 2.13.1\+cpu"):
        attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke("2.13.1+cpu"))
    assert attach.referrers(store, "r", digest) == []


@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:5000/a/b:t", ImageName("127.0.0.1:5000", "a/b", "t")),
    ("localhost/a", ImageName("localhost", "a", "latest")),
    ("ghcr.io/acme/pytorch@sha256:" + "1" * 64, ImageName("ghcr.io", "acme/pytorch", "sha256:" + "1" * 64)),
    ("reg.example:5000/a/b", ImageName("reg.example:5000", "a/b", "latest")),
])
def test_image_names(text: str, expected: ImageName) -> None:
    assert ImageName.parse(text) == expected


@pytest.mark.parametrize("text", ["pytorch:tag", "ghcr.io/a@sha256:zz", "ghcr.io/"])
def test_bad_image_names_exit_2_in_one_line(text: str, tmp_path: Path) -> None:
    _, pub = write_key(tmp_path)
    result = CliRunner().invoke(main, ["verify", text, "--key", str(pub)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "IMAGE:" in result.output


# ---------------------------------------------------------------------------------------------
# The nightly's gate: skip and move aliases only onto digests that verify
# ---------------------------------------------------------------------------------------------

class Labelled(PushingEngine):
    """Its pushes carry the labels its build was given (the fingerprint among them), dated `created`: an
    image as a nightly publishes it, of a chosen age. The SBOM probe is answered as an honest image would."""

    def __init__(self, registry: InMemoryRegistry, created: str, salt: str = "") -> None:
        super().__init__(registry, salt=salt)
        self.created = created
        self.labels: dict[str, dict[str, str]] = {}

    def build(self, context: Path, tag: str, **kwargs: object) -> Any:
        labels = kwargs.get("labels")
        assert isinstance(labels, dict)
        self.labels[f"sha256:built-{tag}"] = {**labels, CREATED_LABEL: self.created}
        return super().build(context, tag, **kwargs)

    def push_image(self, ref: str) -> Pushed:
        self.calls.append(("push", ref))
        image = self.named.get(ref, ref)
        digest = self.registry.push_image(self.labels.get(image, {}), tag=ref.rsplit(":", 1)[-1],
                                          salt=image + self.salt)
        return Pushed(digest)

    def run(self, image: str, command: list[str], **kwargs: Any) -> Any:
        return ProbeEngine(probe_output()).run(image, command, **kwargs)


def gated_run(registry: InMemoryRegistry, key: Path, tmp_path: Path, salt: str = "") -> list[Any]:
    """A signed nightly into `registry` whose images say they were built on 2026-12-01; `salt` sets this
    run's images apart from another run's."""
    from test_nightly import GREEN, NO_WAIT, TEMPLATES, write_matrix

    from accel_images.builder.settings import BuildSettings
    from accel_images.cli.options import load_expansion
    from accel_images.kb import compat
    from accel_images.publish.nightly import NightlyOptions, run_nightly
    from accel_images.publish.promote import Target
    from accel_images.state import StateDir

    expansion = load_expansion(str(write_matrix(tmp_path, "team/pytorch")))
    options = NightlyOptions(Target("reg.example:5000", "team/pytorch"), now=NOW, run_id="r1", retry=NO_WAIT,
                             signer=provenance.load_signer(key))
    registry.requests.clear()
    return run_nightly(Labelled(registry, "2026-12-01T00:00:00Z", salt),  # type: ignore[arg-type]
                       compat.load_kb(), expansion, expansion.variants, registry,
                       BuildSettings(state_dir=StateDir(tmp_path / "state")), options,
                       smoke=lambda image, variant: GREEN, templates_dir=TEMPLATES)


def test_a_copied_fingerprint_is_rebuilt_and_only_a_verified_image_inherits_aliases(tmp_path: Path) -> None:
    from test_nightly import DEBIAN, copied, record_labels
    key, _ = write_key(tmp_path)
    registry = InMemoryRegistry()
    [_, debian] = gated_run(registry, key, tmp_path)
    assert debian.status == "built" and debian.publication.attestation.signed
    published = debian.publication.digest
    image = registry.image("team/pytorch", DEBIAN)
    assert image is not None and image.digest == published

    # A copy with the very labels: the tested record (accel_images.publish.tested) is a tag like any other,
    # so whoever pushed the copy forged it too.
    tampered = registry.push_image(image.labels, tag=DEBIAN, salt="tampered")
    registry.put_labels_image("team/pytorch", f"{DEBIAN}-tested", record_labels(tampered))
    elsewhere = registry.push_image({}, tag="2.13-cpu", salt="elsewhere")
    [_, night] = gated_run(registry, key, tmp_path, salt="2")
    assert night.status == "built" and night.reason.startswith("the registry's image does not verify: no provenance")
    assert night.verdict is not None and not night.verdict.ok
    assert [copy for copy in copied(registry) if copy[1] == "2.13-cpu"] == [] and night.realigned == ()  # no alias
    assert registry.serving("2.13-cpu") == registry.serving(DEBIAN) == night.publication.digest
    assert night.publication.digest not in (tampered, published)

    # the genuine image back under its tags, tested that day, with the alias elsewhere
    registry.tagged.update({DEBIAN: published, f"{DEBIAN}-{NOW:%Y%m%d}": published, "2.13-cpu": elsewhere})
    registry.put_labels_image("team/pytorch", f"{DEBIAN}-tested", record_labels(published, day=f"{NOW:%Y%m%d}"))
    [_, night] = gated_run(registry, key, tmp_path, salt="3")
    assert night.status == "skipped" and night.verdict is not None and night.verdict.ok
    assert night.realigned == ("2.13-cpu",) and copied(registry) == [(published, "2.13-cpu")]
    assert registry.serving("2.13-cpu") == published


def test_a_transient_registry_error_while_reading_the_provenance_is_no_verdict(tmp_path: Path) -> None:
    """A 503 on the provenance or SBOM blob says nothing about the image: it is raised, never 'not verified'."""
    key, pub = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, "t")
    attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    store.blob_error = 503   # every blob read fails as a registry under load does (503, transient)
    with pytest.raises(RegistryError, match="answered 503") as caught:
        verify_digest(store, "r", digest, provenance.load_public_key(pub))
    assert caught.value.exit_code == 4


def test_a_transient_error_while_verifying_fails_the_variant_and_republishes_nothing(tmp_path: Path) -> None:
    from test_nightly import DEBIAN, copied
    key, _ = write_key(tmp_path)
    registry = InMemoryRegistry()
    [_, debian] = gated_run(registry, key, tmp_path)
    published = debian.publication.digest
    attached = [layer["digest"] for _, data in registry.manifests.values() for manifest in [json.loads(data)]
                if (manifest.get("subject") or {}).get("digest") == published for layer in manifest["layers"]]
    assert attached   # its provenance and SBOM
    # every read of them fails as a registry under load does (503, transient); the image itself reads fine
    registry.faults.append(Fault(f"/blobs/({'|'.join(attached)})$", 503, method="GET"))
    [_, night] = gated_run(registry, key, tmp_path, salt="2")
    assert night.status == "failed" and night.outcome.exit_code == 4 and "answered 503" in night.outcome.error
    assert any(f"reading blob {digest[:19]}" in night.outcome.error for digest in attached), night.outcome.error
    assert night.publication is None and night.registry_digest in (None, published)
    assert copied(registry) == [] and registry.serving(DEBIAN) == published


# ---------------------------------------------------------------------------------------------
# What independent readers rely on: one version per package, the tools named, the predicate
# type where cosign and BuildKit look, and nothing promoted that the registry does not serve back
# ---------------------------------------------------------------------------------------------

def test_probe_lists_a_distribution_shadowed_further_down_sys_path_once(tmp_path: Path) -> None:
    """`typing_extensions` first on sys.path hides `typing-extensions` behind it, for import and pip alike."""
    for where, name, version in (("first", "typing_extensions", "4.16.0"), ("second", "Typing-Extensions", "4.1.0")):
        info = tmp_path / where / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    done = subprocess.run([sys.executable, "-c", sbom.PROBE.read_text()], capture_output=True, text=True, timeout=60,
                          check=True, env={**os.environ, "PYTHONPATH": f"{tmp_path / 'first'}:{tmp_path / 'second'}"})
    found = [(p["name"], p["version"]) for p in json.loads(done.stdout)["python"]["packages"]
             if sbom.normalize(p["name"]) == "typing-extensions"]
    assert found == [("typing_extensions", "4.16.0")]


def test_sbom_names_the_tools_that_wrote_it() -> None:
    subject = sbom.Subject("reg.example/team/pytorch", "2.13.0-cpu-py3.11-debian12", "sha256:" + "d" * 64)
    text = sbom.bom_json(INVENTORY, subject)
    assert valid_cyclonedx(text)
    tools = {c["name"]: c for c in json.loads(text)["metadata"]["tools"]["components"]}
    assert set(tools) == {"accel-images", "cyclonedx-python-lib"} and tools["accel-images"]["type"] == "application"


def test_the_provenance_layer_names_its_predicate_type_where_cosign_and_buildkit_look(tmp_path: Path) -> None:
    key, _ = write_key(tmp_path)
    store = InMemoryRegistry()
    digest = push(store, "t")
    done = attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    manifest = json.loads(store.manifests[done.provenance.manifest_digest][1])
    [layer] = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.dsse.envelope.v1+json"
    assert layer["annotations"] == {"in-toto.io/predicate-type": "https://slsa.dev/provenance/v1",
                                    "predicateType": "https://slsa.dev/provenance/v1",
                                    "org.opencontainers.image.title": "provenance.dsse.json"}
    assert manifest["artifactType"] == "application/vnd.in-toto+json"
    assert manifest["annotations"]["in-toto.io/predicate-type"] == "https://slsa.dev/provenance/v1"


def test_a_signed_attestation_the_registry_does_not_serve_back_stops_the_promotion(tmp_path: Path) -> None:
    key, _ = write_key(tmp_path)
    store = ForgetfulRegistry()
    digest = push(store, "t")
    with pytest.raises(AttestationError, match="do not verify through the registry: no provenance refers to") as caught:
        attester(store, ProbeEngine(probe_output()), key, tmp_path)("cand", digest, inputs(), green_smoke())
    assert "\n" not in caught.value.one_line()
    # Unsigned there is nothing to check against: the documents are attached for keyless signing.
    assert not attester(store, ProbeEngine(probe_output()), None, tmp_path)("cand", digest, inputs(),
                                                                              green_smoke()).signed


def test_the_markdown_report_and_the_html_grid_name_both_artifacts() -> None:
    from accel_images.report import reports as report
    records = json.loads((ROOT / "tests" / "data" / "report" / "nightly-records.json").read_text())
    [record] = [r for r in records if r["status"] == "built"][:1]
    sbom_manifest, provenance_manifest = "sha256:" + "5b" * 32, "sha256:" + "9e" * 32
    record.update({"sbom": {"manifest": sbom_manifest, "components": 412, "via": "referrers-tag"},
                   "provenance": {"manifest": provenance_manifest, "signed": True, "via": "referrers-tag"},
                   "verified": {"ok": True, "reason": "", "provenance": provenance_manifest, "sbom": sbom_manifest}})
    expected = f"SBOM {sbom_manifest[:19]} (412 components) · provenance {provenance_manifest[:19]} signed"
    assert expected in report.render_markdown([record], {})
    assert expected in report.render_html([record], {})


def test_provenance_says_when_the_checkout_differs_from_its_commit(tmp_path: Path) -> None:
    """A rendered template edited but not committed is not what the gitCommit names."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                       check=True, capture_output=True, timeout=30)
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text("variants: []\n")
    git("init", "-q")
    git("add", "matrix.yaml")
    git("commit", "-qm", "m")
    clean = Source.of(matrix, env={})
    assert len(clean.commit) == 40 and not clean.dirty
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "base.j2").write_text("FROM x\n")
    dirty = Source.of(matrix, env={})
    assert dirty.dirty and dirty.commit == clean.commit

    key, _ = write_key(tmp_path)
    store = InMemoryRegistry()
    digests = []
    for source in (clean, dirty):
        digest = push(store, f"t-{source.dirty}")
        done = Attester(ProbeEngine(probe_output()), store, "reg.example", "team/pytorch", "r1", NOW,
                        provenance.load_signer(key), source, env={})("cand", digest, inputs(), green_smoke())
        _, envelope = attach.document(store, "r", {"digest": done.provenance.manifest_digest}, digest)
        [checkout] = [d for d in provenance.payload_of(envelope)["predicate"]["buildDefinition"]
                      ["resolvedDependencies"] if "gitCommit" in d["digest"]]
        digests.append(checkout)
    assert "annotations" not in digests[0] and digests[1]["annotations"] == {"uncommittedChanges": True}


def test_the_package_list_is_a_page_people_read_beside_the_sbom() -> None:
    """jupyter/docker-stacks publish a package list per tag; here it is the SBOM's inventory as a page,
    autoescaped, Python distributions first, linked from the report's grid."""
    from accel_images.report.reports import render_html
    from accel_images.supply.packages import package_page
    from accel_images.supply.sbom import Inventory, Package, Subject
    inventory = Inventory("debian", "12", "3.11.2", (
        Package("deb", "libc6", "2.36-9+deb12u13", "amd64", "glibc"), Package("deb", "tini", "0.19.0-1+b3", "amd64"),
        Package("pypi", "torch", "2.13.0+cpu"), Package("pypi", "ipython", "9.18.1"),
        Package("pypi", "<script>", "1")))
    page = package_page(inventory, Subject("127.0.0.1:5000/team/pytorch", "2.13.0-cpu-py3.11-debian12",
                                           "sha256:" + "a" * 64))
    assert "<h2>Python packages (3)</h2>" in page and "<h2>OS packages (dpkg) (2)</h2>" in page
    assert page.index("torch") < page.index("libc6")
    assert "<td>2.13.0+cpu</td>" in page and "<td>0.19.0-1+b3</td><td>amd64</td>" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    record = {"variant": "cpu/2.13.0-cpu-py3.11-debian12", "vendor": "cpu", "tag": "2.13.0-cpu-py3.11-debian12",
              "status": "built", "pushed_tags": ["x"], "packages": "attestations/2.13.0-cpu-py3.11-debian12/packages.html"}
    assert '<a href="attestations/2.13.0-cpu-py3.11-debian12/packages.html">package list</a>' in render_html([record], {})
