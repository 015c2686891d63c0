"""Intel XPU: +xpu wheels (they carry the oneAPI runtime) plus the Intel GPU user-mode driver, on
Ubuntu 24.04; /dev/dri with its host groups.

`VENDOR` is the one object the rest of the package asks (vendors/__init__.py registers it). Its
class is put together from one module per concern, each over the one below it:
- knowledge.py: the tables of data/vendors/xpu.yaml (`XpuFacts`) and what follows from them
  (which combinations work, how a variant resolves);
- image.py: what an image holds: the claims its facts.json is checked against;
- host.py: the device flags, the Kubernetes resource, and whether an image fits a host (`fit`), by
- decision.py: the Data Center GPU Max rule the guard and `recommend` share, and
- detect.py: reading the host (xpu-smi, sycl-ls, sysfs) and the GPU families PyTorch validates;
- guard.py, guard.sh: the shell `check_vendor` the in-image guard gets.

References (each module lists those its own rules follow):
- +xpu wheels per torch and the driver packages: https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html
- device flags: Intel's oneAPI container guide ("--device /dev/dri")
  https://www.intel.com/content/www/us/en/docs/oneapi-base-toolkit/get-started-guide-linux/2025-2/using-containers-with-the-command-line.html
"""

from __future__ import annotations

from accel_images.vendors.collective import Collective
from accel_images.vendors.xpu.decision import (DATA_CENTER_DRIVER_DOCS, DATA_CENTER_MAX_IDS, DATA_CENTER_MAX_REASON,
                                               data_center_max)
from accel_images.vendors.xpu.detect import (INTEL_PCI_VENDOR, KB_FILE, GpuFamily, IntelDevice, driver_name,
                                             family_of, integrated, kernel_drivers, parse_families, parse_sycl_ls,
                                             parse_xpu_smi, pci_device_id, validated_families)
from accel_images.vendors.xpu.guard import GUARD
from accel_images.vendors.xpu.host import (I915_RESOURCE, INTEL_K8S_DOCS, XE_RESOURCE, XPU_DOCS, XpuHost,
                                           k8s_resource, k8s_resource_of)
from accel_images.vendors.xpu.image import XpuImage, oneapi_release
from accel_images.vendors.xpu.knowledge import XpuFacts, XpuKnowledge

__all__ = ["COLLECTIVE", "DATA_CENTER_DRIVER_DOCS", "DATA_CENTER_MAX_IDS", "DATA_CENTER_MAX_REASON", "GUARD",
           "I915_RESOURCE", "INTEL_K8S_DOCS", "INTEL_PCI_VENDOR", "KB_FILE", "VENDOR", "XE_RESOURCE", "XPU_DOCS",
           "GpuFamily", "IntelDevice", "Xpu", "XpuFacts", "data_center_max", "driver_name", "family_of", "integrated",
           "k8s_resource", "k8s_resource_of", "kernel_drivers", "oneapi_release", "parse_families", "parse_sycl_ls",
           "parse_xpu_smi", "pci_device_id", "validated_families"]


COLLECTIVE = Collective("xccl", "xpu", library="xccl")
"""torch >= 2.8; oneCCL underneath: torch.distributed's `xccl` backend
(https://docs.pytorch.org/docs/stable/distributed.html#backends,
https://github.com/pytorch/pytorch/releases/tag/v2.8.0: Intel GPU distributed backend (XCCL) support)."""


class Xpu(XpuHost, XpuImage, XpuKnowledge):
    """The Intel GPU vendor: its knowledge, image and host layers in one object (see the module docstring)."""


VENDOR = Xpu(
    name="xpu",
    title="Intel XPU",
    stack_name="oneAPI",
    smoke_backend="xpu",
    collective=COLLECTIVE,
    kb_file=KB_FILE,
    runner_labels=("self-hosted", "linux", "x64", "gpu-intel"),
    detect_rank=30,
    guard_check=GUARD,
    sources=(XPU_DOCS,),
)
