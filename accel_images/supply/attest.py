"""The publish-path hook: SBOM and signed provenance for one pushed, smoke-tested image.

accel_images.publish.promote calls it between the green smoke test and the promotion, with the
candidate reference (a local name of the image) and the digest the registry gave it. It
inventories the image, checks that the SBOM lists the torch the smoke test saw, attaches the
SBOM, writes the provenance naming that SBOM, signs it when a key was given and attaches it.
A failure here is the variant's failure: nothing unattested is promoted.

The same documents are also written under `out_dir/<tag>/`, so a CI job can sign them
keyless (`cosign attest --predicate provenance.predicate.json --type slsaprovenance1 ...`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from securesystemslib.signer import CryptoSigner

from accel_images import __version__
from accel_images.errors import AccelError
from accel_images.smoke.judge import SmokeResult
from accel_images.smoke.launcher import ContainerRunner
from accel_images.supply import attach, packages, provenance, sbom
from accel_images.model.variant import Variant
from accel_images.model.wheels import Wheel

SBOM_FILE = "sbom.cdx.json"
STATEMENT_FILE = "provenance.intoto.json"
PREDICATE_FILE = "provenance.predicate.json"
ENVELOPE_FILE = "provenance.dsse.json"
PACKAGES_FILE = "packages.html"
"""The image's package list as a page (accel_images.supply.packages), beside its SBOM."""


class AttestationError(AccelError):
    """The SBOM and the smoke test disagree, or a document could not be made."""

    exit_code = 1


@dataclass(frozen=True)
class Attestation:
    """What was attached to one image digest."""

    digest: str
    sbom: attach.Attached
    provenance: attach.Attached
    signed: bool
    components: int
    torch: str | None
    packages_page: str | None = None
    """The package list's path relative to the report directory (`attestations/<tag>/packages.html`),
    when the run writes its attestations there."""

    def record(self) -> dict[str, Any]:
        """The report's view (accel_images.publish.nightly.nightly_record)."""
        return {"sbom": {"manifest": self.sbom.manifest_digest, "blob": self.sbom.blob_digest,
                         "size": self.sbom.blob_size, "components": self.components, "via": self.sbom.via},
                "provenance": {"manifest": self.provenance.manifest_digest, "blob": self.provenance.blob_digest,
                               "size": self.provenance.blob_size, "signed": self.signed, "via": self.provenance.via},
                "torch_in_sbom": self.torch, "packages": self.packages_page}


@dataclass(frozen=True)
class BuildInputs:
    """The per-image facts the publish path knows (accel_images.builder.builder.Prepared)."""

    variant: Variant
    fingerprint: str
    base_digest: str
    build_args: Mapping[str, str]
    wheels: tuple[Wheel, ...] = ()
    """What the run fetched from the index for this build (accel_images.builder.wheels); () when the build fetched."""


@dataclass(frozen=True)
class Source:
    """Where the matrix and templates came from: a commit, and the matrix file's digest."""

    uri: str = ""
    commit: str = ""
    matrix_sha256: str | None = None
    dirty: bool = False
    """The checkout differs from `commit` (uncommitted or untracked files): the commit alone does
    not name the templates that were rendered, and the provenance says so."""

    @classmethod
    def of(cls, matrix: Path | None, env: Mapping[str, str] = os.environ) -> Source:
        """The CI run's commit, else the git checkout around the matrix file, else nothing."""
        digest = hashlib.sha256(matrix.read_bytes()).hexdigest() if matrix and matrix.is_file() else None
        if env.get("GITHUB_SHA") and env.get("GITHUB_REPOSITORY"):
            server = env.get("GITHUB_SERVER_URL", "https://github.com")
            uri = f"git+{server}/{env['GITHUB_REPOSITORY']}@{env.get('GITHUB_REF', '')}"
            return cls(uri, env["GITHUB_SHA"], digest)
        where = (matrix.resolve().parent if matrix else Path.cwd())
        commit = _git(where, "rev-parse", "HEAD")
        origin = _git(where, "config", "--get", "remote.origin.url")
        dirty = bool(commit) and bool(_git(where, "status", "--porcelain", "--untracked-files=normal"))
        return cls(f"git+{origin}" if origin else f"git+file://{where}", commit, digest, dirty) if commit else cls(
            matrix_sha256=digest)


