"""Reproducible layers, proven on the real CPU image CI builds, and what the nightly makes of them.

A first nightly publishes the published CPU variant (its layers are those test_build_integration's build
made, where that ran first in the session: the same Dockerfile on the same base, through the layer cache);
a second, forced (`--max-age 0`), rebuilds it without the layer cache. Every layer above the base must
come out byte for byte the same (diff ID for diff ID), so the second nightly pushes nothing and the
published digest stays. The comparison is made on the engine's RootFS layers and on the registry's own
config, not through the code under test. The image has a name of its own (a copy of matrix.yaml), so no
other test's image of the variant is taken for a build. The steps that meet a base's apt lists and caches,
downloaded .deb files and an existing UID 1000 user are proven reproducible on such a base by
tests/integration/test_apt_cache_base.py.
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
from conftest import BaseImages
from nightly_fixture.cleanup import remove_local_names
from nightly_fixture.rawregistry import DOCKER_MANIFEST, RawRegistry
from conftest import PUBLISHED, PUBLISHED_TAG
from test_build_integration import ROOT

pytestmark = [pytest.mark.engine, pytest.mark.registry, pytest.mark.slow]
TAG = PUBLISHED_TAG


def layers(client: docker.DockerClient, ref: str) -> list[str]:
    return list(client.images.get(ref).attrs["RootFS"]["Layers"])


def registry_diff_ids(raw: RawRegistry, repository: str, tag: str) -> list[str]:
    """The diff IDs of the tag's linux/amd64 image (the tag is an index of the platforms published)."""
    manifest = json.loads(raw.manifest(repository, tag))
    if manifest["mediaType"] != DOCKER_MANIFEST:
        [entry] = [m for m in manifest["manifests"] if m["platform"]["architecture"] == "amd64"]
        manifest = json.loads(raw.manifest(repository, entry["digest"]))
    assert manifest["mediaType"] == DOCKER_MANIFEST
    config = requests.get(f"{raw.url}/v2/{repository}/blobs/{manifest['config']['digest']}", timeout=30).json()
    return list(config["rootfs"]["diff_ids"])


@pytest.fixture
def image(registry: str, docker_client: docker.DockerClient, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A copy of matrix.yaml naming an image of this test's own, and the registry namespace it goes to (built
    for linux/amd64 alone, with --platform: an arm64 build is test_platforms_integration.py's, once per run)."""
    name = f"test-repro-{uuid.uuid4().hex[:10]}"
    matrix = tmp_path / "matrix.yaml"
    text = (ROOT / "matrix.yaml").read_text()
    assert "\nimage: accel-images/pytorch\n" in text
    matrix.write_text(text.replace("\nimage: accel-images/pytorch\n", f"\nimage: {name}/pytorch\n"))
    yield matrix, name
    RawRegistry(registry).delete_repository(f"{name}/{name}/pytorch")
    remove_local_names(docker_client, f"{registry}/{name}/", f"{name}/")


def forced_nightly(registry: str, namespace: str, matrix: Path, wheelhouse: Path, state: Path,
                   base_images: BaseImages, *, forced: bool = True) -> tuple[str, dict]:
    """A nightly of the published CPU variant; `forced` (`--max-age 0`): a rebuild without the layer cache."""
    args = ["--registry", f"{registry}/{namespace}", "--matrix", str(matrix), *PUBLISHED, "--platform", "linux/amd64",
            "--registry-mirror", f"docker.io={registry}",
            "--pip-find-links", str(wheelhouse), "--without-companion", "torchvision",
            *(("--max-age", "0") if forced else ()), "--state-dir", str(state)]
    result = CliRunner().invoke(nightly_command, args)
    assert result.exit_code == 0, result.output
    report = json.loads((state / "reports" / "nightly-latest" / "report.json").read_text())
    [record] = report["variants"]
    return result.output, record


def test_two_builds_give_the_same_layers_and_the_second_forced_nightly_pushes_nothing(
        docker_client: docker.DockerClient, registry: str, wheelhouse: Path, base_images: BaseImages,
        image: tuple[Path, str], tmp_path: Path) -> None:
    matrix, namespace = image
    _, published = forced_nightly(registry, namespace, matrix, wheelhouse, tmp_path / "state", base_images,
                                  forced=False)
    assert published["status"] == "built" and published["kept"] is False, published
    assert published["build_s"] is not None, "the first nightly took a build it did not make"
    base = layers(docker_client, base_images.slim)
    first = layers(docker_client, published["image_id"])
    assert first[: len(base)] == base and len(first) > len(base)
    repository = f"{namespace}/{namespace}/pytorch"
    raw = RawRegistry(registry)
    digest = raw.digest(repository, TAG)
    assert digest == published["digest"]
    tags_before = raw.tags(repository)

    output, again = forced_nightly(registry, namespace, matrix, wheelhouse, tmp_path / "state", base_images)
    assert again["reason"].startswith("older than 0 days"), again
    second = layers(docker_client, again["image_id"])
    differing = [index for index, (one, two) in enumerate(zip(first, second, strict=False)) if one != two]
    assert differing == [], f"layers {differing} differ between the two builds ({len(base)} base layers)"
    assert len(first) == len(second)
    assert registry_diff_ids(raw, repository, TAG) == second

    assert again["kept"] is True and again["uploaded_bytes"] == 0 and again["pushed_tags"] == []
    assert f"rebuilt, identical content, kept {digest}" in output
    assert "uploaded 0 B" in output
    assert raw.digest(repository, TAG) == digest
    assert raw.tags(repository) == tags_before
