"""The run's wheelhouse with the real pip, against a local index that counts what it serves.

The index holds a torch release in miniature for two Pythons (benchmarks/wheel_index.py): the torch,
torchvision and numpy wheels of each, one py3-none runtime wheel they share, setuptools. Builds of
two flavors and two Pythons of that torch must fetch each distinct wheel once, and a second run
none; the builds run with `--network none`, and the index listens on the host's loopback, which
no container reaches: the images are built from the host's copy alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from accel_images.builder.engine import Engine
from accel_images.builder.wheels import RunWheelhouse, WheelRequest
from accel_images.kb.wheels import manylinux_tags
from benchmarks.wheel_index import Sizes, WheelIndex, make_wheel, synthetic_torch
from conftest import BaseImages
from nightly_fixture.cleanup import remove_local_names

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "benchmarks" / "templates_fetch"
SMALL = Sizes(torch=3_000_000, runtime=6_000_000, torchvision=200_000, numpy=400_000, setuptools=20_000)
MATRIX = """schema: 1
image: {image}
user: {{name: dev, uid: 1000, gid: 1000}}
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11", "3.12"]
      os: [ubuntu24.04]
      flavor: [runtime, devel]
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WheelIndex]:
    wheels = tmp_path_factory.mktemp("index")
    synthetic_torch(wheels, "2.13.0", "0.28.0", ["3.11", "3.12"], sizes=SMALL)
    with WheelIndex(wheels).running() as served:
        yield served


@pytest.fixture(scope="module")
def markers_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WheelIndex]:
    """The same, its torch needing one wheel below Python 3.12 and another from 3.12 on."""
    wheels = tmp_path_factory.mktemp("markers-index")
    synthetic_torch(wheels, "2.13.0", "0.28.0", ["3.11", "3.12"], sizes=SMALL,
                    extra_requires=['oldpy-only; python_version < "3.12"', 'newpy-only; python_version >= "3.12"'])
    make_wheel(wheels, "oldpy-only", "1.0", "py3-none-any", 1000)
    make_wheel(wheels, "newpy-only", "1.0", "py3-none-any", 1000)
    with WheelIndex(wheels).running() as served:
        yield served


def request(index: WheelIndex, python: str) -> WheelRequest:
    return WheelRequest(index.url().replace("{index}", "cpu"), ("torch==2.13.0", "torchvision==0.28.*", "numpy"),
                        ("setuptools",), python, "x86_64", manylinux_tags("x86_64", "2.39"))


def test_pip_on_the_host_fetches_each_wheel_once_and_reads_markers_as_the_images_python(
        markers_index: WheelIndex, tmp_path: Path) -> None:
    index = markers_index
    index.reset()
    house = RunWheelhouse(tmp_path / "cache")
    closures = {python: house.closure(request(index, python)) for python in ("3.11", "3.12", "3.11", "3.12")}
    names = {python: {w.filename.split("-")[0] for w in closure.wheels} for python, closure in closures.items()}
    # this process is CPython 3.11: pip alone would read `python_version >= "3.12"` as false for both
    assert names["3.11"] == {"torch", "torchvision", "numpy", "bench_runtime", "setuptools", "oldpy_only"}
    assert names["3.12"] == {"torch", "torchvision", "numpy", "bench_runtime", "setuptools", "newpy_only"}
    assert any("cp312" in w.filename for w in closures["3.12"].wheels)
    served = index.reset()
    distinct = {w.filename: w.size for closure in closures.values() for w in closure.wheels}
    assert sorted(served.files) == sorted(distinct) and served.file_bytes == sum(distinct.values())
    RunWheelhouse(tmp_path / "cache").closure(request(index, "3.12"))  # the next run, the same cache
    assert index.reset().files == []


@pytest.fixture
def site(docker_client: docker.DockerClient, base_images: BaseImages, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A matrix of this test's own image, its bases: the local Debian image with Python, under a mirror prefix."""
    from accel_images.kb import compat
    from accel_images.model.reference import Mirror, mirrored
    from accel_images.plan.matrix import load_matrix
    from accel_images.plan.variants import expand
    name = f"accel-test-fetch-{uuid.uuid4().hex[:8]}"
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.format(image=f"{name}/light"))
    mirror = f"docker.io={name}.invalid/hub"
    for variant in expand(load_matrix(matrix), compat.load_kb()).variants:
        docker_client.images.get(base_images.python).tag(mirrored(variant.base_image, (Mirror.parse(mirror),)))
    yield {"matrix": str(matrix), "mirror": mirror, "name": name}
    remove_local_names(docker_client, f"{name}/", f"{name}.invalid/")


def build(index: WheelIndex, site: dict[str, str], state: Path) -> list[dict]:
    command = [sys.executable, "-m", "accel_images", "build", "--matrix", site["matrix"], "--templates", str(TEMPLATES),
               "--registry-mirror", site["mirror"], "--pip-index-url", index.url(), "--no-smoke", "--network", "none",
               "--jobs", "2", "--state-dir", str(state)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((state / "reports" / "build-latest" / "report.json").read_text())
    return [report["meta"]["wheels"], *report["variants"]]


@pytest.mark.engine
@pytest.mark.slow
def test_builds_of_two_flavors_and_two_pythons_install_from_one_fetch_and_a_second_run_fetches_nothing(
        docker_client: docker.DockerClient, index: WheelIndex, site: dict[str, str], tmp_path: Path) -> None:
    engine = Engine(docker_client, docker_client.api.base_url)
    index.reset()
    fetched, *records = build(index, site, tmp_path / "state")
    assert [r["status"] for r in records] == ["built"] * 4, records
    served = index.reset()
    assert len(served.files) == len(set(served.files)) == fetched["fetched_files"] == 8, served.files
    assert served.file_bytes == fetched["fetched_bytes"]
    for record in records:
        python = "cp" + record["tag"].split("-py")[1].split("-")[0].replace(".", "")
        with engine.image_files(record["image_id"]) as files:  # no container runs: other sessions' clean-ups
            tag = files.entry("/opt/torch-tag.txt")              # cannot remove it under this test
        assert tag is not None and tag.head == f"Tag: {python}-{python}-manylinux_2_28_x86_64\n".encode(), record["tag"]
        context = sorted(p.name for p in (tmp_path / "state" / "contexts" / "cpu" / record["tag"] / "wheels").iterdir())
        assert all(python in n or "py3-none" in n for n in context) and len(context) == 5, context

    again, *records = build(index, site, tmp_path / "state")
    assert [r["status"] for r in records] == ["skipped"] * 4
    assert index.reset().files == [] and again["fetched_bytes"] == 0 and again["reused_files"] == 10
