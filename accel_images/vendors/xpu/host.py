"""An Intel GPU image on a host: the device flags it starts with, and whether it fits the host `recommend` judges.

Reading the host is `detect`'s (xpu-smi, sycl-ls, sysfs); `fit` refuses a Data Center GPU Max
(decision.py), as the in-image guard does. References:
- device flags: Intel's oneAPI container guide ("--device /dev/dri") (XPU_DOCS)
- the Kubernetes resource per kernel driver: Intel's GPU device plugin (INTEL_K8S_DOCS)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from accel_images.model.devices import (APPTAINER_GPU_DOCS, SLURM_GRES_DOCS, DeviceOptions, host_group_ids, nodes,
                                         pci_vendor_is)
from accel_images.vendors.base import Fit
from accel_images.vendors.xpu import detect
from accel_images.vendors.xpu.decision import DATA_CENTER_MAX_REASON, data_center_max
from accel_images.vendors.xpu.detect import INTEL_PCI_VENDOR, driver_name
from accel_images.vendors.xpu.knowledge import XpuKnowledge

if TYPE_CHECKING:
    from accel_images.model.hostinfo import HostInfo, Runner
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant

XPU_DOCS = ("https://www.intel.com/content/www/us/en/docs/oneapi-base-toolkit/get-started-guide-linux/"
            "2025-2/using-containers-with-the-command-line.html")
INTEL_K8S_DOCS = "https://github.com/intel/intel-device-plugins-for-kubernetes/blob/main/cmd/gpu_plugin/README.md"


class XpuHost(XpuKnowledge):
    """The Intel GPU vendor's host layer: device flags, the Kubernetes resource, detection and `fit`."""

    def device_options(self, dev_root: Path) -> DeviceOptions:
        # Apptainer needs no flag: "By default, Apptainer makes all host devices available in the container" (V).
        return DeviceOptions(vendor=self.name, devices=("/dev/dri",), group_add=host_group_ids(("/dev/dri",), dev_root),
                             k8s_resource=k8s_resource(dev_root),
                             slurm_gres="gpu",  # Slurm gres.html: GRES "gpu", AutoDetect=oneapi (V)
                             sources=(XPU_DOCS, INTEL_K8S_DOCS, APPTAINER_GPU_DOCS, SLURM_GRES_DOCS))

    def host_device_options(self, host: HostInfo, dev_root: Path) -> DeviceOptions:
        """The device plugin's resource follows the described node's kernel driver, not this machine's."""
        resource, note = k8s_resource_of(host.kernel_drivers)
        return replace(self.device_options(dev_root), k8s_resource=resource, k8s_note=note)

    def accelerator_present(self, dev_root: Path) -> bool:
        """A render node counts unless sysfs says it belongs to another vendor's PCI device."""
        return any(pci_vendor_is(dev_root, "drm", node.name, INTEL_PCI_VENDOR)
                   for node in nodes(dev_root, "/dev/dri", r"renderD\d+"))

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        return detect.probe(run, root, notes)

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        """An Intel GPU the host detection confirmed runs the +xpu wheels, with the client GPU driver
        these images carry, except a Data Center GPU Max (the guard's rule, guard.py)."""
        names = ", ".join(dict.fromkeys(host.gpu_names)) or "an Intel GPU"
        max_series = [name for name in host.gpu_names if data_center_max(name)]
        if host.gpu_names and len(max_series) == len(host.gpu_names):
            return Fit(variant, rejections=(f"{max_series[0]} {DATA_CENTER_MAX_REASON}",))
        caveats = (f"{', '.join(dict.fromkeys(max_series))} {DATA_CENTER_MAX_REASON}; only the other GPUs "
                   "can use it",) if max_series else ()
        return Fit(variant, caveats=caveats, exact_arch=True,
                   why=f"+xpu wheel (oneAPI {variant.stack}) runs on {names}")


def k8s_resource(dev_root: Path) -> str:
    """Intel's GPU device plugin names a GPU after its kernel driver: "gpu.intel.com/i915 | Legacy i915 KMD ...
    provided GPU instance" and "gpu.intel.com/xe | xe KMD provided GPU instance" (INTEL_K8S_DOCS, V). This
    host's render nodes say which driver binds them (/sys/class/drm/renderD*/device/driver); i915, the
    driver of every GPU before Battlemage and Lunar Lake, when none says xe. A cluster's nodes may differ."""
    drivers = {driver_name(dev_root, node.name) for node in nodes(dev_root, "/dev/dri", r"renderD\d+")}
    return k8s_resource_of(tuple(driver for driver in drivers if driver))[0]


XE_RESOURCE, I915_RESOURCE = "gpu.intel.com/xe", "gpu.intel.com/i915"


def k8s_resource_of(drivers: tuple[str, ...]) -> tuple[str, str | None]:
    """The resource for a node whose Intel GPUs these kernel drivers bind (k8s_resource's rule, from a host
    description), and a note where the description cannot say: no driver recorded (a description from
    before it was, or a node whose sysfs shows none), or both drivers, where the plugin offers both."""
    if "xe" in drivers and "i915" in drivers:
        return XE_RESOURCE, (f"this node's Intel GPUs are bound to i915 and xe: the device plugin offers"
                             f" {I915_RESOURCE} and {XE_RESOURCE}; the Pod asks for {XE_RESOURCE}")
    if "xe" in drivers:
        return XE_RESOURCE, None
    if "i915" in drivers:
        return I915_RESOURCE, None
    return I915_RESOURCE, (f"the host description names no Intel GPU kernel driver: {I915_RESOURCE} assumed; a node"
                           f" whose GPUs the xe driver binds offers {XE_RESOURCE} (Battlemage, Lunar Lake and later,"
                           " or a GPU given to xe by xe.force_probe)")