def _git(where: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def builder_identity(run_id: str, env: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """(builder.id, invocationId): the workflow and its run in GitHub Actions, else this host."""
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_REPOSITORY"):
        server, repo = env.get("GITHUB_SERVER_URL", "https://github.com"), env["GITHUB_REPOSITORY"]
        workflow = env.get("GITHUB_WORKFLOW_REF", f"{repo}/.github/workflows/nightly.yml")
        runner = env.get("RUNNER_NAME", "")
        run = f"{env.get('GITHUB_RUN_ID', '')}/attempts/{env.get('GITHUB_RUN_ATTEMPT', '1')}"
        return f"{server}/{workflow}" + (f"#runner={runner}" if runner else ""), f"{server}/{repo}/actions/runs/{run}"
    return f"urn:accel-images:host:{socket.gethostname()}", run_id


@dataclass(frozen=True)
class Attester:
    """Makes and attaches the SBOM and provenance of images pushed to one repository."""

    engine: ContainerRunner
    store: attach.ArtifactStore
    host: str
    repository: str
    run_id: str
    started: datetime
    signer: CryptoSigner | None = None
    source: Source = Source()
    require_accelerator: bool = False
    out_dir: Path | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False)

    def __call__(self, image: str, digest: str, inputs: BuildInputs, smoke: SmokeResult) -> Attestation:
        """Inventory `image` (a local name of the pushed digest), attach the SBOM, then the provenance."""
        variant, subject = inputs.variant, sbom.Subject(f"{self.host}/{self.repository}", inputs.variant.tag, digest)
        found = sbom.inventory(self.engine, image)
        raw = smoke.raw or {}
        torch = found.version_of("pypi", "torch")
        if raw.get("torch") and not same_torch(torch, str(raw.get("torch"))):
            raise AttestationError(f"the SBOM of {image} lists torch {torch}, the smoke test saw {raw.get('torch')}")
        sbom_text = sbom.bom_json(found, subject, wheels=inputs.wheels).encode()
        created = {attach.CREATED: _now()}
        sbom_attached = attach.attach(self.store, self.repository, digest, sbom_text,
                                      artifact_type=sbom.MEDIA_TYPE, layer_media_type=sbom.MEDIA_TYPE,
                                      title=SBOM_FILE, annotations=created)
        sbom_sha256 = hashlib.sha256(sbom_text).hexdigest()
        statement = provenance.statement(self._facts(subject, inputs, smoke, raw, sbom_sha256))
        envelope = provenance.envelope(statement, self.signer)
        predicate = {name: provenance.PREDICATE_TYPE for name in provenance.PREDICATE_ANNOTATIONS}
        attached = attach.attach(self.store, self.repository, digest, envelope,
                                 artifact_type=provenance.PAYLOAD_TYPE, layer_media_type=provenance.ENVELOPE_MEDIA_TYPE,
                                 title=ENVELOPE_FILE, annotations={**created, provenance.PREDICATE_ANNOTATIONS[0]:
                                                                   provenance.PREDICATE_TYPE},
                                 layer_annotations=predicate)
        page = self._write(variant.local_tag, digest, sbom_text, statement, envelope,  # a directory per platform image
                           packages.package_page(found, subject))
        self._read_back(digest)
        return Attestation(digest, sbom_attached, attached, self.signer is not None,
                           len(found.packages), torch, page)

    def _read_back(self, digest: str) -> None:
        """With a key: `verify` the digest through the registry alone before anything is promoted.

        What the nightly signed is not yet what a user finds: a registry may drop the subject,
        serve another referrers list, or lose the fallback tag to a concurrent writer. Checking
        the way `accel-images verify` does means no real tag, floating alias included, moves
        onto a digest that would then fail it.
        """
        if self.signer is None:
            return
        from accel_images.supply.verify import verify_digest
        verdict = verify_digest(self.store, self.repository, digest, self.signer.public_key)
        if not verdict.ok:
            raise AttestationError(f"the artifacts attached to {self.host}/{self.repository}@{digest[:19]}"
                                   f" do not verify through the registry: {verdict.reason}")

    def _facts(self, subject: sbom.Subject, inputs: BuildInputs, smoke: SmokeResult, raw: Mapping[str, Any],
               sbom_sha256: str) -> provenance.BuildFacts:
        variant = inputs.variant
        builder_id, invocation = builder_identity(self.run_id, self.env)
        facts = provenance.SmokeFacts(
            passed=smoke.ok, ran_on=smoke.ran_on, cpu_fallback=smoke.cpu_fallback,
            torch=_str(raw.get("torch")), python=_str(raw.get("python")),
            device_name=_str(raw.get("device_name")) or "", device_count=int(raw.get("device_count") or 0),
            required_accelerator=self.require_accelerator, host=socket.gethostname())
        return provenance.BuildFacts(
            repository=subject.repository, digest=subject.digest, tag=variant.tag,
            variant={"vendor": variant.vendor, "stack": variant.stack, "torch": variant.torch,
                     "python": variant.python, "os": variant.os, "flavor": variant.flavor,
                     "platform": variant.platform},
            fingerprint=inputs.fingerprint, base_image=inputs.base_digest, build_args=dict(inputs.build_args),
            matrix_sha256=self.source.matrix_sha256,
            source={"uri": self.source.uri, "gitCommit": self.source.commit,
                    **({"uncommittedChanges": "true"} if self.source.dirty else {})} if self.source.commit else {},
            builder_id=builder_id, invocation_id=invocation, started=self.started,
            finished=datetime.now(timezone.utc), smoke=facts, sbom_sha256=sbom_sha256, tool_version=__version__,
            wheels=inputs.wheels)

    def _write(self, tag: str, digest: str, sbom_text: bytes, statement: Mapping[str, Any], envelope: bytes,
               page: str) -> str | None:
        """The documents, and the package list, under out_dir/<tag>/; the list's path from the report."""
        if self.out_dir is None:
            return None
        where = self.out_dir / tag
        where.mkdir(parents=True, exist_ok=True)
        (where / SBOM_FILE).write_bytes(sbom_text)
        (where / STATEMENT_FILE).write_text(json.dumps(statement, indent=1, sort_keys=True) + "\n")
        (where / PREDICATE_FILE).write_text(json.dumps(statement["predicate"], indent=1, sort_keys=True) + "\n")
        (where / ENVELOPE_FILE).write_bytes(envelope)
        (where / "subject.txt").write_text(f"{self.host}/{self.repository}@{digest}\n")
        (where / PACKAGES_FILE).write_text(page, encoding="utf-8")
        return f"{self.out_dir.name}/{tag}/{PACKAGES_FILE}"


def same_torch(listed: str | None, seen: str) -> bool:
    """The SBOM's torch (the distribution's metadata) is the torch the smoke test imported: the same
    version, or, for the package index's builds, whose metadata has no local label while torch.__version__
    has it (`2.15.0` and `2.15.0+cu132`), the same public version."""
    return listed == seen or (listed is not None and "+" not in listed and seen.split("+", 1)[0] == listed)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
