"""A CUDA image on a host: the device flags it starts with, and whether it fits the host `recommend` judges.

Reading the host is `detect`'s (nvidia-smi, /proc/driver/nvidia); the driver and architecture rule
is `decision`'s, which the in-image guard applies too; this layer adds what only a host report
tells (the newest CUDA the driver reports) and what the knowledge base leaves unverified for the
host's platform. References:
- device flags: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
- CDI: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html
- session settings: NGC user guide, "Running PyTorch"
  https://docs.nvidia.com/deeplearning/frameworks/user-guide/index.html
- minor-version and forward compatibility: https://docs.nvidia.com/deploy/cuda-compatibility/
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from accel_images.model.devices import (APPTAINER_GPU_DOCS, K8S_GPU_DOCS, SLURM_GRES_DOCS, DeviceOptions,
                                         GpuRequest, SessionSettings, under)
from accel_images.vendors.base import Fit
from accel_images.vendors.cuda import detect
from accel_images.vendors.cuda.decision import FORWARD_COMPAT, decide
from accel_images.vendors.cuda.knowledge import CudaKnowledge
from accel_images.versions import parse

if TYPE_CHECKING:
    from accel_images.model.hostinfo import HostInfo, Runner
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant

NVIDIA_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"
NGC_PYTORCH_DOCS = "https://docs.nvidia.com/deeplearning/frameworks/user-guide/index.html"
NVIDIA_CDI_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"


class CudaHost(CudaKnowledge):
    """The CUDA vendor's host layer: device flags, session settings, detection and `fit`."""

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(
            vendor=self.name,
            device_requests=(GpuRequest(),),      # --gpus all
            # NVIDIA's CDI page: "podman run --rm --device nvidia.com/gpu=all --security-opt=label=disable" (V)
            cdi_devices=("nvidia.com/gpu=all",),
            # Apptainer's GPU page: --nv binds the /dev/nvidia* entries and the host's driver libraries (V)
            apptainer_flags=("--nv",),
            k8s_resource="nvidia.com/gpu",        # Kubernetes "Schedule GPUs": nvidia.com/gpu (V)
            slurm_gres="gpu",                     # Slurm gres.html: GRES "gpu", AutoDetect=nvml (V)
            sources=(NVIDIA_DOCS, NVIDIA_CDI_DOCS, APPTAINER_GPU_DOCS, K8S_GPU_DOCS, SLURM_GRES_DOCS),
        )

    def session_settings(self) -> SessionSettings:
        """NVIDIA starts its PyTorch containers with `--ipc=host --ulimit memlock=-1 --ulimit
        stack=67108864` (NGC user guide, "Running PyTorch"): pinned host memory for fast copies to
        the GPU, and a 64 MB stack for deep recursion in compiled code."""
        return SessionSettings(ulimits=(("memlock", "-1"), ("stack", "67108864")), sources=(NGC_PYTORCH_DOCS,))

    def accelerator_present(self, dev_root: Path) -> bool:
        return any(under(dev_root, path).exists() for path in ("/dev/nvidiactl", "/dev/nvidia0"))

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        return detect.probe(run, root, notes)

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        """The same decisions as the image's guard (`decide`), plus what only the host report tells:
        the newest CUDA the driver reports (moot when forward compatibility serves the host)."""
        elsewhere = self.not_served(kb, variant, host.gpu_archs)
        if elsewhere:
            return Fit(variant, (elsewhere,))
        decision = decide(host.driver_version, host.gpu_archs, variant, host.gpu_names,
                          self.compat_branches(kb, variant), self.compat_driver(kb, variant))
        rejections, caveats = list(decision.refusals), list(decision.warnings)
        if not rejections and host.stack_version and not decision.forward_compat:
            rejections += reported_cuda_rules(host.stack_version, variant.stack or "")
        if decision.forward_compat and host.driver_version and (unverified := self.unverified_native(
                kb, variant.platform, host.driver_version)):
            caveats.append(unverified)
        return Fit(variant, tuple(rejections), tuple(caveats), decision.exact_arch, decision.why,
                   FORWARD_COMPAT if decision.forward_compat else "")

    def host_warnings(self, host: HostInfo, fits: list[Fit]) -> list[str]:
        warnings = []
        if host.driver_version is None:
            warnings.append("the NVIDIA driver version is unknown: driver rules were not applied")
        if host.device_count and not host.gpu_archs:
            warnings.append("the GPU compute capability is unknown:"
                            " the image's compiled architectures were not checked")
        return warnings

    def describe_host(self, host: HostInfo) -> list[str]:
        return [f"CUDA up to {host.stack_version}"] if host.stack_version else []



def reported_cuda_rules(cuda_max: str, stack: str) -> list[str]:
    """A driver never runs a newer CUDA major (forward compatibility needs cuda-compat, data-center
    GPUs only). An older minor of the same major is what MVC allows, and the images require only
    `cuda>=<major>.0` (NVIDIA_REQUIRE_CUDA), so it is no reason against them."""
    try:
        reported, wanted = parse(cuda_max), parse(stack)
    except ValueError:
        return []
    if reported[0] < wanted[0]:
        return [f"the host driver supports CUDA up to {cuda_max}, older than CUDA {wanted[0]}.x "
                "(a newer CUDA major needs a newer driver)"]
    return []

