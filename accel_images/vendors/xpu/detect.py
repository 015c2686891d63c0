"""Reading an Intel GPU host: /dev/dri render nodes plus positive evidence (xpu-smi, sycl-ls, PCI vendor
0x8086 in sysfs), the kernel drivers bound to them, and the GPU families PyTorch's XPU guide validates.

`probe` is the one entry (host.py's `XpuHost.probe`). The validated families are read from this vendor's
own knowledge-base file (`KB_FILE`, xpu.yaml validated_gpus), not through the knowledge base: host
detection runs without it. References:
- the validated GPUs: https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html, their PCI ids from
  the Linux kernel's include/drm/intel/i915_pciids.h (xpu.yaml validated_gpus)
- sysfs: the kernel's Documentation/ABI/testing/sysfs-bus-pci; Intel's PCI vendor id 0x8086
  (include/linux/pci_ids.h PCI_VENDOR_ID_INTEL)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import yaml

from accel_images import untrusted
from accel_images.model.devices import nodes, pci_vendor_is, under
from accel_images.model.hostinfo import (Gpu, HostInfo, Runner, answer, first_answer, host_from, listing, quote, read,
                                          summary)

INTEL_PCI_VENDOR = "0x8086"
INTEGRATED_SLOT = ":00:02.0"  # where Intel integrated graphics sits: bus 0, device 2
KB_FILE = Path(__file__).parent.parent.parent / "data" / "vendors" / "xpu.yaml"


@dataclass(frozen=True)
class GpuFamily:
    """A GPU family PyTorch's XPU guide validates, with its PCI device ids (xpu.yaml validated_gpus)."""

    name: str
    kernel: str                 # the kernel's macro the ids come from: 'INTEL_MTL_IDS'
    ids: frozenset[str]         # lower-case hex without 0x: '7d55'


def pci_device_id(text: str | None) -> str | None:
    """A PCI device id as the table keys it ('7d55') from sysfs's or a tool's spelling: uevent's PCI_ID
    '8086:7D55', the `device` file's '0x7d55', xpu-smi's '0x20a'; None when it is none of these."""
    match = re.fullmatch(r"\s*(?:[0-9a-fA-F]{4}:|0x)?([0-9a-fA-F]{1,4})\s*", text or "")
    return match.group(1).lower().zfill(4) if match else None


def parse_families(raw: Mapping[str, Any]) -> tuple[GpuFamily, ...]:
    """xpu.yaml's `validated_gpus`: each family's name, kernel macro and ids."""
    return tuple(GpuFamily(str(row["name"]), str(row["kernel"]),
                           frozenset(filter(None, (pci_device_id(str(i)) for i in row["ids"]))))
                 for row in raw.get("families") or ())


@functools.lru_cache(maxsize=1)
def validated_families() -> tuple[GpuFamily, ...]:
    """The table read from this vendor's own knowledge-base file: host detection runs without the
    knowledge base (its loader sits above the vendors), and needs only this table."""
    with open(KB_FILE, encoding="utf-8") as handle:
        return parse_families(yaml.safe_load(handle).get("validated_gpus") or {})


def family_of(pci_id: str | None) -> GpuFamily | None:
    """The validated family whose ids hold `pci_id` (as pci_device_id spells it), else None."""
    return next((family for family in validated_families() if pci_id in family.ids), None) if pci_id else None


