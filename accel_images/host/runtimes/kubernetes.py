"""A Kubernetes Pod, validated in the tests against the API's OpenAPI schema (kubernetes-validate).

- Devices come from the vendor's device plugin as an extended resource, "GPUs are only supposed to be
  specified in the limits section" (Kubernetes, Schedule GPUs; V): `limits: {RESOURCE: N}`, N the
  host description's count of the vendor's devices (1 where it counts none: a note says so). The plugin
  picks the devices, so the environment variables that pick them for a runtime hook (the vendor's
  selection_env) are left to it: Habana's job example sets none (V).
- Shared memory: a memory-backed emptyDir at /dev/shm ("medium: Memory", the API's emptyDir); where the
  vendor itself asks for the host IPC namespace (its Docker `--ipc host`), `hostIPC: true` instead, as
  Habana's job example has it (V).
- A session's host network (the vendor's, for scale-out over the host's NICs) is `hostNetwork: true`.
- The pod runs as the image's own user (runAsUser, runAsGroup, and fsGroup so volumes are writable);
  supplementalGroups carry the device groups' ids as this host has them (I: a node's may differ).
- Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards; V): every Pod
  sets what the `restricted` level asks (runAsNonRoot, allowPrivilegeEscalation: false, capabilities
  drop ALL, seccompProfile RuntimeDefault), so it is admitted wherever the vendor allows it. What a
  vendor needs beyond that (host namespaces, Unconfined seccomp, added capabilities, hostPath volumes)
  needs `baseline` or `privileged`; the document's first line and `pod_security_level` say which, and why.
- The name: `generateName`, so two invocations (two users) never collide; `--name` a fixed one, which
  must be a DNS subdomain name (RFC 1123), as the API server checks.
- The image by digest where it is known ("Digests are hashes of the image's content, and are
  immutable": Kubernetes, Images; V); a build of this host is never pulled (`imagePullPolicy: Never`).
- `command:` replaces the image's entry point, so it starts with the entry point's own words (the
  guard); without a command the pod sleeps, for `kubectl exec -it POD -- bash`.
- The kubelet expands `$(NAME)` in `command` and in env values, and reads `$$` as `$` (the API's
  EnvVar.value, Container.command; V): every `$` written is doubled, so each value arrives as given.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from accel_images.errors import InputError
from accel_images.host.launch import Launch
from accel_images.host.runtimes import Rendered, refuse_engine_args
from accel_images.model.variant import ENTRYPOINT

SHM_VOLUME = "dshm"
GENERATED_NAME = "accel-images-"
"""The prefix the API server completes with five random characters (ObjectMeta.generateName)."""
POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A DNS subdomain name (RFC 1123), what a Pod's name must be; at most 253 characters."""
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
"""The capabilities the `baseline` level lets a container add (Pod Security Standards, Capabilities)."""


def render(launch: Launch) -> Rendered:
    refuse_engine_args(launch, "kubernetes")
    level, reasons = pod_security_level(launch)
    header = f"# Pod Security Standard: {level}" + (f" ({'; '.join(reasons)})" if reasons else "") + "\n"
    text = yaml.safe_dump(manifest(launch), sort_keys=False, default_flow_style=False, width=1000)
    return Rendered("kubernetes", header + text, None, notes(launch))


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
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata(launch), "spec": spec}


def metadata(launch: Launch) -> dict[str, str]:
    """`generateName` (a new name per Pod created), or the `--name` given, refused in one line where the API
    server would refuse it."""
    name = launch.extras.name
    if name is None:
        return {"generateName": GENERATED_NAME}
    if len(name) > 253 or not POD_NAME.fullmatch(name):
        raise InputError(f"{name!r} is not a Pod name: lowercase letters, digits, '-' and '.', starting and ending"
                         " with a letter or digit, at most 253 characters (RFC 1123)", field="--name")
    return {"name": name}


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
    beyond = [name for name in added if name not in BASELINE_CAPABILITIES]
    if beyond:
        privileged.append(f"capabilities {', '.join(beyond)}: {launch.vendor} adds them")
    if privileged:
        return "privileged", privileged
    if added:
        return "baseline", [f"capabilities {', '.join(added)}: {launch.vendor} adds them"]
    return "restricted", []


def notes(launch: Launch) -> tuple[str, ...]:
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
    if launch.extras.name is None:
        found.append("generateName: `kubectl create -f` names each Pod anew (`kubectl apply` needs --name)")
    return tuple(found)


def vendor_levels(vendors: list[tuple[str, Launch]]) -> str:
    """'gaudi: privileged (hostIPC ...)' for each vendor whose Pod needs more than `restricted`: the help's
    sentence, from the same decision the documents state."""
    parts = []
    for vendor, launched in vendors:
        level, reasons = pod_security_level(launched)
        if level != "restricted":
            parts.append(f"{vendor} needs {level} ({', '.join(reason.split(':')[0] for reason in reasons)})")
    return "; ".join(parts)
