"""AMD ROCm: rocmX.Y wheels (they bundle the ROCm user space) on plain Ubuntu, rocm/dev-ubuntu for
devel, /dev/kfd and /dev/dri with their host groups, gfx-target rules.

`VENDOR` is the one object the rest of the package asks (vendors/__init__.py registers it). Its
class is put together from one module per concern, each over the one below it:
- knowledge.py: the tables of data/vendors/rocm.yaml (`RocmFacts`), AMD's kernel-driver support
  matrix, and what follows from them (which combinations work, how a variant resolves);
- image.py: what an image holds: the guard's environment, the claims its facts.json is checked against;
- host.py: the device flags, and whether an image fits a host (`fit`), by
- detect.py: reading the host (rocminfo, amd-smi, KFD topology);
- guard.py, guard.sh: the shell `check_vendor` the in-image guard gets.

References (each module lists those its own rules follow):
- wheel indexes per torch: PyTorch RELEASE.md; gfx targets: pytorch/pytorch#164854, #167299
- device flags: https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html
  ("--device=/dev/kfd --device=/dev/dri ... --ipc=host ... --security-opt seccomp=unconfined")
- HSA_OVERRIDE_GFX_VERSION (unofficial): ROCm/legacy-rocm-build#1756, #2914 (compat-facts §8.8)
- the host's amdgpu kernel driver against the image's ROCm: AMD's user and kernel-space support matrix
  (rocm.yaml kernel_driver, SUPPORT_MATRIX_DOCS)
"""

from __future__ import annotations

from pathlib import Path

from accel_images.vendors.collective import Collective
from accel_images.vendors.rocm.detect import (AmdSmiStatic, AmdSmiTable, amd_smi_failure, gfx, kfd_arch,
                                              parse_amd_smi_static, parse_amd_smi_table, parse_rocminfo,
                                              rocminfo_failure)
from accel_images.vendors.rocm.guard import GUARD
from accel_images.vendors.rocm.host import DEVICE_PATHS, HSA_OVERRIDES, ROCM_DOCS, ROCM_PYTORCH_DOCS, RocmHost
from accel_images.vendors.rocm.image import RocmImage
from accel_images.vendors.rocm.knowledge import (SUPPORT_MATRIX, SUPPORT_MATRIX_DOCS, DriverRelease, DriverWindow,
                                                 RocmFacts, RocmKnowledge, driver_release, driver_window,
                                                 kernel_driver_reason, load_drivers)

__all__ = ["COLLECTIVE", "DEVICE_PATHS", "GUARD", "HSA_OVERRIDES", "ROCM_DOCS", "ROCM_PYTORCH_DOCS", "SUPPORT_MATRIX",
           "SUPPORT_MATRIX_DOCS", "VENDOR", "AmdSmiStatic", "AmdSmiTable", "DriverRelease", "DriverWindow", "Rocm",
           "RocmFacts", "amd_smi_failure", "driver_release", "driver_window", "gfx", "kernel_driver_reason", "kfd_arch",
           "load_drivers", "parse_amd_smi_static", "parse_amd_smi_table", "parse_rocminfo", "rocminfo_failure"]


COLLECTIVE = Collective("nccl", "cuda", library="rccl")
"""RCCL is `nccl` in a HIP build of torch, its GPUs `cuda` devices
(https://docs.pytorch.org/docs/stable/distributed.html#backends); facts.json names the library, rccl."""


class Rocm(RocmHost, RocmImage, RocmKnowledge):
    """The AMD vendor: its knowledge, image and host layers in one object (see the module docstring)."""


VENDOR = Rocm(
    name="rocm",
    title="AMD ROCm",
    stack_name="ROCm",
    smoke_backend="rocm",
    collective=COLLECTIVE,
    kb_file=Path(__file__).parent.parent.parent / "data" / "vendors" / "rocm.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gpu-amd"),
    detect_rank=20,
    guard_check=GUARD,
    sources=(ROCM_DOCS, ROCM_PYTORCH_DOCS, SUPPORT_MATRIX_DOCS),
)
