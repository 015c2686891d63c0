"""The registry's catalogue: what `recommend --registry`, `pull`, `run` and `catalogue` choose from.

Unit tests read an in-memory registry; the integration tests publish layer-less images (a config
blob with a variant's labels, made over the registry's HTTP API) and smoke records into a
repository of their own in the local registry, then read them back through accel-images, directly
and through the fault proxy with 50 ms added to every request.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_catalogue.py.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from faultproxy import FaultProxy
from nightly_fixture.rawregistry import RawRegistry

from accel_images.publish.catalogue import read_catalogue, write_record
from accel_images.cli import fanout as cli_fanout, session as cli_session
from accel_images.model.hostinfo import HostInfo
from accel_images.registry import RegistryClient
from accel_images.smoke.judge import SmokeResult
from test_catalogue import VARIANTS, CPU_NEW, CPU_OLD, CUDA, PASSED


# ---- against the local registry ----------------------------------------------------------------

@dataclass(frozen=True)
class Published:
    registry: str
    namespace: str

    @property
    def repository(self) -> str:
        return f"{self.namespace}/pytorch"

    def add(self, tag: str, *, smoke: SmokeResult | None = PASSED) -> str:
        raw = RawRegistry(self.registry)
        digest = raw.push_config_image(self.repository, tag, VARIANTS[tag].labels())
        if smoke is not None:
            write_record(RegistryClient(self.registry), self.repository, digest, smoke, "test")
        return digest

    def args(self, *more: str) -> list[str]:
        return ["--registry", f"{self.registry}/{self.namespace}", "--image", "pytorch", *more]


@pytest.fixture
def published(registry: str) -> Iterator[Published]:
    here = Published(registry, f"test-{uuid.uuid4().hex[:12]}")
    yield here
    RawRegistry(registry).delete_repository(here.repository)


def host_file(tmp_path: Path, host: HostInfo) -> str:
    path = tmp_path / "host.json"
    path.write_text(json.dumps({key: list(value) if isinstance(value, tuple) else value
                                for key, value in host.__dict__.items()}))
    return str(path)


def no_builds(tmp_path: Path) -> tuple[str, str]:
    """A state directory without builds: the registry is asked, whatever this checkout has built."""
    return ("--state-dir", str(tmp_path / "no-builds"))


@pytest.mark.registry
def test_recommend_with_a_registry_offers_only_published_green_images(published: Published, tmp_path: Path) -> None:
    published.add(CPU_NEW, smoke=None)            # published, never smoke-tested
    published.add(CPU_OLD)
    result = CliRunner().invoke(cli_fanout.recommend_command,
                                published.args(*no_builds(tmp_path), "--host-json", host_file(tmp_path, HostInfo())))
    assert result.exit_code == 0, result.output
    ref = f"{published.registry}/{published.repository}:{CPU_OLD}"
    assert result.stdout.strip() == f"docker run --rm -it --ipc host {ref}"
    assert f"from: chosen from registry {published.registry}/{published.repository}: 2 image(s) published," \
           f" 1 passed their smoke test; {CPU_OLD} passed on cpu" in result.stderr
    assert f"not: {CPU_NEW}: published, but no smoke record vouches for its digest" in result.stderr

    as_json = CliRunner().invoke(cli_fanout.recommend_command,
                                 published.args(*no_builds(tmp_path), "--host-json", host_file(tmp_path, HostInfo()),
                                                "--json"))
    record = json.loads(as_json.stdout)
    assert record["image"] == ref and record["source"]["kind"] == "registry"


@pytest.mark.registry
def test_a_gpu_host_gets_the_published_gpu_image(published: Published, tmp_path: Path) -> None:
    published.add(CPU_OLD)
    published.add(CUDA, smoke=replace(PASSED, ran_on="cpu", cpu_fallback=True))
    a100 = HostInfo(vendor="cuda", driver_version="580.126.09", stack_version="13.0",
                    gpu_names=("NVIDIA A100-SXM4-40GB",), gpu_archs=("8.0",), device_count=1)
    result = CliRunner().invoke(cli_fanout.recommend_command,
                                published.args(*no_builds(tmp_path), "--host-json", host_file(tmp_path, a100)))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith(f"{published.repository}:{CUDA}")
    assert f"warning: {CUDA} was smoke-tested in CPU mode only: no cuda runner ran it" in result.stderr


@pytest.mark.registry
def test_an_empty_repository_is_one_line_naming_the_way_out(published: Published, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli_fanout.recommend_command,
                                published.args(*no_builds(tmp_path), "--host-json", host_file(tmp_path, HostInfo())))
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"accel-images: error: registry {published.registry}/{published.repository}"
                                     " publishes no accel-images image (check --registry and --image, or pass"
                                     " --from-matrix)")


@pytest.mark.registry
def test_catalogue_command_lists_every_image_with_its_smoke_result(published: Published) -> None:
    published.add(CPU_OLD)
    published.add(CPU_NEW, smoke=replace(PASSED, ok=False))
    result = CliRunner().invoke(cli_session.catalogue_command, published.args("--json"))
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    images = {image["tag"]: image for image in document["images"]}
    assert images[CPU_OLD]["offered"] and images[CPU_OLD]["smoke"]["ran_on"] == "cpu"
    assert not images[CPU_NEW]["offered"] and images[CPU_NEW]["why_not"] == "its smoke test failed on cpu"
    table = CliRunner().invoke(cli_session.catalogue_command, published.args())
    assert f" {CPU_OLD}  " in table.stdout and "passed on cpu" in table.stdout


@pytest.mark.registry
def test_forty_images_behind_50_ms_per_request_are_read_concurrently(published: Published) -> None:
    """81 requests (a tag list, then a HEAD and a record per image) at 50 ms each are 4 s one after the
    other; read concurrently they take a fraction. The 1 s bound itself is measured, beside the
    sequential time, by `benchmarks/run.py --only catalogue` (a shared CI machine's load would make
    it a flaky assertion here); this test holds the shape that makes it possible."""
    names = [f"2.{minor}.0-cpu-py3.{py}-ubuntu24.04" for minor in range(20) for py in (11, 12)]
    raw, client = RawRegistry(published.registry), RegistryClient(published.registry)
    for name in names:
        labels = {**VARIANTS[CPU_NEW].labels(), "io.accel-images.tag": name}
        write_record(client, published.repository, raw.push_config_image(published.repository, name, labels),
                     PASSED, "bench")
    with FaultProxy(published.registry) as proxy:
        proxy.faults.delay_s = 0.05
        started = time.perf_counter()
        catalogue = read_catalogue(RegistryClient(proxy.host), published.repository)
        elapsed = time.perf_counter() - started
    assert len(catalogue.offered()) == 40
    assert len(proxy.faults.seen) == 81                   # one tag list, then two requests per image
    assert proxy.faults.peak_in_flight >= 12              # READ_WORKERS (16) at once, give or take the start
    assert elapsed < 81 * 0.05 / 2, f"{elapsed:.2f} s"     # at least twice what one-at-a-time allows
