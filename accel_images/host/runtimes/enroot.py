"""`srun --container-image=...`: Enroot through Slurm's Pyxis plug-in (NVIDIA/pyxis README, `srun --help`).

- The image is an Enroot URI, `[REGISTRY#]IMAGE[:TAG]`: the `#` separates the registry, and every
  Enroot release parses that form; digests only from Enroot 4.0 (its docker.sh), so the tag is used.
- Pyxis does not run the image's entry point by default (`--container-entrypoint` turns it on, and
  sites can disable entry points), so the command starts with the entry point's own words (the guard).
- Devices: Slurm allocates them (the vendor's GRES, `--gres=NAME:1`: Slurm gres.html, V) and confines
  the job to them; Enroot binds the host's /dev (its 10-system.fstab; O), and for NVIDIA its 98-nvidia
  hook reads the image's NVIDIA_VISIBLE_DEVICES (set by the CUDA images) and injects the driver (O).
- Environment: "all exported host environment variables are set in the container" (Pyxis, V; its
  tests pass NVIDIA_VISIBLE_DEVICES this way), so the line starts with `env NAME=VALUE`.
- The filesystem is read-only unless `--container-writable`; the user is the submitting user.
"""

from __future__ import annotations

import shlex

from accel_images.host.launch import WORKSPACE, Launch
from accel_images.host.runtimes import Rendered
from accel_images.model.variant import ENTRYPOINT


def render(launch: Launch) -> Rendered:
    environment = [f"{name}={value}" for name, value in (*launch.devices.environment, *launch.extras.environment)]
    command = launch.command or ("bash",)
    argv = (*(["env", *environment] if environment else []), "srun",
            *(["--pty"] if not launch.command else []), *resource_flags(launch),
            f"--container-image={enroot_uri(launch.image)}", *mount_flags(launch),
            *([f"--container-name={launch.extras.name}"] if launch.extras.name else []),
            *launch.extras.engine_args, *ENTRYPOINT, *command)
    return Rendered("enroot", shlex.join(argv) + "\n", None, notes(launch))


def enroot_uri(image: str) -> str:
    """`ghcr.io/acme/x:tag` -> `ghcr.io#acme/x:tag`; a name without a registry host stays as it is."""
    first, slash, rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def resource_flags(launch: Launch) -> list[str]:
    gres = launch.devices.slurm_gres
    return [f"--gres={gres}:1"] if gres else []


def mount_flags(launch: Launch) -> list[str]:
    """`--container-mounts=SRC:DST[:FLAGS][,SRC:DST...]` and `--container-workdir=PATH`."""
    mounts = [f"{launch.workspace}:{WORKSPACE}"] if launch.workspace is not None else []
    mounts += [mount.spec() for mount in launch.extras.mounts]
    flags = [f"--container-mounts={','.join(mounts)}"] if mounts else []
    return flags + ([f"--container-workdir={WORKSPACE}"] if launch.workspace is not None else [])


def notes(launch: Launch) -> tuple[str, ...]:
    options, settings, extras = launch.devices, launch.settings, launch.extras
    found: list[str] = []
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
