"""Building variants: render a context, resolve the base, skip what is unchanged, build, smoke.

One variant's failure is recorded in its outcome and never stops the others; the caller
decides the exit code from the outcomes. Everything that talks to Docker goes through
`builder.engine.Engine`.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

from builder import buildlog, devices
from builder.compat import KnowledgeBase
from builder.engine import Engine, ImageInfo
from builder.errors import AccelError, EngineError
from builder.fingerprint import FINGERPRINT_LABEL, fingerprint
from builder.render import Renderer, RenderOptions, mirrored, write_build_context
from builder.smoke.judge import SmokeResult
from builder.smoke.launcher import run_smoke
from builder.variant import Expansion, Variant

PULL_POLICIES = ("missing", "always", "never")
BASE_DIGEST_LABEL = "io.accel-images.base.digest"
CREATED_LABEL = "org.opencontainers.image.created"

Status = Callable[[Variant, str], None]


@dataclass(frozen=True)
class BuildSettings:
    """How to build: everything that is not the variant itself."""

    options: RenderOptions = RenderOptions()
    state_dir: Path = field(default_factory=buildlog.state_dir)
    force: bool = False
    smoke: bool = True
    require_accelerator: bool = False
    pull: str = "missing"
    network_mode: str | None = None
    jobs: int = 1
    smoke_timeout_s: float = 600
    user_uid: int | None = None
    user_gid: int | None = None


@dataclass(frozen=True)
class Outcome:
    """What happened to one variant."""

    variant: Variant
    status: str                      # 'built' | 'skipped' | 'failed'
    image: str
    image_id: str | None = None
    size: int | None = None
    build_s: float | None = None
    fingerprint: str | None = None
    base_digest: str | None = None
    smoke: SmokeResult | None = None
    error: str | None = None
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def image_ref(expansion: Expansion, variant: Variant) -> str:
    return f"{expansion.image}:{variant.tag}"


def build_args(variant: Variant, expansion: Expansion, settings: BuildSettings) -> dict[str, str]:
    """Build args: the user IDs (overridable so a team can match its host's IDs)."""
    return {"USER_NAME": expansion.user.name,
            "USER_UID": str(settings.user_uid or expansion.user.uid),
            "USER_GID": str(settings.user_gid or expansion.user.gid)}


class Builder:
    """Builds and smoke-tests variants against one engine."""

    def __init__(self, engine: Engine, kb: KnowledgeBase, expansion: Expansion, settings: BuildSettings,
                 status: Status | None = None, templates_dir: Path | None = None) -> None:
        self.engine = engine
        self.expansion = expansion
        self.settings = settings
        self.renderer = Renderer(kb, templates_dir) if templates_dir else Renderer(kb)
        self.status = status or (lambda variant, text: None)

    def run(self, variants: Sequence[Variant]) -> list[Outcome]:
        """Build every variant, `jobs` at a time; outcomes in the order given."""
        if self.settings.jobs <= 1 or len(variants) <= 1:
            return [self.one(v) for v in variants]
        results: dict[Variant, Outcome] = {}
        with ThreadPoolExecutor(max_workers=self.settings.jobs, thread_name_prefix="build") as pool:
            futures = {pool.submit(self.one, v): v for v in variants}
            try:
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
            except KeyboardInterrupt:
                for future in futures:
                    future.cancel()
                raise
        return [results[v] for v in variants]

    def one(self, variant: Variant) -> Outcome:
        """Build and smoke one variant; expected failures become a failed Outcome."""
        ref = image_ref(self.expansion, variant)
        outcome = Outcome(variant, "failed", ref)
        try:
            outcome = self._build(variant, ref)
            if self.settings.smoke and outcome.image_id:
                outcome = self._smoke(outcome)
        except AccelError as error:
            outcome = replace(outcome, status="failed", error=error.one_line())
        self.status(variant, describe(outcome))
        return outcome

    def _build(self, variant: Variant, ref: str) -> Outcome:
        self.status(variant, "rendering")
        context_dir = self.settings.state_dir / "contexts" / variant.vendor / variant.tag
        rendered = self.renderer.context(variant, self.expansion, self.settings.options)
        write_build_context(context_dir, rendered, self.settings.options.pip_find_links)
        base = self._resolve_base(variant)
        base_digest = base.repo_digests[0] if base.repo_digests else base.id
        args = build_args(variant, self.expansion, self.settings)
        print_ = fingerprint(context_dir, args, base_digest)
        existing = self.engine.inspect_image(ref)
        if existing and existing.labels.get(FINGERPRINT_LABEL) == print_ and not self.settings.force:
            return Outcome(variant, "skipped", ref, existing.id, existing.size, None, print_, base_digest)
        self.status(variant, "building")
        log_path = buildlog.log_path(variant.vendor, variant.tag, root=self.settings.state_dir)
        labels = {FINGERPRINT_LABEL: print_, BASE_DIGEST_LABEL: base_digest,
                  CREATED_LABEL: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        started = time.monotonic()
        try:
            built = self.engine.build(context_dir, ref, buildargs=args, labels=labels, log_path=log_path,
                                      network_mode=self.settings.network_mode, pull=False,
                                      on_line=lambda line: self.status(variant, "building: " + line[-120:]))
        except AccelError as error:
            return Outcome(variant, "failed", ref, None, None, time.monotonic() - started, print_, base_digest,
                           error=error.one_line(), log_path=log_path)
        return Outcome(variant, "built", ref, built.id, built.size, time.monotonic() - started, print_,
                       base_digest, log_path=log_path)

    def _resolve_base(self, variant: Variant) -> ImageInfo:
        """The base image as the build will see it, pulled per the pull policy."""
        base_ref = mirrored(variant.base_image, self.settings.options.mirrors)
        local = None if self.settings.pull == "always" else self.engine.inspect_image(base_ref)
        if local is not None:
            return local
        if self.settings.pull == "never":
            raise EngineError(f"base image {base_ref} is not present locally and --pull never forbids pulling it")
        self.status(variant, f"pulling {base_ref}")
        return self.engine.pull(base_ref)

    def _smoke(self, outcome: Outcome) -> Outcome:
        if outcome.status == "skipped" and smoke_passed_before(self.settings.state_dir, outcome.image_id):
            return outcome
        variant = outcome.variant
        self.status(variant, "smoke test")
        present = devices.accelerator_present(variant.vendor) if variant.vendor != "cpu" else False
        options = devices.device_options(variant.vendor) if present else None
        result = run_smoke(self.engine, outcome.image, variant.expectation(), vendor_options=options,
                           require_accelerator=self.settings.require_accelerator,
                           timeout_s=self.settings.smoke_timeout_s)
        if result.ok:
            remember_smoke_pass(self.settings.state_dir, outcome.image_id, result)
            return replace(outcome, smoke=result)
        return replace(outcome, status="failed", smoke=result, error="smoke: " + "; ".join(result.failures))


def describe(outcome: Outcome) -> str:
    """A short status line for progress displays."""
    if outcome.status == "failed":
        return f"FAILED: {outcome.error}"
    smoke = ""
    if outcome.smoke is not None:
        smoke = f", smoke ok on {outcome.smoke.ran_on}" + (" (CPU mode)" if outcome.smoke.cpu_fallback else "")
    size = f", {human_size(outcome.size)}" if outcome.size else ""
    verb = "unchanged, skipped" if outcome.status == "skipped" else f"built in {outcome.build_s:.0f} s"
    return verb + size + smoke


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit in ("B", "KB") else f"{value:.2f} {unit}"
        value /= 1000
    return f"{value:.2f} GB"


# ---- remembered smoke passes ------------------------------------------------------------------

def _smoke_record(state_dir: Path, image_id: str | None) -> Path:
    return state_dir / "smoke" / f"{(image_id or 'none').replace(':', '_')}.json"


def smoke_passed_before(state_dir: Path, image_id: str | None) -> bool:
    """An unchanged image whose smoke already passed here need not run it again."""
    try:
        return bool(json.loads(_smoke_record(state_dir, image_id).read_text()).get("ok"))
    except (OSError, ValueError):
        return False


def remember_smoke_pass(state_dir: Path, image_id: str | None, result: SmokeResult) -> None:
    path = _smoke_record(state_dir, image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ok": result.ok, "ran_on": result.ran_on, "cpu_fallback": result.cpu_fallback}))


def outcome_record(outcome: Outcome) -> Mapping[str, object]:
    """JSON-ready view of an outcome, for reports."""
    smoke = outcome.smoke
    return {
        "variant": outcome.variant.key, "vendor": outcome.variant.vendor, "tag": outcome.variant.tag,
        "torch": outcome.variant.torch, "stack": outcome.variant.stack, "python": outcome.variant.python,
        "os": outcome.variant.os, "flavor": outcome.variant.flavor,
        "status": outcome.status, "image": outcome.image, "image_id": outcome.image_id, "size": outcome.size,
        "build_s": outcome.build_s, "fingerprint": outcome.fingerprint, "base_digest": outcome.base_digest,
        "error": outcome.error, "log": str(outcome.log_path) if outcome.log_path else None,
        "smoke": None if smoke is None else {
            "ok": smoke.ok, "ran_on": smoke.ran_on, "cpu_fallback": smoke.cpu_fallback,
            "failures": list(smoke.failures),
            "checks": [{"name": c.name, "ok": c.ok, "ms": c.ms, "detail": c.detail} for c in smoke.checks]},
    }
