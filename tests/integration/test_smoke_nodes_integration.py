"""`accel-images smoke --nodes 2` for real, on the suite's CPU image (published_build, built once a session):
two containers on a network made for the run, torchrun, an exact gloo all-reduce and its bandwidth; and
nothing of the run left on the engine afterwards, when it passed, when its rendezvous never completed and
when it was stopped with Ctrl-C.

The tests that need no engine: tests/unit/test_smoke_nodes.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from accel_images import vendors
from accel_images.builder.engine import Engine
from accel_images.smoke.launcher import SMOKE_LABEL
from accel_images.smoke.nodes import NODES_LABEL, NodesPlan, collective_for, run_nodes
from accel_images.smoke.records import recorded_build
from accel_images.state import StateDir

from conftest import SUITE_IMAGE

ROOT = Path(__file__).resolve().parents[2]
IMAGE_LABEL = f"{SMOKE_LABEL}.image={SUITE_IMAGE}"
"""On every container and network of a nodes run of the suite's image: a name only this test session gives."""
pytestmark = pytest.mark.engine


def cli(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)


def left_behind(client: docker.DockerClient, label: str) -> list[str]:
    """The containers (in any state) and networks carrying `label`."""
    containers = client.containers.list(all=True, sparse=True, filters={"label": label})
    networks = client.networks.list(filters={"label": label})
    return [f"container {c.id[:12]}" for c in containers] + [f"network {n.name}" for n in networks]


def test_two_nodes_all_reduce_exactly_with_gloo_and_leave_nothing(docker_client, published_build: dict) -> None:
    result = cli("smoke", "--nodes", "2", SUITE_IMAGE, "--json", "--timeout", "300",
                 "--state-dir", str(published_build["state"]))
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads(result.stdout)   # the record alone on stdout: `python -m json.tool` reads it
    assert record["ok"] is True and record["result_ok"] is True, record
    assert record["world_size"] == 2 and record["nodes"] == 2
    assert record["backend"] == "gloo" and record["device"] == "cpu"
    assert record["bandwidth_gbps"] > 0 and record["seconds"] > 0
    assert [(node["node"], node["rank"], node["sum"]) for node in record["per_node"]] == [(0, 0, 3.0), (1, 1, 3.0)]
    lines = result.stderr.strip().splitlines()
    assert lines[-3].startswith("node0: rank 0 of 2, all-reduce sum 3 (exact), ")
    assert lines[-2].startswith("node1: rank 1 of 2, all-reduce sum 3 (exact), ")
    assert lines[-1].startswith(f"{SUITE_IMAGE}: 2-node smoke passed: world size 2, all-reduce exact, gloo on cpu")
    assert "Traceback" not in result.stderr
    assert left_behind(docker_client, f"{NODES_LABEL}={record['run_id']}") == []


@dataclass(frozen=True)
class NoRendezvous(NodesPlan):
    """A plan whose nodes look for the rendezvous at a host no node answers to, so it never completes."""

    @property
    def rendezvous(self) -> str:
        return "elsewhere"


def test_a_rendezvous_that_never_completes_fails_in_time_and_leaves_nothing(docker_client,
                                                                            published_build: dict) -> None:
    engine = Engine.connect()
    info = engine.inspect_image(SUITE_IMAGE)
    assert info is not None
    plan = NoRendezvous(collective_for(vendors.get("cpu"), accelerator_present=False), timeout_s=20)
    recorded = recorded_build(StateDir.at(published_build["state"]), info.labels.get("io.accel-images.fingerprint"))
    started = time.monotonic()
    result = run_nodes(engine, SUITE_IMAGE, plan, python="3.11", recorded=recorded, vendor_options=None)
    assert not result.ok
    # the run's deadline, or torchrun's own rendezvous timeout (the same 20 s) where it came first
    assert result.failures[0].startswith("node0: no report"), result.failures
    assert ("within the 20 s timeout (the rendezvous at elsewhere:29500" in result.failures[0]
            or "Timed out after" in result.failures[0]), result.failures
    assert time.monotonic() - started < 20 + 60
    assert left_behind(docker_client, f"{NODES_LABEL}={plan.run_id}") == []


def test_ctrl_c_removes_the_containers_and_the_network(docker_client, published_build: dict) -> None:
    process = subprocess.Popen([sys.executable, "-m", "accel_images", "smoke", "--nodes", "2", SUITE_IMAGE,
                                "--state-dir", str(published_build["state"])], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(docker_client.containers.list(filters={"label": IMAGE_LABEL, "status": "running"})) < 2:
        assert process.poll() is None and time.monotonic() < deadline, "the nodes never ran"
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("smoke --nodes did not stop after Ctrl-C") from None
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "accel-images: interrupted" and "Traceback" not in stderr
    assert left_behind(docker_client, IMAGE_LABEL) == []


def test_a_missing_image_is_one_line(docker_client) -> None:
    result = cli("smoke", "--nodes", "2", "accel-images-absent/pytorch:0.0.0-cpu")
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "accel-images: error: image accel-images-absent/pytorch:0.0.0-cpu is not present locally"
        " (build or pull it first)"]
