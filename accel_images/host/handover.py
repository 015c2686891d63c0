"""An image in Docker's store, handed to Podman's: the two engines keep separate stores.

`accel-images build` builds through the Docker Engine API, so its images are in Docker's store; Podman
does not see them, and its `run` then treats the name as one to pull ("short-name ... did not resolve",
or a Docker Hub lookup). `docker save -o FILE IMAGE` and `podman load -i FILE` copy the image with its
name (podman-load(1), docker-archive; V). Through a file rather than a pipe: fed a pipe, Podman first
copies the stream to disk, and the CPU test image took 163 s that way against 60 s from a file in
/dev/shm (observed; tests/integration/test_runtimes_integration.py loads the same way). `run --engine podman`
hands the image over, and says so, before it starts the container; with `--print` it names the commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from accel_images.errors import EngineError
from accel_images.host.runtimes import shell_join

PROBE_TIMEOUT_S = 60
"""`podman image exists` and `docker image inspect` answer at once; a hung engine must not hang `run`."""
COPY_TIMEOUT_S = 1800
"""Saving and loading a CUDA image (10-20 GB) takes minutes, not hours."""


def docker_only_size(ref: str) -> int | None:
    """The size of `ref` where Docker's store holds it and Podman's does not; None otherwise, or where either
    command is missing or Docker does not answer (Podman then says itself what it cannot find)."""
    podman, docker = shutil.which("podman"), shutil.which("docker")
    if podman is None or docker is None or _answers([podman, "image", "exists", ref]) is not None:
        return None
    size = _answers([docker, "image", "inspect", "--format", "{{.Size}}", ref])
    return int(size) if size is not None and size.isdigit() else 0 if size is not None else None


def _answers(argv: list[str]) -> str | None:
    """What the command printed, where it exits 0 within PROBE_TIMEOUT_S; None otherwise."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def archive_name(ref: str) -> str:
    """`accel-images/pytorch:TAG` -> `accel-images+pytorch+TAG.tar`: a file name that says what it holds."""
    return re.sub(r"[/:@]", "+", ref) + ".tar"


def handover_command(ref: str, archive: str) -> str:
    """The shell line that hands `ref` over through `archive`, as a person would run it."""
    return f"{shell_join(['docker', 'save', '-o', archive, ref])} && {shell_join(['podman', 'load', '-i', archive])}"


def scratch_dir(size: int) -> str | None:
    """/dev/shm where it has room for the archive twice over (memory is faster than disk), else the default."""
    try:
        shm = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if size and shm.f_bavail * shm.f_frsize > 2 * size else None


def move_to_podman(ref: str, size: int, said: Callable[[str], None]) -> None:
    """Save `ref` from Docker, load it into Podman, through a file removed afterwards; `said` is told the
    commands first. One line (EngineError) when either side fails."""
    docker, podman = shutil.which("docker") or "docker", shutil.which("podman") or "podman"
    with tempfile.TemporaryDirectory(dir=scratch_dir(size), prefix="accel-images-podman-") as scratch:
        archive = str(Path(scratch) / archive_name(ref))
        said(handover_command(ref, archive))
        for name, argv in (("docker save", [docker, "save", "-o", archive, ref]),
                           ("podman load", [podman, "load", "-i", archive])):
            try:
                done = subprocess.run(argv, capture_output=True, timeout=COPY_TIMEOUT_S, check=False)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise EngineError(f"cannot hand {ref} to Podman: {name}: {error}") from None
            if done.returncode != 0:
                message = " ".join(done.stderr.decode("utf-8", "replace").split()) or f"exit status {done.returncode}"
                raise EngineError(f"cannot hand {ref} to Podman: {name}: {message}")
