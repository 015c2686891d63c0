"""The parts of a Pod every Kubernetes form holds (a Pod, a Job's template, a PyTorchJob's replicas): its spec,
its container, its security settings and the Pod Security Standard they meet. Why each is as it is: the
kubernetes renderer's docstring (accel_images.host.runtimes.kubernetes)."""

from __future__ import annotations

from typing import Any

from accel_images.host.cluster import RDMA_CAPABILITY
from accel_images.host.launch import Launch
from accel_images.model.variant import ENTRYPOINT

SHM_VOLUME = "dshm"
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
"""The capabilities the `baseline` level lets a container add (Pod Security Standards, Capabilities)."""


def pod_spec(launch: Launch) -> dict[str, Any]:
    """The Pod's spec: what a Pod, a Job's template and a PyTorchJob's replicas hold alike."""
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
    return spec


def pod_security(launch: Launch) -> dict[str, Any]:
    uid, gid = launch.image_user
    context: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid, "fsGroup": gid}
    if launch.devices.group_add:
        context["supplementalGroups"] = [int(group) for group in launch.devices.group_add]
    return context


def container(launch: Launch) -> dict[str, Any]:
    options, extras = launch.devices, launch.extras
    body: dict[str, Any] = {"name": "main", "image": launch.pinned_image}
    if launch.local:
        body["imagePullPolicy"] = "Never"
    body["command"] = [escaped(word) for word in (*ENTRYPOINT, *(launch.command or ("sleep", "infinity")))]
    environment = [(name, value) for name, value in options.environment if name not in options.selection_env]
    if environment or extras.environment:
        body["env"] = [{"name": name, "value": escaped(value)} for name, value in (*environment, *extras.environment)]
    if options.k8s_resource:
        body["resources"] = {"limits": {options.k8s_resource: launch.device_count or 1}}
    if extras.ports:
        body["ports"] = [{"containerPort": port.container, "protocol": port.protocol.upper()} for port in extras.ports]
    body["securityContext"] = container_security(launch)
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


def escaped(value: str) -> str:
    """`value` as the kubelet must read it: `$(NAME)` is a reference it expands and `$$` an escaped `$`, so
    every `$` is written `$$` and none starts a reference."""
    return value.replace("$", "$$")


def container_security(launch: Launch) -> dict[str, Any]:
    """The restricted level's settings, with what the vendor adds: its capabilities, and `seccomp=unconfined`
    as the Unconfined seccomp profile."""
    capabilities: dict[str, Any] = {"drop": ["ALL"]}
    added = added_capabilities(launch)
    if added:
        capabilities["add"] = added
    unconfined = "seccomp=unconfined" in launch.devices.security_opt
    return {"allowPrivilegeEscalation": False, "capabilities": capabilities,
            "seccompProfile": {"type": "Unconfined" if unconfined else "RuntimeDefault"}}


def added_capabilities(launch: Launch) -> list[str]:
    """The vendor's capabilities and its session's, once each: what `add` lists and what the levels judge."""
    return list(dict.fromkeys((*launch.devices.cap_add, *launch.settings.cap_add)))


def pod_security_level(launch: Launch) -> tuple[str, list[str]]:
    """The strictest Pod Security Standard the Pod meets (`restricted`, `baseline` or `privileged`), and what
    holds it below `restricted`: a namespace enforcing a stricter level refuses the Pod, so it says why."""
    privileged: list[str] = []
    if launch.vendor_wants_host_ipc:
        privileged.append(f"hostIPC: {launch.vendor} asks for the host's IPC namespace")
    if launch.settings.network == "host":
        privileged.append(f"hostNetwork: {launch.vendor}'s sessions use the host's network")
    if "seccomp=unconfined" in launch.devices.security_opt:
        privileged.append(f"seccomp Unconfined: {launch.vendor} asks for it")
    if launch.extras.mounts:
        privileged.append("hostPath volumes (--volume)")
    added = added_capabilities(launch)
    rdma = launch.cluster is not None and launch.cluster.rdma_resource is not None and RDMA_CAPABILITY in added
    beyond = [name for name in added if name not in BASELINE_CAPABILITIES and not (rdma and name == RDMA_CAPABILITY)]
    if beyond:
        privileged.append(f"capabilities {', '.join(beyond)}: {launch.vendor} adds them")
    if rdma:
        privileged.append(f"capability {RDMA_CAPABILITY}: RDMA pins the memory it registers (--rdma-resource)")
    if privileged:
        return "privileged", privileged
    if added:
        return "baseline", [f"capabilities {', '.join(added)}: {launch.vendor} adds them"]
    return "restricted", []


def security_header(launch: Launch) -> str:
    """The document's first line: the strictest Pod Security Standard its Pods meet, and what holds them below."""
    level, reasons = pod_security_level(launch)
    return f"# Pod Security Standard: {level}" + (f" ({'; '.join(reasons)})" if reasons else "") + "\n"


def pod_notes(launch: Launch) -> tuple[str, ...]:
    """What a Pod's reader must know, whichever form holds the Pod."""
    options, settings = launch.devices, launch.settings
    found: list[str] = []
    if (options.device_requests or options.devices or options.runtime) and not options.k8s_resource:
        found.append(f"{launch.vendor}: no device-plugin resource is known; add the cluster's to `limits`")
    if options.k8s_resource and options.k8s_note:
        found.append(options.k8s_note)
    if options.k8s_resource and not launch.device_count:
        found.append(f"1 {options.k8s_resource} asked for: the host description counts no {launch.vendor} devices"
                     " (pass --host-json with a node's)")
    if options.runtime:
        found.append(f"the node's container runtime must be {options.runtime}'s (its operator makes it the default)")
    if options.group_add:
        found.append("supplementalGroups are this host's device groups; a node's ids may differ")
    if launch.local:
        found.append("a build of this host, never pulled (imagePullPolicy: Never): load it into the node's runtime,"
                     " or push it to a registry and pass --registry")
    elif not launch.digest:
        found.append("the image by tag: with --registry the catalogue gives its digest")
    if launch.workspace is not None:
        found.append("no workspace mount: a node has no copy of this directory (mount a volume at /workspace)")
    if settings.ulimits:
        found.append("ulimits " + " ".join(f"{n}={v}" for n, v in settings.ulimits)
                     + " cannot be set in a Pod: the node's runtime defaults apply")
    if launch.extras.mounts:
        found.append("hostPath volumes read the node's filesystem, not this host's")
    return tuple(found)
