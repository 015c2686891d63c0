"""A small Docker Registry HTTP API v2 client: what a registry holds, without pulling.

The nightly rebuild decides from an image's labels (its fingerprint, its build date) whether
to rebuild it, and checks after a promotion that a tag points at the digest that passed its
smoke test. Both need only a manifest and a config blob, so they talk to the registry
directly instead of pulling gigabytes through the Docker daemon.

Authentication follows the registry's own challenge: anonymous first; on 401 either Basic,
or the Bearer token flow of the `WWW-Authenticate` header, with the credentials `docker
login` stored (the Docker config file, or its credential helpers, through docker-py). They
are never printed and never taken from the command line, and they go to this registry's own
scheme, host and port and to the token service it names (https:// when the registry is), nowhere
else: not to a next page or an upload location on another host.

Copying a tag (a floating alias that must follow an image that was not rebuilt) is a manifest
put of the same bytes: no layer moves, and no local image is needed.

Everything a registry answers is checked against the shape the API defines before it is used
(accel_images/data/registry.schema.json, one `$defs` entry per kind: `MANIFEST`, `INDEX`, `CONFIG`,
`TAG_LIST`, `TOKEN` below, and `parse` for bytes read elsewhere): JSON nested past
accel_images.untrusted's limit, a field of the wrong type, an entry that is not an object are one
permanent `MalformedAnswer` naming the field, never an exception further on.

Deleting a tag: the distribution registry (v2.x) deletes manifests by digest only, and
that removes every tag pointing at the digest. A candidate tag shares its digest with the
real tags it was promoted to, so `delete_tag` first points the tag at a tiny manifest of
its own (a "tombstone") and deletes that; other tags never move. This needs
`storage.delete.enabled` on the registry, and a token with the delete action: both are asked
for (`check_deletes`) before the first tag of a repository moves onto a tombstone.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from collections.abc import Callable, Mapping, Sequence

import docker.auth
import docker.errors
import requests

from accel_images import untrusted
from accel_images.credentials import hide_credentials
from accel_images.errors import InputError, MalformedAnswer, RegistryError
from accel_images.formatting import inert

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MANIFEST_TYPES = (OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST)
LIST_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST)
DEFAULT_PLATFORM = "linux/amd64"
TIMEOUT_S = 30.0
MAX_TAG_PAGES = 1000
"""At 1000 tags a page (100 where a registry caps the page size), more tags than any repository this tool
writes holds."""
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
DOCKER_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io")
DOCKER_HUB_API = "registry-1.docker.io"
TOMBSTONE_LABEL = "io.accel-images.tombstone"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
OCI_EMPTY_JSON = b"{}"
"""The OCI image-spec 1.1 empty descriptor's content, the config of an artifact that needs none."""

_HOST_RE = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)(:\d{1,5})?$")
_PATH_RE = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_ANY_DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+\Z")
"""A digest of any algorithm (image-spec descriptor.md, "Digests"); where one is fetched, sha256 is required."""
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
log = logging.getLogger(__name__)

Credentials = Callable[[str], Mapping[str, str] | None]


@dataclass(frozen=True)
class Destination:
    """`--registry` parsed: `[http[s]://]HOST[:PORT][/NAMESPACE]`."""

    host: str
    namespace: str = ""
    scheme: str | None = None     # None: http for loopback, https otherwise

    @classmethod
    def parse(cls, text: str) -> Destination:
        scheme: str | None
        scheme, sep, rest = text.strip().partition("://")
        if not sep:
            scheme, rest = None, text.strip()
        host, _, namespace = rest.rstrip("/").partition("/")
        port = host.rsplit(":", 1)[1] if _HOST_RE.match(host) and host.rsplit("]", 1)[-1].count(":") else None
        if scheme not in (None, "http", "https") or not _HOST_RE.match(host) \
                or (port is not None and not 0 < int(port) <= 65535) \
                or (namespace and not _PATH_RE.match(namespace)):
            raise InputError(f"'{hide_credentials(text)}' is not [http[s]://]HOST[:PORT][/NAMESPACE]"
                             " (e.g. 127.0.0.1:5000 or ghcr.io/my-team)", field="--registry")
        return cls(host, namespace, scheme)

    def repository(self, image: str) -> str:
        """The repository path of `image` (the matrix's image name) under this destination."""
        return f"{self.namespace}/{image}" if self.namespace else image

    def __str__(self) -> str:
        return f"{self.host}/{self.namespace}" if self.namespace else self.host


