"""Reproducible layers, proven on the real CPU image CI builds, and what the nightly makes of them.

The session's real build of the published CPU variant (test_build_integration's fixture) is the
first build; a forced nightly (`--max-age 0`, which rebuilds without the layer cache) is the
second. Every layer above the base must come out byte for byte the same (diff ID for diff ID),
so the second nightly pushes nothing and the published digest stays. The comparison is made
on the engine's RootFS layers and on the registry's own config, not through the code under test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import requests
from click.testing import CliRunner

from accel_images.cli.nightly import nightly_command
from nightly_fixture.cleanup import remove_local_names
from nightly_fixture.rawregistry import DOCKER_MANIFEST, RawRegistry
from test_build_integration import IMAGE, PUBLISHED, ROOT, offline, published_build  # noqa: F401

pytestmark = [pytest.mark.engine, pytest.mark.registry, pytest.mark.slow]
TAG = IMAGE.rsplit(":", 1)[1]


def layers(client: docker.DockerClient, ref: str) -> list[str]:
    return list(client.images.get(ref).attrs["RootFS"]["Layers"])


def registry_diff_ids(raw: RawRegistry, repository: str, tag: str) -> list[str]:
    manifest = json.loads(raw.manifest(repository, tag))
    assert manifest["mediaType"] == DOCKER_MANIFEST
    config = requests.get(f"{raw.url}/v2/{repository}/blobs/{manifest['config']['digest']}", timeout=30).json()
    return list(config["rootfs"]["diff_ids"])


@pytest.fixture
def namespace(registry: str, docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"test-repro-{uuid.uuid4().hex[:10]}"
    yield name
    RawRegistry(registry).delete_repository(f"{name}/accel-images/pytorch")
    remove_local_names(docker_client, f"{registry}/{name}/")


def forced_nightly(registry: str, namespace: str, wheelhouse: Path, state: Path) -> tuple[str, dict]:
    args = ["--registry", f"{registry}/{namespace}", "--matrix", str(ROOT / "matrix.yaml"), *PUBLISHED,
            *offline(registry, wheelhouse), "--max-age", "0", "--state-dir", str(state)]
    result = CliRunner().invoke(nightly_command, args)
    assert result.exit_code == 0, result.output
    report = json.loads((state / "reports" / "nightly-latest" / "report.json").read_text())
    [record] = report["variants"]
    return result.output, record


def test_two_builds_give_the_same_layers_and_the_second_forced_nightly_pushes_nothing(
        published_build: dict, docker_client: docker.DockerClient, registry: str, wheelhouse: Path,
        base_images, namespace: str, tmp_path: Path) -> None:
    base = layers(docker_client, base_images.slim)
    first = layers(docker_client, IMAGE)
    assert first[: len(base)] == base and len(first) > len(base)

    _, published = forced_nightly(registry, namespace, wheelhouse, tmp_path / "state")
    assert published["status"] == "built" and published["kept"] is False, published
    repository = f"{namespace}/accel-images/pytorch"
    raw = RawRegistry(registry)
    digest = raw.digest(repository, TAG)
    assert digest == published["digest"]
    tags_before = raw.tags(repository)

    output, again = forced_nightly(registry, namespace, wheelhouse, tmp_path / "state")
    assert again["reason"].startswith("older than 0 days"), again
    rebuilt = docker_client.images.get(again["image_id"])
    second = list(rebuilt.attrs["RootFS"]["Layers"])
    for index, (one, two) in enumerate(zip(first, second, strict=False)):
        assert one == two, f"layer {index} differs between the two builds ({len(base)} base layers)"
    assert len(first) == len(second)
    assert registry_diff_ids(raw, repository, TAG) == second

    assert again["kept"] is True and again["uploaded_bytes"] == 0 and again["pushed_tags"] == []
    assert f"rebuilt, identical content, kept {digest}" in output
    assert "uploaded 0 B" in output
    assert raw.digest(repository, TAG) == digest
    assert raw.tags(repository) == tags_before
