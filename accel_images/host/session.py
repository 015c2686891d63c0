"""A development session in an image: the `docker run` line of `accel-images run`, and the
`.devcontainer/devcontainer.json` of `accel-images devcontainer`, from the same facts.

What a session adds to the device options every container of the vendor needs (accel_images.model.devices,
from the vendor module):
- the host IPC namespace for every vendor: DataLoader workers share tensors through /dev/shm, whose
  Docker default of 64 MB fails with "bus error ... insufficient shared memory" (compat-facts §8.23);
- what the vendor recommends for interactive work on top (SessionSettings: NVIDIA's ulimits for its
  PyTorch containers, AMD's SYS_PTRACE for debuggers), from the vendor module, with its source;
- the host user's UID:GID, so files written to the workspace belong to whoever started the session
  (the image's own user has the matrix's UID, 1000, which is often but not always the host's);
- the current directory mounted at /workspace, the images' working directory.

The line is run with the docker command itself rather than the SDK: an interactive session needs
the CLI's terminal handling (raw mode, resizes, detach keys), and the person sees the exact line
`--print` shows.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accel_images import vendors

WORKSPACE = "/workspace"
DEVCONTAINER_FILE = Path(".devcontainer") / "devcontainer.json"


@dataclass(frozen=True)
class Session:
    """One development container to start."""

    image: str
    vendor: str
    workspace: Path
    uid: int
    gid: int
    command: tuple[str, ...] = ()
    interactive: bool = True
    """Standard input is a terminal: `-it`; otherwise `-i` alone (a pipe or CI has no terminal to give)."""


def container_flags(vendor: str, dev_root: Path = Path("/")) -> list[str]:
    """Device options, host IPC, and the vendor's session settings: what both `run` and a devcontainer pass."""
    options = vendors.device_options(vendor, dev_root)
    if options.ipc_mode is None:
        options = replace(options, ipc_mode="host")
    settings = vendors.get(vendor).session_settings()
    settings = replace(settings, cap_add=tuple(c for c in settings.cap_add if c not in options.cap_add))
    return [*options.cli_flags(), *settings.flags()]


def docker_run_argv(session: Session, dev_root: Path = Path("/")) -> list[str]:
    """`docker run --rm -it <device and session flags> --user UID:GID -v CWD:/workspace -w /workspace IMAGE [CMD]`."""
    return ["docker", "run", "--rm", "-it" if session.interactive else "-i",
            *container_flags(session.vendor, dev_root),
            "--user", f"{session.uid}:{session.gid}",
            "-v", f"{session.workspace}:{WORKSPACE}", "-w", WORKSPACE,
            session.image, *session.command]


def docker_run_line(session: Session, dev_root: Path = Path("/")) -> str:
    return shlex.join(docker_run_argv(session, dev_root))


def devcontainer(image: str, vendor: str, user: str, dev_root: Path = Path("/")) -> dict[str, Any]:
    """devcontainer.json for `image` (https://containers.dev/implementors/json_reference/).

    The host user is not named: `updateRemoteUserUID` (the default on Linux) gives the image's user
    `remoteUser` the UID/GID of whoever opens the folder, which is what `--user` does for `run`.
    """
    return {
        "name": f"accel-images {image.rsplit(':', 1)[-1]}",
        "image": image,
        "runArgs": container_flags(vendor, dev_root),
        "remoteUser": user,
        "containerUser": user,
        "updateRemoteUserUID": True,
        "workspaceMount": f"source=${{localWorkspaceFolder}},target={WORKSPACE},type=bind",
        "workspaceFolder": WORKSPACE,
    }


def devcontainer_text(config: dict[str, Any]) -> str:
    return json.dumps(config, indent=2) + "\n"