@dataclass(frozen=True)
class RemoteImage:
    """What the registry says about one tag, read without pulling."""

    repository: str
    tag: str
    digest: str                    # the tag's manifest digest (the index's, for a multi-platform tag)
    labels: Mapping[str, str] = field(default_factory=dict)
    created: datetime | None = None
    diff_ids: tuple[str, ...] = ()           # the config's rootfs.diff_ids: what the layers hold, uncompressed
    layer_sizes: tuple[int, ...] = ()        # the manifest's compressed layer sizes, in the same order
    platform: str = ""                       # the config's os/architecture[/variant]
    manifest: str = ""                       # the image manifest's own digest (`digest` is the index's, if any)
    index: tuple[IndexEntry, ...] = ()       # every platform of the tag's index; () for a single image

    @property
    def is_index(self) -> bool:
        return bool(self.index)

    def layer_size(self, short_id: str) -> int:
        """The compressed size of the layer whose diff ID starts with `short_id` (0 when none does)."""
        return next((size for diff_id, size in zip(self.diff_ids, self.layer_sizes, strict=False)
                     if diff_id.removeprefix("sha256:").startswith(short_id)), 0)


@dataclass(frozen=True)
class IndexEntry:
    """One manifest an image index lists: its platform and its descriptor."""

    platform: str
    digest: str
    size: int
    media_type: str = OCI_MANIFEST

    def descriptor(self) -> dict[str, Any]:
        os, arch, *variant = self.platform.split("/")
        platform = {"architecture": arch, "os": os, **({"variant": variant[0]} if variant else {})}
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size, "platform": platform}


def oci_index(entries: Sequence[IndexEntry], annotations: Mapping[str, str] | None = None) -> bytes:
    """The bytes of an OCI image index of `entries` (image-spec image-index.md), in a fixed order and
    spelling, so the same platforms' manifests always make the same index digest."""
    index: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_INDEX,
                             "manifests": [entry.descriptor() for entry in entries]}
    if annotations:
        index["annotations"] = dict(annotations)
    return json.dumps(index, sort_keys=True, separators=(",", ":")).encode()


def is_index(manifest: Mapping[str, Any]) -> bool:
    """Whether a manifest a tag names is an image index (OCI's or Docker's manifest list), not one image."""
    return manifest.get("mediaType") in LIST_TYPES or "manifests" in manifest


def index_entries(index: Mapping[str, Any], what: str) -> tuple[IndexEntry, ...]:
    """The image manifests an index lists, by platform; entries of no real platform (BuildKit's
    attestation manifests say `unknown/unknown`) are left out. A malformed index is a RegistryError."""
    problem = mismatch(index, INDEX)
    if problem is not None:
        raise malformed(what, f"the image index's {problem}")
    found: list[IndexEntry] = []
    for entry in index["manifests"]:
        platform = entry.get("platform")
        if platform is None or platform["os"] == "unknown":
            continue
        if not DIGEST_RE.match(entry["digest"]):
            raise malformed(what, f"the image index's {platform['os']}/{platform['architecture']} entry"
                                  " is not a sha256 digest")
        name = platform_name(platform["os"], platform["architecture"], platform.get("variant") or "")
        found.append(IndexEntry(name, entry["digest"], entry["size"], entry.get("mediaType") or OCI_MANIFEST))
    return tuple(found)


def platform_name(os: str, arch: str, variant: str = "") -> str:
    """`os/architecture[/variant]` of an index entry, an image config or an inspected image: the one place
    a platform is spelled. `arm64` with variant `v8` is `linux/arm64`: v8 is the only arm64 variant, and
    Docker's own images leave it out as often as they write it, so the two spellings must compare equal."""
    if arch == "arm64" and variant == "v8":
        variant = ""
    return f"{os}/{arch}" + (f"/{variant}" if variant else "")


@dataclass(frozen=True)
class Artifact:
    """An OCI artifact: one payload of its own media type, annotations, and optionally the
    manifest it is about (`subject`: mediaType, digest and size of that manifest)."""

    artifact_type: str
    payload: bytes
    payload_type: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    subject: Mapping[str, Any] | None = None


def docker_credentials(registry: str) -> Mapping[str, str] | None:
    """The `docker login` credentials for `registry` (config file or credential helper)."""
    try:
        found = docker.auth.load_config().resolve_authconfig(registry)
    except docker.errors.DockerException as err:
        raise RegistryError(f"cannot read the Docker credentials for {registry}: {type(err).__name__}") from err
    return found or None


