"""The shared in-memory registry (tests/fakes.py InMemoryRegistry) answers as the distribution registry does.

Every unit test that needs a registry in memory relies on these answers through the real client
(accel_images.registry.RegistryClient): a fake that drifted from the registry would let the client's
handling of it go untested.
"""

from __future__ import annotations

import json

import pytest

from fakes import Fault, ForgetfulRegistry, InMemoryRegistry

from accel_images.errors import RegistryError
from accel_images.registry import Artifact

REPO = "team/pytorch"


def test_a_manifest_delete_when_deletes_are_disabled_is_405_unsupported() -> None:
    registry = InMemoryRegistry(deletes_enabled=False)
    digest = registry.push_image({"k": "v"}, tag="t")
    with pytest.raises(RegistryError) as caught:
        registry.check_deletes(REPO)
    assert "answered 405 (UNSUPPORTED" in caught.value.one_line()
    assert "storage.delete.enabled is off" in caught.value.one_line()
    with pytest.raises(RegistryError, match="answered 405"):
        registry.delete_tag(REPO, "t")
    assert registry.serving("t") == digest and digest in registry.manifests


def test_a_manifest_delete_by_digest_when_deletes_are_enabled_takes_every_tag_on_it() -> None:
    registry = InMemoryRegistry()
    registry.check_deletes(REPO)    # the probe's unknown digest: 404 MANIFEST_UNKNOWN, which means deletes work
    digest = registry.push_image({"k": "v"}, tag="a")
    registry.tagged["b"] = digest
    assert registry.delete_tag(REPO, "a") is True
    assert registry.serving("a") is None and registry.serving("b") == digest   # the tombstone went, not the image
    response = registry._send("DELETE", f"{registry.base_url}/v2/{REPO}/manifests/{digest}", None, None, None, "x")
    assert response.status_code == 202 and registry.tagged == {} and digest not in registry.manifests
    by_tag = registry._send("DELETE", f"{registry.base_url}/v2/{REPO}/manifests/b", None, None, None, "x")
    assert by_tag.status_code == 400   # deletes are by digest only


def test_an_unknown_manifest_or_tag_is_404_manifest_unknown() -> None:
    registry = InMemoryRegistry()
    registry.push_image({"k": "v"}, tag="t")
    assert registry.image(REPO, "absent") is None and registry.manifest_digest(REPO, "absent") is None
    assert registry.manifest(REPO, "sha256:" + "1" * 64) is None
    for method in ("GET", "HEAD"):
        response = registry._send(method, f"{registry.base_url}/v2/{REPO}/manifests/absent", None, None, None, "x")
        assert response.status_code == 404
    body = registry._send("GET", f"{registry.base_url}/v2/{REPO}/manifests/absent", None, None, None, "x").json()
    assert body["errors"][0]["code"] == "MANIFEST_UNKNOWN"


def test_an_unknown_blob_is_404_blob_unknown() -> None:
    registry = InMemoryRegistry()
    with pytest.raises(RegistryError, match="answered 404 \\(BLOB_UNKNOWN"):
        registry.blob(REPO, "sha256:" + "2" * 64)
    digest = registry.push_blob(REPO, b"data")
    assert registry.blob(REPO, digest) == b"data"
    assert registry.push_blob(REPO, b"data") == digest and registry.requests[-1][0] == "HEAD"  # known: not sent again


def test_a_manifest_is_kept_by_digest_with_its_media_type_and_tags_point_at_digests() -> None:
    registry = InMemoryRegistry()
    digest = registry.put_labels_image(REPO, "t", {"k": "v"})
    media_type, data = registry.manifests[digest]
    assert media_type == "application/vnd.docker.distribution.manifest.v2+json"
    assert registry.tagged["t"] == digest
    assert registry.descriptor(REPO, "t") == {"mediaType": media_type, "digest": digest, "size": len(data)}
    assert registry.manifest_bytes(REPO, digest) == (digest, media_type, data)
    image = registry.image(REPO, "t")
    assert image is not None and image.labels == {"k": "v"} and image.digest == digest
    with pytest.raises(RegistryError, match="answered 400 \\(DIGEST_INVALID"):
        registry.put_manifest(REPO, "sha256:" + "3" * 64, data, media_type)   # a digest its bytes do not have


