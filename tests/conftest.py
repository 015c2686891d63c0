"""What the integration tests need from the machine: a Docker engine, the local registry, the
local Debian base images and a wheelhouse. `.ci/setup-host.sh` provides all of them.

A missing piece fails the test when CI=true (a skipped integration suite is a green run that
proves nothing) and skips it elsewhere. Tests marked `engine` or `registry` get the matching
fixture without asking for it.
"""

from __future__ import annotations

import json
import os
import signal
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
pytest_plugins = ["skips", "frozen"]   # skips: under CI=true a skip fails, but for the tests it allows; frozen: the unit tests read tests/data/frozen


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
    """A piece of the machine is missing: a skip, which fails under CI=true (tests/skips.py)."""
    pytest.skip(f"{reason} (run .ci/setup-host.sh)")




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


UNIT_TESTS = Path(__file__).parent / "unit"


@pytest.fixture(autouse=True)
def _no_configured_registry(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                            tmp_path_factory: pytest.TempPathFactory) -> None:
    """A unit test starts with no registry configured, whatever the machine running the suite has: a
    developer's ACCEL_IMAGES_REGISTRY or ~/.config/accel-images/config.yaml would change what `run`, `pull`,
    `recommend` and `devcontainer` choose (accel_images.host.sources). A test that wants one names it."""
    if not request.node.path.is_relative_to(UNIT_TESTS):
        return
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config-home")))
    monkeypatch.delenv("ACCEL_IMAGES_REGISTRY", raising=False)


@pytest.fixture(autouse=True)
def _marked_requirements(request: pytest.FixtureRequest) -> None:
    """A test marked `engine` or `registry` gets that fixture (and so fails or skips without it)."""
    for marker, fixture in MARKER_FIXTURES.items():
        if request.node.get_closest_marker(marker):
            request.getfixturevalue(fixture)


BUILD_LABEL = "io.accel-images.fingerprint"
"""Every build of accel-images sets it, so the classic builder's intermediate containers carry it."""


def labelled_containers(client: docker.DockerClient) -> set[str]:
    """This session's containers, and any build's intermediate ones, in every state (Created included:
    a stopped build's metadata steps leave theirs Created, never running)."""
    ours = client.containers.list(all=True, sparse=True, filters={"label": f"{TEST_LABEL}={TEST_RUN}"})
    builds = client.containers.list(all=True, sparse=True, filters={"label": BUILD_LABEL})
    return {c.id for c in (*ours, *builds)}


SMOKE_IMAGE_LABEL = "io.accel-images.smoke.image"
"""On a smoke run's containers and network (accel_images.smoke.launcher.SMOKE_LABEL + '.image'): the image tested."""


def labelled_networks(client: docker.DockerClient) -> set[str]:
    """This session's networks: labelled with it, made in this process (its owner label, as
    accel_images.builder.leftovers writes it), or a smoke run's of an image only this session names (SUITE_IMAGE)."""
    from accel_images.builder.leftovers import OWNER_LABEL, owner_token

    ours = client.api.networks(filters={"label": f"{TEST_LABEL}={TEST_RUN}"})
    mine = client.api.networks(filters={"label": f"{OWNER_LABEL}={owner_token()}"})
    smoked = [entry for entry in client.api.networks(filters={"label": SMOKE_IMAGE_LABEL})
              if TEST_RUN in str((entry.get("Labels") or {}).get(SMOKE_IMAGE_LABEL))]
    return {str(entry["Id"]) for entry in (*ours, *mine, *smoked)}