class RegistryClient:
    """The registry API of one host. Safe to share between threads."""

    def __init__(self, host: str, *, scheme: str | None = None, credentials: Credentials = docker_credentials,
                 timeout_s: float = TIMEOUT_S) -> None:
        self.host = host
        api_host = DOCKER_HUB_API if host in DOCKER_HUB_ALIASES else host
        scheme = scheme or ("http" if is_loopback(api_host) else "https")
        self.base_url = f"{scheme}://{api_host}"
        self.timeout_s = timeout_s
        self._credentials = credentials
        self._local = threading.local()
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {}
        self._basic: str | None = None
        self._deletable: set[str] = set()

    @classmethod
    def for_destination(cls, destination: Destination, **kwargs: Any) -> RegistryClient:
        return cls(destination.host, scheme=destination.scheme, **kwargs)

    # -- queries ----------------------------------------------------------------------------

    def ping(self) -> None:
        """Fail now, with the reason, when the registry cannot be reached or refuses us."""
        self._call("GET", "/v2/", scope="", what="checking its API (/v2/)")

    def image(self, repository: str, tag: str, platform: str | None = None) -> RemoteImage | None:
        """The labels, digest and creation time of `repository:tag`; None when the tag is absent.

        For a multi-platform tag (an image index) the image of `platform` is read (linux/amd64 when
        none is named): `digest` stays the index's, what the tag points at, and `manifest` is the
        image's own. An index without that platform is None for it, as an absent tag is. A single
        image of another platform than the one named is None too.
        """
        found = self._manifest(repository, tag)
        if found is None:
            return None
        digest, manifest = found
        own, entries = digest, tuple[IndexEntry, ...]()
        what = f"{repository}:{tag}"
        if is_index(manifest):
            entries = index_entries(manifest, f"{self.host}/{what}")
            wanted = platform or DEFAULT_PLATFORM
            chosen = next((entry for entry in entries if entry.platform == wanted), None)
            if chosen is None:
                return None
            inner = self._manifest(repository, chosen.digest)
            if inner is None:
                raise RegistryError(f"{self.host}/{what} lists {chosen.digest}, which the registry lacks")
            own, manifest = inner
        config = self._config(repository, manifest, what)
        problem = mismatch(config, CONFIG)
        if problem is not None:
            raise malformed(f"{self.host}/{what}", f"the image config's {problem}")
        labels = dict((config.get("config") or {}).get("Labels") or {})
        diff_ids = tuple(str(d) for d in (config.get("rootfs") or {}).get("diff_ids") or ())
        sizes = tuple(int(layer.get("size") or 0) for layer in manifest.get("layers") or ())
        image_platform = _config_platform(config)
        if platform is not None and not entries and image_platform and image_platform != platform:
            return None
        return RemoteImage(repository, tag, digest, labels, parse_time(config.get("created")), diff_ids, sizes,
                           image_platform, own, tuple(entries))

    def manifest_digest(self, repository: str, tag: str) -> str | None:
        """The digest `repository:tag` points at, None when the tag is absent."""
        response = self._request("HEAD", f"/v2/{repository}/manifests/{tag}", scope=_scope(repository),
                                 headers={"Accept": ", ".join(MANIFEST_TYPES)}, missing_ok=True,
                                 what=f"reading {repository}:{tag}")
        if response is None:
            return None
        digest = response.headers.get("Docker-Content-Digest")
        if digest:
            return digest
        found = self._manifest(repository, tag)  # registries may omit the header on HEAD
        return found[0] if found else None

    def descriptor(self, repository: str, reference: str) -> dict[str, Any] | None:
        """The OCI descriptor (mediaType, digest, size) of the manifest `reference` names, from a HEAD;
        None when absent or when the registry leaves out what a descriptor needs."""
        response = self._request("HEAD", f"/v2/{repository}/manifests/{reference}", scope=_scope(repository),
                                 headers={"Accept": ", ".join(MANIFEST_TYPES)}, missing_ok=True,
                                 what=f"reading {repository}@{reference}")
        if response is None:
            return None
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        digest = response.headers.get("Docker-Content-Digest") or (reference if reference.startswith("sha256:") else "")
        size = response.headers.get("Content-Length", "")
        if not (media_type and digest and size.isdigit()):
            return None
        return {"mediaType": media_type, "digest": digest, "size": int(size)}

    def tags(self, repository: str, page_size: int = 1000, max_pages: int = MAX_TAG_PAGES) -> list[str]:
        """Every tag of `repository` (all pages); [] when the repository does not exist.

        The next page is what the registry's `Link: <...>; rel="next"` header names. It must be this
        repository's tag list on this registry (a page elsewhere would get the user's login and
        mix in tags that are not this repository's), must not repeat a page already read, and
        there are at most `max_pages` of them: a registry that pages on forever ends the listing
        with one RegistryError instead of a run that never ends.
        """
        names: list[str] = []
        path: str | None = f"/v2/{repository}/tags/list?n={page_size}"
        read: set[str] = set()
        what = f"listing the tags of {repository}"
        while path:
            if path in read:
                raise malformed(f"{self.host}/{repository}", f"the tag list's next page ({shown_url(path)}) "
                                                              "repeats a page already read")
            if len(read) == max_pages:
                raise malformed(f"{self.host}/{repository}", f"the tag list goes on past {max_pages} pages")
            read.add(path)
            response = self._request("GET", path, scope=_scope(repository), missing_ok=True, what=what)
            if response is None:
                return names
            page = _json(response, what, TAG_LIST).get("tags") or []
            names += page
            path = self._next_page(response.headers.get("Link"), repository)
        return names

    def _next_page(self, link: str | None, repository: str) -> str | None:
        """The path of the next tag-list page a Link header names; None on the last page.

        Refused (RegistryError) when it leaves this registry or this repository's tag list.
        """
        target = _next_page(link)
        if target is None:
            return None
        parts = urlsplit(target)
        if (parts.scheme or parts.netloc) and not self.is_home(target):
            raise malformed(f"{self.host}/{repository}", "the tag list's next page is on another host "
                            f"({shown_url(f'{parts.scheme}://{parts.netloc}')}); it is not followed, so "
                            "neither the request nor the login goes there")
        if parts.path != f"/v2/{repository}/tags/list":
            raise malformed(f"{self.host}/{repository}", f"the tag list's next page ({shown_url(parts.path)}) "
                                                          f"is not the tag list of {repository}")
        return parts.path + (f"?{parts.query}" if parts.query else "")

    # -- changes ----------------------------------------------------------------------------

    def copy_tag(self, repository: str, source: str, tag: str) -> str:
        """Point `tag` at the manifest `source` points at (byte for byte, so the same digest)."""
        where = f"tagging {repository}:{source} as {tag}"
        scope = _scope(repository, "pull,push")
        got = self._call("GET", f"/v2/{repository}/manifests/{source}", scope=scope, what=where,
                         headers={"Accept": ", ".join(MANIFEST_TYPES)})
        media_type = got.headers.get("Content-Type", DOCKER_MANIFEST).split(";")[0].strip()
        put = self._call("PUT", f"/v2/{repository}/manifests/{tag}", scope=scope, ok=(201,), data=got.content,
                         headers={"Content-Type": media_type}, what=where)
        return put.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(got.content).hexdigest()

    def delete_tag(self, repository: str, tag: str) -> bool:
        """Remove one tag and nothing else; False when it was not there.

        The tag is first pointed at a tombstone manifest of its own, which is then deleted by
        digest: deleting the real digest would take every other tag on it along. So deletes are
        asked for first (`check_deletes`): a registry or token that cannot delete refuses before
        any tag moves. Should the delete still fail, the tag is pointed back at its image: a tag
        is never left on a tombstone.
        """
        previous = self.manifest_digest(repository, tag)
        if previous is None:
            return False
        scope = _scope(repository, "pull,push,delete")
        self.check_deletes(repository)
        tombstone = self._put_tombstone(repository, tag, scope)
        try:
            self._request("DELETE", f"/v2/{repository}/manifests/{tombstone}", scope=scope,
                          ok=(200, 202), what=f"deleting {repository}:{tag}", missing_ok=True)
        except RegistryError:
            self._put_back(repository, tag, previous)
            raise
        return True

    def check_deletes(self, repository: str) -> None:
        """Raise the registry's refusal (RegistryError) unless it lets this client delete manifests here.

        Asked once per repository, without changing anything: a DELETE of a digest no manifest has.
        The distribution registry answers 404 MANIFEST_UNKNOWN when deletes are on, and 405 UNSUPPORTED
        for any digest when its storage.delete setting is off (observed with docker-registry 2.8); a
        token without the delete action gets 401 or 403.
        """
        with self._lock:
            if repository in self._deletable:
                return
        self._request("DELETE", f"/v2/{repository}/manifests/sha256:{'0' * 64}",
                      scope=_scope(repository, "pull,push,delete"), ok=(200, 202), missing_ok=True,
                      what=f"checking that {repository} allows deletes")
        with self._lock:
            self._deletable.add(repository)

    def _put_back(self, repository: str, tag: str, digest: str) -> None:
        """Point `tag` at `digest` again after a failed delete; a failure here is logged, not raised,
        so the delete's own error is what the caller sees."""
        try:
            self.copy_tag(repository, digest, tag)
        except RegistryError as error:
            log.warning("%s:%s left on a tombstone after a failed delete: %s", repository, tag, error.one_line())

    def _put_tombstone(self, repository: str, tag: str, scope: str) -> str:
        return self._put_labels_image(repository, tag, {TOMBSTONE_LABEL: f"{tag} {uuid.uuid4().hex}"}, scope,
                                      f"deleting {repository}:{tag}")

    def put_labels_image(self, repository: str, tag: str, labels: Mapping[str, str]) -> str:
        """Point `tag` at a tiny image of its own: no layers, only a config carrying `labels`; its digest.

        What the tool keeps in the registry beside the images (accel_images.publish.tested) is stored
        this way: any registry that holds images holds it, and it is read like any image.
        """
        return self._put_labels_image(repository, tag, labels, _scope(repository, "pull,push"),
                                      f"writing {repository}:{tag}")

    def _put_labels_image(self, repository: str, tag: str, labels: Mapping[str, str], scope: str, where: str) -> str:
        config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                             "config": {"Labels": dict(labels)}}, sort_keys=True).encode()
        config_digest = self._put_blob(repository, config, scope, where)
        manifest = json.dumps({"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
                               "config": {"mediaType": DOCKER_CONFIG, "size": len(config), "digest": config_digest},
                               "layers": []}).encode()
        return self._put_manifest(repository, tag, manifest, DOCKER_MANIFEST, scope, where)[0]

    def put_artifact(self, repository: str, tag: str, artifact: Artifact) -> str:
        """Push `artifact` as an OCI artifact manifest under `tag`; its digest.

        The OCI image-spec 1.1 form (artifactType, the empty config, one layer), which registries
        without artifact support (distribution 2.8) store like any OCI manifest.
        """
        scope = _scope(repository, "pull,push")
        where = f"writing {repository}:{tag}"
        empty = self._put_blob(repository, OCI_EMPTY_JSON, scope, where)
        layer = self._put_blob(repository, artifact.payload, scope, where)
        manifest: dict[str, Any] = {
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact.artifact_type,
            "config": {"mediaType": OCI_EMPTY, "size": len(OCI_EMPTY_JSON), "digest": empty},
            "layers": [{"mediaType": artifact.payload_type, "size": len(artifact.payload), "digest": layer}],
            "annotations": dict(artifact.annotations)}
        if artifact.subject is not None:
            manifest["subject"] = dict(artifact.subject)
        body = json.dumps(manifest, sort_keys=True).encode()
        return self._put_manifest(repository, tag, body, OCI_MANIFEST, scope, where)[0]

    def _put_blob(self, repository: str, data: bytes, scope: str, where: str) -> str:
        """A monolithic blob upload (POST, then PUT with the digest); the blob's digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        started = self._call("POST", f"/v2/{repository}/blobs/uploads/", scope=scope, ok=(202,), what=where)
        location = started.headers.get("Location") or ""
        if not location:
            raise RegistryError(f"registry {self.host} gave no upload location while {where}")
        self._call("PUT", _with_query(location, digest=digest), scope=scope, ok=(201,), data=data,
                   headers={"Content-Type": "application/octet-stream"}, what=where)
        return digest

    def _put_manifest(self, repository: str, reference: str, body: bytes, media_type: str, scope: str,
                      where: str) -> tuple[str, bool]:
        """(digest, whether the registry sent OCI-Subject: it keeps the referrers list itself)."""
        put = self._call("PUT", f"/v2/{repository}/manifests/{reference}", scope=scope, ok=(201,), data=body,
                         headers={"Content-Type": media_type}, what=where)
        digest = put.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(body).hexdigest()
        return digest, "OCI-Subject" in put.headers

    # -- raw content (OCI artifacts, accel_images.attach) -----------------------------------

    def manifest_bytes(self, repository: str, reference: str,
                       accept: tuple[str, ...] = MANIFEST_TYPES) -> tuple[str, str, bytes] | None:
        """(digest, media type, exact bytes) of a manifest; None when absent.

        The bytes are what a descriptor's digest and size are computed over, so they are
        never parsed and re-serialised here.
        """
        response = self._request("GET", f"/v2/{repository}/manifests/{reference}", scope=_scope(repository),
                                 headers={"Accept": ", ".join(accept)}, missing_ok=True,
                                 what=f"reading {repository}@{reference}")
        if response is None:
            return None
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
        return digest, media_type, response.content

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> tuple[str, bool]:
        """Put a manifest under a tag or its own digest; (digest, whether the registry sent OCI-Subject).

        The OCI-Subject header is how a registry says it keeps the referrers list itself.
        """
        return self._put_manifest(repository, reference, data, media_type, _scope(repository, "pull,push"),
                                  f"writing {repository}@{reference}")

    def push_blob(self, repository: str, data: bytes) -> str:
        """Upload `data` as one blob (monolithic upload) unless the registry has it; its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        scope, where = _scope(repository, "pull,push"), f"uploading a blob to {repository}"
        if self._request("HEAD", f"/v2/{repository}/blobs/{digest}", scope=scope, missing_ok=True,
                         what=where) is not None:
            return digest
        return self._put_blob(repository, data, scope, where)

    def blob(self, repository: str, digest: str) -> bytes:
        """A blob's bytes, checked against its digest."""
        response = self._call("GET", f"/v2/{repository}/blobs/{digest}", scope=_scope(repository),
                              what=f"reading blob {digest[:19]} of {repository}")
        if "sha256:" + hashlib.sha256(response.content).hexdigest() != digest:
            raise RegistryError(f"registry {self.host} served blob {digest[:19]} of {repository} with other content")
        return response.content

    def referrers(self, repository: str, digest: str) -> dict[str, Any] | None:
        """The OCI referrers API's index for `digest`; None when the registry has no such API (404)."""
        response = self._request("GET", f"/v2/{repository}/referrers/{digest}", scope=_scope(repository),
                                 headers={"Accept": OCI_INDEX}, missing_ok=True,
                                 what=f"listing the referrers of {repository}@{digest[:19]}")
        if response is None:
            return None
        return _json(response, f"listing the referrers of {repository}@{digest[:19]}", INDEX)

    # -- manifests and blobs ----------------------------------------------------------------

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None:
        """The digest and JSON of the manifest `reference` (a tag or a digest) names; None when absent."""
        return self._manifest(repository, reference)

    def _manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None:
        what = f"reading {repository}" + (f"@{reference}" if ":" in reference else f":{reference}")
        response = self._request("GET", f"/v2/{repository}/manifests/{reference}", scope=_scope(repository),
                                 headers={"Accept": ", ".join(MANIFEST_TYPES)}, missing_ok=True, what=what)
        if response is None:
            return None
        digest = (response.headers.get("Docker-Content-Digest")
                  or "sha256:" + hashlib.sha256(response.content).hexdigest())
        return digest, _json(response, what, MANIFEST)

    def _config(self, repository: str, manifest: Mapping[str, Any], what: str) -> dict[str, Any]:
        descriptor = manifest.get("config")
        if not isinstance(descriptor, Mapping) or not descriptor.get("digest"):
            raise malformed(f"{self.host}/{what}", "the manifest has no image config (schema 1 is not supported)")
        if not isinstance(descriptor["digest"], str) or not DIGEST_RE.match(descriptor["digest"]):
            raise malformed(f"{self.host}/{what}", "the manifest's config digest is not a sha256 digest")
        response = self._call("GET", f"/v2/{repository}/blobs/{descriptor['digest']}", scope=_scope(repository),
                              what=f"reading the config of {what}")
        return _json(response, f"reading the config of {what}")

    # -- HTTP and authentication ------------------------------------------------------------

    def _call(self, method: str, path: str, *, scope: str, what: str, ok: tuple[int, ...] = (200,),
              headers: Mapping[str, str] | None = None, data: bytes | None = None) -> requests.Response:
        """Like _request, for calls where a 404 is a failure like any other."""
        response = self._request(method, path, scope=scope, what=what, ok=ok, headers=headers, data=data)
        assert response is not None  # only missing_ok calls return None
        return response

    def _request(self, method: str, path: str, *, scope: str, what: str, ok: tuple[int, ...] = (200,),
                 missing_ok: bool = False, headers: Mapping[str, str] | None = None,
                 data: bytes | None = None) -> requests.Response | None:
        """One call, authenticating once if challenged; None for a 404 when `missing_ok`.

        `what` says what the call was for, in error messages: "reading team/image:tag". The login
        (Basic or a Bearer token) goes only to this registry itself: a URL elsewhere that a registry's
        answer names (an upload location on a storage service) gets no Authorization header, and
        its challenge is not answered."""
        url = path if path.startswith(("http://", "https://")) else self.base_url + path
        home = self.is_home(url)
        response = self._send(method, url, headers, data, self._authorization(scope) if home else None, what)
        if response.status_code == 401 and home:
            authorization = self._answer_challenge(response.headers.get("WWW-Authenticate", ""), scope, what)
            response = self._send(method, url, headers, data, authorization, what)
        if response.status_code in ok:
            return response
        if response.status_code == 404 and missing_ok:
            return None
        raise self._failure(response, what)

    def is_home(self, url: str) -> bool:
        """Whether `url` is on this registry (its scheme, host and port): the only place its login goes."""
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}".lower() == self.base_url.lower()

    def _send(self, method: str, url: str, headers: Mapping[str, str] | None, data: bytes | None,
              authorization: str | None, what: str) -> requests.Response:
        sent = dict(headers or {})
        if authorization:
            sent["Authorization"] = authorization
        try:
            return self._session().request(method, url, headers=sent, data=data, timeout=self.timeout_s)
        except requests.exceptions.RequestException as err:
            raise unreachable(self.host, what, err) from None

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _authorization(self, scope: str) -> str | None:
        with self._lock:
            token = self._tokens.get(scope)
            return f"Bearer {token}" if token else self._basic

    def _answer_challenge(self, challenge: str, scope: str, what: str) -> str:
        kind, _, params_text = challenge.strip().partition(" ")
        params = dict(_CHALLENGE_PARAM.findall(params_text))
        credentials = self._credentials(self.host) or {}
        if kind.lower() == "basic":
            user, password = _user_password(credentials)
            if user is None:
                raise denied(self.host, what, "authentication required")
            basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            with self._lock:
                self._basic = basic
            return basic
        if kind.lower() != "bearer" or "realm" not in params:
            raise denied(self.host, what, f"unsupported authentication challenge '{kind}'")
        realm = urlsplit(params["realm"])
        if realm.scheme not in ("http", "https") or not realm.netloc \
                or (realm.scheme == "http" and self.base_url.startswith("https://")):
            raise denied(self.host, what, f"the token service {shown_url(params['realm'])} is not an https:// URL"
                                          " (the login is sent there)")
        token = self._fetch_token(params, params.get("scope") or scope, credentials, what)
        with self._lock:
            self._tokens[scope] = token
        return f"Bearer {token}"

    def _fetch_token(self, params: Mapping[str, str], scope: str, credentials: Mapping[str, str],
                     what: str) -> str:
        """The token service's answer: anonymous, Basic with the stored login, or a refresh token."""
        query = {"service": params.get("service", "")} if params.get("service") else {}
        if scope:
            query["scope"] = scope
        identity = credentials.get("IdentityToken") or credentials.get("identitytoken")
        user, password = _user_password(credentials)
        try:
            if identity:
                response = self._session().post(params["realm"], timeout=self.timeout_s, data={
                    **query, "grant_type": "refresh_token", "client_id": "accel-images", "refresh_token": identity})
            else:
                response = self._session().get(params["realm"], params=query, timeout=self.timeout_s,
                                               auth=(user, password) if user is not None else None)
        except requests.exceptions.RequestException as err:
            raise unreachable(self.host, f"getting a token for {what}", err) from None
        if response.status_code in (401, 403):
            raise denied(self.host, what, "the token service refused the credentials")
        if response.status_code != 200:
            raise self._failure(response, f"getting a token for {what}")
        body = _json(response, f"getting a token for {what}", TOKEN)
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError(f"the token service of {self.host} returned no token while {what}")
        return str(token)

    def _failure(self, response: requests.Response, what: str) -> RegistryError:
        status = response.status_code
        reason = _error_text(response)
        if status in (401, 403):
            return denied(self.host, what, reason or ("unauthorized" if status == 401 else "forbidden"))
        error = RegistryError(f"registry {self.host} answered {status}" + (f" ({reason})" if reason else "")
                              + f" while {what}")
        error.transient = status >= 500 or status == 429
        if status == 405 and "DELETE" in (response.request.method or ""):
            error.hint = "the registry does not allow deletes: its setting storage.delete.enabled is off"
        return error


