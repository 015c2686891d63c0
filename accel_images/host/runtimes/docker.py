"""`docker run`: the vendor's device options as Docker's flags, read from the same DeviceOptions the smoke
run hands the SDK (accel_images/model/devices.py), then the session's part.

    docker run --rm -it [--pull never] <devices> [--ipc host] <session settings> [--user UID:GID]
               [--mount type=bind,source=CWD,target=/workspace -w /workspace]
               [-v/-p/-e/--name passed through] [raw engine args] IMAGE [COMMAND...]

On N nodes (`--nodes`), the line to run on each: the same container with the RDMA flags and the host's
network, running torchrun (accel_images.host.runtimes.nodes).

The command is run with the docker CLI rather than the SDK: an interactive session needs the CLI's
terminal handling (raw mode, resizes, detach keys), and the person sees the exact line `--print` shows.
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace

from accel_images.host.launch import WORKSPACE, Launch
from accel_images.host.runtimes import Rendered, shell_join
from accel_images.host.runtimes.nodes import many_nodes, on_each_node


def render(launch: Launch) -> Rendered:
    if many_nodes(launch):
        return on_each_node(launch, "docker", lambda node: (docker_argv(node), ()))
    argv = docker_argv(launch)
    return Rendered("docker", shell_join(argv) + "\n", argv)


def docker_argv(launch: Launch) -> tuple[str, ...]:
    return ("docker", "run", "--rm", "-it" if launch.interactive else "-i", *pull_flags(launch),
            *container_flags(launch), *session_flags(launch), *passed_through(launch), launch.image, *launch.command)


def pull_flags(launch: Launch) -> list[str]:
    """`--pull never` for a build of this host: its name has no registry, and docker-run(1)'s default
    (`missing`) would look it up on Docker Hub when the local store lacks it. Podman takes the same flag."""
    return ["--pull", "never"] if launch.local else []


def container_flags(launch: Launch) -> list[str]:
    """Device options with the IPC mode, and the session settings: what a devcontainer's runArgs hold too."""
    return [*replace(launch.devices, ipc_mode=launch.ipc_mode).cli_flags(), *launch.settings.flags()]


def session_flags(launch: Launch) -> list[str]:
    flags: list[str] = []
    if launch.user is not None:
        flags += ["--user", f"{launch.user[0]}:{launch.user[1]}"]
    for gid in launch.environment_groups:
        flags += ["--group-add", str(gid)]
    return flags + workspace_flags(launch)


def workspace_flags(launch: Launch) -> list[str]:
    """The workspace at /workspace, its working directory. With `--mount`, not `-v CWD:/workspace`: `-v` splits
    on `:`, so a directory whose path holds one (`~/proj:v2`) fails ("invalid mode"; Podman 4.3.1: "invalid
    option type", observed). `--mount` is one CSV record (docker/cli opts/mount.go reads it with Go's
    encoding/csv; V), so a path with a comma or a quote is quoted as CSV; Podman 4.3.1 reads it alike (observed)."""
    if launch.workspace is None:
        return []
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow(["type=bind", f"source={launch.workspace}", f"target={WORKSPACE}"])
    return ["--mount", line.getvalue(), "-w", WORKSPACE]


def passed_through(launch: Launch) -> list[str]:
    """-v, -p, -e (the git identity first, so the user's own -e wins), --name, then raw engine arguments;
    Podman takes the same flags (podman-run(1) mirrors docker-run's)."""
    extras = launch.extras
    flags: list[str] = []
    for mount in extras.mounts:
        flags += ["-v", mount.spec()]
    for port in extras.ports:
        flags += ["-p", port.spec]
    for name, value in (*launch.identity, *extras.environment):
        flags += ["-e", f"{name}={value}"]
    if extras.name:
        flags += ["--name", extras.name]
    return flags + list(extras.engine_args)
