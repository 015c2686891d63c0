"""Layers that do not depend on when they were built, on a base that ships what the steps remove.

Corporate and vendor bases often keep apt's package lists and caches, downloaded .deb files, and
(ubuntu:24.04) a user with UID 1000 and a home directory: the apt-cache stand-in of
.ci/setup-host.sh has all of them. Deleting a file of a lower layer leaves a whiteout that the
engine dates with the wall clock, out of any step's reach, so a step that did would give a layer
that differs at every build. A small image made of the shared steps that meet those files (a
bulk apt install, the image's user, the OS updates: templates/partials/apt.j2 and common.j2),
built twice without the cache, must come out the same layer for layer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

import containers
from accel_images.kb.compat import load_kb
from accel_images.plan.matrix import User
from accel_images.render import apt
from accel_images.render.contexts import Renderer
from accel_images.render.reproducible import SOURCE_DATE_EPOCH

pytestmark = [pytest.mark.engine, pytest.mark.slow]
TEMPLATE = """FROM {{ base }}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
{% import "partials/reproducible.j2" as repro with context %}
{% import "partials/apt.j2" as apt with context %}
{% import "partials/common.j2" as common with context %}
{{ repro.arg() }}
{{ apt.install("ca-certificates") }}
{{ common.create_user() }}
{{ apt.updates() }}
"""


def dockerfile(base: str) -> str:
    """The shared steps exactly as the templates write them, on `base`."""
    template = Renderer(load_kb()).env.from_string(TEMPLATE)
    return template.render(base=base, apt_repos=apt.Collector({}, "debian12", ()), user=User("dev", 1000, 1000),
                           source_date_epoch=SOURCE_DATE_EPOCH)


@pytest.fixture
def made(docker_client: docker.DockerClient) -> Iterator[list[str]]:
    """Image IDs this test creates, removed afterwards."""
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


def test_the_shared_steps_give_the_same_layers_at_any_time_on_a_base_with_apt_caches_and_a_user(
        docker_client: docker.DockerClient, apt_cache_base: str, made: list[str], tmp_path: Path) -> None:
    shipped = containers.output(docker_client, apt_cache_base, ["sh", "-c", (
        "ls /var/cache/apt/archives/*.deb | wc -l; ls /var/lib/apt/lists | grep -c _Packages;"
        " ls /var/cache/apt/*.bin | wc -l; getent passwd 1000 | cut -d: -f1")]).split()
    assert int(shipped[0]) > 0 and int(shipped[1]) > 0 and int(shipped[2]) > 0 and shipped[3] == "ubuntu", shipped
    (tmp_path / "Dockerfile").write_text(dockerfile(apt_cache_base))

    first = build(docker_client, tmp_path, made)
    time.sleep(1.5)  # a whiteout's date has whole seconds: the second build must start in another one
    again = build(docker_client, tmp_path, made)
    base = len(docker_client.images.get(apt_cache_base).attrs["RootFS"]["Layers"])
    assert len(first) > base
    for index, (one, two) in enumerate(zip(first, again, strict=True)):
        assert one == two, f"layer {index} differs between two builds ({base} base layers)"
    assert containers.output(docker_client, made[-1], ["getent", "passwd", "1000"]).startswith("dev:")
