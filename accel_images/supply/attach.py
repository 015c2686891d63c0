"""OCI artifacts that refer to an image: pushing them, and finding them again.

An artifact is an OCI image manifest (image-spec v1.1 "Guidelines for Artifact Usage") with
`artifactType`, the empty config descriptor, the document as its one layer, and `subject` set
to the image's manifest descriptor. Registries with the referrers API
(`GET /v2/<name>/referrers/<digest>`, distribution-spec v1.1) index it themselves and say so
with an `OCI-Subject` header on the push. Registries without it (the CNCF distribution
registry 2.x/3.x, Docker Hub) get the spec's fallback, as ORAS and cosign maintain it: an image
index under the tag `sha256-<hex>` that lists every referrer, read, extended and put back by
the client. Readers ask the API first and read that tag on a 404.

The fallback tag has no conditional put on such registries, so two writers at once could drop
an entry; the nightly attaches one image's artifacts from one worker, in sequence.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from accel_images.errors import AccelError, MalformedAnswer, RegistryError
from accel_images.registry import INDEX, MANIFEST, mismatch, parse

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_DATA = b"{}"
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
"""image-spec v1.1 manifest.md, "Guidance for an Empty Descriptor"."""
TITLE = "org.opencontainers.image.title"
CREATED = "org.opencontainers.image.created"
MANIFEST_ACCEPT = (OCI_MANIFEST, OCI_INDEX, "application/vnd.docker.distribution.manifest.v2+json",
                   "application/vnd.docker.distribution.manifest.list.v2+json")
_NOT_IN_TAG = re.compile(r"[^a-zA-Z0-9_.-]")


class BadArtifact(AccelError):
    """A referrer that is missing, malformed or about another image: it attests nothing."""

    exit_code = 1


class ArtifactStore(Protocol):
    """The part of accel_images.registry.RegistryClient that artifacts use."""

    def manifest_bytes(self, repository: str, reference: str,
                       accept: tuple[str, ...] = ...) -> tuple[str, str, bytes] | None: ...

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> tuple[str, bool]: ...

    def push_blob(self, repository: str, data: bytes) -> str: ...

    def blob(self, repository: str, digest: str) -> bytes: ...

    def referrers(self, repository: str, digest: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Attached:
    """One artifact in the registry: its manifest, its document's blob, how it was indexed."""

    artifact_type: str
    manifest_digest: str
    blob_digest: str
    blob_size: int
    manifest_size: int
    via: str              # 'referrers-api' | 'referrers-tag'


def referrers_tag(digest: str) -> str:
    """The fallback tag of a digest: `sha256:abc…` -> `sha256-abc…` (distribution-spec, Referrers Tag Schema)."""
    algorithm, _, encoded = digest.partition(":")
    return f"{_NOT_IN_TAG.sub('-', algorithm[:32])}-{_NOT_IN_TAG.sub('-', encoded[:64])}"


def descriptor(media_type: str, data: bytes, digest: str, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": digest, "size": len(data), **extra}


def attach(store: ArtifactStore, repository: str, subject_digest: str, document: bytes, *,
           artifact_type: str, layer_media_type: str, title: str,
           annotations: Mapping[str, str] | None = None,
           layer_annotations: Mapping[str, str] | None = None) -> Attached:
    """Push `document` as an artifact whose subject is `repository@subject_digest`.

    `annotations` go on the manifest (and its entry in the fallback index, where `oras discover`
    shows them); `layer_annotations` on the document's descriptor beside its title, where
    cosign and BuildKit look for an attestation's predicate type.
    """
    subject = store.manifest_bytes(repository, subject_digest, MANIFEST_ACCEPT)
    if subject is None:
        raise RegistryError(f"cannot attach to {repository}@{subject_digest[:19]}: the registry does not have it")
    _, subject_type, subject_bytes = subject
    store.push_blob(repository, EMPTY_DATA)
    blob_digest = store.push_blob(repository, document)
    manifest: dict[str, Any] = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact_type,
        "config": {**descriptor(EMPTY_MEDIA_TYPE, EMPTY_DATA, EMPTY_DIGEST),
                   "data": base64.b64encode(EMPTY_DATA).decode()},
        "layers": [descriptor(layer_media_type, document, blob_digest,
                              annotations={**dict(layer_annotations or {}), TITLE: title})],
        "subject": descriptor(subject_type, subject_bytes, subject_digest),
    }
    if annotations:
        manifest["annotations"] = dict(annotations)
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    digest, indexed = store.put_manifest(repository, _digest_of(data), data, OCI_MANIFEST)
    if not indexed:
        _add_to_referrers_tag(store, repository, subject_digest,
                              descriptor(OCI_MANIFEST, data, digest, artifactType=artifact_type,
                                         **({"annotations": dict(annotations)} if annotations else {})))
    return Attached(artifact_type, digest, blob_digest, len(document), len(data),
                    "referrers-api" if indexed else "referrers-tag")


