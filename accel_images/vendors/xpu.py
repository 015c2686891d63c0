"""Intel XPU: +xpu wheels (they carry the oneAPI runtime) plus the Intel GPU user-mode driver, on
Ubuntu 24.04; /dev/dri with its host groups.

References:
- +xpu wheels per torch and the driver packages: https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html
- device flags: Intel's oneAPI container guide ("--device /dev/dri")
  https://www.intel.com/content/www/us/en/docs/oneapi-base-toolkit/get-started-guide-linux/2025-2/using-containers-with-the-command-line.html
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from accel_images.devices import DeviceOptions, host_group_ids, nodes, pci_vendor_is, under
from accel_images.hostinfo import Gpu, HostInfo, Runner, host_from, listing, quote, read, summary
from accel_images.vendors.base import Combo, Fit, Resolution, VendorBase

if TYPE_CHECKING:
    from accel_images.compat import KnowledgeBase, TorchRelease
    from accel_images.variant import Variant

XPU_DOCS = ("https://www.intel.com/content/www/us/en/docs/oneapi-base-toolkit/get-started-guide-linux/"
            "2025-2/using-containers-with-the-command-line.html")
INTEL_PCI_VENDOR = "0x8086"
_INTEGRATED_SLOT = ":00:02.0"  # where Intel integrated graphics sits: bus 0, device 2


@dataclass(frozen=True)
class XpuFacts:
    runtime_packages: tuple[str, ...]
    runtime_repository: str
    devel_images: Mapping[str, Mapping[str, str]]


class Xpu(VendorBase):
    """The Intel GPU vendor: see the module docstring for its references."""

    def load_facts(self, raw: Mapping[str, Any]) -> XpuFacts:
        return XpuFacts(tuple(str(p) for p in raw["runtime_packages"]), str(raw["runtime_repository"]),
                        {str(k): dict(v) for k, v in raw.get("devel_images", {}).items()})

    def facts(self, kb: "KnowledgeBase") -> XpuFacts:
        facts: XpuFacts = self.section(kb).facts
        return facts

    def flavor_reasons(self, kb: "KnowledgeBase", combo: Combo) -> list[str]:
        reasons = super().flavor_reasons(kb, combo)
        if reasons or combo.flavor != "devel" or not combo.stack or not combo.os:
            return reasons
        if combo.os not in self.facts(kb).devel_images.get(combo.stack, {}):
            return [f"no intel/deep-learning-essentials image for oneAPI {combo.stack} on {combo.os}"]
        return []

    def resolve(self, kb: "KnowledgeBase", combo: Combo) -> Resolution:
        base = super().resolve(kb, combo)
        if combo.flavor != "devel":
            return base
        image = self.facts(kb).devel_images[base.stack or ""][combo.os or ""]
        return Resolution(**{**base.__dict__, "base_image": image})

    def details(self, kb: "KnowledgeBase", stack: str | None, row: "TorchRelease") -> dict[str, Any]:
        return {"oneapi": list(self.stacks(kb, row.minor)), "wheel_index": self.wheel_index(kb, stack)}

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(vendor=self.name, devices=("/dev/dri",), group_add=host_group_ids(("/dev/dri",), dev_root),
                             sources=(XPU_DOCS,))

    def accelerator_present(self, dev_root: Path) -> bool:
        """A render node counts unless sysfs says it belongs to another vendor's PCI device."""
        return any(pci_vendor_is(dev_root, "drm", node.name, INTEL_PCI_VENDOR)
                   for node in nodes(dev_root, "/dev/dri", r"renderD\d+"))

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        if not listing(under(root, "/dev/dri"), "renderD*"):
            notes.append("xpu: no /dev/dri/renderD* node")
            return None
        gpus = _intel_gpus(run, root, notes)
        if not gpus:
            notes.append("xpu: /dev/dri present but no Intel GPU confirmed (it also serves AMD and other GPUs)")
            return None
        return host_from("xpu", gpus)

    def fit(self, host: HostInfo, variant: "Variant", kb: "KnowledgeBase") -> Fit:
        """Any Intel GPU the host detection confirmed runs the +xpu wheels."""
        names = ", ".join(dict.fromkeys(host.gpu_names)) or "an Intel GPU"
        return Fit(variant, exact_arch=True, why=f"+xpu wheel (oneAPI {variant.stack}) runs on {names}")


