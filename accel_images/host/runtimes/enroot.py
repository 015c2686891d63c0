"""`srun --container-image=...`: Enroot through Slurm's Pyxis plug-in (NVIDIA/pyxis README, `srun --help`).

- The image is an Enroot URI, `[REGISTRY#]IMAGE[:TAG]`: the `#` separates the registry, and every
  Enroot release parses that form; digests only from Enroot 4.0 (its docker.sh), so the tag is used.
- Pyxis does not run the image's entry point by default (`--container-entrypoint` turns it on, and
  sites can disable entry points), so the command starts with the entry point's own words (the guard).
- Devices: Slurm allocates them (the vendor's GRES, `--gres=NAME:N` for the N devices the host
  description counts: Slurm gres.html, V) and confines the job to them; Enroot binds the host's /dev
  (its 10-system.fstab; O), and for NVIDIA its 98-nvidia hook reads the image's NVIDIA_VISIBLE_DEVICES
  (set by the CUDA images) and injects the driver (O).
- Environment: "all exported host environment variables are set in the container" (Pyxis, V; its
  tests pass NVIDIA_VISIBLE_DEVICES this way), so the line starts with `env NAME=VALUE`.
- The filesystem is read-only unless `--container-writable`; the user is the submitting user.
- On N nodes (`--nodes`): one srun task per node running torchrun, the node's devices asked for by the host
  description's count, the rendezvous at the allocation's first node (accel_images.host.runtimes.slurm).
  The job shares the node's network and devices (/dev/infiniband included), and its limits apply.
"""

from __future__ import annotations

import re

from accel_images.host.launch import WORKSPACE, Launch
from accel_images.host.runtimes import Rendered, refuse_separators, shell_join, slurm
from accel_images.host.runtimes.nodes import many_nodes
from accel_images.host.runtimes.nodes import notes as nodes_notes
from accel_images.model.variant import ENTRYPOINT


def render(launch: Launch) -> Rendered:
    if many_nodes(launch):
        argv = srun_argv(launch, slurm.allocation_flags(launch), tuple(slurm.rendezvous(launch)))
        return Rendered("enroot", slurm.header(launch) + shell_join(argv) + "\n", None,
                        (*nodes_notes(launch, "the allocation's first node"), *slurm.fabric_note(launch),
                         *notes(launch)))
    argv = srun_argv(launch, [*(["--pty"] if not launch.command else []), *resource_flags(launch)],
                     launch.command or ("bash",))
    return Rendered("enroot", shell_join(argv) + "\n", None, notes(launch))


def srun_argv(launch: Launch, srun_flags: list[str], command: tuple[str, ...]) -> tuple[str, ...]:
    """`[env NAME=VALUE...] srun FLAGS --container-image=... [mounts] [name] ENTRYPOINT COMMAND`."""
    environment = [f"{name}={value}" for name, value in (*launch.devices.environment, *launch.extras.environment)]
    return (*(["env", *environment] if environment else []), "srun", *srun_flags,
            f"--container-image={image_source(launch)}", *mount_flags(launch),
            *([f"--container-name={launch.extras.name}"] if launch.extras.name else []),
            *launch.extras.engine_args, *ENTRYPOINT, *command)


def enroot_uri(image: str) -> str:
    """`ghcr.io/acme/x:tag` -> `ghcr.io#acme/x:tag`; a name without a registry host stays as it is."""
    first, slash, rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def image_source(launch: Launch) -> str:
    """The image's Enroot URI; a build of this host as the squashfs file `squashfs_of` makes of it (notes say
    how), since a node has no copy of this host's engine store and its name would be a Docker Hub one."""
    return f"./{squashfs_name(launch.image)}" if launch.local else enroot_uri(launch.image)


def squashfs_name(image: str) -> str:
    """`accel-images/pytorch:TAG` -> `accel-images+pytorch+TAG.sqsh`, Enroot's own naming of imported images."""
    return re.sub(r"[/:@]", "+", image) + ".sqsh"


def resource_flags(launch: Launch) -> list[str]:
    """`--gres=NAME:N`, N the host description's count of the vendor's devices (Slurm gres.html: "--gres=gpu:2";
    V); 1 where it counts none, as the notes say."""
    gres = launch.devices.slurm_gres
    return [f"--gres={gres}:{launch.device_count or 1}"] if gres else []


def mount_flags(launch: Launch) -> list[str]:
    """`--container-mounts=SRC:DST[:FLAGS][,SRC:DST...]` and `--container-workdir=PATH`. A comma separates the
    mounts and a colon a mount's parts, with no escape for either (Pyxis README): a path holding one is refused."""
    why = "--container-mounts=SRC:DST[:FLAGS][,SRC:DST...]"
    mounts: list[str] = []
    if launch.workspace is not None:
        mounts.append(f"{refuse_separators(str(launch.workspace), ',:', 'enroot', '--workspace', why)}:{WORKSPACE}")
    for mount in launch.extras.mounts:
        for path in (mount.source, mount.target):
            refuse_separators(path, ",:", "enroot", "--volume", why)
        mounts.append(mount.spec())
    flags = [f"--container-mounts={','.join(mounts)}"] if mounts else []
    return flags + ([f"--container-workdir={WORKSPACE}"] if launch.workspace is not None else [])


def notes(launch: Launch) -> tuple[str, ...]:
    options, settings, extras = launch.devices, launch.settings, launch.extras
    found: list[str] = []
    if launch.local:
        found.append(f"a build of this host: make its squashfs first, `enroot import -o {squashfs_name(launch.image)}"
                     f" dockerd://{launch.image}`, in a directory the nodes read (or push it to a registry and pass"
                     " --registry)")
    if options.slurm_gres and not launch.device_count and not many_nodes(launch):  # the nodes' notes say it then
        found.append(f"--gres={options.slurm_gres}:1: the host description counts no {launch.vendor} devices"
                     " (pass --host-json with a node's)")
    if (options.device_requests or options.devices or options.runtime) and not options.slurm_gres:
        found.append(f"{launch.vendor}: no Slurm GRES is known for its devices; ask the site which to request")
    if options.devices:
        found.append(f"where the site sets ENROOT_RESTRICT_DEV, add {','.join(options.devices)} to"
                     " --container-mounts (unverified)")
    capabilities = (*options.cap_add, *settings.cap_add)
    if capabilities:
        found.append(f"{', '.join(capabilities)} not added: Enroot containers run unprivileged")
    if settings.ulimits:
        found.append("ulimits " + " ".join(f"{n}={v}" for n, v in settings.ulimits) + " not set: the job's apply")
    if extras.ports:
        found.append("ports need no publishing: the job shares the node's network")
    return tuple(found)
