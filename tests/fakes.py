"""In-process stand-ins for the engine and the registry, shared by the unit tests.

Each fake answers the protocol the production code asks for (accel_images.publish.promote.Pusher and
TagStore, accel_images.publish.retention.TagRegistry; tests/fakeimage.py's engine answers
accel_images.smoke.launcher.Runner with an image's files); the
assignments at the end of this module make mypy check them against those protocols, so a
protocol that grows a method fails type checking here rather than at a test's first call.
Defaults are the behaviour most tests want; the parameters give the rest (a build that fails,
a push that fails, a registry that refuses a delete).

The registry itself is InMemoryRegistry: the real client with only its HTTP exchange answered from memory,
as the distribution registry answers it (tests/unit/test_fakes.py holds it to that), with its variants as
options and subclasses (deletes disabled, a referrers API, failing blobs, put hooks, ForgetfulRegistry).
Every test that publishes runs against it, with PushingEngine's pushes landing in it; no other
registry stand-in answers the publishing protocols by value.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import requests

import fakeimage

from accel_images.builder.engine import BuiltImage, ImageInfo, Pushed, RunResult
from accel_images.errors import BuildFailed
from accel_images.publish.promote import Pusher, TagStore
from accel_images.registry import OCI_INDEX, OCI_MANIFEST, RegistryClient, unreachable
from accel_images.publish.retention import TagRegistry
from accel_images.smoke.launcher import Runner
from accel_images.supply.attach import ArtifactStore

PUSHED = "sha256:" + "d" * 64
"""What FakeEngine's pushes answer unless told otherwise (`digests`, `pushed_digest`)."""


@dataclass
class FakeEngine:
    """Just enough of Engine for Builder and publish; records every call.

    `failing_builds` holds tags whose build fails; `push_failures[ref]` is a list of errors raised
    by successive pushes of ref; `digests[ref]` what a push of ref answers (else `pushed_digest`);
    `local` the images inspect_image finds.
    """

    failing_builds: set[str] = field(default_factory=set)
    calls: list[tuple[str, str]] = field(default_factory=list)
    local: dict[str, ImageInfo] = field(default_factory=dict)
    push_failures: dict[str, list[BaseException]] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    pushed_digest: str = PUSHED
    facts: dict[str, bytes] = field(default_factory=dict)
    """What each image's facts.json holds, by image ID: a build records what its Dockerfile promises
    (fakeimage.facts_of_dockerfile); a test may put other facts there. Absent: an honest CPU image's."""
    uncached: list[str] = field(default_factory=list)     # tags built without the layer cache
    base_platform: str | None = None
    """The platform every pulled base says it is (None: the one the pull asked for)."""
    built_platforms: dict[str, str | None] = field(default_factory=dict)

    def pull(self, ref: str, on_line: object = None, platform: str | None = None) -> ImageInfo:
        self.calls.append(("pull", ref) if platform is None else ("pull", f"{ref} {platform}"))
        name, _, digest = ref.partition("@")
        repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
        return ImageInfo(f"sha256:id-{ref}", (ref,), {}, 1, "", (f"{repository}@{digest or 'sha256:' + 'b' * 64}",),
                         platform=self.base_platform or platform or "")

    def inspect_image(self, ref: str) -> ImageInfo | None:
        if ref.startswith("sha256:built-") and ref not in self.local:  # the image the builder just built
            return ImageInfo(ref, (), {}, 1, "", (), env=(fakeimage.PATH,), user="1000:1000",
                             platform=self.built_platforms.get(ref) or "")
        return self.local.get(ref)

    @contextmanager
    def image_files(self, image: str) -> Iterator[fakeimage.FakeFiles]:
        """An honest image's files, for the build's record (accel_images.smoke.integrity) and its facts."""
        files = fakeimage.honest_files()
        if image in self.facts:
            files[fakeimage.FACTS_PATH] = fakeimage.facts_entry(self.facts[image])
        yield fakeimage.FakeFiles(files)

    def build(self, context: Path, tag: str, **kwargs: object) -> BuiltImage:
        self.calls.append(("build", tag))
        if kwargs.get("nocache"):
            self.uncached.append(tag)
        self.built_platforms[f"sha256:built-{tag}"] = kwargs.get("platform")  # type: ignore[assignment]
        if tag.split(":")[-1] in self.failing_builds:
            raise BuildFailed(f"build of {tag} failed at 'Step 2/4 : RUN false'")
        self.facts.setdefault(f"sha256:built-{tag}", fakeimage.facts_of_dockerfile(
            (context / "Dockerfile").read_text(), machine=fakeimage.machine_of(kwargs.get("platform"))))
        return BuiltImage(f"sha256:built-{tag}", tag, 1)

    def tag(self, image: str, ref: str) -> None:
        self.calls.append(("tag", ref))

    def push(self, ref: str) -> str:
        self.calls.append(("push", ref))
        failures = self.push_failures.get(ref)
        if failures:
            raise failures.pop(0)
        return self.digests.get(ref, self.pushed_digest)

    def push_image(self, ref: str) -> Pushed:
        return Pushed(self.push(ref))

    def remove_image(self, ref: str, force: bool = False) -> None:
        self.calls.append(("remove", ref))


