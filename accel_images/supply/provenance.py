"""Provenance: who built an image from what, and that it passed its smoke test, signed.

The record is an in-toto Statement v1 (github.com/in-toto/attestation, spec/v1/statement.md)
whose subject is the image's manifest digest and whose predicate is SLSA build provenance v1
(slsa.dev/spec/v1.0/provenance). It is wrapped in a DSSE envelope
(github.com/secure-systems-lab/dsse, envelope.md) and signed through securesystemslib, so any
DSSE verifier (cosign, in-toto, securesystemslib, or 30 lines of pyca/cryptography) can check it.

Where each fact goes in the SLSA predicate (the build type below is this project's):
    buildDefinition.externalParameters    variant, tag, matrix file digest, non-secret build args
    buildDefinition.internalParameters    the fingerprint (inputs the tool derives itself)
    buildDefinition.resolvedDependencies  the source commit, the base image by digest, and each wheel the
                                          run fetched for the build (a pypi package URL naming the file
                                          and its index, its sha256)
    runDetails.builder                    who ran the build (a CI workflow run, or a host)
    runDetails.byproducts                 the smoke result (and the hardware it ran on), the SBOM
A signed statement whose smoke byproduct does not say `passed` never verifies.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import FormatError, UnsupportedLibraryError, VerificationError
from securesystemslib.signer import CryptoSigner, Key, SSlibKey

from accel_images import untrusted
from accel_images.errors import AccelError, InputError
from accel_images.model.wheels import Wheel

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
"""The DSSE payload type of an in-toto Statement (in-toto attestation spec/v1/envelope.md)."""
ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
BUILD_TYPE = "https://accel-images.dev/build-types/docker-engine/v1"
"""This project's build type: its parameters are described in README.md ("Supply chain")."""
PREDICATE_ANNOTATIONS = ("in-toto.io/predicate-type", "predicateType")
"""Where readers look for an attestation layer's predicate type: BuildKit's attestation
manifests use the first, cosign's attestation layers the second."""
SMOKE_BYPRODUCT = "smoke-test"
SBOM_BYPRODUCT = "sbom"


class SigningKeyError(InputError):
    """A --sign-key or --key file that is not a usable key."""


@dataclass(frozen=True)
class SmokeFacts:
    """What the smoke test of the pushed image saw."""

    passed: bool
    ran_on: str | None
    cpu_fallback: bool
    torch: str | None
    python: str | None
    device_name: str = ""
    device_count: int = 0
    required_accelerator: bool = False
    host: str = ""

    def annotations(self) -> dict[str, Any]:
        return {"passed": self.passed, "ranOn": self.ran_on, "cpuFallback": self.cpu_fallback,
                "torch": self.torch, "python": self.python, "deviceName": self.device_name,
                "deviceCount": self.device_count, "requiredAccelerator": self.required_accelerator,
                "host": self.host}


@dataclass(frozen=True)
class BuildFacts:
    """Everything the provenance statement of one image says."""

    repository: str                     # host/path, e.g. 127.0.0.1:5000/accel-images/pytorch
    digest: str                         # the image manifest digest, sha256:...
    tag: str
    variant: Mapping[str, Any]          # vendor, stack, torch, python, os, flavor
    fingerprint: str
    base_image: str                     # the base as the build resolved it (ref@digest)
    build_args: Mapping[str, str]       # only the non-secret ones
    matrix_sha256: str | None
    source: Mapping[str, str]           # {"uri": ..., "gitCommit": ..., "uncommittedChanges": "true"} where known
    builder_id: str
    invocation_id: str
    started: datetime
    finished: datetime
    smoke: SmokeFacts
    sbom_sha256: str | None = None
    tool_version: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    wheels: tuple[Wheel, ...] = ()      # fetched by the run on the host (accel_images.builder.wheels)