def probe(run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
    """A /dev/dri render node and an Intel GPU a tool or sysfs confirms (/dev/dri also serves other GPUs)."""
    if not listing(under(root, "/dev/dri"), "renderD*"):
        notes.append("xpu: no /dev/dri/renderD* node")
        return None
    gpus, driver = _intel_gpus(run, root, notes)
    if not gpus:
        notes.append("xpu: /dev/dri present but no Intel GPU confirmed (it also serves AMD and other GPUs)")
        return None
    return replace(host_from("xpu", gpus, driver_version=driver), kernel_drivers=kernel_drivers(root, notes))


def kernel_drivers(root: Path, notes: list[str]) -> tuple[str, ...]:
    """The kernel drivers bound to this host's Intel render nodes, each once (sysfs's `driver` link, else
    the DRIVER of the device's uevent), for the host description: the node's Kubernetes resource follows them."""
    found: dict[str, None] = {}
    for node in nodes(root, "/dev/dri", r"renderD\d+"):
        if not pci_vendor_is(root, "drm", node.name, INTEL_PCI_VENDOR):
            continue
        device = under(root, f"/sys/class/drm/{node.name}/device")
        driver = driver_name(root, node.name) or _uevent(device).get("DRIVER")
        if driver:
            found[driver] = None
    notes.append(f"xpu: kernel driver {', '.join(found)}" if found else "xpu: kernel driver unknown (sysfs names none)")
    return tuple(found)


def driver_name(dev_root: Path, node: str) -> str | None:
    try:
        return under(dev_root, f"/sys/class/drm/{node}/device/driver").resolve(strict=True).name
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------
# Host detection: /dev/dri render nodes plus positive evidence (xpu-smi, sycl-ls, PCI vendor 0x8086)
# ---------------------------------------------------------------------------------------------

_XPU_SMI = [["xpu-smi", "discovery", "-j"], ["xpu-smi", "discovery"]]
_SYCL_LS = [["sycl-ls"]]
# "[level_zero:gpu][level_zero:0] <platform>, <device> <device version> [<Level Zero driver>]", e.g.
#   "... Intel(R) Level-Zero, Intel(R) Arc(TM) A770 Graphics 1.3 [1.3.26918]"
#   "... Intel(R) oneAPI Unified Runtime over Level-Zero, Intel(R) Arc(TM) B580 Graphics 20.1.0 [1.6.33578+11]",
# and the older "[ext_oneapi_level_zero:gpu:0] ..." form. OpenCL-only entries do not count: torch.xpu needs Level Zero.
_SYCL_LEVEL_ZERO = re.compile(r"\[(?:ext_oneapi_)?level_zero:gpu(?::\d+)?\](?:\[[^\]]*\])?\s+"
                              r"[^,]*,\s+(?P<name>.+?)\s+\d+(?:\.\d+)+\s+\[(?P<driver>[^\]]*)\]\s*")
_DRIVER_VERSION = re.compile(r"\d+(?:\.\d+)+(?:\+\d+)?")
# Integrated graphics by name: "Intel(R) UHD Graphics 750", "Intel(R) Iris(R) Xe Graphics", "Intel(R) HD Graphics 630".
_INTEGRATED_NAME = re.compile(r"\b(?:UHD|Iris|HD Graphics)\b", re.IGNORECASE)
# Row of the `xpu-smi discovery` table: "| 0         | Device Name: Intel(R) Arc(TM) A770 Graphics   |", then
# "|           | PCI BDF Address: 0000:03:00.0  |" lines with no id for the same device.
_XPU_TABLE_ROW = re.compile(r"\|\s*(?P<id>\d*)\s*\|\s*(?P<key>[^:|]+?)\s*:\s*(?P<value>.*?)\s*\|\s*")


@dataclass(frozen=True)
class IntelDevice:
    """One Intel GPU as a tool listed it."""

    name: str
    bdf: str | None = None          # PCI address, where the tool gives it
    kind: str | None = None         # xpu-smi's device type: 'GPU', 'Discrete GPU', 'Integrated GPU'
    driver: str | None = None       # sycl-ls: the Level Zero driver; xpu-smi: the kernel driver package
    device_id: str | None = None    # xpu-smi's device id, for `discovery -d`
    node: str | None = None         # the DRM node xpu-smi names
    pci_id: str | None = None       # the PCI device id ('7d55'), where sysfs or xpu-smi gives it


def integrated(device: IntelDevice) -> bool:
    """Integrated graphics shares the CPU's memory and is no accelerator for these images: UHD, Iris (Xe)
    and HD parts by name, or what xpu-smi types as integrated or sits at the integrated slot 00:02.0.
    Not the Arc graphics of Core Ultra processors, which PyTorch validates as XPU devices
    (https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html): by PCI id where one is known
    (xpu.yaml validated_gpus, from the kernel's pciids.h), else by "Arc" in the name."""
    if family_of(device.pci_id) is not None:
        return False
    if _INTEGRATED_NAME.search(device.name):
        return True
    on_die = "integrated" in (device.kind or "").lower() or (device.bdf or "").endswith(INTEGRATED_SLOT)
    return on_die and "Arc" not in device.name


def _json_device(device: Any) -> IntelDevice | None:
    """One xpu-smi JSON device: a physical Intel GPU, or None."""
    if not isinstance(device, dict) or device.get("device_function_type") == "virtual":
        return None
    name, kind = device.get("device_name"), str(device.get("device_type", "GPU"))
    if not (isinstance(name, str) and name and "GPU" in kind and "Intel" in str(device.get("vendor_name", "Intel"))):
        return None
    return IntelDevice(name, _text(device.get("pci_bdf_address")), kind, _text(device.get("driver_version")),
                       _text(device.get("device_id")), _text(device.get("drm_device")),
                       pci_device_id(_text(device.get("pci_device_id"))))


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) else None


