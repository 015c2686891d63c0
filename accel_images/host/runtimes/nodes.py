"""What the many-node forms share in reading a Launch's Cluster (accel_images.host.cluster says why each fact)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from accel_images.host.cluster import RDMA_CAPABILITY, RDMA_DEVICE, RDMA_MEMLOCK, TRAIN_SCRIPT, Cluster
from accel_images.host.launch import Launch
from accel_images.host.runtimes import Rendered, shell_join


def cluster_of(launch: Launch) -> Cluster:
    """The Launch's Cluster; a renderer asks only once it knows there is one of several nodes."""
    if launch.cluster is None:
        raise ValueError("a one-node Launch has no many-node form")
    return launch.cluster


def many_nodes(launch: Launch) -> bool:
    return launch.cluster is not None and launch.cluster.many


def accelerated(launch: Launch) -> bool:
    """Whether the vendor has devices to pass (its collective library can use RDMA); without, gloo over TCP."""
    options = launch.devices
    return bool(options.device_requests or options.devices or options.runtime)


def processes_per_node(launch: Launch) -> int:
    """One process per device the host description counts; one where it counts none, and for the CPU image."""
    return (launch.device_count or 1) if accelerated(launch) else 1


def with_fabric(launch: Launch) -> Launch:
    """The Launch of one node's container: the host's network on every node (the rendezvous and the collectives
    cross nodes, and a bridge network would hide the node's address and ports), and where the vendor has an
    accelerator the RDMA devices, IPC_LOCK and unlimited memlock, each added only where the vendor has not
    already asked for it (CUDA's memlock, Habana's network), so Docker, Podman and Compose write each flag once."""
    settings = replace(launch.settings, network="host")
    if not accelerated(launch):
        return replace(launch, settings=settings)
    options = launch.devices
    devices = options.devices if RDMA_DEVICE in options.devices else (*options.devices, RDMA_DEVICE)
    ulimits = settings.ulimits if any(name == RDMA_MEMLOCK[0] for name, _ in settings.ulimits) \
        else (*settings.ulimits, RDMA_MEMLOCK)
    capabilities = settings.cap_add if RDMA_CAPABILITY in (*options.cap_add, *settings.cap_add) \
        else (*settings.cap_add, RDMA_CAPABILITY)
    return replace(launch, devices=replace(options, devices=devices),
                   settings=replace(settings, ulimits=ulimits, cap_add=capabilities))


def torchrun(launch: Launch, endpoint: str, *extra: str) -> list[str]:
    """`torchrun --nnodes N --nproc-per-node P --rdzv-backend c10d --rdzv-endpoint ENDPOINT [extra] SCRIPT ARGS`.
    The command's `python SCRIPT ARGS` becomes `SCRIPT ARGS` (torchrun starts the script with Python); any other
    command runs as it is, `--no-python` (torchrun: "Skip prepending the training script with 'python'")."""
    cluster = cluster_of(launch)
    words = ["torchrun", "--nnodes", str(cluster.nodes), "--nproc-per-node", str(processes_per_node(launch)),
             "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, *extra]
    command = launch.command
    if not command:
        return [*words, TRAIN_SCRIPT]
    if re.fullmatch(r"python3?(\.\d+)?", command[0]) and len(command) > 1 and not command[1].startswith("-"):
        return [*words, *command[1:]]
    return [*words, "--no-python", *command]


def notes(launch: Launch, where: str) -> list[str]:
    """What every many-node form says: where the rendezvous is, how many processes per node and why, and what
    carries the collectives."""
    cluster = cluster_of(launch)
    found = [f"{cluster.nodes} nodes meet at {where} (torchrun's c10d rendezvous, port {cluster.port}); each starts"
             f" {processes_per_node(launch)} process(es)"]
    if accelerated(launch) and not launch.device_count:
        found.append(f"--nproc-per-node 1: the host description counts no {launch.vendor} devices (pass --host-json"
                     " with a node's)")
    if not accelerated(launch):
        found.append(f"{launch.vendor}: no accelerator: gloo over TCP, one process per node, no RDMA devices")
    if not launch.command:
        found.append(f"{TRAIN_SCRIPT} stands for your training script: pass it after `--`")
    return found


FIRST_NODE = "FIRST_NODE_ADDR"
"""The placeholder a per-node line carries for the first node's address, which only the person knows."""


def on_each_node(launch: Launch, engine: str,
                 argv_of: Callable[[Launch], tuple[tuple[str, ...], tuple[str, ...]]]) -> Rendered:
    """The line to run on each node (Docker, Podman): the node's container with the fabric (with_fabric) running
    torchrun, whose rendezvous is the first node's address, a placeholder the first line says to fill in.
    Nothing is executed here (argv None): the line is for the nodes, not this host."""
    cluster = cluster_of(launch)
    endpoint = f"{FIRST_NODE}:{cluster.port}"
    argv, own_notes = argv_of(replace(with_fabric(launch), command=tuple(torchrun(launch, endpoint))))
    header = (f"# on each of the {cluster.nodes} nodes, with {FIRST_NODE} replaced by the first node's address"
              " (one every node reaches):\n")
    fabric = [f"{RDMA_DEVICE} must exist on every node (the RDMA verbs devices): without an RDMA network, leave out"
              f" --device {RDMA_DEVICE}, and NCCL uses TCP"] if accelerated(launch) else []
    return Rendered(engine, header + shell_join(argv) + "\n", None,
                    (*notes(launch, endpoint), *fabric, *own_notes))