def _time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def statement(facts: BuildFacts) -> dict[str, Any]:
    """The in-toto Statement (a plain dict, JSON-ready) for one image."""
    dependencies: list[dict[str, Any]] = []
    if facts.source.get("gitCommit"):
        checkout: dict[str, Any] = {"uri": facts.source.get("uri", ""),
                                    "digest": {"gitCommit": facts.source["gitCommit"]}}
        if facts.source.get("uncommittedChanges") == "true":  # the commit is where the checkout started, not all of it
            checkout["annotations"] = {"uncommittedChanges": True}
        dependencies.append(checkout)
    base_name, _, base_digest = facts.base_image.partition("@")
    if base_digest.startswith("sha256:"):
        dependencies.append({"uri": f"docker://{base_name}", "digest": {"sha256": base_digest.split(":", 1)[1]}})
    dependencies += [{"uri": wheel.purl, "name": wheel.filename, "digest": {"sha256": wheel.sha256},
                      "annotations": {"index": wheel.index_url, "size": wheel.size}} for wheel in facts.wheels]
    byproducts: list[dict[str, Any]] = [{"name": SMOKE_BYPRODUCT, "mediaType": "application/json",
                                         "annotations": facts.smoke.annotations()}]
    if facts.sbom_sha256:
        byproducts.append({"name": SBOM_BYPRODUCT, "mediaType": "application/vnd.cyclonedx+json",
                           "digest": {"sha256": facts.sbom_sha256}})
    external: dict[str, Any] = {"variant": dict(facts.variant), "tag": facts.tag, "buildArgs": dict(facts.build_args)}
    if facts.matrix_sha256:
        external["matrix"] = {"digest": {"sha256": facts.matrix_sha256}}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": facts.repository, "digest": {"sha256": facts.digest.split(":", 1)[-1]}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {"buildType": BUILD_TYPE, "externalParameters": external,
                                "internalParameters": {"fingerprint": facts.fingerprint, **dict(facts.extra)},
                                "resolvedDependencies": dependencies},
            "runDetails": {"builder": {"id": facts.builder_id,
                                       "version": {"accel-images": facts.tool_version} if facts.tool_version else {}},
                           "metadata": {"invocationId": facts.invocation_id, "startedOn": _time(facts.started),
                                        "finishedOn": _time(facts.finished)},
                           "byproducts": byproducts},
        },
    }


# -- keys ------------------------------------------------------------------------------------

MAX_KEY_BYTES = 1 << 20
"""A PEM key is a few hundred bytes (RSA-4096: about 3 KB); more is not a key, and `/dev/zero` never ends."""


def load_signer(path: Path, option: str = "--sign-key") -> CryptoSigner:
    """A signer from an unencrypted PEM private key (ed25519, ECDSA P-256/384 or RSA).

    Make one with `openssl genpkey -algorithm ed25519 -out sign.pem`; the public half
    (`openssl pkey -in sign.pem -pubout -out sign.pub`) is what `verify --key` takes. Errors name
    `option`, the command-line option the path came from.
    """
    return _signer(_key_bytes(path, option, "signing key"), path, option)


def load_public_key(path: Path, option: str = "--key") -> Key:
    """A verification key from a PEM public key (or a private key, whose public half is used)."""
    data = _key_bytes(path, option, "key")
    if b"PRIVATE KEY" in data:
        return _signer(data, path, option).public_key
    try:
        return SSlibKey.from_crypto(serialization.load_pem_public_key(data))
    except (ValueError, TypeError, UnsupportedAlgorithm, UnsupportedLibraryError, FormatError) as error:
        raise SigningKeyError(f"{path} is not a PEM public key ({_reason(error)})", field=option) from None


def _key_bytes(path: Path, option: str, what: str) -> bytes:
    try:
        return untrusted.read_limited(path, MAX_KEY_BYTES)
    except OSError as error:
        raise SigningKeyError(f"cannot read {what} {path}: {error.strerror}", field=option) from None


