"""Does an image in a registry carry a signed provenance that says it passed its smoke test?

Only the registry is asked (its manifests, blobs and referrers), never a local image or a
label: labels are part of the image and copy along with it, a signature by a key the image's
builder alone holds does not. An image verifies when some provenance artifact referring to its
digest
1. is a DSSE envelope signed by the expected key,
2. holds an in-toto SLSA provenance statement whose subject is that very digest,
3. records a passed smoke test, and
4. names an SBOM that is attached to the same digest (the SBOM is signed by being named).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from securesystemslib.signer import Key

from accel_images.errors import AccelError, InputError, RegistryError
from accel_images.model.reference import REPOSITORY_RE, TAG_RE
from accel_images.supply import attach, provenance, sbom

PROVENANCE_ARTIFACT_TYPE = provenance.PAYLOAD_TYPE
SBOM_ARTIFACT_TYPE = sbom.MEDIA_TYPE
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageName:
    """`HOST[:PORT]/PATH[:TAG|@DIGEST]`, as `verify` takes it."""

    host: str
    repository: str
    reference: str

    @classmethod
    def parse(cls, text: str) -> ImageName:
        host, slash, rest = text.strip().partition("/")
        if not slash or not rest or not ("." in host or ":" in host or host == "localhost"):
            raise InputError(f"'{text}' is not HOST[:PORT]/PATH[:TAG|@DIGEST]"
                             " (e.g. 127.0.0.1:5000/accel-images/pytorch:TAG)", field="IMAGE")
        if "@" in rest:
            repository, _, reference = rest.partition("@")
            if not _DIGEST.match(reference):
                raise InputError(f"'{reference}' is not a sha256 digest", field="IMAGE")
        else:
            repository, colon, tag = rest.rpartition(":")
            repository, reference = (repository, tag) if colon and "/" not in tag else (rest, "latest")
            if not TAG_RE.match(reference):
                raise InputError(f"'{reference}' is not a tag (letters, digits, '_', '.' and '-', at most 128,"
                                 " not starting with '.' or '-')", field="IMAGE")
        if not REPOSITORY_RE.match(repository):
            raise InputError(f"'{repository}' is not a repository name (lowercase letters and digits, separated"
                             " by '.', '_', '__', '-' or '/')", field="IMAGE")
        return cls(host, repository, reference)

    def __str__(self) -> str:
        joiner = "@" if self.reference.startswith("sha256:") else ":"
        return f"{self.host}/{self.repository}{joiner}{self.reference}"


@dataclass(frozen=True)
class Verdict:
    """The answer about one digest, with what was found on the way."""

    ok: bool
    digest: str | None
    reason: str
    smoke: Mapping[str, Any] = field(default_factory=dict)
    provenance: str | None = None        # the provenance artifact's manifest digest
    sbom: str | None = None              # the SBOM artifact's manifest digest

    def line(self, image: str) -> str:
        if self.ok:
            where = self.smoke.get("ranOn") or "?"
            return (f"verified: {image} ({(self.digest or '')[:19]}) provenance {(self.provenance or '')[:19]}"
                    f" signed, smoke passed on {where}, torch {self.smoke.get('torch')}, SBOM {(self.sbom or '')[:19]}")
        return f"not verified: {image}: {self.reason}"


def verify_digest(store: attach.ArtifactStore, repository: str, digest: str, key: Key) -> Verdict:
    """Check the provenance artifacts referring to `digest`; the first that holds wins.

    Registry failures (unreachable, denied, a referrers list of the wrong shape) raise RegistryError,
    and so does a transient one (a 503, a reset connection) while an artifact is read: that is no
    evidence about the image, and a retry may read it whole. Everything about the artifacts
    themselves (a bad signature, a missing or malformed referrer, another subject) is in the Verdict.
    """
    entries = attach.referrers(store, repository, digest, PROVENANCE_ARTIFACT_TYPE)
    if not entries:
        return Verdict(False, digest, f"no provenance refers to {digest[:19]}")
    reasons = []
    for entry in reversed(entries):  # newest first
        try:
            _, envelope = attach.document(store, repository, entry, digest)
            statement = provenance.open_envelope(envelope, key)
            smoke = provenance.check_statement(statement, digest)
            sbom_manifest = _named_sbom(store, repository, digest, statement)
        except AccelError as error:
            if isinstance(error, RegistryError) and error.transient:
                raise
            reasons.append(error.one_line())
            continue
        return Verdict(True, digest, "", smoke, str(entry["digest"]), sbom_manifest)
    return Verdict(False, digest, reasons[0] + (f" (and {len(reasons) - 1} other)" if len(reasons) > 1 else ""))


def _named_sbom(store: attach.ArtifactStore, repository: str, digest: str, statement: Mapping[str, Any]) -> str:
    """The manifest digest of the SBOM artifact whose document the statement names."""
    named = provenance.byproduct(statement, provenance.SBOM_BYPRODUCT)
    digests = (named or {}).get("digest")
    wanted = digests.get("sha256") if isinstance(digests, Mapping) else None
    if not wanted or not isinstance(wanted, str):
        raise provenance.NotVerified("the provenance names no SBOM")
    for entry in attach.referrers(store, repository, digest, SBOM_ARTIFACT_TYPE):
        manifest, _ = attach.document(store, repository, entry, digest)
        if any(layer.get("digest") == f"sha256:{wanted}" for layer in manifest.get("layers") or []):
            return str(entry["digest"])
    raise provenance.NotVerified(f"the SBOM the provenance names (sha256:{wanted[:12]}) is not attached")


def verify_image(store: Any, image: ImageName, key: Key) -> Verdict:
    """Resolve a tag to its digest (a digest stays itself), then verify_digest."""
    digest = image.reference if image.reference.startswith("sha256:") else \
        store.manifest_digest(image.repository, image.reference)
    if digest is None:
        return Verdict(False, None, f"the registry has no {image}")
    return verify_digest(store, image.repository, digest, key)