# -- helpers ---------------------------------------------------------------------------------

def unreachable(host: str, what: str, err: BaseException) -> RegistryError:
    """A connection failure: transient, with the reason and never the request's headers."""
    reason = _connection_reason(err)
    error = RegistryError(f"registry {host} unreachable ({reason}) while {what}")
    error.transient = True
    return error


def denied(host: str, what: str, reason: str) -> RegistryError:
    error = RegistryError(f"registry {host} denied access ({reason}) while {what}",
                          hint=f"log in with `docker login {host}`")
    error.transient = False
    return error


def is_loopback(host: str) -> bool:
    """127.0.0.1, localhost or [::1], with or without a port: plain HTTP by default."""
    name = host[: host.index("]") + 1] if host.startswith("[") and "]" in host else host.split(":")[0]
    return name in LOCAL_HOSTS


def _connection_reason(err: BaseException) -> str:
    text = str(err).lower()
    for needle, reason in (("connection refused", "connection refused"),
                           ("name or service not known", "unknown host"),
                           ("temporary failure in name resolution", "DNS failure"),
                           ("nodename nor servname", "unknown host"),
                           ("certificate", "TLS certificate not trusted"),
                           ("wrong version number", "TLS to a plain HTTP port: use http://HOST"),
                           ("timed out", "timed out"),
                           ("connection reset", "connection reset"),
                           ("remote end closed", "connection closed early")):
        if needle in text:
            return reason
    return type(err).__name__