# ---------------------------------------------------------------------------------------------
# Host detection: /dev/dri render nodes plus positive evidence (xpu-smi, sycl-ls, PCI vendor 0x8086)
# ---------------------------------------------------------------------------------------------

# "[level_zero:gpu][level_zero:0] <platform>, <device> <version> [<driver>]", and the older
# "[ext_oneapi_level_zero:gpu:0] ..." form. OpenCL-only entries do not count: torch.xpu needs Level Zero.
_SYCL_LEVEL_ZERO = re.compile(r"\[(?:ext_oneapi_)?level_zero:gpu(?::\d+)?\](?:\[[^\]]*\])?\s+"
                              r"[^,]*,\s+(?P<name>.+?)\s+\d+(?:\.\d+)+\s+\[[^\]]*\]\s*")


def parse_xpu_smi(text: str) -> list[Gpu]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    devices = data.get("device_list") if isinstance(data, dict) else None
    gpus = []
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, dict) or device.get("device_function_type") == "virtual":
            continue
        name, kind = device.get("device_name"), str(device.get("device_type", "GPU"))
        if isinstance(name, str) and name and "GPU" in kind and "Intel" in str(device.get("vendor_name", "Intel")):
            gpus.append(Gpu(name, name))
    return gpus


def parse_sycl_ls(text: str) -> list[Gpu]:
    names = [match.group("name") for match in map(_SYCL_LEVEL_ZERO.fullmatch, text.splitlines()) if match]
    return [Gpu(name, name) for name in names if "Intel" in name]


def _uevent(device: Path) -> dict[str, str]:
    lines = (read(device / "uevent") or "").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _sysfs_intel_gpus(root: Path, notes: list[str]) -> list[Gpu]:
    """Discrete Intel GPUs by PCI vendor id; the integrated one at 00:02.0 alone is no accelerator."""
    gpus = []
    for node in listing(under(root, "/sys/class/drm"), "renderD*"):
        if (read(node / "device" / "vendor") or "").strip().lower() != INTEL_PCI_VENDOR:
            continue
        event = _uevent(node / "device")
        slot = event.get("PCI_SLOT_NAME", "")
        if slot.endswith(_INTEGRATED_SLOT):
            notes.append(f"xpu: {node.name} is Intel integrated graphics ({slot}); not counted")
            continue
        name = f"Intel GPU {event['PCI_ID']}" if event.get("PCI_ID") else None
        gpus.append(Gpu(name, name))
    return gpus


def _intel_gpus(run: Runner, root: Path, notes: list[str]) -> list[Gpu]:
    for argv, parse in ((["xpu-smi", "discovery", "-j"], parse_xpu_smi), (["sycl-ls"], parse_sycl_ls)):
        output = run(argv)
        if output is None:
            notes.append(f"xpu: {argv[0]} missing, failing or timed out")
        elif (gpus := parse(output)):
            notes.append(f"xpu: {argv[0]} lists {summary(gpus)}")
            return gpus
        else:
            notes.append(f"xpu: {argv[0]} lists no Intel Level Zero GPU: {quote(output)}")
    if (gpus := _sysfs_intel_gpus(root, notes)):
        notes.append(f"xpu: PCI vendor {INTEL_PCI_VENDOR} on {len(gpus)} discrete render node(s)")
    return gpus


GUARD = r'''check_vendor() {
    if ! any_exists "$dev"/dri/renderD*; then
        missing "no /dev/dri render node: run with --device /dev/dri"
        return
    fi
    open_or_group_add "$dev"/dri/renderD*
}
'''

VENDOR = Xpu(
    name="xpu",
    title="Intel XPU",
    stack_name="oneAPI",
    smoke_backend="xpu",
    kb_file=Path(__file__).parent.parent / "data" / "vendors" / "xpu.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gpu-intel"),
    detect_rank=30,
    guard_check=GUARD,
    sources=(XPU_DOCS,),
)
