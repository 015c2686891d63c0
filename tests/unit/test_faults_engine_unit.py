"""The Docker engine failing under the builder: missing socket, stopped daemon, a daemon killed
mid-build, and a base image withdrawn upstream. Each ends in one clear line, never a traceback.

Daemons are stopped and killed only in a disposable dockerd of the test's own
(tests/faultproxy.py); the shared one is only read from.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_faults_engine.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path



ROOT = Path(__file__).resolve().parents[2]
CPU_MATRIX = ROOT / "tests" / "matrices" / "cpu-debian.yaml"


def cli(*args: str, docker_host: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_HOST": docker_host}
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("accel-images: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_missing_socket_is_one_line_with_what_to_do(tmp_path: Path) -> None:
    host = f"unix://{tmp_path}/no-such/docker.sock"
    result = cli("build", "--matrix", str(CPU_MATRIX), "--no-smoke", "--state-dir", str(tmp_path / "s"),
                 docker_host=host)
    assert result.returncode == 3, result.stderr
    line = one_error_line(result)
    assert str(tmp_path / "no-such" / "docker.sock") in line
    assert "start it" in line and "DOCKER_HOST" in line


def test_newer_bases_come_from_the_knowledge_base() -> None:
    from accel_images.builder.bases import newer_bases
    from accel_images.kb.compat import load_kb
    from accel_images.plan.variants import make_variant

    kb = load_kb()
    cuda = make_variant(kb, "cuda", "12.6", "2.14", "3.12", "ubuntu24.04", "devel")
    newer = newer_bases(kb, cuda)
    assert newer[0] == "nvidia/cuda:13.2.1-devel-ubuntu24.04"
    assert "nvidia/cuda:12.6.3-devel-ubuntu24.04" not in newer
    cpu = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    assert newer_bases(kb, cpu) == []