@pytest.fixture(autouse=True)
def _no_leaked_containers(request: pytest.FixtureRequest, _marked_requirements: None) -> Iterator[None]:
    """A test that leaves a container labelled io.accel-images.test=<this session>, or a build's intermediate
    container, behind fails; it goes."""
    if "docker_client" not in request.fixturenames:
        yield
        return
    client = request.getfixturevalue("docker_client")
    before, networks_before = labelled_containers(client), labelled_networks(client)
    yield
    leaked = labelled_containers(client) - before
    for container_id in leaked:
        try:
            client.containers.get(container_id).remove(force=True)
        except docker.errors.NotFound:
            pass
    networks = labelled_networks(client) - networks_before   # after the containers: an attached one cannot go
    for network_id in networks:
        try:
            client.api.remove_network(network_id)
        except docker.errors.NotFound:
            pass
    if leaked:
        pytest.fail(f"left {len(leaked)} container(s) labelled {TEST_LABEL}={TEST_RUN} or {BUILD_LABEL} behind",
                    pytrace=False)
    if networks:
        pytest.fail(f"left {len(networks)} network(s) of this session behind (labelled {TEST_LABEL}={TEST_RUN},"
                    f" made by this process, or a smoke run's of its image)", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    """The interrupt tests send SIGINT: a suite started in the background of a non-interactive shell
    (`cmd &`, job control off) inherits SIGINT ignored (POSIX), and Python then installs no
    KeyboardInterrupt handler, in this process or in the CLIs the tests start (an ignored signal stays
    ignored across exec). A handler set here is reset to the default across exec, so both get one."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


# ---- the CUDA runtime image on Debian 12, built and published once a test session -----------------

CUDA_WHEEL_CACHE = Path(os.environ.get("ACCEL_TEST_WHEEL_CACHE", "/var/cache/accel-images/wheel-cache"))
"""The run's wheel cache for the CUDA image's 3 GB of package-index wheels, kept between CI runs on the
same machine (.ci/setup-host.sh's cache directory): a second run downloads none of them."""
CUDA_DEBIAN = ("--vendor", "cuda", "--torch", "2.15", "--python", "3.11", "--os", "debian12", "--flavor", "runtime",
               "--platform", "linux/amd64")
"""The CUDA image every machine with the package index and Debian's mirror can build: torch 2.15.0+cu132."""


@dataclass(frozen=True)
class CudaImage:
    """The published CUDA Debian image: its local name and ID, where it was published, the run that did it."""

    image: str
    image_id: str
    registry: str
    repository: str
    state: Path
    key: Path
    public_key: Path
    record: dict[str, object]
    output: str

    def nightly_args(self) -> list[str]:
        """The very nightly that published it, to run again."""
        return cuda_nightly_args(self.registry, self.repository.split("/", 1)[0], self.state, self.key)


SUITE_REPOSITORY = f"accel-images-{TEST_RUN}/pytorch"
"""Where the suite's shared CPU build lives on the engine: a name unique to this test run, so two runs on one
engine (or a developer's own `make image`) never move the image another run's tests read."""
PUBLISHED_TAG = "2.13.0-cpu-py3.11-debian12"
PUBLISHED = ("--vendor", "cpu", "--torch", "2.13", "--python", "3.11", "--os", "debian12", "--flavor", "runtime")
"""The CPU variant the suite builds once and publishes (the one `make image-offline` builds)."""
SUITE_IMAGE = f"{SUITE_REPOSITORY}:{PUBLISHED_TAG}"
"""The suite's shared CPU image (published_build), by the name only this run gives it."""


def offline(registry: str, wheelhouse: Path) -> list[str]:
    """The local mirror and wheelhouse; the wheelhouse holds torch alone, so torchvision is left out on purpose."""
    return ["--registry-mirror", f"docker.io={registry}", "--pip-find-links", str(wheelhouse),
            "--without-companion", "torchvision"]


@pytest.fixture(scope="session")
def suite_matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """matrix.yaml with the image named SUITE_REPOSITORY: what the suite's shared builds are built from."""
    text = (Path(__file__).resolve().parents[1] / "matrix.yaml").read_text()
    assert "\nimage: accel-images/pytorch\n" in text
    matrix = tmp_path_factory.mktemp("suite-matrix") / "matrix.yaml"
    matrix.write_text(text.replace("\nimage: accel-images/pytorch\n", f"\nimage: {SUITE_REPOSITORY}\n"))
    return matrix


@pytest.fixture(scope="session")
def published_build(docker_client: docker.DockerClient, registry: str, wheelhouse: Path, base_images: BaseImages,
                    suite_matrix: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Build (forced, so the first run really builds) the published CPU variant once per session, under
    SUITE_REPOSITORY; its tag goes when the session ends (the layers stay in the build cache)."""
    import subprocess
    import sys

    state = tmp_path_factory.mktemp("state")
    result = subprocess.run([sys.executable, "-m", "accel_images", "build", "--matrix", str(suite_matrix), *PUBLISHED,
                             *offline(registry, wheelhouse), "--force", "--state-dir", str(state)],
                            cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=1800,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    records = json.loads((state / "reports" / "build-latest" / "report.json").read_text())["variants"]
    yield {"state": state, "records": records, "stdout": result.stdout, "stderr": result.stderr, "image": SUITE_IMAGE,
           "matrix": suite_matrix}
    for built in docker_client.images.list(name=SUITE_REPOSITORY):   # every tag the suite gave under it
        for tag in built.tags:
            if tag.startswith(f"{SUITE_REPOSITORY}:"):
                try:
                    docker_client.images.remove(tag)   # the name only: a container still using it keeps the image
                except docker.errors.APIError:
                    pass


def cuda_nightly_args(registry: str, namespace: str, state: Path, key: Path) -> list[str]:
    return ["nightly", "--registry", f"{registry}/{namespace}", *CUDA_DEBIAN, "--registry-mirror",
            f"docker.io={registry}", "--cache-dir", str(CUDA_WHEEL_CACHE), "--state-dir", str(state),
            "--sign-key", str(key)]


@pytest.fixture(scope="session")
def cuda_debian(docker_client: docker.DockerClient, registry: str, base_images: BaseImages,
                tmp_path_factory: pytest.TempPathFactory) -> CudaImage:
    """`nightly` builds the CUDA runtime image on Debian 12 from the package index's wheels (through the
    wheel cache), smoke-tests it on the CPU, publishes it with its SBOM and signed provenance: once a
    session, for every test that reads it (tests/integration/test_cuda_image.py)."""
    import subprocess
    import sys

    from test_supply import write_key

    root = tmp_path_factory.mktemp("cuda-debian")
    key, public_key = write_key(root)
    namespace, state = f"cuda-{TEST_RUN}", root / "state"
    result = subprocess.run([sys.executable, "-m", "accel_images", *cuda_nightly_args(registry, namespace, state, key)],
                            cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=3600,
                            check=False)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        pytest.fail(f"the CUDA Debian nightly failed (exit {result.returncode}):\n{output[-4000:]}", pytrace=False)
    report = json.loads((state / "reports" / "nightly-latest" / "report.json").read_text())
    [record] = report["variants"]
    # By the ID the nightly built: the local name is shared with every other build of the tag on this engine.
    image_id = str(record["image_id"])
    return CudaImage(image_id, docker_client.images.get(image_id).id, registry, f"{namespace}/accel-images/pytorch",
                     state, key, public_key, record, output)
