"""Ctrl-C and SIGTERM during `accel-images build`: a prompt, clean stop.

Each run goes against a disposable dockerd (tests/faultproxy.py), so "no containers are left"
means exactly that, whatever else runs on the shared daemon. The builder must exit 130
(SIGINT) or 143 (SIGTERM), leave no build or smoke container behind, and write a partial
report naming what finished and what was interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel_images.smoke.launcher import SMOKE_LABEL
from faultproxy import DisposableDaemon, disposable_daemon
from lighttemplates import light_templates

ROOT = Path(__file__).resolve().parents[2]
SLIM = "local/debian:bookworm-slim"
TWO_VARIANTS = """schema: 1
image: accel-images-test/interrupt
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime, devel]
"""
# runtime builds at once; devel sleeps in a RUN step, where the signal arrives.
SLOW_DEVEL = """FROM {{ base_ref }}
{% if v.flavor == "devel" %}
RUN echo step-started && sleep 60
{% else %}
RUN echo quick > /quick
{% endif %}
"""
# The launcher refuses an image whose `python` is a script before it runs anything, so these builds
# run with the nightly fixture's smoke stage (tests/nightly_fixture/stubsmoke.py), which runs the
# image's `python /opt/accel-images/smoke.py ...` through the same engine run: here `python` just hangs.
HANGING_SMOKE = """FROM {{ base_ref }}
RUN printf '#!/bin/sh\\nsleep 120\\n' > /usr/local/bin/python && chmod +x /usr/local/bin/python
"""

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def daemon(docker_client, tmp_path_factory) -> Iterator[DisposableDaemon]:
    with disposable_daemon(docker_client, Path(tmp_path_factory.mktemp("dockerd")), SLIM,
                           "debian:bookworm-slim") as disposable:
        yield disposable


def start_build(daemon: DisposableDaemon, tmp_path: Path, template: str, *extra: str) -> subprocess.Popen[str]:
    light_templates(tmp_path / "templates", template)
    (tmp_path / "matrix.yaml").write_text(TWO_VARIANTS)
    env = {**os.environ, "DOCKER_HOST": daemon.host, "PYTHONPATH": str(ROOT / "tests")}
    return subprocess.Popen([sys.executable, "-m", "nightly_fixture", "build", "--matrix", str(tmp_path / "matrix.yaml"),
                             "--templates", str(tmp_path / "templates"), "--force",
                             "--state-dir", str(tmp_path / "state"), *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(condition, process: subprocess.Popen[str], what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            raise AssertionError(f"the build ended before {what}: {process.communicate()}")
        time.sleep(0.2)
    raise AssertionError(f"{what} never happened")


def log_says(state: Path, text: str) -> bool:
    logs = state / "logs"
    return logs.is_dir() and any(text in log.read_text() for log in logs.rglob("*.log"))


def containers(daemon: DisposableDaemon, **filters: str | list[str] | bool) -> list[str]:
    client = daemon.client()
    try:
        # sparse: no inspect per container, which raised NotFound for one the daemon removed meanwhile
        return [c.id for c in client.containers.list(all=True, sparse=True, filters=filters)]
    finally:
        client.close()


def wait_for_no_containers(daemon: DisposableDaemon, timeout_s: float = 30) -> list[str]:
    """The daemon removes a cancelled build's container asynchronously; give it a moment."""
    deadline = time.monotonic() + timeout_s
    left = containers(daemon)
    while left and time.monotonic() < deadline:
        time.sleep(0.3)
        left = containers(daemon)
    return left


def stop(process: subprocess.Popen[str], signum: int) -> tuple[str, str]:
    process.send_signal(signum)
    try:
        return process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the builder did not stop after the signal") from None


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_a_build_step_stops_cleanly_with_a_partial_report(
        daemon: DisposableDaemon, tmp_path: Path, signum: int, code: int) -> None:
    state = tmp_path / "state"
    process = start_build(daemon, tmp_path, SLOW_DEVEL, "--no-smoke")
    wait_until(lambda: log_says(state, "step-started"), process, "the slow step")
    stdout, stderr = stop(process, signum)
    assert process.returncode == code, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert "partial report" in stderr
    records = {r["flavor"]: r for r in json.loads((state / "reports" / "build-latest" / "report.json").read_text())["variants"]}
    assert records["runtime"]["status"] == "built"
    assert records["devel"]["status"] == "interrupted"
    assert wait_for_no_containers(daemon) == []  # the build's intermediate container is gone


def test_sigterm_during_the_smoke_test_removes_the_smoke_container(daemon: DisposableDaemon,
                                                                    tmp_path: Path) -> None:
    state = tmp_path / "state"
    process = start_build(daemon, tmp_path, HANGING_SMOKE, "--flavor", "runtime")
    wait_until(lambda: bool(containers(daemon, label=SMOKE_LABEL, status="running")), process,
               "a running smoke container")
    stdout, stderr = stop(process, signal.SIGTERM)
    assert process.returncode == 143, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert containers(daemon, label=SMOKE_LABEL) == []
    assert wait_for_no_containers(daemon) == []
    [record] = json.loads((state / "reports" / "build-latest" / "report.json").read_text())["variants"]
    assert record["status"] == "interrupted"


def test_sigterm_becomes_the_keyboard_interrupt_path() -> None:
    """In-process: the handler raises the KeyboardInterrupt subclass that exits 143."""
    from accel_images.cli import options

    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        options.handle_sigterm()
        with pytest.raises(options.Terminated) as raised:  # the KeyboardInterrupt that exits 143
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        assert raised.value.exit_code == 143
    finally:
        signal.signal(signal.SIGTERM, previous)



def test_a_stop_reaches_worker_threads_at_their_next_checkpoint() -> None:
    """With --jobs N, Ctrl-C lands in the main thread; a worker must not go on to promote."""
    import threading

    from accel_images import stopping
    from accel_images.builder.workers import run_each

    stopping.reset()
    reached: list[str] = []
    started = threading.Event()

    def work(item: str) -> str:
        if item == "interrupted":
            started.wait(5)
            raise KeyboardInterrupt  # stands for Ctrl-C surfacing through the pool
        started.set()
        deadline = time.monotonic() + 30   # until the main thread has taken the interrupt (no timer decides)
        while not stopping.stop_requested() and time.monotonic() < deadline:
            time.sleep(0.01)
        stopping.checkpoint()
        reached.append("promotion")
        return item

    try:
        with pytest.raises(KeyboardInterrupt):
            run_each(work, ["slow", "interrupted"], jobs=2)
        assert stopping.stop_requested()
        assert reached == []
    finally:
        stopping.reset()
