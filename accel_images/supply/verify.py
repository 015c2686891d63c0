"""Does an image in a registry carry a signed provenance that says it passed its smoke test?

Only the registry is asked (its manifests, blobs and referrers), never a local image or a
label: labels are part of the image and copy along with it, a signature by a key the image's
builder alone holds does not. An image verifies when some provenance artifact referring to its
digest
1. is a DSSE envelope signed by the expected key,
2. holds an in-toto SLSA provenance statement whose subject is that very digest,
3. records a passed smoke test,
4. names an SBOM that is attached to the same digest (the SBOM is signed by being named), and
5. when a tag was asked for, names a variant that wears that tag (its full tag, a dated tag of it,
   or an alias of its group): a tag that serves another variant's signed image (a downgrade) is
   not verified. By digest there is no tag to compare.

A tag that is an image index verifies when each image it lists does as the tag's image of the platform
it is listed under (accel_images.supply.trust, the one decision per (tag, platform)): a platform listed
twice, or an image signed as another platform, fails the index.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from securesystemslib.signer import Key

from accel_images.errors import AccelError, InputError, RegistryError
from accel_images.formatting import inert
from accel_images.model import platforms, tags
from accel_images.model.platforms import DEFAULT as DEFAULT_PLATFORM
from accel_images.model.reference import REPOSITORY_RE, TAG_RE
from accel_images.model.variant import Variant
from accel_images.registry import index_entries, is_index
from accel_images.supply import attach, provenance, sbom, trust

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
    platforms: Mapping[str, Verdict] = field(default_factory=dict)
    """For an image index: each platform's image's own verdict (the index verifies when all do)."""
    platform: str = DEFAULT_PLATFORM
    """The platform the signed statement's variant is of (one signed before platforms were an axis: amd64)."""

    def line(self, image: str) -> str:
        if self.platforms and self.ok:
            each = "; ".join(f"{platform} {verdict.summary()}" for platform, verdict in self.platforms.items())
            return f"verified: {image} (index {(self.digest or '')[:19]}): {each}"
        if self.ok:
            return f"verified: {image} ({(self.digest or '')[:19]}) {self.summary()}"
        return f"not verified: {image}: {self.reason}"

    def summary(self) -> str:
        where = self.smoke.get("ranOn") or "?"
        return (f"provenance {(self.provenance or '')[:19]} signed, smoke passed on {where},"
                f" torch {self.smoke.get('torch')}, SBOM {(self.sbom or '')[:19]}")

    def record(self) -> dict[str, Any]:
        """As `verify --json` prints it."""
        found: dict[str, Any] = {"ok": self.ok, "digest": self.digest, "reason": self.reason,
                                 "provenance": self.provenance, "sbom": self.sbom, "smoke": dict(self.smoke)}
        if self.platforms:
            found["platforms"] = {platform: verdict.record() for platform, verdict in self.platforms.items()}
        return found


