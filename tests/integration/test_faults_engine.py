"""The Docker engine failing under the builder: missing socket, stopped daemon, a daemon killed
mid-build, and a base image withdrawn upstream. Each ends in one clear line, never a traceback.

Daemons are stopped and killed only in a disposable dockerd of the test's own
(tests/faultproxy.py); the shared one is only read from.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_faults_engine_unit.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultproxy import DisposableDaemon, disposable_daemon
from lighttemplates import light_templates
from test_faults_engine_unit import ROOT, CPU_MATRIX, cli, one_error_line
VARIANT = "cpu/2.13.0-cpu-py3.11-debian12"
SLIM = "local/debian:bookworm-slim"
SLEEPING_TEMPLATE = "FROM {{ base_ref }}\nRUN echo step-started && sleep 30\n"
QUICK_TEMPLATE = "FROM {{ base_ref }}\nRUN echo quick > /quick\n"


def templates_with(tmp_path: Path, cpu_template: str) -> Path:
    return light_templates(tmp_path / "templates", cpu_template)


def build_args(templates: Path, state: Path) -> list[str]:
    return ["build", "--matrix", str(CPU_MATRIX), "--templates", str(templates), "--no-smoke", "--force",
            "--state-dir", str(state)]


@pytest.fixture(scope="module")
def daemon(docker_client, tmp_path_factory) -> Iterator[DisposableDaemon]:
    """A disposable dockerd holding the slim Debian base as `debian:bookworm-slim`."""
    with disposable_daemon(docker_client, Path(tmp_path_factory.mktemp("dockerd")), SLIM,
                           "debian:bookworm-slim") as disposable:
        yield disposable


@pytest.mark.engine
def test_stopped_daemon_is_one_line_and_exit_3(daemon: DisposableDaemon, tmp_path: Path) -> None:
    daemon.stop()
    try:
        result = cli("smoke", "accel-images/pytorch:2.13.0-cpu-py3.11-debian12", docker_host=daemon.host)
    finally:
        daemon.start()
    assert result.returncode == 3, result.stderr
    line = one_error_line(result)
    assert "not reachable" in line and daemon.host in line and "DOCKER_HOST" in line


@pytest.mark.engine
def test_killed_daemon_leaves_a_refusing_socket_and_the_same_clear_line(daemon: DisposableDaemon,
                                                                        tmp_path: Path) -> None:
    daemon.kill()
    try:
        assert daemon.socket.exists()  # a crashed dockerd leaves its socket: connections are refused
        result = cli(*build_args(templates_with(tmp_path, QUICK_TEMPLATE), tmp_path / "state"),
                     docker_host=daemon.host)
    finally:
        daemon.start()
    assert result.returncode == 3, result.stderr
    line = one_error_line(result)
    assert "connection refused" in line and "start it" in line


@pytest.mark.engine
def test_daemon_killed_mid_build_names_variant_and_log_and_a_rerun_works(daemon: DisposableDaemon,
                                                                         tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "DOCKER_HOST": daemon.host}
    process = subprocess.Popen([sys.executable, "-m", "accel_images",
                                *build_args(templates_with(tmp_path, SLEEPING_TEMPLATE), state)],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_log_line(state, "step-started", process)
        daemon.kill()
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        daemon.start()
    said = stdout + stderr
    assert process.returncode != 0, said
    assert "Traceback" not in said
    failed = [line for line in stderr.splitlines() if line.startswith(f"FAILED {VARIANT}")]
    assert failed, said
    assert "daemon" in failed[0] and "log: " in failed[0]
    [record] = json.loads((state / "reports" / "build-latest" / "report.json").read_text())["variants"]
    assert record["status"] == "failed" and Path(record["log"]).is_file()
    assert record["log"] in failed[0]

    rerun = cli(*build_args(templates_with(tmp_path / "again", QUICK_TEMPLATE), tmp_path / "state2"),
                docker_host=daemon.host)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr


def wait_for_log_line(state: Path, text: str, process: subprocess.Popen[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for log in (state / "logs").rglob("*.log") if (state / "logs").is_dir() else ():
            if any(line.strip() == text for line in log.read_text().splitlines()):
                return
        if process.poll() is not None:
            raise AssertionError(f"the build ended before '{text}': {process.communicate()}")
        time.sleep(0.2)
    raise AssertionError(f"'{text}' never appeared in a build log under {state}")


@pytest.mark.engine
@pytest.mark.registry
def test_base_withdrawn_upstream_names_the_tag_and_newer_bases(registry: str, tmp_path: Path) -> None:
    """nvidia/cuda deletes end-of-life tags (the devel flavor sits on it); the local registry has no
    CUDA base at all."""
    result = cli("build", "--vendor", "cuda", "--stack", "13.0", "--torch", "2.14", "--python", "3.12",
                 "--os", "ubuntu24.04", "--flavor", "devel", "--registry-mirror", f"docker.io={registry}",
                 "--no-smoke", "--state-dir", str(tmp_path / "state"),
                 docker_host=os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"))
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert "Traceback" not in said
    [failed] = [line for line in result.stderr.splitlines() if line.startswith("FAILED cuda/")]
    assert "nvidia/cuda:13.0.3-devel-ubuntu24.04" in failed
    assert "not found" in failed
    assert "nvidia/cuda:13.2.1-devel-ubuntu24.04" in failed  # the newer base the knowledge base knows
    assert "nvidia/cuda:12.6.3-devel-ubuntu24.04" not in failed  # older ones are no way forward
