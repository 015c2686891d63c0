"""A security update changes the top layer alone: the shared apt partials, built on the real engine.

A small image made of the two apt steps every image has (templates/partials/apt.j2): a bulk
install, then the OS updates as the last layer. Its base is the local Debian 12 slim image plus a
security suite served over HTTP (the republish benchmark's, benchmarks/republish_benches.py).
Built twice without the cache while the suite is empty, the image is the same layer for layer;
built again once the suite holds a newer libssl3 (installed by the bulk step, through
ca-certificates -> openssl), only the last layer differs, and it holds the update. A file of a
lower layer keeps its date, however recent: no step takes it for one it wrote.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

import containers
from accel_images.render import apt
from accel_images.kb.compat import load_kb
from accel_images.render.contexts import Renderer
from accel_images.render.reproducible import SOURCE_DATE_EPOCH
from benchmarks.republish_benches import SUITE, UPDATED_PACKAGE, SecuritySuite, security_suite, updated_deb

pytestmark = [pytest.mark.engine, pytest.mark.slow]
BENCH_SOURCES = "/etc/apt/sources.list.d/bench.sources"
LOWER_LAYER_MTIME = int(time.time()) + 86400
"""The base's sources file is dated after the steps above it start: a step that dated files by their
modification time alone took it for its own, and whether it did depended on timing."""
TEMPLATE = """FROM {{ base }}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
{% import "partials/reproducible.j2" as repro with context %}
{% import "partials/apt.j2" as apt with context %}
{{ repro.arg() }}
{{ apt.install("ca-certificates") }}
{{ apt.updates() }}
"""


def dockerfile(base: str) -> str:
    """The two apt steps exactly as the templates write them, on `base`."""
    template = Renderer(load_kb()).env.from_string(TEMPLATE)
    return template.render(base=base, apt_repos=apt.Collector({}, "debian12", ()),
                           source_date_epoch=SOURCE_DATE_EPOCH)


@pytest.fixture
def suite(tmp_path: Path) -> Iterator[SecuritySuite]:
    with security_suite(tmp_path / "suite") as served:
        yield served


@pytest.fixture
def made(docker_client: docker.DockerClient) -> Iterator[list[str]]:
    """Image IDs and tags this test creates, removed afterwards."""
    names: list[str] = []
    yield names
    for name in reversed(names):
        try:
            docker_client.images.remove(name, force=True)
        except docker.errors.APIError:
            pass


def build(client: docker.DockerClient, context: Path, made: list[str]) -> list[str]:
    """Build without the layer cache; the image's layer diff IDs."""
    image, _ = client.images.build(path=str(context), nocache=True, rm=True, forcerm=True)
    made.append(image.id)
    return list(image.attrs["RootFS"]["Layers"])


def dated(client: docker.DockerClient, image: str, path: str) -> int:
    return int(containers.output(client, image, ["stat", "-c", "%Y", path]))


def installed(client: docker.DockerClient, image: str) -> str:
    return containers.output(client, image, ["dpkg-query", "-W", "-f", "${Version}", UPDATED_PACKAGE])


def test_a_security_update_changes_only_the_last_layer(docker_client: docker.DockerClient, base_images,
                                                       suite: SecuritySuite, made: list[str], tmp_path: Path) -> None:
    update = updated_deb(tmp_path / "debs")
    base_context = tmp_path / "base"
    base_context.mkdir()
    sources = base_context / "bench.sources"
    sources.write_text(f"Types: deb\nURIs: {suite.url}\nSuites: {SUITE}\nComponents: main\nTrusted: yes\n")
    os.utime(sources, (LOWER_LAYER_MTIME, LOWER_LAYER_MTIME))  # newer than any step's start, as if just written
    (base_context / "Dockerfile").write_text(f"FROM {base_images.slim}\nCOPY bench.sources /etc/apt/sources.list.d/\n")
    base_tag = f"accel-images-test/updates-base:{uuid.uuid4().hex[:10]}"
    docker_client.images.build(path=str(base_context), tag=base_tag, rm=True, forcerm=True)
    made.append(base_tag)
    context = tmp_path / "image"
    context.mkdir()
    (context / "Dockerfile").write_text(dockerfile(base_tag))

    suite.publish([])
    first = build(docker_client, context, made)
    again = build(docker_client, context, made)
    assert first == again, "two builds without the cache differ while nothing changed"
    assert dated(docker_client, made[-1], BENCH_SOURCES) == LOWER_LAYER_MTIME, \
        "a step re-dated (and so copied up) a file only a lower layer wrote"
    assert not installed(docker_client, made[-1]).endswith("+bench1")

    suite.publish([update])
    updated = build(docker_client, context, made)
    assert updated[:-1] == first[:-1], "a layer below the OS updates changed with a security update"
    assert updated[-1] != first[-1]
    assert installed(docker_client, made[-1]).endswith("+bench1")
