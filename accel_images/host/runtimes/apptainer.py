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
On N nodes (`--nodes`): `srun --nodes=N ... apptainer run ... torchrun ...` inside a Slurm allocation, one task
per node, the rendezvous at the allocation's first node (accel_images.host.runtimes.slurm): Apptainer shares
the node's network and devices, so the RDMA fabric needs nothing passed.
`run` executes the image's ENTRYPOINT, so the guard runs ("If the Docker container only has an
ENTRYPOINT - that ENTRYPOINT is run, with any arguments appended"); `exec` would skip it.
"""

from __future__ import annotations

from accel_images.host.launch import WORKSPACE, Launch
from accel_images.host.runtimes import Rendered, refuse_separators, shell_join, slurm
from accel_images.host.runtimes.nodes import many_nodes
from accel_images.host.runtimes.nodes import notes as nodes_notes

ENV_PREFIX = "APPTAINERENV_"
"""`APPTAINERENV_NAME=VALUE` in the host's environment sets NAME in the container (Apptainer user guide,
"Environment and Metadata"; V): the form for a value `--env` would split at its commas."""


def render(launch: Launch) -> Rendered:
    if many_nodes(launch):
        argv = apptainer_argv(launch, slurm.allocation_flags(launch), tuple(slurm.rendezvous(launch)))
        return Rendered("apptainer", slurm.header(launch) + shell_join(argv) + "\n", None,
                        (*nodes_notes(launch, "the allocation's first node"), *slurm.fabric_note(launch),
                         *notes(launch)))
    return Rendered("apptainer", shell_join(apptainer_argv(launch, None, launch.command)) + "\n", None, notes(launch))


def apptainer_argv(launch: Launch, srun_flags: list[str] | None, command: tuple[str, ...]) -> tuple[str, ...]:
    """`[env APPTAINERENV_...] [srun FLAGS] apptainer run FLAGS IMAGE COMMAND`: under srun on N nodes, one task per
    node (srun passes the environment on: its --export defaults to ALL)."""
    prefix, flags = env_forms(launch)
    return (*(["env", *prefix] if prefix else []), *(["srun", *srun_flags] if srun_flags is not None else []),
            "apptainer", "run", *launch.devices.apptainer_flags, *flags, *bind_flags(launch),
            *launch.extras.engine_args, image_uri(launch), *command)


def image_uri(launch: Launch) -> str:
    """`docker://REF` from its registry; a build of this host from the local Docker daemon's store
    (`docker-daemon://`, Apptainer's source for it), so its name is never looked up on Docker Hub."""
    if launch.local:
        return f"docker-daemon://{launch.image}"
    return f"docker://{launch.pinned_image}"


def env_forms(launch: Launch) -> tuple[list[str], list[str]]:
    """(`APPTAINERENV_NAME=VALUE` words for `env`, `--env NAME=VALUE` flags). `--env` reads a comma-separated
    list (`--env A=1,B=2`; I), so a value with a comma goes through the environment instead."""
    prefix: list[str] = []
    flags: list[str] = []
    for name, value in (*launch.devices.environment, *launch.extras.environment):
        if "," in value:
            prefix.append(f"{ENV_PREFIX}{name}={value}")
        else:
            flags += ["--env", f"{name}={value}"]
    return prefix, flags


def bind_flags(launch: Launch) -> list[str]:
    """`--bind src[:dest[:opts]]` ("Mount options ('opts') may be specified as 'ro' (read-only) or 'rw'"); a
    comma separates binds and a colon the parts, with no escape for either: a path holding one is refused."""
    why = "--bind src[:dest[:opts]][,src...]"
    flags: list[str] = []
    if launch.workspace is not None:
        refuse_separators(str(launch.workspace), ",:", "apptainer", "--workspace", why)
        flags += ["--bind", f"{launch.workspace}:{WORKSPACE}", "--pwd", WORKSPACE]
    for mount in launch.extras.mounts:
        for path in (mount.source, mount.target):
            refuse_separators(path, ",:", "apptainer", "--volume", why)
        flags += ["--bind", mount.spec()]
    return flags


def notes(launch: Launch) -> tuple[str, ...]:
    options, settings, extras = launch.devices, launch.settings, launch.extras
    found: list[str] = []
    if launch.local:
        found.append("docker-daemon://: a build of this host, read from its Docker engine, never pulled")
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