class PullRecorder:
    """Stands in for the Engine class itself (`engine.Engine`, patched): connect, pull, close.

    The pulls are recorded on the class, as the command under test makes its own instance.
    """

    pulled: ClassVar[list[str]] = []

    @classmethod
    def connect(cls) -> PullRecorder:
        return cls()

    platforms: ClassVar[list[str | None]] = []

    def pull(self, ref: str, on_line=None, platform: str | None = None):
        self.pulled.append(ref)
        self.platforms.append(platform)
        if on_line:
            on_line(f"{ref}: Pulling from fake")

    def close(self) -> None:
        pass


PutHook = Callable[[str, str], int | None]
"""Called with a manifest PUT's reference and media type before the PUT lands; a status it returns is the
answer instead."""


class InMemoryRegistry(RegistryClient):
    """The one in-memory registry of the unit tests: the real client (accel_images.registry.RegistryClient)
    whose HTTP exchange alone (`_send`, the lowest seam: authentication aside, everything the client does
    with an answer, its status codes, headers and shape checks, runs as against a real registry) is answered
    from memory, as the distribution registry (`registry:2`, distribution/distribution 2.8) answers it.

    What it models, after the OCI distribution-spec
    (https://github.com/opencontainers/distribution-spec/blob/main/spec.md):

    * manifests stored by digest with their media type (`manifests[digest] = (media type, bytes)`), tags
      pointing at digests (`tagged[tag] = digest`); GET and HEAD answer Content-Type, Docker-Content-Digest
      and Content-Length; a PUT by digest whose bytes have another digest is 400 DIGEST_INVALID;
    * an unknown tag or digest: 404 MANIFEST_UNKNOWN; an unknown blob: 404 BLOB_UNKNOWN ("Error Codes");
    * blob uploads, monolithic: POST then PUT `?digest=`, 400 DIGEST_INVALID when the bytes differ;
    * the tag list ("Listing Tags"): lexically sorted, `n` entries at most after the tag `last`, and while
      more remain an RFC 5988 `Link: </v2/<name>/tags/list?n=<n>&last=<last>>; rel="next"` header; a
      repository without tags: 404 NAME_UNKNOWN;
    * manifest deletes by digest only ("Deleting Manifests": a tag is 400 UNSUPPORTED), 202, and every tag
      on the digest goes with it; `deletes_enabled=False` is a registry whose storage.delete setting is
      off: every manifest DELETE answers 405 UNSUPPORTED, as docker-registry 2.8 does
      (accel_images.registry.check_deletes);
    * no referrers API (404, so artifacts are listed under the fallback tag `sha256-<hex>`) unless
      `referrers_api`: then `GET /v2/<name>/referrers/<digest>` answers the image index of every manifest
      whose subject is that digest, and a PUT of such a manifest answers the `OCI-Subject` header.

    One repository's worth: every repository name shares it. What a test needs beyond that: `push_image`
    puts an image (a config with labels and a platform), `put_hooks[tag]` runs before each manifest PUT of
    `tag` (`"*"`: of any reference), to answer a 500 or to play another job writing the tag meanwhile (a
    gated push); `blob_error`, when set, is the status every blob read answers (a registry under load:
    503 UNAVAILABLE); `faults` are answered before anything else (a registry that is down, refuses a login
    or a tag, or blips: Fault); `requests` lists every call made, (method, path). A registry that forgets what it
    was given is ForgetfulRegistry below. Deliberately odd registries that script raw answers to test the
    client's defences are not this one (tests/unit/test_registry_hostile_unit.py ScriptedRegistry).
    """

    def __init__(self, host: str = "reg.example:5000", deletes_enabled: bool = True,
                 referrers_api: bool = False) -> None:
        super().__init__(host, scheme="http", credentials=lambda host: None)
        self.deletes_enabled = deletes_enabled
        self.referrers_api = referrers_api
        self.blob_error: int | None = None
        self.manifests: dict[str, tuple[str, bytes]] = {}
        self.tagged: dict[str, str] = {}
        self.blobs: dict[str, bytes] = {}
        self.put_hooks: dict[str, list[PutHook]] = {}
        self.requests: list[tuple[str, str]] = []
        self.faults: list[Fault] = []

    def push_image(self, labels: Mapping[str, str], platform: str = "linux/amd64", tag: str | None = None,
                   salt: str = "", layers: Sequence[tuple[str, int]] = ()) -> str:
        """Store an image (a config with `labels`, of `platform`) under `tag` or its digest alone; `salt` sets
        apart the digests of images otherwise the same. `layers` are (diff ID, compressed size) pairs: the
        config lists the diff IDs and the manifest a layer blob of that size each (what a reader compares a
        local build's layers with, and counts an upload's bytes by); none by default."""
        os, arch = platform.split("/")[:2]
        config = json.dumps({"os": os, "architecture": arch, "config": {"Labels": dict(labels)},
                             "rootfs": {"type": "layers", "diff_ids": [diff_id for diff_id, _ in layers]},
                             "salt": salt}, sort_keys=True).encode()
        config_digest = self._store_blob(config)
        blobs = [self._store_blob((diff_id.encode() * (size // len(diff_id) + 1))[:size]) for diff_id, size in layers]
        manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": blob, "size": size}
                       for blob, (_, size) in zip(blobs, layers, strict=True)]}, sort_keys=True).encode()
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        self.manifests[digest] = (OCI_MANIFEST, manifest)
        if tag is not None:
            self.tagged[tag] = digest
        return digest

    def serving(self, tag: str) -> str | None:
        return self.tagged.get(tag)

    def index_of(self, tag: str) -> list[tuple[str, str]]:
        """(platform, image digest) of each entry of the index `tag` serves, in order."""
        data = json.loads(self.manifests[self.tagged[tag]][1])
        return [("{os}/{architecture}".format(**entry["platform"]), entry["digest"]) for entry in data["manifests"]
                if "platform" in entry]

    def _store_blob(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return digest

    def _send(self, method: str, url: str, headers: Mapping[str, str] | None, data: bytes | None,
              authorization: str | None, what: str) -> requests.Response:
        parts = urlsplit(url)
        self.requests.append((method, parts.path))
        fault = next((fault for fault in self.faults if fault.matches(method, parts.path)), None)
        if fault is not None:
            return self._fault(fault, method, url, what)
        if parts.path == "/v2/":
            return http_answer(method, url, 200, b"{}")
        found = re.match(r"^/v2/(?P<repository>.+?)/(?P<kind>manifests|blobs|tags|referrers)/(?P<rest>.*)$",
                         parts.path)
        if found is None:
            return http_answer(method, url, 404, _error("NAME_UNKNOWN"))
        kind, rest, query = found["kind"], found["rest"], parse_qs(parts.query)
        if kind == "manifests":
            return self._manifests(method, url, rest, dict(headers or {}), data or b"")
        if kind == "blobs":
            return self._blobs(method, url, rest, query, data or b"")
        if kind == "tags" and rest == "list":
            return self._tag_list(method, url, found["repository"], query)
        if kind == "referrers" and self.referrers_api:
            return self._referrers(method, url, rest)
        return http_answer(method, url, 404, _error("NOT_FOUND"))  # no referrers API

    def _fault(self, fault: Fault, method: str, url: str, what: str) -> requests.Response:
        """The fault's answer, counted; no answer at all raises as the real client's _send does."""
        if fault.times is not None:
            fault.times -= 1
        if fault.status is None:
            raise unreachable(self.host, what, requests.ConnectionError("[Errno 111] Connection refused"))
        headers = {"WWW-Authenticate": 'Basic realm="Registry Realm"'} if fault.status == 401 else {}
        return http_answer(method, url, fault.status, _error(ERROR_CODES.get(fault.status, "UNKNOWN")), headers)

    def _tag_list(self, method: str, url: str, repository: str, query: dict[str, list[str]]) -> requests.Response:
        """distribution-spec "Listing Tags": sorted, after `last`, `n` at most, a Link to the rest."""
        names = sorted(self.tagged)
        if not names:
            return http_answer(method, url, 404, _error("NAME_UNKNOWN"))
        last = query.get("last", [""])[0]
        if last:
            names = [name for name in names if name > last]
        headers = {}
        if "n" in query:
            limit = int(query["n"][0])
            if len(names) > limit:
                names = names[:limit]
                headers["Link"] = f'</v2/{repository}/tags/list?n={limit}&last={names[-1]}>; rel="next"'
        body = json.dumps({"name": repository, "tags": names}).encode()
        return http_answer(method, url, 200, body, headers)

    def _referrers(self, method: str, url: str, digest: str) -> requests.Response:
        """distribution-spec "Listing Referrers": an image index of the manifests whose subject is `digest`."""
        found = []
        for manifest_digest, (media_type, data) in self.manifests.items():
            manifest = json.loads(data)
            if (manifest.get("subject") or {}).get("digest") == digest:
                found.append({"mediaType": media_type, "digest": manifest_digest, "size": len(data),
                              "artifactType": manifest.get("artifactType") or manifest.get("config", {}).get(
                                  "mediaType"), **({"annotations": manifest["annotations"]}
                                                   if manifest.get("annotations") else {})})
        body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": found}).encode()
        return http_answer(method, url, 200, body, {"Content-Type": OCI_INDEX})

    def _manifests(self, method: str, url: str, reference: str, headers: dict[str, str],
                   data: bytes) -> requests.Response:
        if method == "PUT":
            media_type = headers.get("Content-Type", OCI_MANIFEST)
            for hook in [*self.put_hooks.get(reference, []), *self.put_hooks.get("*", [])]:
                status = hook(reference, media_type)
                if status is not None:
                    return http_answer(method, url, status, _error("UNKNOWN"))
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            if reference.startswith("sha256:") and reference != digest:
                return http_answer(method, url, 400, _error("DIGEST_INVALID"))
            self._put(reference, data, media_type)
            answer = {"Docker-Content-Digest": digest}
            subject = (json.loads(data).get("subject") or {}).get("digest") if self.referrers_api else None
            if subject:
                answer["OCI-Subject"] = subject
            return http_answer(method, url, 201, b"", answer)
        digest = reference if reference.startswith("sha256:") else self.tagged.get(reference)
        if method == "DELETE":
            if not self.deletes_enabled:
                return http_answer(method, url, 405, _error("UNSUPPORTED"))
            if not reference.startswith("sha256:"):
                return http_answer(method, url, 400, _error("UNSUPPORTED"))
            if digest not in self.manifests:
                return http_answer(method, url, 404, _error("MANIFEST_UNKNOWN"))
            del self.manifests[digest]
            self.tagged = {tag: kept for tag, kept in self.tagged.items() if kept != digest}
            return http_answer(method, url, 202, b"")
        if digest is None or digest not in self.manifests:
            return http_answer(method, url, 404, _error("MANIFEST_UNKNOWN"))
        media_type, body = self.manifests[digest]
        return http_answer(method, url, 200, body, {"Content-Type": media_type, "Docker-Content-Digest": digest,
                                                "Content-Length": str(len(body))})

    def _put(self, reference: str, data: bytes, media_type: str) -> None:
        """Keep a manifest PUT's bytes by digest, and point `reference` at them when it is a tag."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.manifests[digest] = (media_type, data)
        if not reference.startswith("sha256:"):
            self.tagged[reference] = digest

    def _blobs(self, method: str, url: str, rest: str, query: dict[str, list[str]], data: bytes) -> requests.Response:
        if rest.startswith("uploads/"):
            if method == "POST":
                return http_answer(method, url, 202, b"", {"Location": f"{url.rstrip('/')}/{uuid.uuid4().hex}"})
            digest = query.get("digest", [""])[0]
            if digest != "sha256:" + hashlib.sha256(data).hexdigest():
                return http_answer(method, url, 400, _error("DIGEST_INVALID"))
            self._store_blob(data)
            return http_answer(method, url, 201, b"", {"Docker-Content-Digest": digest})
        if self.blob_error is not None:
            return http_answer(method, url, self.blob_error, _error("UNAVAILABLE"))
        if rest not in self.blobs:
            return http_answer(method, url, 404, _error("BLOB_UNKNOWN"))
        return http_answer(method, url, 200, self.blobs[rest], {"Content-Length": str(len(self.blobs[rest])),
                                                              "Docker-Content-Digest": rest})


class ForgetfulRegistry(InMemoryRegistry):
    """An InMemoryRegistry that acknowledges a manifest PUT under a referrers fallback tag (`sha256-<hex>`)
    with 201 and keeps nothing: the artifacts exist, nobody can find them."""

    def _put(self, reference: str, data: bytes, media_type: str) -> None:
        if not reference.startswith("sha256-"):
            super()._put(reference, data, media_type)


def http_answer(method: str, url: str, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> requests.Response:
    """A requests.Response as the registry would send it."""
    response = requests.Response()
    response.status_code = status
    response._content = b"" if method == "HEAD" else body
    response.headers.update(headers or {})
    response.request = requests.Request(method, url).prepare()
    response.url = url
    return response


def _error(code: str) -> bytes:
    """The distribution-spec error body: {"errors": [{"code", "message"}]}."""
    return json.dumps({"errors": [{"code": code, "message": code.lower().replace("_", " ")}]}).encode()


@dataclass
class Fault:
    """A failure InMemoryRegistry answers instead of the request's own answer (`InMemoryRegistry.faults`), for
    the requests whose path `path` (a regular expression) is found in and, when given, of `method`: `status`
    with the distribution-spec error body a registry sends with it (401 with a Basic challenge, as registry:2
    behind htpasswd; 403 DENIED; 503 UNAVAILABLE...), or, when `status` is None, no answer at all (the
    connection refused, as the real client meets a registry that is down). `times`: for that many matching
    requests, then the registry answers as usual again (None: for every one)."""

    path: str
    status: int | None
    method: str = ""
    times: int | None = None

    def matches(self, method: str, path: str) -> bool:
        return self.times != 0 and (not self.method or self.method == method) and re.search(self.path, path) is not None


ERROR_CODES = {401: "UNAUTHORIZED", 403: "DENIED", 404: "NOT_FOUND", 405: "UNSUPPORTED", 429: "TOOMANYREQUESTS",
               503: "UNAVAILABLE"}
"""The distribution-spec error code a fault's status is sent with (any other status: UNKNOWN)."""


class PushingEngine(FakeEngine):
    """FakeEngine whose pushes land in an InMemoryRegistry: each built image is an image of its build's
    platform there (its digest differs per build), and the SBOM probe answers as an honest image would."""

    def __init__(self, registry: InMemoryRegistry, probe: str = "", salt: str = "", **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.registry = registry
        self.probe = probe
        self.salt = salt
        """Set apart the digests of one run's builds from another's (the builds are otherwise the same)."""
        self.named: dict[str, str] = {}

    def tag(self, image: str, ref: str) -> None:
        super().tag(image, ref)
        self.named[ref] = image

    def push_image(self, ref: str) -> Pushed:
        self.calls.append(("push", ref))
        failures = self.push_failures.get(ref)
        if failures:
            raise failures.pop(0)
        image = self.named.get(ref, ref)
        digest = self.registry.push_image({"io.accel-images.built": image}, self.built_platforms.get(image)
                                          or "linux/amd64", tag=ref.rsplit(":", 1)[-1], salt=image + self.salt)
        return Pushed(digest)

    def push(self, ref: str) -> str:
        """A push of a real tag by promotion (accel_images.publish.promote) lands in the registry too."""
        return self.push_image(ref).digest

    def run(self, image: str, command: list[str], **kwargs: object) -> RunResult:
        return RunResult(exit_code=0, stdout=self.probe, stderr="", timed_out=False)


# What mypy checks: each fake is the protocol production code takes it as.
_pusher: Pusher = FakeEngine()
_runner: Runner = fakeimage.FakeEngine(RunResult(exit_code=0, stdout="", stderr="", timed_out=False))
_tag_store: TagStore = InMemoryRegistry()
_tag_registry: TagRegistry = InMemoryRegistry()
_artifact_store: ArtifactStore = InMemoryRegistry()
