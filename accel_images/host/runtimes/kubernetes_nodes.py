"""Kubernetes on N nodes: N Pods of the image (the Pod the kubernetes renderer makes, accel_images.host.runtimes.pod),
one per node, each running torchrun, meeting at the first. Validated in the tests against the API's OpenAPI schema.

Two forms (`--k8s-kind`):
- `job` (the default): an indexed Job (`completionMode: Indexed`, `completions` and `parallelism` N) and a
  headless Service (`clusterIP: None`) named as the Pods' `subdomain`, so pod i is `NAME-i.NAME` and pod 0 is
  found by DNS (Kubernetes, "Job with Pod-to-Pod Communication": an Indexed Job's Pods are named
  `$(job-name)-$(index)`, and a headless Service selecting `job-name` gives them DNS names; V;
  kubernetes.io/docs/tasks/job/job-with-pod-to-pod-communication/). The rendezvous reaches torchrun through the
  environment: MASTER_ADDR (pod 0's name) and MASTER_PORT, which the kubelet expands where the command says
  `$(NAME)` (the API's Container.command; V). `backoffLimit: 0`: one failed Pod fails the Job, since the
  others' torchrun cannot go on without it (I).
- `pytorchjob`: the Kubeflow training operator's PyTorchJob (kubeflow.org/v1), a Master replica and N-1 Workers,
  where the cluster runs the operator. The operator sets MASTER_ADDR and MASTER_PORT in every Pod (Kubeflow,
  "PyTorch Training (PyTorchJob)"; V) from the container named `pytorch` and its port named `pytorchjob-port`
  (kubeflow/training-operator pkg/apis/kubeflow.org/v1/pytorch_types.go: PytorchJobDefaultContainerName,
  PytorchJobDefaultPortName; V).
RDMA: the device plugin's resource that `--rdma-resource` names, 1 per Pod, with IPC_LOCK added, as the plugin's
own example Pod has them (Mellanox/k8s-rdma-shared-dev-plugin, example/test-hca-pod.yaml: `rdma/hca_shared_devices_a:
1`, `capabilities: add: ["IPC_LOCK"]`; V). Without it, no RDMA resource, and NCCL uses TCP (the notes say so).
The Pods use the cluster's network, not the node's: a host-network Pod's name is its node's, which the DNS
names above need (I); a vendor's host network is left out, and the notes say so.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

import yaml

from accel_images.errors import InputError
from accel_images.host.cluster import NCCL_SOCKETS_DOCS, RDMA_CAPABILITY
from accel_images.host.launch import Launch
from accel_images.host.runtimes import Rendered, ShellWord
from accel_images.host.runtimes.nodes import accelerated, cluster_of, torchrun
from accel_images.host.runtimes.nodes import notes as nodes_notes
from accel_images.host.runtimes.pod import escaped, pod_notes, pod_spec, security_header
from accel_images.model.variant import ENTRYPOINT

DEFAULT_NAME = "accel-images-train"
"""The Job's, Service's or PyTorchJob's name where --name gives none: fixed, since the Pods find pod 0 by it."""
NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
"""A DNS label (RFC 1035), what a Service's name must be; with `-INDEX` added it must stay a 63-character label."""
ENDPOINT = ShellWord("$(MASTER_ADDR):$(MASTER_PORT)")
"""The rendezvous as the kubelet expands it from the environment."""
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT = "pytorchjob-port"


def render(launch: Launch) -> Rendered:
    cluster = cluster_of(launch)
    name = job_name(launch)
    node = pod_launch(launch)
    if cluster.k8s_kind == "pytorchjob":
        documents = [pytorchjob(node, launch, name)]
        where = "the Master replica"
    else:
        documents = [service(name), indexed_job(node, launch, name)]
        where = f"{name}-0.{name}"
    text = yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False, width=1000)
    return Rendered("kubernetes", security_header(node) + text, None,
                    (*nodes_notes(launch, where), *fabric_notes(launch), *pod_notes(node)))