def _signer(data: bytes, path: Path, option: str) -> CryptoSigner:
    try:
        return CryptoSigner(serialization.load_pem_private_key(data, password=None))
    except (ValueError, TypeError, UnsupportedAlgorithm, UnsupportedLibraryError, FormatError) as error:
        raise SigningKeyError(f"{path} is not an unencrypted PEM private key ({_reason(error)})",
                              field=option) from None


def _reason(error: BaseException) -> str:
    return " ".join(str(error).split())[:120] or type(error).__name__


# -- envelopes -------------------------------------------------------------------------------

def envelope(payload: Mapping[str, Any], signer: CryptoSigner | None) -> bytes:
    """The statement as a DSSE envelope (JSON bytes); signed when a signer is given.

    Unsigned envelopes are what a CI workflow hands to keyless signing (cosign attest takes
    the statement's predicate); they never pass `verify`.
    """
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    env = Envelope(body, PAYLOAD_TYPE, {})
    if signer is not None:
        env.sign(signer)
    return json.dumps(env.to_dict(), sort_keys=True, indent=1).encode()


class NotVerified(AccelError):
    """An attestation that does not hold: bad signature, wrong subject, failed smoke, bad format."""

    exit_code = 1


def open_envelope(data: bytes, key: Key) -> dict[str, Any]:
    """The statement inside a DSSE envelope whose signature `key` verifies; NotVerified otherwise.

    securesystemslib only tries keys whose keyid equals a signature's keyid, so the key's
    keyid (derived from the key itself) is what a signature must name.
    """
    try:
        raw = untrusted.loads(data)
        env = Envelope.from_dict(raw)
    except (ValueError, KeyError, TypeError, FormatError) as error:
        raise NotVerified(f"the provenance is not a DSSE envelope ({type(error).__name__})") from None
    if env.payload_type != PAYLOAD_TYPE:
        raise NotVerified(f"the envelope's payload type is {env.payload_type!r}, not {PAYLOAD_TYPE}")
    if not env.signatures:
        raise NotVerified("the provenance is not signed")
    try:
        env.verify([key], 1)
    except VerificationError:
        raise NotVerified(f"the provenance is not signed by key {key.keyid[:12]}") from None
    try:
        payload = untrusted.loads(env.payload)
    except ValueError:
        raise NotVerified("the signed payload is not JSON") from None
    if not isinstance(payload, dict):
        raise NotVerified("the signed payload is not a JSON object")
    return payload


def payload_of(data: bytes) -> dict[str, Any]:
    """The statement of an envelope, without checking any signature (for reports and tests)."""
    raw = untrusted.loads(data)
    value = untrusted.loads(base64.b64decode(raw["payload"]))
    return value if isinstance(value, dict) else {}


def check_statement(payload: Mapping[str, Any], digest: str) -> dict[str, Any]:
    """The smoke byproduct of a statement about `digest` that records a pass; NotVerified otherwise."""
    if payload.get("_type") != STATEMENT_TYPE or payload.get("predicateType") != PREDICATE_TYPE:
        raise NotVerified(f"the statement is not an in-toto v1 SLSA provenance ({payload.get('predicateType')!r})")
    wanted = digest.split(":", 1)[-1]
    found = payload.get("subject")
    subjects: list[Any] = found if isinstance(found, list) else []
    named = [_mapping(_mapping(s).get("digest")).get("sha256") for s in subjects]
    if wanted not in named:
        shown = ", ".join(str(name or "?")[:12] for name in named)
        raise NotVerified(f"the statement is about {shown or 'no digest'}, not {digest[:19]}")
    smoke = byproduct(payload, SMOKE_BYPRODUCT)
    annotations = _mapping((smoke or {}).get("annotations"))
    if annotations.get("passed") is not True:
        raise NotVerified("the provenance records no passed smoke test")
    return dict(annotations)


def byproduct(payload: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    run = _mapping(_mapping(payload.get("predicate")).get("runDetails"))
    found = run.get("byproducts")
    for item in found if isinstance(found, list) else []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is an object, else an empty one: a statement's fields are read, never trusted to be objects."""
    return value if isinstance(value, Mapping) else {}
