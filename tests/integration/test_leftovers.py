"""Containers a killed run left on the engine are removed by the next run, and only those.

Against the shared engine: containers labelled like the smoke containers of a run, owned by a
process that has ended, by this (running) process, and by another running process; the next
`reclaim` removes only the first. End to end, a nightly killed (SIGKILL) during its smoke test
leaves its smoke container running; the next nightly removes it.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_leftovers_unit.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import docker
import pytest
from click.testing import CliRunner

from accel_images.cli.nightly import nightly_command
from accel_images.builder.engine import MANAGED_LABEL, Engine
from accel_images.builder.leftovers import OWNER_LABEL, owner_token, reclaim
from conftest import TEST_LABEL, TEST_RUN
from test_nightly_integration import Site, site  # noqa: F401  (site is a fixture)
from test_nightly_interrupt import (ONLY_DEBIAN, output_of, slow_smoke, smoke_containers, start_nightly,
                                    wait_until)
from test_leftovers_unit import ended_process_token


@pytest.mark.engine
def test_reclaim_removes_only_containers_of_ended_runs(docker_client: docker.DockerClient, base_images) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    owners = {"ended": ended_process_token(), "me": owner_token(), "running": owner_token(sleeper.pid)}
    made = {}
    try:
        for name, token in owners.items():
            container = docker_client.containers.create(base_images.python, ["sleep", "60"], network_disabled=True,
                                                        labels={MANAGED_LABEL: "true", OWNER_LABEL: token,
                                                                TEST_LABEL: TEST_RUN})
            made[name] = container.id
        later = datetime.now(timezone.utc) + timedelta(seconds=5)
        removed = reclaim(Engine.connect(), later)
        assert made["ended"] in removed
        assert made["me"] not in removed and made["running"] not in removed
        assert reclaim(Engine.connect(), datetime.now(timezone.utc) - timedelta(hours=1)) == []  # none older
        left = {c.id for c in docker_client.containers.list(all=True, filters={"label": TEST_LABEL})}
        assert made["ended"] not in left and {made["me"], made["running"]} <= left
    finally:
        sleeper.kill()
        sleeper.wait()
        for container_id in made.values():
            try:
                docker_client.containers.get(container_id).remove(force=True)
            except docker.errors.NotFound:
                pass


@pytest.mark.engine
@pytest.mark.registry
def test_a_smoke_container_a_killed_nightly_left_is_removed_by_the_next(
        site: Site, tmp_path: Path, docker_client: docker.DockerClient) -> None:
    original = slow_smoke(site)
    process = start_nightly(site, tmp_path)
    wait_until(lambda: bool(smoke_containers(docker_client, site, status="running")), process, tmp_path,
               "a running smoke container")
    process.kill()
    process.wait(timeout=60)
    left = smoke_containers(docker_client, site)
    assert left, output_of(tmp_path)
    time.sleep(1.1)
    (site.templates / "vendors" / "cpu.Dockerfile.j2").write_text(original)
    result = CliRunner().invoke(nightly_command, [*site.cli_args(), *ONLY_DEBIAN])
    assert result.exit_code == 0, result.output
    assert smoke_containers(docker_client, site) == []
