"""An Intel Gaudi image on a host: the device flags it starts with, and whether it fits the host `recommend` judges.

Reading the host is `detect`'s (hl-smi); `fit` holds the image's Intel Gaudi software against the host
driver's (decision.py's rule, the guard's `admits`). References:
- `docker run --runtime=habana -e HABANA_VISIBLE_DEVICES=all ... --cap-add=sys_nice --ipc=host`:
  https://docs.habana.ai/en/latest/shared/Pull_Prebuilt_Containers.html (GAUDI_DOCS)
- the habana runtime's registration: GAUDI_DOCKER_DOCS; Kubernetes: GAUDI_K8S_DOCS
- the unlimited memlock RDMA needs: RDMA_MEMLOCK_DOCS
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from accel_images.model.devices import APPTAINER_GPU_DOCS, DeviceOptions, SessionSettings, nodes, pci_vendor_is
from accel_images.vendors.base import Fit
from accel_images.vendors.gaudi import detect
from accel_images.vendors.gaudi.decision import N_MINUS_1_SINCE, OLDER_ON_GAUDI2, _behind
from accel_images.vendors.gaudi.detect import GAUDI2, generation
from accel_images.vendors.gaudi.knowledge import GaudiKnowledge
from accel_images.versions import compare_driver

if TYPE_CHECKING:
    from accel_images.model.hostinfo import HostInfo, Runner
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant

GAUDI_DOCS = "https://docs.habana.ai/en/latest/shared/Pull_Prebuilt_Containers.html"
RDMA_MEMLOCK_DOCS = ("https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/9/html/"
                     "configuring_infiniband_and_rdma_networks/"
                     "increasing-the-amount-of-memory-that-users-are-allowed-to-pin-in-the-system_"
                     "configuring-infiniband-and-rdma-networks")
GAUDI_DOCKER_DOCS = "https://docs.habana.ai/en/latest/Installation_Guide/Additional_Installation/Docker_Installation.html"
GAUDI_K8S_DOCS = "https://docs.habana.ai/en/latest/Orchestration/Gaudi_Kubernetes/index.html"
HABANA_PCI_VENDOR = "0x1da3"


class GaudiHost(GaudiKnowledge):
    """The Intel Gaudi vendor's host layer: device flags, session settings, detection and `fit`."""

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(
            vendor=self.name,
            runtime="habana",  # the habana runtime mounts the device nodes itself
            environment=(("HABANA_VISIBLE_DEVICES", "all"), ("OMPI_MCA_btl_vader_single_copy_mechanism", "none")),
            cap_add=("SYS_NICE",),
            ipc_mode="host",  # "required for distributed training using HCCL"
            # Habana's Docker installation registers "habana": {"path": "/usr/bin/habana-container-runtime"} (V);
            # that path given to Podman's --runtime is inferred (I): no Habana document names Podman.
            runtime_path="/usr/bin/habana-container-runtime",
            # Habana's Kubernetes job example: limits "habana.ai/gaudi: 1", no HABANA_VISIBLE_DEVICES (V).
            k8s_resource="habana.ai/gaudi",
            selection_env=("HABANA_VISIBLE_DEVICES",),
            # Apptainer needs no flag: "all of /dev on the host is normally made available" (V); Slurm: Intel
            # Gaudi's own Slurm fork schedules it as a GRES whose name is the site's (unverified), so none here.
            sources=(GAUDI_DOCS, GAUDI_DOCKER_DOCS, GAUDI_K8S_DOCS, APPTAINER_GPU_DOCS),
        )

    def session_settings(self) -> SessionSettings:
        """Habana's `docker run` for its containers adds `--net=host` (Pull_Prebuilt_Containers, V),
        which scale-out over the hosts' NICs (HCCL) needs; a session gets it, the smoke run does not
        (one device, no network: accel_images/smoke/launcher.py runs it with the network off).
        `--ulimit memlock=-1`: RDMA pins the memory it registers, and pinning beyond the default
        limit is what the unlimited memlock grants (Red Hat, "Configuring InfiniBand and RDMA
        networks", ch. 5, V for RDMA in general); that Habana's host-NIC scale-out needs it is
        inferred (I: no Habana document asking for it was found)."""
        return SessionSettings(network="host", ulimits=(("memlock", "-1"),), sources=(GAUDI_DOCS, RDMA_MEMLOCK_DOCS))

    def accelerator_present(self, dev_root: Path) -> bool:
        if nodes(dev_root, "/dev", r"hl\d+"):
            return True
        return any(pci_vendor_is(dev_root, "accel", node.name, HABANA_PCI_VENDOR)
                   for node in nodes(dev_root, "/dev/accel", r"accel\d+"))

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        return detect.probe(run, root, notes)

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        """Image software must equal the host's; on Gaudi 2 with host software >= 1.17 it may be older
        within the host's minor release or the one before (`_behind`). The guard's `admits` is the same rule."""
        image_sw, host_sw = variant.stack or "", host.stack_version
        if host_sw is None:
            return Fit(variant, rejections=("the host's Intel Gaudi software version is unknown "
                                            "(hl-smi reported no driver version)",))
        if compare_driver(image_sw, host_sw) == 0:
            return Fit(variant, exact_arch=True, why=f"Intel Gaudi software {image_sw} matches the host's driver")
        behind = _behind(image_sw, host_sw)
        if behind and _gaudi2(host) and compare_driver(host_sw, N_MINUS_1_SINCE) >= 0:
            return Fit(variant, caveats=(f"image Gaudi software {image_sw} is {behind} behind the host's "
                                         f"{host_sw}: allowed on Gaudi 2 only (backward compatibility since 1.17)",),
                       exact_arch=True,
                       why=f"Intel Gaudi software {image_sw} runs on Gaudi 2 with {host_sw} ({behind} behind)")
        return Fit(variant, rejections=(f"image Gaudi software {image_sw} differs from the host's {host_sw}: "
                                        f"container and host driver must match ({OLDER_ON_GAUDI2})",))

    def describe_host(self, host: HostInfo) -> list[str]:
        return [f"Intel Gaudi software {host.stack_version}"] if host.stack_version else []


def _gaudi2(host: HostInfo) -> bool:
    """Every device is a Gaudi 2, by the detected generation; a host recorded with names only (an
    older --host-json) by the generation its model names give."""
    generations = host.gpu_archs or tuple(generation(name) or "" for name in host.gpu_names)
    return bool(generations) and set(generations) == {GAUDI2}
