"""A ROCm image on a host: the device flags it starts with, and whether it fits the host `recommend` judges.

Reading the host is `detect`'s (rocminfo, amd-smi, KFD topology); `fit` holds the host's amdgpu kernel
driver against the image's ROCm (knowledge.kernel_driver_reason: the host's own ROCm does not matter,
the image brings its user space) and its gfx targets against the wheel's, as the in-image guard does.
References:
- device flags: https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html
  ("--device=/dev/kfd --device=/dev/dri ... --ipc=host ... --security-opt seccomp=unconfined")
- session settings: AMD's PyTorch container line (ROCM_PYTORCH_DOCS)
- HSA_OVERRIDE_GFX_VERSION (unofficial): ROCm/legacy-rocm-build#1756, #2914 (compat-facts §8.8)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from accel_images.model.devices import (APPTAINER_GPU_DOCS, K8S_GPU_DOCS, SLURM_GRES_DOCS, DeviceOptions,
                                         SessionSettings, host_group_ids, under)
from accel_images.vendors.base import Fit
from accel_images.vendors.rocm import detect
from accel_images.vendors.rocm.knowledge import SUPPORT_MATRIX, RocmKnowledge, kernel_driver_reason

if TYPE_CHECKING:
    from accel_images.model.hostinfo import HostInfo, Runner
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant

ROCM_DOCS = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html"
ROCM_PYTORCH_DOCS = ("https://rocm.docs.amd.com/projects/install-on-linux/en/docs-6.2.0/"
                     "how-to/3rd-party/pytorch-install.html")
DEVICE_PATHS = ("/dev/kfd", "/dev/dri")

HSA_OVERRIDES = {
    "gfx1031": ("10.3.0", "gfx1030"), "gfx1032": ("10.3.0", "gfx1030"),
    "gfx1101": ("11.0.0", "gfx1100"), "gfx1102": ("11.0.0", "gfx1100"), "gfx1103": ("11.0.0", "gfx1100"),
}
"""Unofficial HSA_OVERRIDE_GFX_VERSION values users run these GPUs with, and the target each then
poses as (§8.8): RDNA2 parts as gfx1030, RDNA3 parts as gfx1100. AMD: "not supported by AMD but
some have had success"."""


class RocmHost(RocmKnowledge):
    """The ROCm vendor's host layer: device flags, session settings, detection and `fit`."""

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(vendor=self.name, devices=DEVICE_PATHS, ipc_mode="host",
                             security_opt=("seccomp=unconfined",),
                             group_add=host_group_ids(DEVICE_PATHS, dev_root),  # video/render, whatever their ids
                             # Apptainer's GPU page: --rocm binds /dev/dri and the host's ROCm libraries (V)
                             apptainer_flags=("--rocm",),
                             k8s_resource="amd.com/gpu",  # Kubernetes "Schedule GPUs": amd.com/gpu (V)
                             slurm_gres="gpu",            # Slurm gres.html: GRES "gpu", AutoDetect=rsmi (V)
                             sources=(ROCM_DOCS, ROCM_PYTORCH_DOCS, APPTAINER_GPU_DOCS, K8S_GPU_DOCS,
                                      SLURM_GRES_DOCS))

    def session_settings(self) -> SessionSettings:
        """AMD's PyTorch container line adds `--cap-add=SYS_PTRACE` (rocgdb and profilers attach to
        processes) to the device options; its `--shm-size 8G` is moot under `--ipc=host`."""
        return SessionSettings(cap_add=("SYS_PTRACE",), sources=(ROCM_PYTORCH_DOCS,))

    def accelerator_present(self, dev_root: Path) -> bool:
        return under(dev_root, "/dev/kfd").exists()

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        return detect.probe(run, root, notes)

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        """The host's amdgpu kernel driver must be one AMD's support matrix supports the image's ROCm on (the
        image brings its own user space: the host's ROCm does not matter), and the gfx target must be compiled
        into the wheel (§4.2)."""
        stack = variant.stack or ""
        outside = kernel_driver_reason(self.facts(kb).drivers, host.driver_version, stack)
        if outside:
            return Fit(variant, rejections=(outside,))
        caveats: list[str] = []
        if not host.gpu_archs:
            return Fit(variant, caveats=tuple(caveats), why=f"ROCm {stack}")
        compiled = variant.gpu_archs
        served = [a for a in host.gpu_archs if a in compiled]
        missing = [a for a in host.gpu_archs if a not in compiled]
        if not served:
            return Fit(variant, rejections=(f"GPU architecture {', '.join(missing)} is not compiled into the "
                                            f"{variant.wheel_index} wheel (it has {', '.join(compiled)})",))
        if missing:
            caveats.append(f"GPU architecture {', '.join(missing)} is not compiled into the {variant.wheel_index} "
                           f"wheel; only the {', '.join(served)} GPUs can use it")
        return Fit(variant, caveats=tuple(caveats), exact_arch=True,
                   why=f"{', '.join(served)} compiled into the {variant.wheel_index} wheel")

    def host_warnings(self, host: HostInfo, fits: list[Fit]) -> list[str]:
        warnings = []
        if host.device_count and not host.gpu_archs:
            warnings.append("the GPU gfx target is unknown: the image's compiled architectures were not checked")
        if not host.driver_version:
            warnings.append(f"the amdgpu kernel driver's version is unknown (a distribution's in-kernel driver has"
                            f" none): {SUPPORT_MATRIX} was not checked")
        return warnings + _hsa_override_hints(host, fits)

    def describe_host(self, host: HostInfo) -> list[str]:
        return [f"ROCm {host.stack_version}"] if host.stack_version else []



def _hsa_override_hints(host: HostInfo, fits: list[Fit]) -> list[str]:
    rocm = [f.variant for f in fits if f.variant.vendor == "rocm"]
    hints = []
    for arch in host.gpu_archs:
        if arch not in HSA_OVERRIDES or not rocm or any(arch in v.gpu_archs for v in rocm):
            continue
        version, poses_as = HSA_OVERRIDES[arch]
        hints.append(f"{arch} is in no official wheel; unofficial workaround, not supported by AMD: "
                     f"-e HSA_OVERRIDE_GFX_VERSION={version} makes ROCm treat it as {poses_as}")
    return hints
