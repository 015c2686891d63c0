"""The one table of per-vendor container device options.

Both the builder (Docker SDK keyword arguments for the smoke run) and the `docker run`
line printed for a person come from the same rows, so the two can never disagree. Each
row carries the vendor document it was taken from (compat-facts.md section 7.1).

The options are the minimum a container needs to use the device; conveniences that the
vendors also suggest for training jobs (host networking, --ipc=host for DataLoader shared
memory on NVIDIA/XPU, SYS_PTRACE for debuggers) are left to the user.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel_images.compat import VENDORS
from accel_images.errors import InputError


# PCI vendor ids read from sysfs to tell whose device a shared-style node belongs to.
_PCI_VENDOR_INTEL = "0x8086"
_PCI_VENDOR_HABANA = "0x1da3"


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


@dataclass(frozen=True)
class _Row:
    """The static part of a vendor's options; group ids are found on the host at run time."""

    options: DeviceOptions
    group_paths: tuple[str, ...] = ()  # device files (or directories of them) whose groups to add


_NVIDIA_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"
_ROCM_DOCS = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html"
_ROCM_PYTORCH_DOCS = ("https://rocm.docs.amd.com/projects/install-on-linux/en/docs-6.2.0/"
                      "how-to/3rd-party/pytorch-install.html")
_XPU_DOCS = ("https://www.intel.com/content/www/us/en/docs/oneapi-base-toolkit/get-started-guide-linux/"
             "2025-2/using-containers-with-the-command-line.html")
_GAUDI_DOCS = "https://docs.habana.ai/en/latest/shared/Pull_Prebuilt_Containers.html"

_TABLE: dict[str, _Row] = {
    "cpu": _Row(DeviceOptions(vendor="cpu")),
    "cuda": _Row(DeviceOptions(
        vendor="cuda",
        device_requests=(GpuRequest(),),  # --gpus all
        sources=(_NVIDIA_DOCS,),
    )),
    "rocm": _Row(
        DeviceOptions(
            vendor="rocm",
            devices=("/dev/kfd", "/dev/dri"),
            ipc_mode="host",
            security_opt=("seccomp=unconfined",),
            sources=(_ROCM_DOCS, _ROCM_PYTORCH_DOCS),
        ),
        group_paths=("/dev/kfd", "/dev/dri"),  # video/render groups, whatever their ids here
    ),
    "xpu": _Row(
        DeviceOptions(vendor="xpu", devices=("/dev/dri",), sources=(_XPU_DOCS,)),
        group_paths=("/dev/dri",),
    ),
    "gaudi": _Row(DeviceOptions(
        vendor="gaudi",
        runtime="habana",  # the habana runtime mounts the device nodes itself
        environment=(("HABANA_VISIBLE_DEVICES", "all"),
                     ("OMPI_MCA_btl_vader_single_copy_mechanism", "none")),
        cap_add=("SYS_NICE",),
        ipc_mode="host",  # "required for distributed training using HCCL"
        sources=(_GAUDI_DOCS,),
    )),
}


def _row(vendor: str) -> _Row:
    try:
        return _TABLE[vendor]
    except KeyError:
        raise InputError(f"unknown vendor {vendor!r}", field="vendor",
                         hint=f"one of {', '.join(VENDORS)}") from None


def device_options(vendor: str, dev_root: Path = Path("/")) -> DeviceOptions:
    """The options for `vendor`, with the host's group ids of its device files filled in.

    `dev_root` is the directory standing for `/` (a fake tree in tests).
    """
    row = _row(vendor)
    if not row.group_paths:
        return row.options
    groups = host_group_ids(row.group_paths, dev_root)
    return DeviceOptions(**{**_fields(row.options), "group_add": groups})


def _fields(options: DeviceOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


def host_group_ids(paths: tuple[str, ...], dev_root: Path = Path("/")) -> tuple[str, ...]:
    """Numeric ids of the groups owning the device files at `paths` (directories: their entries).

    Group ids differ between distributions (render is 104 on one, 109 on another), so they are
    read from the host rather than named; the root group adds nothing and is skipped.
    """
    found: set[int] = set()
    for path in paths:
        host_path = _under(dev_root, path)
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


def accelerator_present(vendor: str, dev_root: Path = Path("/")) -> bool:
    """Whether the host has the device nodes `vendor` needs; cheap file checks only.

    A node shared between vendors (/dev/dri render nodes, /dev/accel) counts unless sysfs
    says it belongs to another vendor's PCI device. `cpu` has no accelerator: False.
    """
    _row(vendor)
    if vendor == "cuda":
        return any(_under(dev_root, path).exists() for path in ("/dev/nvidiactl", "/dev/nvidia0"))
    if vendor == "rocm":
        return _under(dev_root, "/dev/kfd").exists()
    if vendor == "xpu":
        return any(_pci_vendor_is(dev_root, "drm", node.name, _PCI_VENDOR_INTEL)
                   for node in _nodes(dev_root, "/dev/dri", r"renderD\d+"))
    if vendor == "gaudi":
        if _nodes(dev_root, "/dev", r"hl\d+"):
            return True
        return any(_pci_vendor_is(dev_root, "accel", node.name, _PCI_VENDOR_HABANA)
                   for node in _nodes(dev_root, "/dev/accel", r"accel\d+"))
    return False


def _under(dev_root: Path, absolute: str) -> Path:
    return dev_root / absolute.lstrip("/")


def _nodes(dev_root: Path, directory: str, pattern: str) -> list[Path]:
    folder = _under(dev_root, directory)
    try:
        return [entry for entry in folder.iterdir() if re.fullmatch(pattern, entry.name)]
    except OSError:
        return []


def _pci_vendor_is(dev_root: Path, sys_class: str, node: str, pci_vendor: str) -> bool:
    """True unless /sys/class/<class>/<node>/device/vendor names a different PCI vendor."""
    vendor_file = _under(dev_root, f"/sys/class/{sys_class}/{node}/device/vendor")
    try:
        return vendor_file.read_text().strip().lower() == pci_vendor
    except OSError:
        return True
