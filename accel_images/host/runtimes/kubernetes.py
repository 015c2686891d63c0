"""A Kubernetes Pod, validated in the tests against the API's OpenAPI schema (kubernetes-validate). Its parts are
built in pod.py, which the N-node forms (kubernetes_nodes.py: an indexed Job, a PyTorchJob) share.

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
from accel_images.host.runtimes import kubernetes_nodes
from accel_images.host.runtimes.nodes import many_nodes
from accel_images.host.runtimes.pod import pod_notes, pod_security_level, pod_spec, security_header

GENERATED_NAME = "accel-images-"
"""The prefix the API server completes with five random characters (ObjectMeta.generateName)."""
POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A DNS subdomain name (RFC 1123), what a Pod's name must be; at most 253 characters."""


def render(launch: Launch) -> Rendered:
    refuse_engine_args(launch, "kubernetes")
    if many_nodes(launch):
        return kubernetes_nodes.render(launch)
    text = yaml.safe_dump(manifest(launch), sort_keys=False, default_flow_style=False, width=1000)
    return Rendered("kubernetes", security_header(launch) + text, None, notes(launch))


def manifest(launch: Launch) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata(launch), "spec": pod_spec(launch)}


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


def notes(launch: Launch) -> tuple[str, ...]:
    named = () if launch.extras.name else ("generateName: `kubectl create -f` names each Pod anew (`kubectl apply`"
                                           " needs --name)",)
    return (*pod_notes(launch), *named)


def vendor_levels(vendors: list[tuple[str, Launch]]) -> str:
    """'gaudi: privileged (hostIPC ...)' for each vendor whose Pod needs more than `restricted`: the help's
    sentence, from the same decision the documents state."""
    parts = []
    for vendor, launched in vendors:
        level, reasons = pod_security_level(launched)
        if level != "restricted":
            parts.append(f"{vendor} needs {level} ({', '.join(reason.split(':')[0] for reason in reasons)})")
    return "; ".join(parts)