def _user_password(credentials: Mapping[str, str]) -> tuple[str | None, str]:
    user = credentials.get("username") or credentials.get("Username")
    password = credentials.get("password") or credentials.get("Password") or ""
    return (str(user), str(password)) if user else (None, "")


def _scope(repository: str, actions: str = "pull") -> str:
    return f"repository:{repository}:{actions}"


def _json(response: requests.Response, what: str, kind: str | None = None) -> dict[str, Any]:
    return parse(response.content, f"while {what}", kind)


def parse(data: bytes, what: str, kind: str | None = None) -> dict[str, Any]:
    """A JSON object the registry served, checked against the schema of `kind` (MANIFEST, INDEX...);
    MalformedAnswer (exit 4, permanent) for anything else. `what` ends the message: "while reading
    team/image:tag"."""
    try:
        value = untrusted.loads(data)
    except untrusted.JSONTooDeep as error:
        raise MalformedAnswer(f"the registry answered {error} {what}") from None
    except ValueError:
        raise MalformedAnswer(f"the registry answered something that is not JSON {what}") from None
    if not isinstance(value, dict):
        raise MalformedAnswer(f"the registry answered JSON that is not an object {what}")
    problem = mismatch(value, kind) if kind is not None else None
    if problem is not None:
        raise MalformedAnswer(f"the registry answered {DOCUMENT_NAMES[kind or '']} whose {problem} {what}")
    return value


