"""Reclaiming what an earlier run of this tool left on the Docker engine when it was killed.

A run stopped by Ctrl-C or SIGTERM removes its own smoke containers; one killed outright
(SIGKILL, the OOM killer, a CI runner torn down) cannot, and nothing else ever would. So every
container `Engine.run` creates carries, besides `io.accel-images.managed`, the run that owns
it: `io.accel-images.owner=<host>:<pid>:<process start time>`. At its start each `build` and
`nightly` removes the managed containers whose owner on this host no longer runs (the PID is
gone, or now belongs to a process started at another time) and that were created before the
run began. Containers of a run still going, on this host or another sharing the engine, are
never touched; managed containers without an owner (written by an older version) go only when
they are no longer running. The networks a run makes (the N-node smoke test's, accel_images.smoke.nodes)
carry the same two labels and go by the same rule, after the containers (a network a container is still
attached to cannot go); a managed network without an owner is left alone.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from collections.abc import Mapping

from accel_images.errors import AccelError

OWNER_LABEL = "io.accel-images.owner"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContainerInfo:
    """A managed container as the engine lists it."""

    id: str
    labels: Mapping[str, str]
    created: datetime | None
    running: bool


@dataclass(frozen=True)
class NetworkInfo:
    """A managed network as the engine lists it."""

    id: str
    labels: Mapping[str, str]
    created: datetime | None


class ContainerStore(Protocol):
    """The part of accel_images.builder.engine.Engine reclaiming uses."""

    def managed_containers(self) -> list[ContainerInfo]: ...

    def remove_container(self, container_id: str) -> None: ...

    def managed_networks(self) -> list[NetworkInfo]: ...

    def remove_network(self, network_id: str) -> None: ...


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def owner_token(pid: int | None = None) -> str:
    """`<host>:<pid>:<start time>` of this process (or `pid`): what OWNER_LABEL holds."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '?'}"


def owner_gone(token: str) -> bool | None:
    """True when the owning process is known to have ended; None when that cannot be told here."""
    parts = token.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    host, pid, started = parts
    if host != socket.gethostname():
        return None   # another host's process: it may well be running
    now = _start_time(int(pid))
    return now is None or now != started


def reclaim(store: ContainerStore, run_started: datetime) -> list[str]:
    """Remove what killed runs left (see the module docstring): containers, then networks; the IDs removed.
    Best effort."""
    removed = []
    for container in store.managed_containers():
        if container.created is None or container.created >= run_started:
            continue
        token = container.labels.get(OWNER_LABEL)
        stale = owner_gone(token) if token else not container.running
        if not stale:
            continue
        try:
            store.remove_container(container.id)
        except AccelError as error:  # cleaning up after others must never fail this run
            log.warning("leftover container %s not removed: %s", container.id[:12], error.one_line())
            continue
        removed.append(container.id)
    if removed:
        log.info("removed %d container(s) killed runs left behind", len(removed))
    return removed + reclaim_networks(store, run_started)


def reclaim_networks(store: ContainerStore, run_started: datetime) -> list[str]:
    """Remove the managed networks of ended runs created before this one began; the IDs removed."""
    removed = []
    try:
        networks = store.managed_networks()
    except AccelError as error:
        log.warning("leftover networks not listed: %s", error.one_line())
        return []
    for network in networks:
        if network.created is None or network.created >= run_started:
            continue
        token = network.labels.get(OWNER_LABEL)
        if not token or not owner_gone(token):
            continue
        try:
            store.remove_network(network.id)
        except AccelError as error:
            log.warning("leftover network %s not removed: %s", network.id[:12], error.one_line())
            continue
        removed.append(network.id)
    if removed:
        log.info("removed %d network(s) killed runs left behind", len(removed))
    return removed


def network_created(text: object) -> datetime | None:
    """The engine's `Created` of a network (RFC 3339 with nanoseconds: '2026-12-07T09:40:50.539590683Z'); None
    for anything else."""
    if not isinstance(text, str):
        return None
    head, dot, rest = text.partition(".")
    if dot:   # Python reads at most microseconds: the fraction cut to six digits, the zone kept
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[:min(digits, 6)]}{rest[digits:]}"
    try:
        created = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return created if created.tzinfo is not None else None
