"""A Compose file (one service; with `--nodes N`, N services rehearsing N nodes), validated in the tests against
the compose-spec schema.

- A GPU request becomes a device reservation, `deploy.resources.reservations.devices` with
  `capabilities: [gpu]` and `count: all` (Docker, "Enable GPU access with Docker Compose": "count.
  Specified as an integer or the value all"; "You must set the capabilities field"; V). No `driver`:
  Docker's own `--gpus all` names none either, and the field is optional.
- Everything else is Docker's flag by its Compose name (compose-spec 05-services: devices, group_add,
  runtime, cap_add, security_opt, ipc, network_mode, ulimits, shm_size, environment, ports, volumes; V).
- `command:` replaces only the image's CMD, so the guard, the entry point, still runs; without a command
  the service keeps a terminal open (`stdin_open`, `tty`), for `docker compose run --rm dev`.
- Compose interpolates every value: `$NAME` and `${NAME}` become the shell's variables, `$$` a `$`,
  and `$(` is an error (compose-spec 12-interpolation; V). Every `$` of a value given is written `$$`,
  so the command, the environment and the paths arrive as given.
- A build of this host is never pulled (`pull_policy: never`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml

from accel_images.host.launch import WORKSPACE, Launch
from accel_images.host.runtimes import Rendered, refuse_engine_args
from accel_images.host.runtimes.nodes import accelerated, cluster_of, many_nodes, torchrun
from accel_images.host.runtimes.nodes import notes as nodes_notes

SERVICE = "dev"
NETWORK = "nodes"
"""The network N services share when `--nodes` rehearses N nodes on one host."""


def render(launch: Launch) -> Rendered:
    refuse_engine_args(launch, "compose")
    if many_nodes(launch):
        return rehearsal(launch)
    text = yaml.safe_dump({"services": {SERVICE: service(launch)}}, sort_keys=False, default_flow_style=False,
                          width=1000)
    return Rendered("compose", text)


def rehearsal(launch: Launch) -> Rendered:
    """N nodes rehearsed on this host: one service per node (`node0`, `node1`, ...), the same image and command,
    on one network whose DNS names each service by its name (Compose, "Networking in Compose"; V), so torchrun's
    rendezvous is `node0:PORT`. The host network would make the services one address and collide on the port,
    so it is left out (Compose's network_mode and networks exclude each other: compose-spec 05-services; V);
    the first service alone publishes the ports given, which N services could not all bind."""
    cluster = cluster_of(launch)
    endpoint = f"{node_name(0)}:{cluster.port}"
    node = replace(launch, command=tuple(torchrun(launch, endpoint)), extras=replace(launch.extras, name=None),
                   settings=replace(launch.settings, network=None))
    services: dict[str, Any] = {}
    for index in range(cluster.nodes):
        body = service(node if index == 0 else replace(node, extras=replace(node.extras, ports=())))
        body["networks"] = [NETWORK]
        services[node_name(index)] = body
    text = yaml.safe_dump({"services": services, "networks": {NETWORK: {}}}, sort_keys=False,
                          default_flow_style=False, width=1000)
    rehearsed = [f"a rehearsal of {cluster.nodes} nodes on this host, meeting over the Compose network (no RDMA); on"
                 " real nodes use --engine docker or enroot"]
    if accelerated(launch):
        rehearsed.append("every service sees all of this host's devices, and NCCL refuses two ranks on one GPU"
                         " (\"Duplicate GPU detected\"): rehearse with the CPU image (gloo), or give each service its"
                         " own devices")
    if launch.settings.network:
        rehearsed.append(f"network_mode {launch.settings.network} left out: the services share the `{NETWORK}` network")
    if launch.extras.name:
        rehearsed.append(f"--name {launch.extras.name} not used: the services are {node_name(0)}, {node_name(1)}, ...")
    return Rendered("compose", text, None, (*nodes_notes(launch, endpoint), *rehearsed))


def node_name(index: int) -> str:
    return f"node{index}"


def service(launch: Launch) -> dict[str, Any]:
    body: dict[str, Any] = {"image": launch.image}
    if launch.local:  # a build of this host: compose-spec's pull_policy `never`, never Docker Hub
        body["pull_policy"] = "never"
    if launch.extras.name:
        body["container_name"] = launch.extras.name
    if launch.command:
        body["command"] = [escaped(word) for word in launch.command]
    else:
        body.update(stdin_open=True, tty=True)
    body.update(session(launch))
    body.update(devices(launch))
    return body


def session(launch: Launch) -> dict[str, Any]:
    extras = launch.extras
    body: dict[str, Any] = {}
    if launch.user is not None:
        body["user"] = f"{launch.user[0]}:{launch.user[1]}"
    volumes = [f"{launch.workspace}:{WORKSPACE}"] if launch.workspace is not None else []
    volumes += [mount.spec() for mount in extras.mounts]
    volumes = [escaped(volume) for volume in volumes]
    if launch.workspace is not None:
        body["working_dir"] = WORKSPACE
    if volumes:
        body["volumes"] = volumes
    if extras.ports:
        body["ports"] = [port.spec for port in extras.ports]
    environment = (*launch.devices.environment, *extras.environment)
    if environment:
        body["environment"] = {name: escaped(value) for name, value in environment}
    return body


def escaped(value: str) -> str:
    """`value` as Compose reads it back after interpolation: each `$` doubled."""
    return value.replace("$", "$$")


def devices(launch: Launch) -> dict[str, Any]:
    options, settings = launch.devices, launch.settings
    body: dict[str, Any] = {}
    if options.devices:
        body["devices"] = [f"{path}:{path}" for path in options.devices]
    groups = [*options.group_add, *(str(gid) for gid in launch.environment_groups)]
    if groups:
        body["group_add"] = groups
    if options.runtime:
        body["runtime"] = options.runtime
    capabilities = [*options.cap_add, *settings.cap_add]
    if capabilities:
        body["cap_add"] = capabilities
    if options.security_opt:
        body["security_opt"] = list(options.security_opt)
    body["ipc"] = launch.ipc_mode
    if settings.network:
        body["network_mode"] = settings.network
    if settings.ulimits:
        body["ulimits"] = {name: int(value) if value.lstrip("-").isdigit() else value
                           for name, value in settings.ulimits}
    if settings.shm_size:
        body["shm_size"] = settings.shm_size
    if options.device_requests:
        body["deploy"] = {"resources": {"reservations": {"devices": [
            {"capabilities": list(request.capabilities[0]), "count": "all" if request.count == -1 else request.count}
            for request in options.device_requests]}}}
    return body
