"""The only module that talks to Docker.

Everything else in accel-images works on plain values and can be tested without a daemon;
this module turns those values into Docker Engine API calls (through the Docker SDK for
Python) and turns whatever the SDK raises into the project's one-line errors.

Two facts about docker-py shape the code below:
- streamed operations (build, pull, push) report failures as `error`/`errorDetail` events
  inside a successful HTTP response, so every event is checked here;
- a daemon that dies mid-stream surfaces as requests/urllib3 exceptions (or a stream that
  simply ends), never as a docker exception.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import logging
import posixpath
import tarfile
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions
from docker.auth import resolve_repository_name
from docker.utils import parse_repository_tag

from accel_images.builder import buildlog, failure
from accel_images.credentials import hide_credentials
from accel_images.errors import AccelError, BuildFailed, EngineError, InputError, NotInRegistry, RegistryError
from accel_images.builder.leftovers import OWNER_LABEL, ContainerInfo, NetworkInfo, network_created, owner_token
from accel_images.registry import platform_name
from accel_images.smoke.integrity import KEEP_SUFFIXES, Entry

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
MANAGED_LABEL = "io.accel-images.managed"
"""Set on every container `Engine.run` creates, so leftovers can be found and removed."""

LOG_TAIL_LINES = 60
_KILL_GRACE_S = 30.0
PEER_GRACE_S = 15.0
"""How long containers run together (run_together) may go on once one of them has failed."""

_NO_STRINGS: Mapping[str, str] = MappingProxyType({})
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STEP_LINE = re.compile(r"^Step \d+/\d+ : ")
_BUILT_LINE = re.compile(r"^Successfully built ([0-9a-f]+)\s*$")
_PUSHED_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")

_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    ConnectionError,
    docker.errors.StreamParseError,
)
"""What reading from a daemon that went away raises. APIError derives from requests'
HTTPError, so it must be caught before these."""

OnLine = Callable[[str], None]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuiltImage:
    id: str
    tag: str
    size: int


@dataclass(frozen=True)
class ImageInfo:
    id: str
    tags: tuple[str, ...]
    labels: dict[str, str]
    size: int
    created: str
    repo_digests: tuple[str, ...]
    layers: tuple[str, ...] = ()           # RootFS.Layers: the diff IDs, base first
    env: tuple[str, ...] = ()              # Config.Env, `NAME=value` each
    user: str = ""                         # Config.User
    architecture: str = ""                 # Architecture: amd64, arm64, ... (what a build on it runs on)
    platform: str = ""                     # Os/Architecture[/Variant] of the image config ('' when unknown)


@dataclass(frozen=True)
class Pushed:
    """What one push did: the manifest digest, and the layers the engine uploaded.

    `uploaded` holds the short IDs the engine reports (the first 12 hex digits of each diff ID);
    layers the registry already had ("Layer already exists", "Mounted from") are not in it.
    """

    digest: str
    uploaded: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool


class Engine:
    """A connected Docker daemon. Create it with `Engine.connect()`."""

    def __init__(self, client: docker.DockerClient, base_url: str) -> None:
        self._client = client
        self.base_url = base_url

    @classmethod
    def connect(cls, base_url: str | None = None) -> Engine:
        """Connect and ping; the daemon comes from base_url, else DOCKER_HOST, else the socket."""
        where = base_url or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST
        try:
            client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
            client.ping()
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as err:  # type: ignore[misc]  # mypy reads no * here
            raise _unreachable(where, err) from err
        return cls(client, where)

    def close(self) -> None:
        self._client.close()

    def platform(self) -> str:
        """The platform this engine runs without emulation (`linux/amd64`): its `Os` and `Arch`."""
        with self._daemon_errors("asking the engine for its platform"):
            found = self._client.version()
        return f"{found.get('Os') or 'linux'}/{found.get('Arch') or 'amd64'}"

    # -- images ---------------------------------------------------------------------------

    def build(self, context: Path, tag: str, *, buildargs: Mapping[str, str] = _NO_STRINGS,
              labels: Mapping[str, str] = _NO_STRINGS, log_path: Path,
              network_mode: str | None = None, pull: bool = False, nocache: bool = False,
              on_line: OnLine | None = None, extra_tags: Sequence[str] = (),
              platform: str | None = None) -> BuiltImage:
        """Build `context` as `tag` (classic builder), logging every line to `log_path`.

        `nocache` runs every step afresh instead of reusing the layer cache: what an image
        rebuilt for its age needs, so its package installs really fetch today's updates.
        `platform` is the Engine API's build `platform` (a pull during the build fetches that
        platform's image). The classic builder takes a base found locally by name whatever its
        platform, so the caller names the base by its platform's digest (accel_images.builder.bases).

        Raises BuildFailed (failing step, log tail, log path) when a step or the Dockerfile
        fails, EngineError when the daemon goes away.
        """
        context = Path(context)
        if not context.is_dir():
            raise InputError(f"build context {context} is not a directory")
        try:
            with _BuildLog(Path(log_path), on_line) as build_log:
                build_log.note(f"# build of {tag} from {context}"
                               f" (network_mode={network_mode}, pull={pull}, nocache={nocache}"
                               + (f", platform={platform})" if platform else ")"))
                image_id = self._follow_build(build_log, tag, dict(
                    path=str(context), tag=tag, rm=True, forcerm=True, decode=True,
                    buildargs=dict(buildargs), labels=dict(labels),
                    network_mode=network_mode, pull=pull, nocache=nocache,
                    **({"platform": platform} if platform else {})))
        except BaseException:   # a failed step, a lost daemon, Ctrl-C, SIGTERM: what the build made goes
            self.remove_build_containers(labels)
            raise
        for extra in extra_tags:
            self.tag(image_id, extra)
        info = self.inspect_image(image_id)
        if info is None:
            raise EngineError(f"image {image_id} of {tag} vanished right after its build")
        return BuiltImage(id=info.id, tag=tag, size=info.size)

    def remove_build_containers(self, labels: Mapping[str, str]) -> int:
        """Remove, in any state, the containers carrying every one of a stopped build's `labels`: the classic
        builder's intermediate containers. forcerm removes them when a step fails, but a build whose client
        goes away (Ctrl-C, SIGTERM) leaves those of its metadata steps behind, in state Created
        (`/bin/sh -c '#(nop) LABEL ...'`), with the labels the build set. A build's labels include the time it
        started (builder.CREATED_LABEL), so another build's containers never match. Best effort: what cannot
        be removed is logged. How many went."""
        if not labels:
            return 0
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}
        removed = 0
        try:
            found = self._client.api.containers(all=True, filters=filters)
            for container in found:
                self._client.api.remove_container(container["Id"], force=True)
                removed += 1
        except (docker.errors.DockerException, *_TRANSPORT_ERRORS) as err:  # type: ignore[misc]
            log.warning("could not remove a stopped build's intermediate containers: %s", err)
        return removed

    def _follow_build(self, build_log: _BuildLog, tag: str, params: dict[str, Any]) -> str:
        """Stream the build, checking each event; the built image's ID."""
        image_id: str | None = None
        try:
            for event in self._client.api.build(**params):
                build_log.event(event)
                error = _event_error(event)
                if error is not None:
                    raise _build_failed(tag, error, build_log)
                image_id = _built_image_id(event) or image_id
        except docker.errors.APIError as err:
            build_log.note(f"ERROR: {_explanation(err)}")
            raise _build_failed(tag, _explanation(err), build_log) from err
        except _TRANSPORT_ERRORS as err:
            build_log.note(f"ERROR: lost the Docker daemon: {err}")
            raise EngineError(f"the Docker daemon went away during the build of {tag}"
                              f" ({_transport_reason(err)}); log: {build_log.path}") from err
        except docker.errors.DockerException as err:
            raise EngineError(f"build of {tag}: {err}; log: {build_log.path}") from err
        except OSError as err:
            build_log.note(f"ERROR: {err}")
            raise _build_failed(tag, str(err), build_log) from err
        if image_id is None:
            build_log.note("ERROR: the build stream ended without an image id")
            raise EngineError(f"the build of {tag} ended without producing an image (did the"
                              f" Docker daemon stop?); log: {build_log.path}")
        return image_id

    def inspect_image(self, ref: str) -> ImageInfo | None:
        """The local image `ref` (tag, ID or digest reference), or None when absent."""
        with self._daemon_errors(f"inspecting image {ref}"):
            try:
                raw = self._client.api.inspect_image(ref)  # type: ignore[no-untyped-call]  # untyped in types-docker
            except docker.errors.NotFound:
                return None
        return ImageInfo(
            id=raw["Id"],
            tags=tuple(raw.get("RepoTags") or ()),
            labels=dict((raw.get("Config") or {}).get("Labels") or {}),
            size=int(raw.get("Size") or 0),
            created=raw.get("Created", ""),
            repo_digests=tuple(raw.get("RepoDigests") or ()),
            layers=tuple((raw.get("RootFS") or {}).get("Layers") or ()),
            env=tuple(str(item) for item in (raw.get("Config") or {}).get("Env") or ()),
            user=str((raw.get("Config") or {}).get("User") or ""),
            architecture=str(raw.get("Architecture") or ""),
            platform=_platform_of(raw),
        )

    def disk_usage_of(self, ref: str) -> int:
        """Bytes the image occupies, as the daemon reports it (shared layers included)."""
        info = self.inspect_image(ref)
        if info is None:
            raise EngineError(f"no local image {ref}")
        return info.size

    def pull(self, ref: str, on_line: OnLine | None = None, platform: str | None = None) -> ImageInfo:
        """Pull `ref` (no tag means `latest`); RegistryError names the ref and the reason.

        `platform` picks that platform's image of an index (the engine's own otherwise). Pulled by
        tag, it becomes the image the tag names locally: pull another platform's image by its digest."""
        printer = _EventPrinter(on_line)
        try:
            for event in self._client.api.pull(ref, stream=True, decode=True, platform=platform):
                printer.event(event)
                error = _event_error(event)
                if error is not None:
                    raise registry_error("pull", ref, error)
        except docker.errors.APIError as err:
            raise registry_error("pull", ref, _explanation(err)) from err
        except _TRANSPORT_ERRORS as err:
            raise EngineError(f"the Docker daemon went away during the pull of {ref}"
                              f" ({_transport_reason(err)})") from err
        except docker.errors.DockerException as err:
            raise RegistryError(f"pull of {ref} failed: {err}") from err
        info = self.inspect_image(ref)
        if info is None:
            raise RegistryError(f"pull of {ref} finished but the image is not there")
        return info

    def tag(self, image: str, ref: str) -> None:
        """Give the local image `image` the name `ref` (`repo[:tag]`, default tag latest)."""
        repository, tag = parse_repository_tag(ref)
        with self._daemon_errors(f"tagging {image} as {ref}"):
            try:
                self._client.api.tag(image, repository, tag or "latest", force=True)
            except docker.errors.NotFound as err:
                raise EngineError(f"cannot tag {image} as {ref}: no such local image") from err

    def push(self, ref: str, on_line: OnLine | None = None) -> str:
        """Push `ref` with the credentials of the Docker config; the manifest digest.

        Registry failures raise RegistryError with `transient` set when a retry may help.
        """
        return self.push_image(ref, on_line).digest

    def push_image(self, ref: str, on_line: OnLine | None = None) -> Pushed:
        """Like `push`, also saying which layers went over the wire (to count the bytes uploaded)."""
        repository, tag = parse_repository_tag(ref)
        printer = _EventPrinter(on_line)
        digest: str | None = None
        uploaded: list[str] = []
        try:
            for event in self._client.api.push(repository, tag=tag or "latest",
                                               stream=True, decode=True):
                printer.event(event)
                error = _event_error(event)
                if error is not None:
                    if "does not exist locally" in error:
                        raise EngineError(f"cannot push {ref}: no local image has that name")
                    raise registry_error("push", ref, error)
                digest = _pushed_digest(event) or digest
                if event.get("status") == "Pushed" and event.get("id"):
                    uploaded.append(str(event["id"]))
        except docker.errors.APIError as err:
            raise registry_error("push", ref, _explanation(err)) from err
        except _TRANSPORT_ERRORS as err:
            raise EngineError(f"the Docker daemon went away during the push of {ref}"
                              f" ({_transport_reason(err)})") from err
        except docker.errors.DockerException as err:
            raise RegistryError(f"push of {ref} failed: {err}") from err
        if digest is None:
            raise registry_error("push", ref, "the registry reported no manifest digest")
        return Pushed(digest, tuple(uploaded))

    def remove_image(self, ref: str, force: bool = False) -> None:
        """Remove a local image or one of its names; an absent image is not an error."""
        with self._daemon_errors(f"removing image {ref}"):
            try:
                self._client.api.remove_image(ref, force=force)
            except docker.errors.NotFound:
                pass

    # -- containers -----------------------------------------------------------------------

    def run(self, image: str, command: list[str], *, options: Mapping[str, Any] | None = None,
            timeout_s: float, labels: Mapping[str, str] | None = None,
            before_start: Callable[[ContainerFiles], None] | None = None) -> RunResult:
        """Run `command` in a fresh container of `image` and always remove it afterwards.

        `options` are extra `containers.create` keyword arguments (devices, device_requests,
        group_add, runtime, environment, entrypoint, volumes, ...). After `timeout_s` the
        container is killed and the result says `timed_out`. `before_start` reads the created
        container's files (its mounts in place) before any of its code runs; what it raises
        stops the run, and the container is removed all the same.
        """
        container = None
        try:
            with self._daemon_errors(f"running {image}"):
                try:
                    container = self._client.containers.create(
                        image, command,
                        labels={MANAGED_LABEL: "true", OWNER_LABEL: owner_token(), **(labels or {})},
                        **dict(options or {}))
                except docker.errors.ImageNotFound as err:
                    raise EngineError(f"image {image} not found locally:"
                                      " build or pull it first") from err
                if before_start is not None:
                    before_start(ContainerFiles(self._client.api, str(container.id)))
                container.start()
                exit_code, timed_out = _wait_or_kill(container, timeout_s)
                stdout = container.logs(stdout=True, stderr=False)
                stderr = container.logs(stdout=False, stderr=True)
            return RunResult(exit_code=exit_code, stdout=_text(stdout), stderr=_text(stderr),
                             timed_out=timed_out)
        finally:
            if container is not None and container.id is not None:  # a created container has an id
                self._remove_container_quietly(container.id)

    def run_together(self, image: str, commands: Sequence[list[str]], *, network: str, aliases: Sequence[str],
                     options: Mapping[str, Any] | None = None, timeout_s: float,
                     labels: Mapping[str, str] | None = None,
                     before_start: Callable[[ContainerFiles], None] | None = None) -> list[RunResult]:
        """Run one container of `image` per command, all at once on `network` (each reachable there by its
        alias), and always remove every one of them afterwards, on a failure or Ctrl-C too.

        Containers that talk to each other must run at the same time, which `run` (one after another)
        cannot give. They share one deadline, `timeout_s` from the start; once one has failed or timed out
        the others get PEER_GRACE_S more, since a peer waiting for it would otherwise hold the run until
        the deadline. Who is still running then is killed and says `timed_out`.
        """
        created: list[Any] = []
        try:
            with self._daemon_errors(f"running {image} on network {network}"):
                for command, alias in zip(commands, aliases, strict=True):
                    created.append(self._create_on(image, command, network, alias, options, labels))
                    if before_start is not None:
                        before_start(ContainerFiles(self._client.api, str(created[-1].id)))
                for container in created:
                    container.start()
                return self._wait_together(created, timeout_s)
        finally:
            for container in created:
                self._remove_container_quietly(str(container.id))

    def _create_on(self, image: str, command: list[str], network: str, alias: str,
                   options: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> Any:
        """A labelled container on `network`, which its peers reach by `alias` (also its host name)."""
        endpoint = self._client.api.create_endpoint_config(aliases=[alias])
        try:
            return self._client.containers.create(
                image, command, hostname=alias, network=network, networking_config={network: endpoint},
                labels={MANAGED_LABEL: "true", OWNER_LABEL: owner_token(), **(labels or {})}, **dict(options or {}))
        except docker.errors.ImageNotFound as err:
            raise EngineError(f"image {image} not found locally: build or pull it first") from err

    @staticmethod
    def _wait_together(containers: Sequence[Any], timeout_s: float) -> list[RunResult]:
        """Each container's result, waiting under one deadline (see run_together)."""
        deadline = time.monotonic() + timeout_s
        results = []
        for container in containers:
            exit_code, timed_out = _wait_or_kill(container, max(1.0, deadline - time.monotonic()))
            if exit_code != 0 or timed_out:
                deadline = min(deadline, time.monotonic() + PEER_GRACE_S)
            results.append(RunResult(exit_code=exit_code, stdout=_text(container.logs(stdout=True, stderr=False)),
                                     stderr=_text(container.logs(stdout=False, stderr=True)), timed_out=timed_out))
        return results

    @contextmanager
    def network(self, name: str, labels: Mapping[str, str] | None = None) -> Iterator[str]:
        """A user-defined bridge network for one run, removed afterwards whatever happened (a failure,
        Ctrl-C). Internal: its containers reach each other by name and alias, and nothing outside it, so a
        smoke test across containers gets no more network than the containers' conversation needs."""
        with self._daemon_errors(f"creating network {name}"):
            created = self._client.networks.create(
                name, driver="bridge", internal=True, check_duplicate=True,
                labels={MANAGED_LABEL: "true", OWNER_LABEL: owner_token(), **(labels or {})})
        try:
            yield name
        finally:
            self._remove_network_quietly(str(created.id))

    def list_networks(self, label: str) -> list[str]:
        """IDs of the networks carrying `label` (`key` or `key=value`)."""
        with self._daemon_errors(f"listing networks labelled {label}"):
            found = self._client.api.networks(filters={"label": label})
        return [entry["Id"] for entry in found]

    def managed_networks(self) -> list[NetworkInfo]:
        """Every network `network` made (MANAGED_LABEL), with its labels and creation time."""
        with self._daemon_errors(f"listing networks labelled {MANAGED_LABEL}"):
            found = self._client.api.networks(filters={"label": MANAGED_LABEL})
        return [NetworkInfo(str(entry.get("Id")), dict(entry.get("Labels") or {}),
                            network_created(entry.get("Created"))) for entry in found]

    def remove_network(self, network_id: str) -> None:
        """Remove a network; absent is fine."""
        with self._daemon_errors(f"removing network {network_id}"):
            try:
                self._client.api.remove_network(network_id)
            except docker.errors.NotFound:
                pass

    def _remove_network_quietly(self, network_id: str) -> None:
        """Cleanup that must not hide the failure (or Ctrl-C) already on its way up."""
        try:
            self.remove_network(network_id)
        except EngineError as err:
            log.warning("network %s left behind (label %s): %s", network_id, MANAGED_LABEL, err.one_line())

    @contextmanager
    def image_files(self, image: str) -> Iterator[ContainerFiles]:
        """The files of `image`, read through a container that is created and never started.

        No code of the image runs: the engine's archive API reads the container's file system
        (what `docker cp` does), so a hostile image cannot answer for itself.
        """
        container_id: str | None = None
        try:
            with self._daemon_errors(f"reading the files of {image}"):
                try:
                    created = self._client.api.create_container(
                        image, command=["/nonexistent"], entrypoint=[], network_disabled=True,
                        labels={MANAGED_LABEL: "true", OWNER_LABEL: owner_token()})
                except docker.errors.ImageNotFound as err:
                    raise EngineError(f"image {image} not found locally: build or pull it first") from err
                container_id = str(created["Id"])
                yield ContainerFiles(self._client.api, container_id)
        finally:
            if container_id is not None:
                self._remove_container_quietly(container_id)

    def list_containers(self, label: str) -> list[str]:
        """IDs of all containers, running or not, carrying `label` (`key` or `key=value`)."""
        with self._daemon_errors(f"listing containers labelled {label}"):
            found = self._client.api.containers(all=True, filters={"label": label})
        return [entry["Id"] for entry in found]

    def managed_containers(self) -> list[ContainerInfo]:
        """Every container `run` made (MANAGED_LABEL), running or not, with its labels and creation time."""
        with self._daemon_errors(f"listing containers labelled {MANAGED_LABEL}"):
            found = self._client.api.containers(all=True, filters={"label": MANAGED_LABEL})
        return [ContainerInfo(str(entry.get("Id")), dict(entry.get("Labels") or {}),
                              datetime.fromtimestamp(entry["Created"], timezone.utc)
                              if isinstance(entry.get("Created"), (int, float)) else None,
                              entry.get("State") == "running") for entry in found]

    def remove_container(self, container_id: str) -> None:
        """Force-remove a container and its anonymous volumes; absent is fine."""
        with self._daemon_errors(f"removing container {container_id}"):
            try:
                self._client.api.remove_container(container_id, force=True, v=True)
            except docker.errors.NotFound:
                pass

    def _remove_container_quietly(self, container_id: str) -> None:
        """Cleanup that must not hide the failure (or Ctrl-C) already on its way up."""
        try:
            self.remove_container(container_id)
        except EngineError as err:
            log.warning("container %s left behind (label %s): %s",
                        container_id, MANAGED_LABEL, err.one_line())

    @contextmanager
    def _daemon_errors(self, action: str) -> Iterator[None]:
        """Translate what the SDK raises during `action` into EngineError."""
        try:
            yield
        except AccelError:
            raise
        except docker.errors.APIError as err:
            raise EngineError(f"{action}: {_explanation(err)}") from err
        except _TRANSPORT_ERRORS as err:
            raise EngineError(f"{action}: lost the Docker daemon at {self.base_url}"
                              f" ({_transport_reason(err)})") from err
        except docker.errors.DockerException as err:
            raise EngineError(f"{action}: {err}") from err


_GO_MODE_SYMLINK = 1 << 27
"""os.ModeSymlink in the Go FileMode the archive API's stat header carries."""


def _followed_link(stat: Any) -> str | None:
    """Where a final link leads, when the stat header says the path is one (see ContainerFiles)."""
    if not isinstance(stat, Mapping) or not int(stat.get("mode") or 0) & _GO_MODE_SYMLINK:
        return None
    target = stat.get("linkTarget")
    return target if isinstance(target, str) and target else None


class ContainerFiles:
    """A container's files as the engine's archive API gives them (accel_images.smoke.integrity.FileReader).

    Links in the middle of a path are resolved by the engine inside the container's root; a
    final link is returned as a link, never followed, so the caller sees every step. Podman's
    Docker-compatible service (4.3.1, observed) follows a final link and sends the target's content
    under the link's name; the stat header it sends beside the archive still marks the path a link
    (Go's os.ModeSymlink in `mode`) and names where it leads (`linkTarget`, resolved), so such an
    answer is read back as the link Docker would have sent.
    """

    _KEPT_BYTES = 64 << 20
    _HEAD_BYTES = 64

    def __init__(self, api: Any, container_id: str) -> None:
        self._api = api
        self.container_id = container_id

    def entry(self, path: str) -> Entry | None:
        """The entry at `path` itself; a directory's content is not read."""
        if path.rstrip("/") != path or not path.startswith("/"):
            return None
        found = self.tree(path, only_top=True)
        return found.get(path)

    def tree(self, path: str, *, only_top: bool = False) -> dict[str, Entry]:
        """Every entry at and below `path`, by absolute path; empty when nothing is there."""
        try:
            stream, stat = self._api.get_archive(self.container_id, path, chunk_size=1 << 20)
        except docker.errors.NotFound:
            return {}
        except docker.errors.APIError as err:
            raise EngineError(f"reading {path} from container {self.container_id[:12]}: {_explanation(err)}") from err
        followed = _followed_link(stat)
        parent = posixpath.dirname(path)
        entries: dict[str, Entry] = {}
        by_name: dict[str, Entry] = {}
        with tarfile.open(fileobj=_ChunkReader(stream), mode="r|") as archive:
            for member in archive:
                absolute = posixpath.normpath(posixpath.join(parent, member.name))
                if followed and absolute == path.rstrip("/") and not member.issym():
                    return {absolute: Entry(absolute, "link", target=followed)}
                entry = self._entry(archive, member, absolute, by_name)
                by_name[member.name] = entry
                entries[absolute] = entry
                if only_top:
                    break
        return entries

    def _entry(self, archive: tarfile.TarFile, member: tarfile.TarInfo, absolute: str,
               by_name: Mapping[str, Entry]) -> Entry:
        if member.issym():
            return Entry(absolute, "link", target=member.linkname)
        if member.islnk():
            same = by_name.get(member.linkname)
            return Entry(absolute, "file", same.sha256, head=same.head, data=same.data) if same else \
                Entry(absolute, "other", target=member.linkname)
        if member.isdir():
            return Entry(absolute, "dir")
        if not member.isfile():
            return Entry(absolute, "other")
        digest, head, kept = hashlib.sha256(), b"", bytearray()
        keep = absolute.endswith(KEEP_SUFFIXES) and member.size <= self._KEPT_BYTES
        source = archive.extractfile(member)
        while source is not None and (chunk := source.read(1 << 20)):
            digest.update(chunk)
            head = head or chunk[: self._HEAD_BYTES]
            if keep:
                kept += chunk
        return Entry(absolute, "file", digest.hexdigest(), head=head, data=bytes(kept) if keep else None)


class _ChunkReader(io.RawIOBase):
    """A file object over the engine's stream of byte chunks, for tarfile's stream mode."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(target), len(self._buffer))
        target[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


# -- registry errors --------------------------------------------------------------------

_TRANSIENT_REASONS = (
    ("connection refused", "connection refused"),
    ("no such host", "unknown host"),
    ("server misbehaving", "DNS failure"),
    ("temporary failure in name resolution", "DNS failure"),
    ("i/o timeout", "timed out"),
    ("timeout", "timed out"),
    ("connection reset", "connection reset"),
    ("network is unreachable", "network unreachable"),
    ("no route to host", "no route to host"),
    ("unexpected eof", "connection closed early"),
    ("broken pipe", "connection closed early"),
    ("use of closed network connection", "connection closed early"),
    ("server closed idle connection", "connection closed early"),
    ("connection closed", "connection closed early"),
)
_BARE_EOF = re.compile(r"(:\s*|\b)EOF\s*$|: EOF\b")
"""Go's io.EOF as the daemon prints it: the registry closed the connection mid-request (`Put "...": EOF`)."""
_URL_QUERY = re.compile(r"((?:https?://)[^\s\"'?]+)\?[^\s\"']*")
"""The query of a URL: upload URLs carry the registry's `_state` token there, which no message may show."""
_DETAIL_CHARS = 300
_SERVER_ERROR = re.compile(
    r"(status|code)\D{0,12}5\d\d\b|internal server error|bad gateway|service unavailable"
    r"|gateway time-?out", re.IGNORECASE)
_LOGIN = "access denied by registry {registry}: log in with `docker login {registry}`"
_PERMANENT_REASONS = (
    ("manifest unknown", "not found in registry {registry}"),
    ("not found", "not found in registry {registry}"),
    ("does not exist", "not found in registry {registry}, or access denied"),
    ("name unknown", "not found in registry {registry}"),
    ("unauthorized", _LOGIN),
    ("no basic auth credentials", _LOGIN),
    ("authentication required", _LOGIN),
    ("denied", _LOGIN),
    ("forbidden", "access forbidden by registry {registry}"),
    ("http response to https client",
     "registry {registry} speaks plain HTTP: list it in the daemon's insecure-registries"),
    ("x509", "the TLS certificate of registry {registry} is not trusted"),
    ("certificate", "the TLS certificate of registry {registry} is not trusted"),
    ("invalid reference format", "not a valid image reference"),
)


def registry_error(action: str, ref: str, detail: str) -> RegistryError:
    """A RegistryError with a short reason, `transient` (worth retrying) and the full `detail`.

    A registry that answered "no such image" is NotInRegistry (exit 1): it was reached. A pull
    from a registry that cannot be reached suggests pulling through a mirror, which is what a
    firewalled or offline site needs. URL queries (upload tokens) are left out.
    """
    detail = without_url_queries(detail)
    reason, transient = _classify_registry_failure(detail)
    registry = _registry_of(ref)
    kind = NotInRegistry if reason.startswith("not found") else RegistryError
    hint = None
    if transient and action == "pull" and "unreachable" in reason:
        hint = pull_through_a_mirror(registry)
    err = kind(f"{action} of {ref} failed: {reason.format(registry=registry)}", hint=hint)
    err.transient = transient
    err.detail = detail
    return err


def pull_through_a_mirror(registry: str) -> str:
    """The advice for a base's registry out of reach, whether its pull or the read of its index failed."""
    return f"offline or behind a firewall? pull through a mirror: --registry-mirror {registry}=HOST[/PATH]"


def _classify_registry_failure(detail: str) -> tuple[str, bool]:
    """(reason, with a {registry} slot; whether a retry may help)."""
    lowered = detail.lower()
    if _SERVER_ERROR.search(detail):
        return "registry {registry} had a server error", True
    for needle, reason in _TRANSIENT_REASONS:
        if needle in lowered:
            return f"registry {{registry}} unreachable ({reason})", True
    if _BARE_EOF.search(detail):
        return "registry {registry} unreachable (connection closed early)", True
    for needle, reason in _PERMANENT_REASONS:
        if needle in lowered:
            return reason, False
    unknown = _shortened(" ".join(detail.split()))
    return unknown.replace("{", "{{").replace("}", "}}"), False


def without_url_queries(text: str) -> str:
    """`text` with every URL's query replaced by `?…`: tokens (`_state=...`) never reach a message."""
    return _URL_QUERY.sub(r"\1?…", text)


def _shortened(text: str, limit: int = _DETAIL_CHARS) -> str:
    """At most `limit` characters, keeping both ends: the cause is usually last (`Put "URL": CAUSE`)."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half].rstrip()} … {text[-half:].lstrip()}"


def _registry_of(ref: str) -> str:
    try:
        return resolve_repository_name(parse_repository_tag(ref)[0])[0]
    except docker.errors.DockerException:
        return "unknown"


# -- build and stream helpers -----------------------------------------------------------

class _EventPrinter:
    """Turns stream events into whole text lines for a progress display.

    Build output arrives in fragments ("Step 1/3 : FROM x" and its "\\n" are separate
    events); download progress repeats one status many times, kept here once per layer.
    """

    def __init__(self, on_line: OnLine | None) -> None:
        self._on_line = on_line
        self._partial = ""
        self._seen_progress: set[tuple[str, str]] = set()

    def event(self, event: Mapping[str, Any]) -> None:
        if "stream" in event:
            self._text(str(event["stream"]))
            return
        self.flush()
        for line in _event_lines(event, self._seen_progress):
            self.line(line)

    def _text(self, text: str) -> None:
        *complete, self._partial = (self._partial + _ANSI_ESCAPE.sub("", text)).split("\n")
        for line in complete:
            self.line(line.rstrip("\r"))

    def flush(self) -> None:
        if self._partial:
            partial, self._partial = self._partial, ""
            self.line(partial.rstrip("\r"))

    def line(self, line: str) -> None:
        if self._on_line is not None:
            self._on_line(line)


class _BuildLog(_EventPrinter):
    """The build's log file (line-buffered, so a crash keeps all but the last line) plus
    the step being run, for failure messages."""

    def __init__(self, path: Path, on_line: OnLine | None) -> None:
        super().__init__(on_line)
        self.path = path
        self.step: str | None = None
        self._file: IO[str] | None = None

    def __enter__(self) -> _BuildLog:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w", encoding="utf-8", errors="replace", buffering=1)
        except OSError as err:
            raise EngineError(f"cannot write the build log {self.path}: {err.strerror}") from err
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.flush()
        finally:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError:
                    pass  # a full disk: the write that failed first has said so

    def line(self, line: str) -> None:
        """One line into the log and on to the progress display, credentials masked: a step's own output
        (pip's `Looking in indexes: ...`, an error quoting a URL) may carry an index's or a mirror's."""
        line = hide_credentials(line)
        if _STEP_LINE.match(line):
            self.step = line
        if self._file is not None:
            try:
                self._file.write(line + "\n")
            except OSError as err:  # a full disk (ENOSPC) or a quota: this variant fails in one line
                raise EngineError(f"cannot write the build log {self.path}: {err.strerror}",
                                  hint="free space under the state directory, or choose another --state-dir") from None
        super().line(line)

    def note(self, line: str) -> None:
        """A line of our own (a header, an error), after any pending fragment."""
        self.flush()
        self.line(line)

    def tail(self) -> list[str]:
        self.flush()
        if self._file is not None:
            self._file.flush()
        return buildlog.tail(self.path, LOG_TAIL_LINES)


def _event_lines(event: Mapping[str, Any], seen_progress: set[tuple[str, str]]) -> Iterable[str]:
    """Readable lines for a non-`stream` event: status, errors."""
    error = _event_error(event)
    if error is not None:
        yield f"ERROR: {error}"
        return
    status = event.get("status")
    if not status:
        return
    layer = str(event.get("id") or "")
    if event.get("progressDetail"):
        if (layer, status) in seen_progress:
            return
        seen_progress.add((layer, status))
    yield f"{layer}: {status}" if layer else str(status)


def _event_error(event: Mapping[str, Any]) -> str | None:
    """The error a stream event carries, if any (docker-py does not raise for these)."""
    detail = event.get("errorDetail")
    if isinstance(detail, Mapping) and detail.get("message"):
        return str(detail["message"])
    if event.get("error"):
        return str(event["error"])
    return None


def _built_image_id(event: Mapping[str, Any]) -> str | None:
    aux = event.get("aux")
    if isinstance(aux, Mapping) and aux.get("ID"):
        return str(aux["ID"])
    built = _BUILT_LINE.match(str(event.get("stream", "")))
    return built.group(1) if built else None


def _pushed_digest(event: Mapping[str, Any]) -> str | None:
    aux = event.get("aux")
    if isinstance(aux, Mapping) and aux.get("Digest"):
        return str(aux["Digest"])
    found = _PUSHED_DIGEST.search(str(event.get("status", "")))
    return found.group(1) if found else None


def _build_failed(tag: str, error: str, build_log: _BuildLog) -> BuildFailed:
    """BuildFailed with the short cause read from the step and the log tail; the full log is named apart."""
    lines = tuple(build_log.tail())
    error = hide_credentials(error)
    cause = failure.explain(error, build_log.step, lines)
    return BuildFailed(str(cause), step=build_log.step, detail=" ".join(error.split()), log_tail=lines,
                       log_path=build_log.path)


# -- containers and errors ----------------------------------------------------------------

def _wait_or_kill(container: Any, timeout_s: float) -> tuple[int, bool]:
    """(exit code, timed out). On timeout the container is killed and reaped."""
    try:
        return _exit_code(container.wait(timeout=timeout_s)), False
    except _TRANSPORT_ERRORS as err:
        if not _is_read_timeout(err):
            raise
    try:
        container.kill()
    except docker.errors.APIError:
        pass  # it stopped on its own meanwhile
    return _exit_code(container.wait(timeout=_KILL_GRACE_S)), True


def _exit_code(wait_result: Mapping[str, Any]) -> int:
    return int(wait_result.get("StatusCode", -1))


def _is_read_timeout(err: BaseException) -> bool:
    """requests raises ReadTimeout over TCP but ConnectionError(ReadTimeoutError) over a
    unix socket; both mean the wait ran out, not that the daemon is gone."""
    if isinstance(err, (requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError)):
        return True
    return any(isinstance(arg, urllib3.exceptions.ReadTimeoutError) for arg in err.args)


def _platform_of(raw: Mapping[str, Any]) -> str:
    """`os/architecture[/variant]` of an inspected image ('' when the engine says nothing)."""
    os_name, arch = str(raw.get("Os") or ""), str(raw.get("Architecture") or "")
    if not os_name or not arch:
        return ""
    return platform_name(os_name, arch, str(raw.get("Variant") or ""))


def _text(output: bytes | str) -> str:
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else output


def _explanation(err: docker.errors.APIError) -> str:
    """The daemon's own message, without docker-py's URL-laden prefix."""
    text = err.explanation if err.explanation else str(err)
    return " ".join(str(text).split())


def _transport_reason(err: BaseException) -> str:
    text = str(err).lower()
    for needle, reason in (("no such file", "no such socket"),
                           ("permission denied", "permission denied"),
                           ("connection refused", "connection refused"),
                           ("connection reset", "connection reset"),
                           ("broken pipe", "connection closed"),
                           ("timed out", "timed out"),
                           ("connection broken", "connection broken"),
                           ("connection aborted", "connection aborted")):
        if needle in text:
            return reason
    return " ".join(str(err).split())[:200] or type(err).__name__


def _unreachable(where: str, err: BaseException) -> EngineError:
    reason = _transport_reason(err)
    if reason == "permission denied":
        advice = "add your user to the `docker` group (then log in again) or run as root"
    else:
        advice = "start it (e.g. `sudo systemctl start docker`) or set DOCKER_HOST"
    return EngineError(f"Docker daemon not reachable at {where} ({reason}): {advice}")