def job_name(launch: Launch) -> str:
    """--name, else DEFAULT_NAME; refused in one line where the API server would refuse the Service's name or the
    Pods' host names (`NAME-INDEX`, at most 63 characters)."""
    name = launch.extras.name or DEFAULT_NAME
    longest = len(f"{name}-{cluster_of(launch).nodes - 1}")
    if not NAME.fullmatch(name) or longest > 63:
        raise InputError(f"{name!r} cannot name {cluster_of(launch).nodes} Pods and their Service: lowercase letters,"
                         " digits and '-', starting with a letter, ending with a letter or digit, and with '-INDEX'"
                         " at most 63 characters (RFC 1035)", field="--name")
    return name


def pod_launch(launch: Launch) -> Launch:
    """The Launch each Pod renders: IPC_LOCK added where an RDMA resource is asked for (so the Pod Security
    Standard the header states counts it), the vendor's host network left out (see the module docstring)."""
    settings = replace(launch.settings, network=None)
    if cluster_of(launch).rdma_resource and accelerated(launch):
        settings = replace(settings, cap_add=(*settings.cap_add, RDMA_CAPABILITY))
    return replace(launch, settings=settings)


def node_spec(node: Launch, launch: Launch, container_name: str = "main") -> dict[str, Any]:
    """The Pod's spec running torchrun (the user's words escaped for the kubelet, the rendezvous not), with the RDMA
    resource where one is named."""
    spec = pod_spec(node)
    body = spec["containers"][0]
    body["name"] = container_name
    body["command"] = [str(word) if isinstance(word, ShellWord) else escaped(word)
                       for word in (*ENTRYPOINT, *torchrun(launch, ENDPOINT))]
    rdma = cluster_of(launch).rdma_resource
    if rdma and accelerated(launch):
        body.setdefault("resources", {}).setdefault("limits", {})[rdma] = 1
    return spec


def service(name: str) -> dict[str, Any]:
    """The headless Service that gives the Job's Pods their DNS names: it selects them by `job-name`."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": "None", "selector": {"job-name": name}}}


def indexed_job(node: Launch, launch: Launch, name: str) -> dict[str, Any]:
    cluster = cluster_of(launch)
    spec = node_spec(node, launch)
    spec["subdomain"] = name
    body = spec["containers"][0]
    env = [{"name": "MASTER_ADDR", "value": f"{name}-0.{name}"}, {"name": "MASTER_PORT", "value": str(cluster.port)},
           *body.pop("env", [])]
    spec["containers"][0] = {**{key: body.pop(key) for key in ("name", "image", "imagePullPolicy", "command")
                                if key in body}, "env": env, **body}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completionMode": "Indexed", "completions": cluster.nodes, "parallelism": cluster.nodes,
                     "backoffLimit": 0, "template": {"spec": spec}}}


def pytorchjob(node: Launch, launch: Launch, name: str) -> dict[str, Any]:
    """Master (1) and Worker (N-1) replicas of the same Pod, its container `pytorch` with the rendezvous port named
    as the operator reads it."""
    cluster = cluster_of(launch)
    spec = node_spec(node, launch, PYTORCH_CONTAINER)
    spec["containers"][0]["ports"] = [{"name": PYTORCH_PORT, "containerPort": cluster.port, "protocol": "TCP"},
                                      *spec["containers"][0].get("ports", [])]
    replicas = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}},
                "Worker": {"replicas": cluster.nodes - 1, "restartPolicy": "Never",
                           "template": {"spec": copy.deepcopy(spec)}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": replicas}}


def fabric_notes(launch: Launch) -> list[str]:
    cluster = cluster_of(launch)
    found: list[str] = []
    if accelerated(launch) and not cluster.rdma_resource:
        found.append(f"no RDMA resource asked for: NCCL uses TCP ({NCCL_SOCKETS_DOCS}); pass --rdma-resource with"
                     " the cluster's RDMA device plugin resource (e.g. rdma/hca_shared_devices_a)")
    if launch.settings.network:
        found.append(f"{launch.vendor}'s host network left out: the Pods find each other by the cluster's DNS")
    if cluster.k8s_kind == "pytorchjob":
        found.append("a PyTorchJob needs the Kubeflow training operator in the cluster, which sets MASTER_ADDR and"
                     " MASTER_PORT")
    return found
