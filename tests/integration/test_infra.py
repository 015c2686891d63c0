"""The machine gives the suite what `.ci/setup-host.sh` promises: an engine that runs the local
base image, a registry holding the slim stand-in, and a wheelhouse that installs on Debian 12."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename
from packaging.version import Version

import containers
from conftest import BaseImages, registry_get


def debian12_tags() -> set[Tag]:
    """Wheel tags that install on Debian 12's CPython 3.11, x86_64, glibc 2.36."""
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    return set(cpython_tags((3, 11), platforms=platforms)) | set(
        compatible_tags((3, 11), interpreter="cp311", platforms=platforms))


@pytest.mark.engine
def test_engine_runs_python_in_the_local_base_image(docker_client, base_images: BaseImages) -> None:
    output = containers.output(docker_client, base_images.python, ["python3", "-c", "print(1+1)"])
    assert output == "2\n"


@pytest.mark.engine
def test_slim_stand_in_has_no_python_like_the_real_slim_image(docker_client, base_images: BaseImages) -> None:
    script = "ls /usr/bin/python3* 2>/dev/null; command -v python3 || echo no-python"
    output = containers.output(docker_client, base_images.slim, ["sh", "-c", script])
    assert output == "no-python\n"


@pytest.mark.registry
def test_registry_holds_the_slim_stand_in(registry: str, base_images: BaseImages) -> None:
    tags = json.loads(registry_get(registry, f"/v2/{base_images.slim_repository}/tags/list"))
    assert base_images.slim_tag in tags["tags"]


@pytest.mark.engine
@pytest.mark.registry
def test_registry_copy_is_the_local_slim_image(docker_client, registry: str, base_images: BaseImages) -> None:
    manifest = json.loads(registry_get(
        registry, f"/v2/{base_images.slim_repository}/manifests/{base_images.slim_tag}",
        accept="application/vnd.docker.distribution.manifest.v2+json"))
    assert manifest["config"]["digest"] == docker_client.images.get(base_images.slim).id


def test_wheelhouse_has_torch_2_13_0_and_numpy(wheelhouse: Path) -> None:
    releases = {parse_wheel_filename(w.name)[:2] for w in wheelhouse.glob("*.whl")}
    assert any(name == "torch" and Version(version.public) == Version("2.13.0") for name, version in releases)
    assert any(name == "numpy" for name, _ in releases)


def test_every_wheel_installs_on_debian12_python(wheelhouse: Path) -> None:
    supported = debian12_tags()
    unusable = [w.name for w in wheelhouse.glob("*.whl") if not parse_wheel_filename(w.name)[3] & supported]
    assert unusable == []
