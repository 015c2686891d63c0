"""NVIDIA CUDA: cuXY wheels on nvidia/cuda bases, `--gpus all`, driver and architecture rules.

`VENDOR` is the one object the rest of the package asks (vendors/__init__.py registers it). Its
class is put together from one module per concern, each over the one below it:
- knowledge.py: the tables of data/vendors/cuda.yaml (`CudaFacts`) and what follows from them
  (which combinations work, how a variant resolves);
- image.py: what an image holds: the guard's environment, the claims its facts.json is checked against;
- host.py: the device flags, and whether an image fits a host (`fit`), by
- decision.py: the driver and architecture rule the guard and `recommend` share, and
- detect.py: reading the host (nvidia-smi, /proc/driver/nvidia);
- guard.py, guard.sh: the shell `check_vendor` the in-image guard gets.

References (each rule names its section of compat-facts.md and the vendor source; each module
lists those its own rules follow):
- wheel indexes, toolkits and SASS targets per torch: PyTorch RELEASE.md
  https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix
- toolkit -> driver: https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html
- minor-version compatibility floors: https://docs.nvidia.com/deploy/cuda-compatibility/
- forward compatibility (cuda-compat, data-center GPUs only; CUDA error 804 elsewhere):
  https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html; the branches each
  nvidia/cuda base serves: its NVIDIA_REQUIRE_CUDA (cuda.yaml forward_compat, families.compat_branches);
  the container toolkit loads the compat libraries unless nvidia-container-runtime.modes.legacy.cuda-compat-mode
  is `disabled` (NVIDIA/nvidia-container-toolkit api/config/v1/runtime.go)
- the driver under /usr/local/nvidia on GKE: GoogleCloudPlatform/container-engine-accelerators
  cmd/nvidia_gpu/nvidia_gpu.go (-container-path /usr/local/nvidia)
- device flags: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
"""

from __future__ import annotations

from pathlib import Path

from accel_images.vendors.collective import Collective
from accel_images.vendors.cuda.decision import (COMPAT_LOADED, CONSUMER_BRANDS, FORWARD_COMPAT, PTX_MARK, WAYS_OUT,
                                                Compat, Decision, compat_loaded, consumer, decide, sass_for,
                                                split_archs)
from accel_images.vendors.cuda.detect import (ARCHITECTURE_CC, JETSON_GPU_CC, NVIDIA_PCI_VENDOR, NvidiaReport,
                                              nvidia_failure, parse_nvidia_full, parse_nvidia_query,
                                              parse_nvidia_table)
from accel_images.vendors.cuda.guard import GUARD
from accel_images.vendors.cuda.host import NGC_PYTORCH_DOCS, NVIDIA_CDI_DOCS, NVIDIA_DOCS, CudaHost
from accel_images.vendors.cuda.image import PTX_PREFIX, SASS_PREFIX, CudaImage
from accel_images.vendors.cuda.knowledge import CudaFacts, CudaKnowledge

__all__ = ["ARCHITECTURE_CC", "COLLECTIVE", "COMPAT_LOADED", "CONSUMER_BRANDS", "FORWARD_COMPAT", "GUARD",
           "JETSON_GPU_CC", "NGC_PYTORCH_DOCS", "NVIDIA_CDI_DOCS", "NVIDIA_DOCS", "NVIDIA_PCI_VENDOR", "PTX_MARK",
           "PTX_PREFIX", "SASS_PREFIX", "VENDOR", "WAYS_OUT", "Compat", "Cuda", "CudaFacts", "Decision",
           "NvidiaReport", "compat_loaded", "consumer", "decide", "nvidia_failure", "parse_nvidia_full",
           "parse_nvidia_query", "parse_nvidia_table", "sass_for", "split_archs"]


COLLECTIVE = Collective("nccl", "cuda", library="nccl")
"""NCCL between CUDA devices: torch.distributed's `nccl` backend
(https://docs.pytorch.org/docs/stable/distributed.html#backends); facts.json names it nccl."""


class Cuda(CudaHost, CudaImage, CudaKnowledge):
    """The NVIDIA vendor: its knowledge, image and host layers in one object (see the module docstring)."""


VENDOR = Cuda(
    name="cuda",
    title="NVIDIA CUDA",
    stack_name="CUDA",
    smoke_backend="cuda",
    collective=COLLECTIVE,
    kb_file=Path(__file__).parent.parent.parent / "data" / "vendors" / "cuda.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gpu-nvidia"),
    detect_rank=10,
    guard_check=GUARD,
    sources=(NVIDIA_DOCS,),
)