@pytest.mark.parametrize("count, page_size", [(0, 3), (1, 3), (7, 3), (9, 3), (10, 1), (5, 1000)])
def test_the_tag_list_pages_by_n_and_last_and_reaches_every_tag_once(count: int, page_size: int) -> None:
    registry = InMemoryRegistry()
    wanted = [f"t{n:02d}" for n in range(count)]
    for tag in reversed(wanted):
        registry.push_image({"tag": tag}, tag=tag)
    assert registry.tags(REPO, page_size=page_size) == wanted
    pages = [path for method, path in registry.requests if path == f"/v2/{REPO}/tags/list"]
    assert len(pages) == max(1, -(-count // page_size))   # a Link only while tags remain: no empty last page


def test_a_tag_list_page_names_the_next_in_a_link_header_only_while_tags_remain() -> None:
    registry = InMemoryRegistry()
    for tag in ("v1", "v2", "v3", "v4"):
        registry.push_image({}, tag=tag)
    first = registry._send("GET", f"{registry.base_url}/v2/{REPO}/tags/list?n=2", None, None, None, "x")
    assert first.json() == {"name": REPO, "tags": ["v1", "v2"]}
    assert first.headers["Link"] == f'</v2/{REPO}/tags/list?n=2&last=v2>; rel="next"'
    second = registry._send("GET", f"{registry.base_url}/v2/{REPO}/tags/list?n=2&last=v2", None, None, None, "x")
    assert second.json()["tags"] == ["v3", "v4"] and "Link" not in second.headers
    whole = registry._send("GET", f"{registry.base_url}/v2/{REPO}/tags/list", None, None, None, "x")
    assert whole.json()["tags"] == ["v1", "v2", "v3", "v4"] and "Link" not in whole.headers


@pytest.mark.parametrize("api", [False, True])
def test_the_referrers_api_answers_only_when_asked_for(api: bool) -> None:
    registry = InMemoryRegistry(referrers_api=api)
    subject = registry.push_image({}, tag="t")
    described = {"mediaType": registry.manifests[subject][0], "digest": subject,
                 "size": len(registry.manifests[subject][1])}
    artifact = Artifact("application/x-a", b"{}", "application/x-a", subject=described)
    scope = "repository:team/pytorch:pull,push"
    empty = registry._put_blob(REPO, b"{}", scope, "x")
    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "artifactType": artifact.artifact_type, "subject": described, "layers": [],
                       "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2}}).encode()
    digest, indexed = registry.put_manifest(REPO, "a", body, "application/vnd.oci.image.manifest.v1+json")
    assert indexed is api
    found = registry.referrers(REPO, subject)
    if not api:
        assert found is None
        return
    assert found is not None
    assert [(m["digest"], m["artifactType"]) for m in found["manifests"]] == [(digest, "application/x-a")]


def test_a_503_on_every_blob_is_transient_and_a_forgetful_registry_keeps_no_fallback_tag() -> None:
    registry = InMemoryRegistry()
    digest = registry.push_blob(REPO, b"x")
    registry.blob_error = 503
    with pytest.raises(RegistryError) as caught:
        registry.blob(REPO, digest)
    assert caught.value.transient is True and "answered 503" in caught.value.one_line()
    forgetful = ForgetfulRegistry()
    image = forgetful.push_image({}, tag="t")
    forgetful.put_manifest(REPO, "sha256-" + image[7:], forgetful.manifests[image][1], forgetful.manifests[image][0])
    forgetful.put_manifest(REPO, "kept", forgetful.manifests[image][1], forgetful.manifests[image][0])
    assert set(forgetful.tagged) == {"t", "kept"}


def test_a_fault_answers_its_status_for_its_requests_as_many_times_as_asked_then_the_registry_answers() -> None:
    registry = InMemoryRegistry()
    registry.push_image({"k": "v"}, tag="t")
    blips = Fault("/manifests/t$", 503, method="GET", times=2)
    registry.faults.append(blips)
    assert registry.manifest_digest(REPO, "t") is not None          # a HEAD: not the fault's method
    for _ in range(2):
        with pytest.raises(RegistryError) as caught:
            registry.image(REPO, "t")
        assert caught.value.transient is True and "answered 503 (UNAVAILABLE" in caught.value.one_line()
    image = registry.image(REPO, "t")
    assert image is not None and image.labels == {"k": "v"} and blips.times == 0


@pytest.mark.parametrize("status,said", [(401, "denied access (authentication required)"),
                                         (403, "denied access (DENIED"), (500, "answered 500 (UNKNOWN")])
def test_a_fault_is_answered_with_the_registrys_error_body_and_a_401_with_its_challenge(status: int, said: str) -> None:
    """401 comes with registry:2's Basic challenge, which the client answers with the login it lacks here."""
    registry = InMemoryRegistry()
    registry.faults.append(Fault("/manifests/", status))
    with pytest.raises(RegistryError) as caught:
        registry.image(REPO, "t")
    assert said in caught.value.one_line() and caught.value.transient is (status >= 500)


def test_a_fault_without_a_status_is_a_registry_nothing_answers_for() -> None:
    registry = InMemoryRegistry()
    registry.faults.append(Fault("^/v2/$", None))
    with pytest.raises(RegistryError) as caught:
        registry.ping()
    assert caught.value.transient is True
    assert caught.value.one_line().startswith("registry reg.example:5000 unreachable (connection refused) while")
    assert registry.tags(REPO) == []        # other paths answer as usual (no tags yet: 404 NAME_UNKNOWN)


def test_an_image_pushed_with_layers_lists_their_diff_ids_and_sizes_and_its_blobs_exist() -> None:
    registry = InMemoryRegistry()
    layers = (("sha256:" + "1" * 64, 100), ("sha256:" + "2" * 64, 3))
    registry.push_image({}, tag="t", layers=layers)
    image = registry.image(REPO, "t")
    assert image is not None and image.diff_ids == tuple(d for d, _ in layers) and image.layer_sizes == (100, 3)
    found = registry.manifest(REPO, "t")
    assert found is not None
    for layer, (_, size) in zip(found[1]["layers"], layers, strict=True):
        assert len(registry.blob(REPO, layer["digest"])) == layer["size"] == size