def _parse_xpu_smi_json(text: str) -> list[IntelDevice] | None:
    """`xpu-smi discovery -j` ({"device_list": [...]}) or `discovery -d N -j` (one device); None if not JSON."""
    try:
        data = untrusted.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict) and "device_name" in data:
        data = {"device_list": [data]}
    devices = data.get("device_list") if isinstance(data, dict) else None
    found = [_json_device(device) for device in (devices if isinstance(devices, list) else [])]
    return [device for device in found if device]


def _parse_xpu_smi_table(text: str) -> list[IntelDevice]:
    """`xpu-smi discovery`: a box, one row group per device id, 'Key: value' fields."""
    rows: list[dict[str, str]] = []
    for line in text.splitlines():
        row = _XPU_TABLE_ROW.fullmatch(line.strip())
        if row is None:
            continue
        if row.group("id"):
            rows.append({"device_id": row.group("id")})
        if rows:
            rows[-1].setdefault(row.group("key"), row.group("value"))
    as_json = [{json_key: row[key] for key, json_key in _TABLE_KEYS.items() if row.get(key)} for row in rows]
    return [device for device in map(_json_device, as_json) if device]


_TABLE_KEYS = {"device_id": "device_id", "Device Name": "device_name", "Vendor Name": "vendor_name",
               "Device Type": "device_type", "PCI BDF Address": "pci_bdf_address",
               "Function Type": "device_function_type", "Driver Version": "driver_version", "DRM Device": "drm_device"}
"""`xpu-smi discovery` table fields -> the keys of its JSON form."""


def parse_xpu_smi(text: str) -> list[IntelDevice]:
    """Either form of `xpu-smi discovery`: JSON (-j) or the table."""
    devices = _parse_xpu_smi_json(text)
    return devices if devices is not None else _parse_xpu_smi_table(text)


def parse_sycl_ls(text: str) -> list[IntelDevice]:
    """Level Zero GPUs, each with the driver version sycl-ls prints in brackets."""
    matches = [match for match in map(_SYCL_LEVEL_ZERO.fullmatch, text.splitlines()) if match]
    drivers = [m.group("driver") if _DRIVER_VERSION.fullmatch(m.group("driver")) else None for m in matches]
    return [IntelDevice(m.group("name"), driver=driver)
            for m, driver in zip(matches, drivers, strict=True) if "Intel" in m.group("name")]


def _uevent(device: Path) -> dict[str, str]:
    lines = (read(device / "uevent") or "").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _sysfs_intel_devices(root: Path) -> list[IntelDevice]:
    """Intel render nodes by PCI vendor id. sysfs has no marketing name: a device is named by its PCI id,
    and by its family where the id is one PyTorch validates (validated_families)."""
    devices = []
    for node in listing(under(root, "/sys/class/drm"), "renderD*"):
        if (read(node / "device" / "vendor") or "").strip().lower() != INTEL_PCI_VENDOR:
            continue
        event = _uevent(node / "device")
        pci_id = pci_device_id(event.get("PCI_ID") or read(node / "device" / "device"))
        devices.append(IntelDevice(_sysfs_name(event.get("PCI_ID"), pci_id, node.name),
                                   bdf=event.get("PCI_SLOT_NAME"), node=node.name, pci_id=pci_id))
    return devices


