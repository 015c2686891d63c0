"""Container device options: one value type, read the same way for the SDK and for a person.

Both the builder (Docker SDK keyword arguments for the smoke run) and the `docker run` line
printed for a person come from the same DeviceOptions, so the two can never disagree. Each vendor
module (accel_images/vendors/) says which options its accelerator needs, citing the vendor
document it follows; this module only holds the value and the host look-ups vendors share.

The options are the minimum a container needs to use the device; what the vendors also suggest
for training jobs (host networking, ulimits, SYS_PTRACE for debuggers) is each vendor's
SessionSettings, which the lines printed for a person carry (accel_images.host.launch) and the
smoke run does not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The runtimes' own documents that the vendors' entries for them follow (beside each vendor's own).
APPTAINER_GPU_DOCS = "https://apptainer.org/docs/user/main/gpu.html"
K8S_GPU_DOCS = "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/"
SLURM_GRES_DOCS = "https://slurm.schedmd.com/gres.html"


@dataclass(frozen=True)
class GpuRequest:
    """A GPU request in the form of `docker run --gpus`: count -1 means all GPUs."""

    count: int = -1
    capabilities: tuple[tuple[str, ...], ...] = (("gpu",),)


@dataclass(frozen=True)
class DeviceOptions:
    """What a container needs to reach one vendor's accelerator."""

    vendor: str
    device_requests: tuple[GpuRequest, ...] = ()
    devices: tuple[str, ...] = ()          # host device paths, mapped to the same path inside
    group_add: tuple[str, ...] = ()        # numeric group ids owning those device files on the host
    runtime: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    cap_add: tuple[str, ...] = ()
    ipc_mode: str | None = None
    security_opt: tuple[str, ...] = ()
    # The same devices as other runtimes name them (accel_images/host/runtimes/ reads these; empty or
    # None where the runtime's generic reading of the fields above is right, or where nothing is known):
    cdi_devices: tuple[str, ...] = ()      # CDI names that stand for `device_requests` (Podman's --device)
    apptainer_flags: tuple[str, ...] = ()  # what binds the devices and driver libraries (--nv, --rocm)
    k8s_resource: str | None = None        # the Kubernetes device plugin's extended resource name
    k8s_note: str | None = None            # what a Pod's reader must know of k8s_resource (an assumption)
    slurm_gres: str | None = None          # the Slurm GRES that allocates the device (srun --gres=NAME:1)
    runtime_path: str | None = None        # the executable behind `runtime`, for engines that take a path
    selection_env: tuple[str, ...] = ()    # `environment` names that pick devices: a device plugin sets them
    sources: tuple[str, ...] = field(default=(), compare=False)

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for docker SDK `containers.run`/`create`; empty ones are left out."""
        kwargs: dict[str, Any] = {}
        if self.device_requests:
            from docker.types import DeviceRequest

            kwargs["device_requests"] = [
                DeviceRequest(count=request.count, capabilities=[list(caps) for caps in request.capabilities])
                for request in self.device_requests
            ]
        if self.devices:
            kwargs["devices"] = [f"{path}:{path}:rwm" for path in self.devices]
        if self.group_add:
            kwargs["group_add"] = list(self.group_add)
        if self.runtime:
            kwargs["runtime"] = self.runtime
        if self.environment:
            kwargs["environment"] = dict(self.environment)
        if self.cap_add:
            kwargs["cap_add"] = list(self.cap_add)
        if self.ipc_mode:
            kwargs["ipc_mode"] = self.ipc_mode
        if self.security_opt:
            kwargs["security_opt"] = list(self.security_opt)
        return kwargs

    def cli_flags(self) -> list[str]:
        """The same options as `docker run` flags, for the command line shown to a person."""
        flags: list[str] = []
        for request in self.device_requests:
            flags += ["--gpus", "all" if request.count == -1 else str(request.count)]
        for path in self.devices:
            flags += ["--device", path]
        for group in self.group_add:
            flags += ["--group-add", group]
        if self.runtime:
            flags += ["--runtime", self.runtime]
        for name, value in self.environment:
            flags += ["-e", f"{name}={value}"]
        for capability in self.cap_add:
            flags += ["--cap-add", capability]
        if self.ipc_mode:
            flags += ["--ipc", self.ipc_mode]
        for option in self.security_opt:
            flags += ["--security-opt", option]
        return flags


def host_group_ids(paths: tuple[str, ...], dev_root: Path = Path("/")) -> tuple[str, ...]:
    """Numeric ids of the groups owning the device files at `paths` (directories: their entries).

    Group ids differ between distributions (render is 104 on one, 109 on another), so they are
    read from the host rather than named; the root group adds nothing and is skipped.
    """
    found: set[int] = set()
    for path in paths:
        host_path = under(dev_root, path)
        candidates = [host_path]
        if host_path.is_dir():
            candidates = [entry for entry in host_path.iterdir() if not entry.is_dir()]
        for candidate in candidates:
            try:
                found.add(os.stat(candidate).st_gid)
            except OSError:
                continue
    found.discard(0)
    return tuple(str(gid) for gid in sorted(found))


def under(dev_root: Path, absolute: str) -> Path:
    return dev_root / absolute.lstrip("/")


def nodes(dev_root: Path, directory: str, pattern: str) -> list[Path]:
    folder = under(dev_root, directory)
    try:
        return [entry for entry in folder.iterdir() if re.fullmatch(pattern, entry.name)]
    except OSError:
        return []


def pci_vendor_is(dev_root: Path, sys_class: str, node: str, pci_vendor: str) -> bool:
    """True unless /sys/class/<class>/<node>/device/vendor names a different PCI vendor."""
    vendor_file = under(dev_root, f"/sys/class/{sys_class}/{node}/device/vendor")
    try:
        return vendor_file.read_text().strip().lower() == pci_vendor
    except OSError:
        return True


@dataclass(frozen=True)
class SessionSettings:
    """What a vendor recommends for an interactive development container beyond its device options."""

    ulimits: tuple[tuple[str, str], ...] = ()     # ("memlock", "-1") -> --ulimit memlock=-1
    cap_add: tuple[str, ...] = ()
    shm_size: str | None = None                   # only where the IPC namespace is the container's own
    network: str | None = None                    # "host" -> --network host (a session's, never the smoke run's)
    sources: tuple[str, ...] = ()

    def flags(self) -> list[str]:
        flags: list[str] = []
        if self.network:
            flags += ["--network", self.network]
        for name, value in self.ulimits:
            flags += ["--ulimit", f"{name}={value}"]
        for capability in self.cap_add:
            flags += ["--cap-add", capability]
        if self.shm_size:
            flags += ["--shm-size", self.shm_size]
        return flags
