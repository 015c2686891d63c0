"""A Kubernetes Pod, validated in the tests against the API's OpenAPI schema (kubernetes-validate).

- Devices come from the vendor's device plugin as an extended resource, "GPUs are only supposed to be
  specified in the limits section" (Kubernetes, Schedule GPUs; V): `limits: {RESOURCE: 1}`. The plugin
  picks the devices, so the environment variables that pick them for a runtime hook (the vendor's
  selection_env) are left to it: Habana's job example sets none (V).
- Shared memory: a memory-backed emptyDir at /dev/shm ("medium: Memory", the API's emptyDir); where the
  vendor itself asks for the host IPC namespace (its Docker `--ipc host`), `hostIPC: true` instead, as
  Habana's job example has it (V).
- A session's host network (the vendor's, for scale-out over the host's NICs) is `hostNetwork: true`.
- The pod runs as the image's own user (runAsUser, runAsGroup, and fsGroup so volumes are writable);
  supplementalGroups carry the device groups' ids as this host has them (I: a node's may differ).
- The image by digest where it is known ("Digests are hashes of the image's content, and are
  immutable": Kubernetes, Images; V).
- `command:` replaces the image's entry point, so it starts with the entry point's own words (the
  guard); without a command the pod sleeps, for `kubectl exec -it accel-images -- bash`.
"""

from __future__ import annotations

from typing import Any

import yaml

from accel_images.host.launch import Launch
from accel_images.host.runtimes import Rendered, refuse_engine_args
from accel_images.model.variant import ENTRYPOINT

SHM_VOLUME = "dshm"


def render(launch: Launch) -> Rendered:
    refuse_engine_args(launch, "kubernetes")
    text = yaml.safe_dump(manifest(launch), sort_keys=False, default_flow_style=False, width=1000)
    return Rendered("kubernetes", text, None, notes(launch))


def manifest(launch: Launch) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "securityContext": pod_security(launch)}
    if launch.vendor_wants_host_ipc:
        spec["hostIPC"] = True
    if launch.settings.network == "host":
        spec["hostNetwork"] = True
    spec["containers"] = [container(launch)]
    volumes = [] if launch.vendor_wants_host_ipc else [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    volumes += [{"name": f"volume-{index}", "hostPath": {"path": mount.source}}
                for index, mount in enumerate(launch.extras.mounts, 1)]
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": launch.extras.name or "accel-images"},
            "spec": spec}


def pod_security(launch: Launch) -> dict[str, Any]:
    uid, gid = launch.image_user
    context: dict[str, Any] = {"runAsUser": uid, "runAsGroup": gid, "fsGroup": gid}
    if launch.devices.group_add:
        context["supplementalGroups"] = [int(group) for group in launch.devices.group_add]
    return context


def container(launch: Launch) -> dict[str, Any]:
    options, extras = launch.devices, launch.extras
    body: dict[str, Any] = {"name": "main", "image": launch.pinned_image,
                            "command": [*ENTRYPOINT, *(launch.command or ("sleep", "infinity"))]}
    environment = [(name, value) for name, value in options.environment if name not in options.selection_env]
    if environment or extras.environment:
        body["env"] = [{"name": name, "value": value} for name, value in (*environment, *extras.environment)]
    if options.k8s_resource:
        body["resources"] = {"limits": {options.k8s_resource: 1}}
    if extras.ports:
        body["ports"] = [{"containerPort": port.container, "protocol": port.protocol.upper()} for port in extras.ports]
    security = container_security(launch)
    if security:
        body["securityContext"] = security
    mounts: list[dict[str, Any]] = []
    if not launch.vendor_wants_host_ipc:
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    for index, mount in enumerate(extras.mounts, 1):
        mounts.append({"name": f"volume-{index}", "mountPath": mount.target})
        if mount.read_only:
            mounts[-1]["readOnly"] = True
    if mounts:
        body["volumeMounts"] = mounts
    return body


def container_security(launch: Launch) -> dict[str, Any]:
    """Capabilities, and `seccomp=unconfined` as the Unconfined seccomp profile."""
    security: dict[str, Any] = {}
    capabilities = [*launch.devices.cap_add, *launch.settings.cap_add]
    if capabilities:
        security["capabilities"] = {"add": capabilities}
    if "seccomp=unconfined" in launch.devices.security_opt:
        security["seccompProfile"] = {"type": "Unconfined"}
    return security


def notes(launch: Launch) -> tuple[str, ...]:
    options, settings = launch.devices, launch.settings
    found: list[str] = []
    if (options.device_requests or options.devices or options.runtime) and not options.k8s_resource:
        found.append(f"{launch.vendor}: no device-plugin resource is known; add the cluster's to `limits`")
    if options.k8s_resource and options.k8s_note:
        found.append(options.k8s_note)
    if options.runtime:
        found.append(f"the node's container runtime must be {options.runtime}'s (its operator makes it the default)")
    if options.group_add:
        found.append("supplementalGroups are this host's device groups; a node's ids may differ")
    if not launch.digest:
        found.append("the image by tag: with --registry the catalogue gives its digest")
    if launch.workspace is not None:
        found.append("no workspace mount: a node has no copy of this directory (mount a volume at /workspace)")
    if settings.ulimits:
        found.append("ulimits " + " ".join(f"{n}={v}" for n, v in settings.ulimits)
                     + " cannot be set in a Pod: the node's runtime defaults apply")
    if launch.extras.mounts:
        found.append("hostPath volumes read the node's filesystem, not this host's")
    return tuple(found)