def _sysfs_name(uevent_id: str | None, pci_id: str | None, node: str) -> str:
    """'Intel Core Ultra Arc graphics (Meteor Lake) 8086:7D55', 'Intel GPU 8086:A780', 'Intel GPU on renderD128'."""
    label = f"8086:{pci_id.upper()}" if pci_id else None
    family = family_of(pci_id)
    if family is not None:
        return f"Intel {family.name} {label}"
    return f"Intel GPU {uevent_id or label}" if uevent_id or label else f"Intel GPU on {node}"


def _counted(devices: list[IntelDevice], source: str, notes: list[str]) -> list[IntelDevice]:
    """The devices that are accelerators. The evidence names each integrated one as not counted, and each
    one at the integrated slot that counts because its PCI id is of a validated family."""
    for device in devices:
        where = _where(device)
        place = f" ({where})" if where else ""
        family = family_of(device.pci_id)
        if integrated(device):
            notes.append(f"xpu: {source}: {device.name}{place} is integrated graphics; not counted")
        elif family is not None and (device.bdf or "").endswith(INTEGRATED_SLOT):
            notes.append(f"xpu: {source}: {device.name}{place}: PCI id {device.pci_id} is in {family.kernel}, "
                         f"{family.name}, which PyTorch's XPU guide validates; counted")
    return [device for device in devices if not integrated(device)]


def _xpu_smi_driver(run: Runner, devices: list[IntelDevice]) -> str | None:
    """xpu-smi's listing may carry the driver; else its per-device detail does (`discovery -d N -j`)."""
    driver = next((d.driver for d in devices if d.driver and any(c.isdigit() for c in d.driver)), None)
    if driver or devices[0].device_id is None:
        return driver
    detail = parse_xpu_smi(answer(run(["xpu-smi", "discovery", "-d", devices[0].device_id, "-j"])) or "")
    return next((d.driver for d in detail if d.driver and any(c.isdigit() for c in d.driver)), None)


def _intel_gpus(run: Runner, root: Path, notes: list[str]) -> tuple[list[Gpu], str | None]:
    """Discrete (or Core Ultra Arc) Intel GPUs from the first source that lists one, and the driver."""
    for forms, parse in ((_XPU_SMI, parse_xpu_smi), (_SYCL_LS, parse_sycl_ls)):
        command, output = first_answer(run, forms)
        text, tool = answer(output), forms[0][0]
        if text is None:
            notes.append(f"xpu: {tool} missing, failing or timed out")
            continue
        devices = _counted(parse(text), tool, notes)
        if not devices:
            notes.append(f"xpu: {tool} lists no Intel Level Zero GPU: {quote(text)}")
            continue
        driver = _xpu_smi_driver(run, devices) if tool == "xpu-smi" else devices[0].driver
        where = "; ".join(filter(None, map(_where, devices)))
        notes.append(f"xpu: {command} lists {summary(_gpus(devices))}" + (f" at {where}" if where else "")
                     + (f", driver {driver}" if driver else ""))
        return _gpus(devices), driver
    devices = _counted(_sysfs_intel_devices(root), "sysfs", notes)
    if devices:
        notes.append(f"xpu: PCI vendor {INTEL_PCI_VENDOR} on {len(devices)} render node(s) counted as accelerators")
    return _gpus(devices), None


def _where(device: IntelDevice) -> str:
    """'id 0, 0000:03:00.0, /dev/dri/card0': what the tool says of the device's place."""
    return ", ".join(part for part in (f"id {device.device_id}" if device.device_id else "", device.bdf or "",
                                       device.node or "") if part)


def _gpus(devices: list[IntelDevice]) -> list[Gpu]:
    return [Gpu(device.name, device.name) for device in devices]
