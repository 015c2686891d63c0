"""What the integration tests need from the machine: a Docker engine, the local registry, the
local Debian base images and a wheelhouse. `.ci/setup-host.sh` provides all of them.

A missing piece fails the test when CI=true (a skipped integration suite is a green run that
proves nothing) and skips it elsewhere. Tests marked `engine` or `registry` get the matching
fixture without asking for it.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest

REGISTRY = os.environ.get("ACCEL_TEST_REGISTRY", "127.0.0.1:5000")
WHEELHOUSE = Path(os.environ.get("ACCEL_TEST_WHEELHOUSE", "/var/cache/accel-images/wheelhouse"))
TEST_LABEL = "io.accel-images.test"
TEST_RUN = f"run-{os.getpid()}-{os.urandom(4).hex()}"
"""The value of TEST_LABEL on the containers this test session makes: a session that finds a container
leaked removes only its own, never one another session on the same engine is using."""
MARKER_FIXTURES = {"engine": "docker_client", "registry": "registry"}


@dataclass(frozen=True)
class BaseImages:
    """The local Debian 12 images, and where builds find the slim one through a registry mirror."""

    python: str = "local/debian:bookworm"
    slim: str = "local/debian:bookworm-slim"
    slim_repository: str = "library/debian"
    slim_tag: str = "bookworm-slim"
    apt_cache: str = "local/debian:bookworm-slim-apt-cache"
    """The slim stand-in with apt's lists, caches and .deb files and a UID 1000 user left in it."""
    apt_cache_prefix: str = "apt-cache"
    """Where the registry holds it: `<prefix>/library/debian:bookworm-slim`, for `docker.io=REGISTRY/<prefix>`."""


def unavailable(reason: str) -> None:
    """Fail under CI, skip elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (run .ci/setup-host.sh)", pytrace=False)
    pytest.skip(reason)


def registry_get(registry: str, path: str, accept: str | None = None) -> bytes:
    """GET from the registry's HTTP API; raises OSError when it does not answer 200."""
    request = urllib.request.Request(f"http://{registry}{path}", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read()


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        unavailable(f"Docker engine unreachable: {error}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def registry() -> str:
    try:
        registry_get(REGISTRY, "/v2/")
    except (OSError, ValueError) as error:
        unavailable(f"registry {REGISTRY} does not answer /v2/: {error}")
    return REGISTRY


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    if not any(WHEELHOUSE.glob("torch-2.13.0*.whl")):
        unavailable(f"no torch 2.13.0 wheel in {WHEELHOUSE}")
    return WHEELHOUSE


@pytest.fixture(scope="session")
def base_images(docker_client: docker.DockerClient, registry: str) -> BaseImages:
    images = BaseImages()
    for name in (images.python, images.slim):
        try:
            docker_client.images.get(name)
        except docker.errors.ImageNotFound:
            unavailable(f"local image {name} missing")
    try:
        registry_get(registry, f"/v2/{images.slim_repository}/manifests/{images.slim_tag}",
                     accept="application/vnd.docker.distribution.manifest.v2+json")
    except OSError as error:
        unavailable(f"{registry}/{images.slim_repository}:{images.slim_tag} missing: {error}")
    return images


@pytest.fixture(scope="session")
def apt_cache_base(docker_client: docker.DockerClient, registry: str, base_images: BaseImages) -> str:
    """The apt-cache stand-in, locally and in the registry under its prefix."""
    try:
        docker_client.images.get(base_images.apt_cache)
        registry_get(registry, f"/v2/{base_images.apt_cache_prefix}/{base_images.slim_repository}/manifests/"
                               f"{base_images.slim_tag}", accept="application/vnd.docker.distribution.manifest.v2+json")
    except (docker.errors.ImageNotFound, OSError) as error:
        unavailable(f"the apt-cache stand-in {base_images.apt_cache} is missing: {error}")
    return base_images.apt_cache


@pytest.fixture(autouse=True)
def _marked_requirements(request: pytest.FixtureRequest) -> None:
    """A test marked `engine` or `registry` gets that fixture (and so fails or skips without it)."""
    for marker, fixture in MARKER_FIXTURES.items():
        if request.node.get_closest_marker(marker):
            request.getfixturevalue(fixture)


def labelled_containers(client: docker.DockerClient) -> set[str]:
    return {c.id for c in client.containers.list(all=True, filters={"label": f"{TEST_LABEL}={TEST_RUN}"})}


@pytest.fixture(autouse=True)
def _no_leaked_containers(request: pytest.FixtureRequest, _marked_requirements: None) -> Iterator[None]:
    """A test that leaves a container labelled io.accel-images.test=<this session> behind fails; it goes."""
    if "docker_client" not in request.fixturenames:
        yield
        return
    client = request.getfixturevalue("docker_client")
    before = labelled_containers(client)
    yield
    leaked = labelled_containers(client) - before
    for container_id in leaked:
        try:
            client.containers.get(container_id).remove(force=True)
        except docker.errors.NotFound:
            pass
    if leaked:
        pytest.fail(f"left {len(leaked)} container(s) labelled {TEST_LABEL}={TEST_RUN} behind", pytrace=False)


UNIT_TESTS = Path(__file__).resolve().parent / "unit"
ENGINE_FIXTURES = {"docker_client", "registry", "base_images", "wheelhouse"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """tests/unit runs without an engine: a test there that asks for one (a fixture above, or a
    marker that brings it) is refused at collection, so it moves to tests/integration instead.
    A test marked `network` (gigabytes from the package index) runs only when `-m` names it: CI's
    run and `make test` leave it out."""
    if "network" not in (config.getoption("markexpr", "") or ""):
        skipped = [item for item in items if item.get_closest_marker("network")]
        if skipped:
            config.hook.pytest_deselected(items=skipped)
            items[:] = [item for item in items if not item.get_closest_marker("network")]
    def fixtures(item: pytest.Item) -> set[str]:
        callspec = getattr(item, "callspec", None)  # a parameter named like a fixture is not one
        return set(getattr(item, "fixturenames", ())) - set(callspec.params if callspec else ())

    misplaced = [item.nodeid for item in items
                 if UNIT_TESTS in item.path.parents
                 and (ENGINE_FIXTURES & fixtures(item)
                      or any(item.get_closest_marker(marker) for marker in ("engine", "registry", "slow", "network")))]
    if misplaced:
        raise pytest.UsageError("tests/unit must not need the engine or the registry; move to tests/integration: "
                                + ", ".join(misplaced))
