"""`podman run`: podman-run(1) takes Docker's flags, except where the devices and the user differ.

- A GPU request (Docker's `--gpus`) becomes the vendor's CDI names: "podman run --rm --device
  nvidia.com/gpu=all --security-opt=label=disable ubuntu nvidia-smi -L" (NVIDIA, CDI support; V).
- Device nodes are passed as with Docker (`--device /dev/kfd --device /dev/dri`: ROCm's container page; V).
- `--security-opt label=disable` wherever a device is passed: NVIDIA's line has it (V); podman-run(1)
  --device warns that on SELinux "the container can get permission denied when accessing the mounted
  device" (V), so the other vendors get it too (I).
- Rootless, the host's device groups are not mapped into the user namespace, so `--group-add GID` gives
  nothing; "use the --group-add keep-groups flag to pass these supplementary groups to the container
  process" (AMD Container Toolkit, Podman; V). podman-run(1): "Currently only available with the crun OCI
  runtime" (V); with runc, Podman 4.3.1 accepts it and drops the groups (observed).
- Rootless, `--userns=keep-id` maps the user's UID:GID to the same inside (podman-run(1), --userns; V),
  and `--user UID:GID` runs as them, not as the image's USER (Podman 4.3.1 keeps the image's USER under
  keep-id: observed), so files written to the workspace stay theirs; rootful, `--user` alone, as with Docker.
- Rootless, ulimits above the user's own hard limit fail the start ("error setting rlimit type 7:
  operation not permitted", observed; podman-run(1) --ulimit: the hard limit applies rootless), so the
  vendor's ulimits are left out and the notes say so.
- A runtime Docker knows by a registered name (`--runtime habana`) is passed as the vendor's runtime_path (I).
- HOME: under Podman a session's HOME was /workspace, the working directory (reported), where Docker
  gives `/` and the image's entry point then the image user's home. So a session passes `-e HOME=` the
  image user's home, before the user's own `-e`, which wins.
"""

from __future__ import annotations

from accel_images.host.launch import Launch
from accel_images.host.runtimes import Rendered, shell_join
from accel_images.host.runtimes.docker import passed_through, pull_flags, workspace_flags
from accel_images.host.runtimes.nodes import many_nodes, on_each_node


def render(launch: Launch) -> Rendered:
    if many_nodes(launch):
        return on_each_node(launch, "podman", podman_argv)
    argv, notes = podman_argv(launch)
    return Rendered("podman", shell_join(argv) + "\n", argv, notes)


def podman_argv(launch: Launch) -> tuple[tuple[str, ...], tuple[str, ...]]:
    notes: list[str] = []
    argv = ("podman", "run", "--rm", "-it" if launch.interactive else "-i", *pull_flags(launch),
            *device_flags(launch, notes),
            *process_flags(launch, notes), *user_flags(launch), *passed_through(launch),
            launch.image, *launch.command)
    return argv, tuple(notes)


def device_flags(launch: Launch, notes: list[str]) -> list[str]:
    options = launch.devices
    flags: list[str] = []
    if options.device_requests and not options.cdi_devices:
        notes.append(f"{launch.vendor}: no CDI name is known for its GPU request; Podman has no --gpus equivalent")
    for name in (*options.cdi_devices, *options.devices):
        flags += ["--device", name]
    if flags:
        flags += ["--security-opt", "label=disable"]
    if options.group_add and launch.rootless:
        flags += ["--group-add", "keep-groups"]
        notes.append("--group-add keep-groups needs the crun runtime: with runc the device groups are dropped")
    else:
        for group in options.group_add:
            flags += ["--group-add", group]
    if options.runtime:
        if options.runtime_path:
            flags += ["--runtime", options.runtime_path]
            notes.append(f"--runtime {options.runtime_path}: Docker's `--runtime {options.runtime}` given to Podman"
                         " by its path (unverified)")
        else:
            notes.append(f"Docker's `--runtime {options.runtime}` has no known Podman form")
    return flags


def process_flags(launch: Launch, notes: list[str]) -> list[str]:
    options, settings = launch.devices, launch.settings
    flags: list[str] = ["--network", settings.network] if settings.network else []
    for name, value in options.environment:
        flags += ["-e", f"{name}={value}"]
    for capability in (*options.cap_add, *settings.cap_add):
        flags += ["--cap-add", capability]
    flags += ["--ipc", launch.ipc_mode]
    for option in options.security_opt:
        flags += ["--security-opt", option]
    if launch.rootless and settings.ulimits:
        shown = " ".join(f"{name}={value}" for name, value in settings.ulimits)
        notes.append(f"ulimits {shown} left out: rootless Podman cannot raise limits above your own")
    else:
        for name, value in settings.ulimits:
            flags += ["--ulimit", f"{name}={value}"]
    if settings.shm_size:
        flags += ["--shm-size", settings.shm_size]
    return flags


def user_flags(launch: Launch) -> list[str]:
    flags: list[str] = []
    if launch.user is not None:
        flags += ["--userns", "keep-id"] if launch.rootless else []
        flags += ["--user", f"{launch.user[0]}:{launch.user[1]}"]
        flags += ["-e", f"HOME={launch.home}"] if launch.home else []
    for gid in launch.environment_groups:
        flags += ["--group-add", str(gid)]
    return flags + workspace_flags(launch)
