"""How one image runs on this host: the one model every runtime's renderer reads (accel_images.host.runtimes).

Each fact has one source:
- the devices: the vendor's DeviceOptions (its module's `device_options`), with this host's group ids
  of the device files; they also say how Podman, Apptainer, Kubernetes and Slurm name the devices;
- shared memory: every container gets the host IPC namespace unless the vendor already asks for it:
  DataLoader workers share tensors through /dev/shm, whose Docker default of 64 MB fails with "bus
  error ... insufficient shared memory" (compat-facts §8.23). `ipc_mode` says which it is, because
  runtimes without an IPC option translate the two differently (Kubernetes: the vendor's own request
  is `hostIPC`, the shared-memory rule a memory-backed /dev/shm);
- the vendor's SessionSettings (NVIDIA's ulimits, AMD's SYS_PTRACE, Habana's host network and memlock):
  every Launch has them, so the line `recommend` prints and the one `run --print` prints name the same
  container (one source: `launch`);
- a development session (`run`, devcontainer) adds the host user's UID:GID, this directory at
  /workspace, the user's git identity and what the user passes through (`-v`, `-p`, `-e`, `--name`,
  raw engine arguments); `recommend`'s line has none of these;
- the image's own user (the matrix's `user`): what a cluster runs it as, where no host user exists;
- training on several nodes (`--nodes`): a Cluster (accel_images.host.cluster), which every renderer reads.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from accel_images import vendors
from accel_images.errors import InputError
from accel_images.host.cluster import Cluster
from accel_images.model.devices import DeviceOptions, SessionSettings
from accel_images.plan.matrix import User

if TYPE_CHECKING:
    from accel_images.model.hostinfo import HostInfo

WORKSPACE = "/workspace"
"""The images' working directory, where a session mounts the host's directory."""
ENVIRONMENT_GID = 100
"""The group that owns the image's Python environment, group-writable with setgid directories (the
templates' `chown -R "${USER_UID}:100" /opt/venv`, as jupyter/docker-stacks' fix-permissions does for
NB_GID 100, `users`): a session running as the host user joins it, so `pip install` works in the image."""
GIT_IDENTITY_KEYS = (("user.name", ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")),
                     ("user.email", ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")))
"""git config keys -> the variables that carry them into a container (git-commit-tree(1), "Commit Information")."""


@dataclass(frozen=True)
class Mount:
    """`-v SRC:DST[:ro|rw]`: a host path in the container."""

    source: str
    target: str
    read_only: bool = False

    @classmethod
    def parse(cls, text: str) -> Mount:
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise InputError(f"{text!r} is not SRC:DST[:ro|rw]", field="--volume")
        if not parts[1].startswith("/"):
            raise InputError(f"{text!r}: the container path {parts[1]!r} must be absolute", field="--volume")
        source = parts[0] if parts[0].startswith("/") else str(Path(parts[0]).resolve())
        return cls(source, parts[1], len(parts) == 3 and parts[2] == "ro")

    def spec(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


_PORT = re.compile(r"(?:(?P<ip>[0-9.]+|\[[0-9a-fA-F:]+\]):)?(?:(?P<host>\d+):)?"
                   r"(?P<container>\d+)(?:/(?P<proto>tcp|udp))?")


@dataclass(frozen=True)
class Port:
    """`-p [IP:][HOST:]CONTAINER[/PROTO]`: a container port published on the host."""

    spec: str
    container: int
    protocol: str = "tcp"

    @classmethod
    def parse(cls, text: str) -> Port:
        match = _PORT.fullmatch(text)
        if match is None or not 0 < int(match["container"]) < 65536:
            raise InputError(f"{text!r} is not [IP:][HOST:]CONTAINER[/tcp|udp]", field="--publish")
        return cls(text, int(match["container"]), match["proto"] or "tcp")


def parse_env(text: str) -> tuple[str, str]:
    """`-e NAME=VALUE`."""
    name, equals, value = text.partition("=")
    if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise InputError(f"{text!r} is not NAME=VALUE", field="--env")
    return name, value


@dataclass(frozen=True)
class Extras:
    """What the user passes through to the container, in the engine-neutral form every renderer reads."""

    mounts: tuple[Mount, ...] = ()
    ports: tuple[Port, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    name: str | None = None
    engine_args: tuple[str, ...] = ()
    """Raw arguments for the engine's own command line, placed before the image; command lines only."""