def _error_text(response: requests.Response) -> str:
    """The registry's own `errors[].code: message`, when it sent one."""
    try:
        errors = untrusted.loads(response.content).get("errors") or []
        return "; ".join(f"{e.get('code', '')}: {e.get('message', '')}".strip(": ") for e in errors)[:300]
    except (ValueError, AttributeError, TypeError):
        return ""


def malformed(what: str, problem: str) -> RegistryError:
    """Registry content that does not have the shape the API defines: permanent, one line."""
    return MalformedAnswer(f"{what}: {problem}", hint="the registry holds an image this tool cannot read; "
                                                     "push a good one under the tag or delete it")


# -- the shapes of what a registry answers ----------------------------------------------------

SCHEMA_FILE = Path(__file__).resolve().parent / "data" / "registry.schema.json"
"""One JSON Schema, a `$defs` entry per kind of document (image-spec manifest.md, image-index.md,
descriptor.md, config.md; distribution-spec's tag list): the names below."""
MANIFEST, INDEX, CONFIG, TAG_LIST, TOKEN = "manifest", "index", "config", "tagList", "token"
DOCUMENT_NAMES = {MANIFEST: "a manifest", INDEX: "an index", CONFIG: "an image config", TAG_LIST: "a tag list",
                  TOKEN: "a token"}


