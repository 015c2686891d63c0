"""A development session in an image: the line `accel-images run` starts, and the
`.devcontainer/devcontainer.json` of `accel-images devcontainer`, from the same Launch
(accel_images.host.launch) and the same Docker flags (accel_images.host.runtimes.docker).

A session adds to what every container of the vendor needs (its devices and session settings, the
same as the line `recommend` prints: accel_images.host.launch.launch) the host user's UID:GID (so files
written to the workspace belong to whoever started the session; the image's own user has the matrix's
UID, 1000, which is often but not always the host's), the current directory at /workspace, the images'
working directory, and the user's git identity.

A devcontainer is started by VS Code or the devcontainers CLI, which replace the image's entry point
with their own (`overrideCommand` defaults to true for an image: devcontainer.json reference; the CLI
passes `--entrypoint /bin/sh`). With `overrideCommand: false` the CLI would exec the image's entry point
and CMD, and the CMD, an interactive bash, ends at once without a terminal. So the guard runs as the
`postStartCommand` of every start instead, where its refusal is the start's failure, in the CLI's output.
Neither does the CLI copy the user's ~/.gitconfig (the VS Code extension does): the
`initializeCommand`, run on the host before the container starts, writes the user's name and e-mail to a
file under ~/.config/accel-images, mounted read-only and included by git through GIT_CONFIG_* (a
missing include is no error); only the identity travels, not signing keys or credential helpers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accel_images.host.launch import WORKSPACE, Launch, launch
from accel_images.host.runtimes import docker
from accel_images.model.variant import GUARD_PATH

DEVCONTAINER_FILE = Path(".devcontainer") / "devcontainer.json"
IDENTITY_DIR = ".config/accel-images/devcontainer-git"
"""Under the host user's home: the git identity the devcontainer's initializeCommand writes."""
IDENTITY_MOUNT = "/etc/accel-images/host-git"
IDENTITY_SCRIPT = (Path(__file__).parent / "git-identity.sh").read_text()
"""The initializeCommand's shell program (git-identity.sh, shellcheck clean in `make lint`), passed inline with
IDENTITY_DIR as its argument: devcontainer.json stays a file of its own, with no script beside it."""


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


def session_launch(session: Session, dev_root: Path = Path("/")) -> Launch:
    return replace(launch(session.image, session.vendor, dev_root), user=(session.uid, session.gid),
                   workspace=session.workspace, command=session.command, interactive=session.interactive)


def container_flags(vendor: str, dev_root: Path = Path("/")) -> list[str]:
    """Device options, the IPC mode and the vendor's session settings: what both `run` and a devcontainer pass."""
    return docker.container_flags(launch("", vendor, dev_root))


def docker_run_argv(session: Session, dev_root: Path = Path("/")) -> list[str]:
    """`docker run --rm -it <device and session flags> --user UID:GID -v CWD:/workspace -w /workspace IMAGE [CMD]`."""
    return list(docker.render(session_launch(session, dev_root)).argv or ())


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
        "postStartCommand": [GUARD_PATH, "true"],
        "initializeCommand": ["sh", "-c", IDENTITY_SCRIPT, "git-identity", IDENTITY_DIR],
        "mounts": [f"source=${{localEnv:HOME}}/{IDENTITY_DIR},target={IDENTITY_MOUNT},type=bind,readonly"],
        "containerEnv": {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "include.path",
                         "GIT_CONFIG_VALUE_0": f"{IDENTITY_MOUNT}/config"},
    }


def devcontainer_text(config: dict[str, Any]) -> str:
    return json.dumps(config, indent=2) + "\n"