@dataclass(frozen=True)
class Launch:
    """One image on this host, as every runtime needs to know it."""

    image: str
    vendor: str
    devices: DeviceOptions
    """The vendor's own options, as it states them (ipc_mode too: see `ipc_mode`)."""
    settings: SessionSettings = field(default_factory=SessionSettings)
    user: tuple[int, int] | None = None
    """The host user's UID:GID the container runs as; None: the image's own user."""
    image_user: tuple[int, int] = (User().uid, User().gid)
    """The image's own user: the matrix's (a choice carries it), else the matrix's default."""
    workspace: Path | None = None
    command: tuple[str, ...] = ()
    interactive: bool = True
    """Standard input is a terminal (`-it`); otherwise `-i` alone (a pipe or CI has no terminal to give)."""
    extras: Extras = field(default_factory=Extras)
    identity: tuple[tuple[str, str], ...] = ()
    """The user's git identity as environment variables (GIT_AUTHOR_NAME, ...)."""
    digest: str | None = None
    """The image's manifest digest, where known (a registry's catalogue): what a cluster should pull."""
    rootless: bool = False
    """The engine runs as a user other than root (rootless Podman): groups and user ids map differently."""
    home: str | None = None
    """The image user's home (`/home/<matrix user>`): a session's HOME where an engine would set another."""
    device_count: int | None = None
    """How many of the vendor's accelerators the host description counts (None: none counted): what a
    cluster form asks its scheduler for (Slurm's GRES, a Pod's limits)."""
    local: bool = False
    """The image is a build of this host, in its engine's store (accel_images.host.sources): every runtime is
    told never to pull it, since its name without a registry is a Docker Hub name."""
    cluster: Cluster | None = None
    """N nodes of this image (`--nodes`): each runtime's many-node form; None or one node: the one-node form."""

    @property
    def environment_groups(self) -> tuple[int, ...]:
        """Supplementary groups a host user needs in the image: the Python environment's, unless it is their
        group already or they are root (who writes anyway)."""
        if self.user is None or self.user[0] == 0 or self.user[1] == ENVIRONMENT_GID:
            return ()
        return (ENVIRONMENT_GID,)

    @property
    def ipc_mode(self) -> str:
        """The vendor's IPC mode, else the host's for /dev/shm (see the module docstring)."""
        return self.devices.ipc_mode or "host"

    @property
    def vendor_wants_host_ipc(self) -> bool:
        return self.devices.ipc_mode == "host"

    @property
    def pinned_image(self) -> str:
        """`repository@sha256:...` where the digest is known, else the reference as given."""
        if not self.digest:
            return self.image
        repository, _, tag = self.image.rpartition(":")
        return f"{repository if repository and '/' not in tag else self.image}@{self.digest}"


def launch(image: str, vendor: str, dev_root: Path = Path("/"), *, host: HostInfo | None = None) -> Launch:
    """The Launch of `image` for `vendor`: its device options read against `dev_root` (a fake tree in tests)
    and, where `host` describes the node it is for (recommend's --host-json), what that description decides;
    and its session settings, the one source of what `recommend` prints and `run` starts (a line without
    the vendor's `--network host` or `--cap-add SYS_PTRACE` would be another container than the one `run`
    starts). The rest (user, workspace, command, what is passed through) the caller sets with
    dataclasses.replace."""
    options = vendors.device_options(vendor, dev_root, host)
    settings = vendors.get(vendor).session_settings()
    settings = replace(settings, cap_add=tuple(c for c in settings.cap_add if c not in options.cap_add))
    return Launch(image, vendor, options, settings)


def git_identity(cwd: Path | None = None) -> tuple[tuple[str, str], ...]:
    """The user's git identity (`git config user.name` / `user.email`, as git reads them for `cwd`) as the
    variables git inside the container reads: a commit there is the user's, with nothing mounted and none
    of the host's other settings (signing keys, credential helpers) carried into a place they do not work."""
    git = shutil.which("git")
    if git is None:
        return ()
    found: list[tuple[str, str]] = []
    for key, names in GIT_IDENTITY_KEYS:
        try:
            done = subprocess.run([git, "config", "--get", key], cwd=cwd, capture_output=True, text=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ()
        value = done.stdout.strip()
        if done.returncode == 0 and value:
            found += [(name, value) for name in names]
    return tuple(found)