@functools.cache
def _validator(kind: str) -> Any:
    """The validator of one kind of document, made once a process; jsonschema is imported only by a
    process that reads a registry. An integer is an int (JSON Schema would also take 12.0), never a bool."""
    import jsonschema
    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _checker, value: type(value) is int)
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    strict = jsonschema.validators.extend(base, type_checker=checker)  # type: ignore[no-untyped-call]
    return strict({**schema, "$ref": f"#/$defs/{kind}"})


def mismatch(value: Any, kind: str) -> str | None:
    """`layers[0].size is a string, not a size`: the first way `value` is not a document of `kind` (in the
    schema's order), in one line; None when it is one."""
    error = next(iter(_validator(kind).iter_errors(value)), None)
    return None if error is None else _problem(error)


def _problem(error: Any) -> str:
    """One schema error as a reader says it: where (`config.digest`, `annotations['a']`), then what is wrong."""
    where, names = "", iter(error.absolute_path)
    for keyword in error.absolute_schema_path:   # each of these steps into the document
        if keyword == "properties":
            where += f".{next(names)}" if where else str(next(names))
        elif keyword == "additionalProperties":
            where += f"[{str(next(names))[:40]!r}]"
        elif keyword == "items":
            where += f"[{next(names)}]"
    instance, noun = error.instance, error.schema.get("title", "valid")
    if error.validator == "required":
        missing = next(name for name in error.validator_value if name not in instance)
        return f"{where}.{missing} is missing" if where else f"{missing} is missing"
    where = where or "document"
    if error.validator == "type":
        return f"{where} is {_kind_of(instance)}, not {noun}"
    if error.validator == "minimum":
        return f"{where} is negative, not {noun}"
    if isinstance(instance, str):                  # a pattern, a length, a constant
        return f"{where} is {instance[:80]!r}, not {noun}"
    if isinstance(instance, (int, float)):
        return f"{where} is {instance!r}, not {noun}"
    return f"{where} is {_kind_of(instance)}, not {noun}"


