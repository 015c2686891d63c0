"""`apptainer run docker://IMAGE`: Apptainer (and SingularityCE, same flags) from the image's registry.

Apptainer's defaults do much of what Docker needs flags for (user guide, V unless marked):
- "By default, Apptainer makes all host devices available in the container": /dev/dri, /dev/kfd and
  /dev/accel need nothing; `--nv` / `--rocm` also bind the host's driver libraries (the vendor's
  apptainer_flags);
- it runs as the host user with the host's groups ("Any USER statement in a Dockerfile will be
  ignored"), so the device groups need no --group-add and no --user;
- $HOME, /tmp and $PWD are bound from the host; the image itself is read-only;
- no IPC namespace of its own and the host's /dev/shm, so nothing for shared memory; the host's
  ulimits and network apply.
`run` executes the image's ENTRYPOINT, so the guard runs ("If the Docker container only has an
ENTRYPOINT - that ENTRYPOINT is run, with any arguments appended"); `exec` would skip it.
"""

from __future__ import annotations

import shlex

from accel_images.host.launch import WORKSPACE, Launch
from accel_images.host.runtimes import Rendered


def render(launch: Launch) -> Rendered:
    argv = ("apptainer", "run", *launch.devices.apptainer_flags, *env_flags(launch), *bind_flags(launch),
            *launch.extras.engine_args, f"docker://{launch.pinned_image}", *launch.command)
    return Rendered("apptainer", shlex.join(argv) + "\n", None, notes(launch))


def env_flags(launch: Launch) -> list[str]:
    flags: list[str] = []
    for name, value in (*launch.devices.environment, *launch.extras.environment):
        flags += ["--env", f"{name}={value}"]
    return flags


def bind_flags(launch: Launch) -> list[str]:
    """`--bind src[:dest[:opts]]` ("Mount options ('opts') may be specified as 'ro' (read-only) or 'rw'")."""
    flags: list[str] = []
    if launch.workspace is not None:
        flags += ["--bind", f"{launch.workspace}:{WORKSPACE}", "--pwd", WORKSPACE]
    for mount in launch.extras.mounts:
        flags += ["--bind", mount.spec()]
    return flags


def notes(launch: Launch) -> tuple[str, ...]:
    options, settings, extras = launch.devices, launch.settings, launch.extras
    found: list[str] = []
    if options.runtime:
        found.append(f"no `--runtime {options.runtime}` under Apptainer: the host's device nodes are shown as they are")
    capabilities = (*options.cap_add, *settings.cap_add)
    if capabilities:
        found.append(f"{', '.join(capabilities)} not added: Apptainer runs with your own privileges")
    if settings.ulimits:
        found.append("ulimits " + " ".join(f"{n}={v}" for n, v in settings.ulimits) + " not set: your own apply")
    if extras.ports:
        found.append("ports need no publishing: the container shares the host's network")
    if extras.name:
        found.append(f"--name {extras.name} has no meaning for `apptainer run`")
    return tuple(found)
