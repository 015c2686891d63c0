"""accel_images.registry: labels and digests read over the registry API, tag deletion that leaves
other tags alone, authentication, and failures as one-line RegistryErrors.

Most tests talk to the real local registry (127.0.0.1:5000) with images made of a config
blob and a manifest, pushed over HTTP by the test itself; authentication runs against a
small stand-in registry on a loopback port.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_registry.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from accel_images.registry import RegistryClient
from nightly_fixture.rawregistry import (DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, RawRegistry)
from test_registry import client  # noqa: F401  (a fixture)

LABELS = {"io.accel-images.fingerprint": "sha256:abc", "org.opencontainers.image.created": "2026-11-30T01:02:03Z"}


@pytest.fixture
def repo(registry: str) -> Iterator[str]:
    """A repository of its own for each test, emptied afterwards."""
    name = f"test-{uuid.uuid4().hex[:12]}/pytorch"
    yield name
    RawRegistry(registry).delete_repository(name)


@pytest.fixture
def raw(registry: str) -> RawRegistry:
    return RawRegistry(registry)


# ---- reading without pulling --------------------------------------------------------------------

@pytest.mark.registry
@pytest.mark.parametrize("media_type", [DOCKER_MANIFEST, OCI_MANIFEST])
def test_image_reads_labels_digest_and_created(client: RegistryClient, raw: RawRegistry, repo: str,
                                               media_type: str) -> None:
    digest = raw.push_config_image(repo, "2.13.0-cpu", LABELS, media_type=media_type)
    image = client.image(repo, "2.13.0-cpu")
    assert image is not None
    assert image.digest == digest
    assert image.labels == LABELS
    assert image.created == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    assert client.manifest_digest(repo, "2.13.0-cpu") == digest


@pytest.mark.registry
@pytest.mark.parametrize("list_type,manifest_type", [(OCI_INDEX, OCI_MANIFEST), (DOCKER_LIST, DOCKER_MANIFEST)])
def test_multi_platform_tag_reads_the_linux_amd64_config(client: RegistryClient, raw: RawRegistry, repo: str,
                                                         list_type: str, manifest_type: str) -> None:
    arm = raw.push_config_image(repo, "arm", {"arch": "arm64"}, architecture="arm64", media_type=manifest_type)
    amd = raw.push_config_image(repo, "amd", {"arch": "amd64"}, media_type=manifest_type)
    entries = [{"mediaType": manifest_type, "digest": digest, "size": len(raw.manifest(repo, digest)),
                "platform": {"os": "linux", "architecture": arch}} for digest, arch in ((arm, "arm64"), (amd, "amd64"))]
    index_digest = raw.put_manifest(repo, "multi", {"schemaVersion": 2, "mediaType": list_type,
                                                    "manifests": entries}, list_type)
    image = client.image(repo, "multi")
    assert image is not None
    assert image.labels == {"arch": "amd64"}
    assert image.digest == index_digest  # the digest the tag points at, as `docker pull` would resolve it


@pytest.mark.registry
def test_missing_tag_and_missing_repository_are_none_not_errors(client: RegistryClient, raw: RawRegistry,
                                                                repo: str) -> None:
    assert client.image(repo, "nope") is None
    assert client.manifest_digest(repo, "nope") is None
    assert client.tags(repo) == []
    raw.push_config_image(repo, "present", LABELS)
    assert client.image(repo, "absent") is None
    assert client.tags(repo) == ["present"]


@pytest.mark.registry
def test_tags_follows_pagination(client: RegistryClient, raw: RawRegistry, repo: str) -> None:
    names = [f"t{i}" for i in range(5)]
    for name in names:
        raw.push_config_image(repo, name, {"name": name})
    assert sorted(client.tags(repo, page_size=2)) == names


# ---- deleting one tag -------------------------------------------------------------------------

@pytest.mark.registry
def test_delete_tag_leaves_other_tags_on_the_same_digest(client: RegistryClient, raw: RawRegistry,
                                                         repo: str) -> None:
    digest = raw.push_config_image(repo, "full", LABELS)
    assert raw.push_config_image(repo, "candidate", LABELS) == digest
    assert client.delete_tag(repo, "candidate") is True
    assert raw.tags(repo) == ["full"]
    assert raw.digest(repo, "full") == digest
    assert client.delete_tag(repo, "candidate") is False


@pytest.mark.registry
def test_copy_tag_points_a_tag_at_the_same_manifest(client: RegistryClient, raw: RawRegistry, repo: str) -> None:
    old = raw.push_config_image(repo, "latest", {"v": "1"})
    new = raw.push_config_image(repo, "2.0", {"v": "2"})
    assert client.copy_tag(repo, "2.0", "latest") == new
    assert raw.digest(repo, "latest") == new and raw.digest(repo, "2.0") == new
    assert old != new