def verify_digest(store: attach.ArtifactStore, repository: str, digest: str, key: Key,
                  tag: str | None = None) -> Verdict:
    """Check the provenance artifacts referring to `digest`; the first that holds wins.

    `tag`: the tag the digest was asked for (or is published under); the statement's variant must
    wear it. The platform the statement signs is the verdict's `platform`: whether the image may be
    served as an index's image of some platform is verify_platform's question (accel_images.supply.trust).
    Registry failures (unreachable, denied, a referrers list
    of the wrong shape) raise RegistryError, and so does a transient one (a 503, a reset connection) while
    an artifact is read: that is no evidence about the image, and a retry may read it whole. Everything
    about the artifacts themselves (a bad signature, a missing or malformed referrer, another subject,
    another variant) is in the Verdict."""
    entries = attach.referrers(store, repository, digest, PROVENANCE_ARTIFACT_TYPE)
    if not entries:
        return Verdict(False, digest, f"no provenance refers to {digest[:19]}")
    reasons = []
    for entry in reversed(entries):  # newest first
        try:
            _, envelope = attach.document(store, repository, entry, digest)
            statement = provenance.open_envelope(envelope, key)
            smoke = provenance.check_statement(statement, digest)
            if tag is not None:
                check_tag(statement, tag)
            sbom_manifest = _named_sbom(store, repository, digest, statement)
        except AccelError as error:
            if isinstance(error, RegistryError) and error.transient:
                raise
            reasons.append(error.one_line())
            continue
        return Verdict(True, digest, "", smoke, str(entry["digest"]), sbom_manifest,
                       platform=signed_platform(statement))
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
    """Resolve a tag to its digest (a digest stays itself), then verify_digest (with the tag to compare); an
    image index verifies when the image of every platform it lists does (each has its own provenance and
    SBOM, and each must wear the tag)."""
    by_digest = image.reference.startswith("sha256:")
    digest = image.reference if by_digest else store.manifest_digest(image.repository, image.reference)
    if digest is None:
        return Verdict(False, None, f"the registry has no {image}")
    tag = None if by_digest else image.reference
    found = store.manifest(image.repository, digest)
    if found is not None and is_index(found[1]):
        entries = index_entries(found[1], str(image))
        if not entries:
            return Verdict(False, digest, f"the image index {digest[:19]} lists no image")
        verdicts: dict[str, Verdict] = {}
        for listed in trust.listed(entries):
            verdicts.setdefault(listed.platform, verify_platform(store, image.repository, listed, key, tag))
        failed = [f"{platform}: {verdict.reason}" for platform, verdict in verdicts.items() if not verdict.ok]
        return Verdict(not failed, digest, "; ".join(failed), platforms=verdicts)
    return verify_digest(store, image.repository, digest, key, tag)


def verify_platform(store: attach.ArtifactStore, repository: str, listed: trust.Listed, key: Key,
                    tag: str | None) -> Verdict:
    """The verdict on one image a tag's index lists, as that tag's image of the platform it is listed under:
    the signed provenance is the evidence, accel_images.supply.trust decides. A duplicated platform is refused
    before anything is read (whatever its entries' provenance says, the client pulls the first)."""
    if listed.copies > 1:
        return Verdict(False, listed.digest, trust.duplicated(listed.platform, listed.copies))
    verdict = verify_digest(store, repository, listed.digest, key, tag)
    why = trust.distrust(listed, trust.Evidence(verdict.ok, verdict.platform, verdict.reason,
                                                "its signed provenance"))
    return verdict if why is None else replace(verdict, ok=False, reason=why)


def check_tag(statement: Mapping[str, Any], tag: str) -> None:
    """The signed statement's variant must wear `tag` (NotVerified otherwise), and its own tag must be the
    variant's full tag: a signature covers both, and they must not disagree."""
    external = ((statement.get("predicate") or {}).get("buildDefinition") or {}).get("externalParameters") or {}
    raw = external.get("variant") if isinstance(external, Mapping) else None
    fields = ("vendor", "torch", "python", "os", "flavor")
    if not isinstance(raw, Mapping) or not all(isinstance(raw.get(name), str) for name in fields) \
            or not isinstance(raw.get("stack"), str | None):
        raise provenance.NotVerified("the signed provenance names no variant to compare the tag with")
    variant = Variant(raw["vendor"], raw["stack"], raw["torch"], raw["python"], raw["os"], raw["flavor"],
                      base_image="")
    signed_tag = external.get("tag")
    if signed_tag != tags.full_tag(variant):
        raise provenance.NotVerified(f"the signed provenance's tag {shown(signed_tag)} is not its variant's "
                                     f"({tags.full_tag(variant)})")
    if not tags.wears(tag, variant):
        raise provenance.NotVerified(f"the signed provenance is about {tags.full_tag(variant)}, which does not "
                                     f"wear the tag {tag}: the tag serves another variant's image")


def signed_platform(statement: Mapping[str, Any]) -> str:
    """The platform of the signed statement's variant; a statement that names none was signed before platforms
    were an axis: linux/amd64."""
    external = ((statement.get("predicate") or {}).get("buildDefinition") or {}).get("externalParameters") or {}
    raw = external.get("variant") if isinstance(external, Mapping) else None
    signed = raw.get("platform", platforms.DEFAULT) if isinstance(raw, Mapping) else platforms.DEFAULT
    return signed if isinstance(signed, str) else shown(signed)


def shown(value: object) -> str:
    """A value from a signed statement, quoted and inert (formatting.inert), at most 80 characters of it."""
    return repr(inert(str(value)[:80]))
