"""The Data Center GPU Max rule the guard and `recommend` share: which Intel GPUs need Intel's
data-center driver stack rather than the client GPU driver these images carry, and the words of
the refusal (host.py `fit`; guard.sh `max_series` and `check_vendor`, filled in by guard.py).

References: the PCI ids from the Linux kernel's include/drm/intel/i915_pciids.h (INTEL_PVC_IDS) and
Intel's out-of-tree backport; the driver stacks: DATA_CENTER_DRIVER_DOCS.
"""

from __future__ import annotations

import re

DATA_CENTER_MAX_IDS = ("0b69", "0b6e", "0bd0", "0bd1", "0bd2", "0bd4", "0bd5", "0bd6", "0bd7", "0bd8", "0bd9",
                       "0bda", "0bdb", "0be0", "0be1", "0be5")
"""PCI device ids of Intel Data Center GPU Max (Ponte Vecchio, PVC): INTEL_PVC_IDS of the Linux kernel's
include/drm/intel/i915_pciids.h (Jani Nikula's "drm/i915/pciids: add PVC PCI ID macros": 0B69, 0B6E,
0BD4-0BDB, 0BE0, 0BE1, 0BE5) and of Intel's out-of-tree backport (i915_pciids_local.h: 0BD0-0BD2,
0BD5-0BDB). V, read in copies of the patch and the header."""
DATA_CENTER_DRIVER_DOCS = "https://dgpu-docs.intel.com/driver/kernel-driver-types.html"
_DATA_CENTER_MAX = re.compile(r"Data Center GPU Max|\b8086:(?:" + "|".join(DATA_CENTER_MAX_IDS) + r")\b",
                              re.IGNORECASE)


def data_center_max(name: str) -> bool:
    """An Intel Data Center GPU Max, by the name xpu-smi or sycl-ls gives, or the PCI id sysfs gives."""
    return bool(_DATA_CENTER_MAX.search(name))


DATA_CENTER_MAX_REASON = ("needs Intel's data-center GPU driver stack (the out-of-tree i915 driver and its matched "
                          "user-mode driver from repositories.intel.com/gpu), not the client GPU driver of these "
                          "images (ppa:kobuk-team/intel-graphics)")
"""Why: "For data center GPUs, including Intel Data Center GPU Max Series and Intel Data Center GPU Flex
Series, the out-of-tree drivers are the only drivers validated by Intel" (dgpu-docs.intel.com
driver/kernel-driver-types.html, V); PyTorch's and Intel's images install the client PPA for client
GPUs and the repositories.intel.com streams otherwise (install_xpu.sh, DLE Dockerfiles, V). That the
client PPA's user-mode driver fails on Max is not stated by Intel (unverified): refused as unvalidated."""