def _digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add_to_referrers_tag(store: ArtifactStore, repository: str, subject_digest: str,
                          entry: Mapping[str, Any]) -> None:
    """Read the fallback index (an empty one when the tag is absent), add `entry` once, put it back."""
    tag = referrers_tag(subject_digest)
    found = store.manifest_bytes(repository, tag, (OCI_INDEX,))
    index: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
    if found is not None:
        index = parse(found[2], f"in {repository}:{tag} (the referrers tag)", INDEX)
    manifests = [m for m in index.get("manifests") or [] if m.get("digest") != entry["digest"]]
    index["manifests"] = [*manifests, dict(entry)]
    store.put_manifest(repository, tag, json.dumps(index, sort_keys=True, separators=(",", ":")).encode(), OCI_INDEX)


def referrers(store: ArtifactStore, repository: str, subject_digest: str,
              artifact_type: str | None = None) -> list[dict[str, Any]]:
    """The descriptors of every artifact that refers to `subject_digest`, newest last.

    The referrers API when the registry has it, else the fallback tag; `artifact_type`
    filters on the client side (a registry may ignore the `artifactType` query). A list that is not
    an image index (an entry that is not a descriptor, JSON that is not one) is MalformedAnswer.
    """
    where = f"listing the referrers of {repository}@{subject_digest[:19]}"
    index = store.referrers(repository, subject_digest)
    if index is None:
        found = store.manifest_bytes(repository, referrers_tag(subject_digest), (OCI_INDEX,))
        if found is None:
            return []
        index = parse(found[2], f"while {where} (the sha256-<hex> tag)", INDEX)
    problem = mismatch(index, INDEX)
    if problem is not None:
        raise MalformedAnswer(f"the registry answered an index whose {problem} while {where}")
    entries = [m for m in index.get("manifests") or [] if m.get("digest")]
    return [m for m in entries if artifact_type is None or m.get("artifactType") == artifact_type]


def document(store: ArtifactStore, repository: str, entry: Mapping[str, Any],
             subject_digest: str) -> tuple[dict[str, Any], bytes]:
    """(manifest, its first layer's bytes) of one referrer; its `subject` must be `subject_digest`.

    The check matters for the fallback tag, which anyone with push access can write.
    """
    found = store.manifest_bytes(repository, str(entry["digest"]), (OCI_MANIFEST,))
    if found is None:
        raise BadArtifact(f"{repository}@{str(entry['digest'])[:19]} is listed as a referrer but is missing")
    try:
        manifest = parse(found[2], "", MANIFEST)
    except MalformedAnswer as error:
        raise BadArtifact(f"{repository}@{str(entry['digest'])[:19]} is not an artifact manifest"
                          f" ({error.message.removeprefix('the registry answered ').strip()})") from None
    if (manifest.get("subject") or {}).get("digest") != subject_digest:
        raise BadArtifact(f"{repository}@{str(entry['digest'])[:19]} does not refer to {subject_digest[:19]}")
    layers = manifest.get("layers") or []
    if not layers or not layers[0].get("digest"):
        raise BadArtifact(f"{repository}@{str(entry['digest'])[:19]} has no layer")
    return manifest, store.blob(repository, str(layers[0]["digest"]))
