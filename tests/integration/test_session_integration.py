"""`accel-images run` and `devcontainer`: the generated arguments per vendor, and a real session.

The per-vendor lines are checked exactly, against a fake /dev tree whose device files belong to
groups 44 and 109 (as root; elsewhere the two groups the user is in). The real session runs the CPU
image that the build tests make, as a user id that exists neither on the host nor in the image.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_session.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUITE_IMAGE as CPU_IMAGE   # published_build's, a name only this run gives it


# ---- for real -------------------------------------------------------------------------------------

STRANGER = 4321


def as_stranger(workspace: Path) -> list[str]:
    """Run as STRANGER with the docker group (the socket's), when this is root; as oneself otherwise."""
    if os.geteuid() != 0:
        return []
    os.chown(workspace, STRANGER, STRANGER)
    socket_gid = os.stat("/var/run/docker.sock").st_gid
    return ["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}", f"--groups={socket_gid}"]


@pytest.mark.engine
def test_run_executes_in_workspace_as_the_host_user(tmp_path: Path, docker_client, published_build: dict) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    prefix = as_stranger(workspace)
    uid = STRANGER if prefix else os.getuid()
    cli = shutil.which("accel-images", path=str(Path(sys.executable).parent)) or "accel-images"
    result = subprocess.run([*prefix, cli, "run", CPU_IMAGE, "--", "sh", "-c",
                             "id -u > out.txt && pwd >> out.txt && python -c 'import torch' && echo torch >> out.txt"],
                            cwd=workspace, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HOME": str(workspace)}, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr
    made = workspace / "out.txt"
    assert made.read_text().split() == [str(uid), "/workspace", "torch"]
    assert made.stat().st_uid == uid


@pytest.mark.engine
def test_run_mounts_a_workspace_whose_path_holds_a_colon_and_a_comma(tmp_path: Path, docker_client,
                                                                      base_images) -> None:
    """`-v PATH:/workspace` reads `:v2` as a mode ("invalid mode"); `--mount` takes the path as it is."""
    workspace = tmp_path / "proj:v2, final"
    workspace.mkdir()
    (workspace / "marker").write_text("here\n")
    cli = shutil.which("accel-images", path=str(Path(sys.executable).parent)) or "accel-images"
    result = subprocess.run([cli, "run", base_images.python, "--vendor", "cpu", "--", "cat", "/workspace/marker"],
                            cwd=workspace, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "here\n"