def _kind_of(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _config_platform(config: Mapping[str, Any]) -> str:
    """`os/architecture[/variant]` of an image config; '' when it says nothing (a labels-only image)."""
    os, arch = config.get("os"), config.get("architecture")
    if not isinstance(os, str) or not isinstance(arch, str) or not os or not arch:
        return ""
    variant = config.get("variant")
    return platform_name(os, arch, variant if isinstance(variant, str) else "")


def _next_page(link: str | None) -> str | None:
    """The next page from a `Link: </v2/...?last=x&n=1000>; rel="next"` header."""
    if not link:
        return None
    found = re.match(r'\s*<([^>]+)>\s*;\s*rel="?next"?', link)
    return found.group(1) if found else None


def shown_url(text: str) -> str:
    """A URL from a registry's answer as an error shows it: inert (formatting.inert), at most 120 characters."""
    escaped = inert(text)
    return escaped if len(escaped) <= 120 else escaped[:117] + "..."


def _with_query(url: str, **params: str) -> str:
    joiner = "&" if "?" in url else "?"
    return url + joiner + "&".join(f"{key}={value}" for key, value in params.items())


def parse_time(text: object) -> datetime | None:
    """RFC 3339 as registries and labels write it (nanoseconds, `Z`); None when absent or odd."""
    if not isinstance(text, str) or not text:
        return None
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", text.strip()).replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(trimmed)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
