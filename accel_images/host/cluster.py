"""Training on N nodes: the facts every runtime's many-node form reads, beside the one-node Launch (a Launch
carries a Cluster; accel_images.host.runtimes.nodes holds what the renderers share in reading it).

A Launch with a Cluster of more than one node is rendered as the line (or document) that starts one
container per node, each running torchrun, which starts one process per device of the node and meets
the other nodes at a rendezvous (the c10d backend, hosted by the first node). What the fabric needs
from the container is said once, here, and each renderer translates it into its runtime's words:

- RDMA: the verbs devices `/dev/infiniband/uverbsN` ("Userspace communicates with the kernel ... via
  the /dev/infiniband/uverbsN character devices": Linux, Documentation/infiniband/user_verbs.rst; V),
  passed as the directory; `IPC_LOCK` and an unlimited memlock, since RDMA pins the memory it
  registers (Red Hat, "Configuring InfiniBand and RDMA networks", ch. 5; V; the RDMA device plugin's own
  test Pod adds IPC_LOCK: Mellanox/k8s-rdma-shared-dev-plugin example/test-hca-pod.yaml; V); the host's
  network, so the HCA's network devices are the container's (AMD's RCCL container: `--network=host`,
  rocm.docs.amd.com/projects/rccl/en/latest/install/docker-install.html; V). That NVIDIA's NCCL and AMD's
  RCCL need all four together in a container is inferred (I): no vendor page giving one `docker run`
  with all four was found; without them NCCL falls back to IP sockets (NCCL_IB_DISABLE, "NCCL will fall
  back to using IP sockets": docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html; V).
- The rendezvous: `torchrun --nnodes N --nproc-per-node P --rdzv-backend c10d --rdzv-endpoint HOST:PORT`
  (PyTorch, "torchrun (Elastic Launch)": docs.pytorch.org/docs/stable/elastic/run.html; V), P the devices
  the host description counts (one where it counts none, as the renderers' notes say).
A vendor without an accelerator (the CPU image) uses gloo over TCP: no RDMA, one process per node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from accel_images.errors import InputError

RDZV_PORT = 29500
"""The rendezvous port: torch.distributed's customary MASTER_PORT; any free port on the first node works."""
RDMA_DEVICE = "/dev/infiniband"
RDMA_CAPABILITY = "IPC_LOCK"
RDMA_MEMLOCK = ("memlock", "-1")
TORCHRUN_DOCS = "https://docs.pytorch.org/docs/stable/elastic/run.html"
NCCL_SOCKETS_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
K8S_KINDS = ("job", "pytorchjob")
"""How `--engine kubernetes` runs N pods: an indexed Job with a headless Service (Kubernetes' own), or the
Kubeflow training operator's PyTorchJob (where the cluster has the operator)."""
TRAIN_SCRIPT = "train.py"
"""The script torchrun starts where the command names none: a placeholder, and the notes say so."""
_RESOURCE = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/[A-Za-z0-9]([-A-Za-z0-9_.]*"
                       r"[A-Za-z0-9])?")
"""An extended resource name, `DOMAIN/NAME` (Kubernetes, "Extended resources"; what a device plugin registers)."""


@dataclass(frozen=True)
class Cluster:
    """N nodes of the same image: how many, where they meet, and which Kubernetes forms the user asked for."""

    nodes: int = 1
    port: int = RDZV_PORT
    rdma_resource: str | None = None
    """The RDMA device plugin's resource (its name is the plugin's: `rdma/hca_shared_devices_a` for the
    k8s-rdma-shared-dev-plugin); None: a Pod asks for none, and NCCL uses TCP."""
    k8s_kind: str = "job"

    @property
    def many(self) -> bool:
        return self.nodes > 1

    @classmethod
    def parse(cls, nodes: str | int, rdma_resource: str | None = None, k8s_kind: str = "job") -> Cluster:
        """The options as given on the command line, each refused in one line naming it."""
        text = str(nodes).strip()
        if not text.isdigit() or int(text) < 1:
            raise InputError(f"{nodes!r} is not a number of nodes (a whole number, 1 or more)", field="--nodes")
        if rdma_resource is not None and not _RESOURCE.fullmatch(rdma_resource):
            raise InputError(f"{rdma_resource!r} is not an extended resource name (DOMAIN/NAME, e.g."
                             " rdma/hca_shared_devices_a)", field="--rdma-resource")
        if k8s_kind not in K8S_KINDS:
            raise InputError(f"unknown kind {k8s_kind!r}", field="--k8s-kind", hint=f"one of {', '.join(K8S_KINDS)}")
        return cls(int(text), RDZV_PORT, rdma_resource, k8s_kind)
