"""Building variants: render a context, resolve the base, skip what is unchanged, build, smoke.

One variant's failure is recorded in its outcome and never stops the others; the caller
decides the exit code from the outcomes. Everything that talks to Docker goes through
`accel_images.engine.Engine`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar
from urllib.parse import urlsplit

from docker.utils import parse_repository_tag

from accel_images import buildlog, devices, stopping
from accel_images import vendors
from accel_images.compat import KnowledgeBase
from accel_images.engine import Engine, ImageInfo
from accel_images.errors import AccelError, EngineError, RegistryError
from accel_images.fingerprint import FINGERPRINT_LABEL, fingerprint, load_digest_cache, save_digest_cache
from accel_images.render import RenderedContext, Renderer, RenderOptions, mirrored, write_build_context
from accel_images.smoke.judge import SmokeResult
from accel_images.smoke.launcher import run_smoke
from accel_images.variant import LABEL_PREFIX, Expansion, Variant

PULL_POLICIES = ("missing", "always", "never")
BASE_DIGEST_LABEL = "io.accel-images.base.digest"
CREATED_LABEL = "org.opencontainers.image.created"
CREDENTIALS_ARG = "ACCEL_PIP_CREDENTIALS"
"""Build arg carrying the user:password of --pip-index-url, so it is never written into a Dockerfile."""

Status = Callable[[Variant, str], None]
Item = TypeVar("Item")
Result = TypeVar("Result")


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
    no_cache: bool = False
    """Build every step afresh, ignoring the engine's layer cache."""


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
    notes: tuple[str, ...] = ()      # what the render left out (a companion a wheelhouse lacks)

    @property
    def ok(self) -> bool:
        return self.status != "failed"


@dataclass(frozen=True)
class Prepared:
    """A variant ready to build: its context on disk, build args, resolved base and fingerprint."""

    variant: Variant
    ref: str
    context_dir: Path
    args: dict[str, str]
    fingerprint: str
    base_digest: str
    secret_args: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Build args that must reach the build but not the fingerprint, a log or a report."""
    notes: tuple[str, ...] = ()


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
        self.finished: list[Outcome] = []
        self._bases: dict[str, ImageInfo] = {}
        self._bases_lock = threading.Lock()
        """Outcomes so far, in completion order: what a partial report after Ctrl-C shows."""

    def run(self, variants: Sequence[Variant]) -> list[Outcome]:
        """Build every variant, `jobs` at a time; outcomes in the order given.

        File digests are kept in the state dir between runs, so a no-op rebuild does not
        re-hash the wheelhouse of every context.
        """
        cache = self.settings.state_dir / "cache" / "digests.json"
        load_digest_cache(cache)
        try:
            return run_each(self.one, variants, self.settings.jobs)
        finally:
            try:
                save_digest_cache(cache)
            except OSError:
                pass  # only a speed-up: a read-only state dir must not fail the build

    def one(self, variant: Variant) -> Outcome:
        """Build and smoke one variant; expected failures become a failed Outcome."""
        ref = image_ref(self.expansion, variant)
        outcome = Outcome(variant, "failed", ref)
        try:
            stopping.checkpoint()
            outcome = self._build(variant, ref)
            if self.settings.smoke and outcome.image_id:
                stopping.checkpoint()
                outcome = self._smoke(outcome)
        except AccelError as error:
            outcome = replace(outcome, status="failed", error=error.one_line())
        self.finished.append(outcome)
        self.status(variant, describe(outcome))
        return outcome

    def _build(self, variant: Variant, ref: str) -> Outcome:
        prepared = self.prepare(variant)
        existing = self.engine.inspect_image(ref)
        if existing and existing.labels.get(FINGERPRINT_LABEL) == prepared.fingerprint and not self.settings.force:
            return Outcome(variant, "skipped", ref, existing.id, existing.size, None, prepared.fingerprint,
                           prepared.base_digest, notes=prepared.notes)
        return replace(self.build_prepared(prepared), notes=prepared.notes)

    def prepare(self, variant: Variant) -> Prepared:
        """Render the context, resolve the base per the pull policy and fingerprint the result.

        Separate from the build so a caller can decide from the fingerprint (a nightly
        compares it with the registry's copy) whether to build at all.
        """
        self.status(variant, "rendering")
        context_dir = self.settings.state_dir / "contexts" / variant.vendor / variant.tag
        rendered = self.renderer.context(variant, self.expansion, self.settings.options)
        rendered = withhold_credentials(rendered, self.settings.options.pip_index_url)
        for note in rendered.notes:
            self.status(variant, f"note: {note}")
        write_build_context(context_dir, rendered, self.settings.options.pip_find_links)
        base = self._resolve_base(variant)
        base_digest = pinned_base(base, mirrored(variant.base_image, self.settings.options.mirrors))
        args = build_args(variant, self.expansion, self.settings)
        return Prepared(variant, image_ref(self.expansion, variant), context_dir, args,
                        fingerprint(context_dir, args, base_digest), base_digest,
                        credential_args(self.settings.options.pip_index_url), rendered.notes)

    def build_prepared(self, prepared: Prepared, *, nocache: bool = False) -> Outcome:
        """Build a prepared context unconditionally; a failing build is a failed Outcome.

        `nocache` (or the settings' `no_cache`) ignores the layer cache for this build.
        """
        variant, ref, print_, base_digest = prepared.variant, prepared.ref, prepared.fingerprint, prepared.base_digest
        self.status(variant, "building")
        log_path = buildlog.log_path(variant.vendor, variant.tag, root=self.settings.state_dir)
        labels = {FINGERPRINT_LABEL: print_, BASE_DIGEST_LABEL: base_digest,
                  CREATED_LABEL: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        started = time.monotonic()
        try:
            built = self.engine.build(prepared.context_dir, ref, buildargs={**prepared.args, **prepared.secret_args},
                                      labels=labels,
                                      log_path=log_path, network_mode=self.settings.network_mode, pull=False,
                                      nocache=nocache or self.settings.no_cache,
                                      on_line=lambda line: self.status(variant, "building: " + line[-120:]))
        except AccelError as error:
            return Outcome(variant, "failed", ref, None, None, time.monotonic() - started, print_, base_digest,
                           error=error.one_line(), log_path=log_path)
        return Outcome(variant, "built", ref, built.id, built.size, time.monotonic() - started, print_,
                       base_digest, log_path=log_path)

    def _resolve_base(self, variant: Variant) -> ImageInfo:
        """The base image as the build will see it, pulled per the pull policy.

        Resolved once per run for each distinct base: sixteen variants on one base cost one
        pull (and one registry round trip), not sixteen.
        """
        base_ref = mirrored(variant.base_image, self.settings.options.mirrors)
        with self._bases_lock:
            if base_ref not in self._bases:
                self._bases[base_ref] = self._fetch_base(variant, base_ref)
            return self._bases[base_ref]

    def _fetch_base(self, variant: Variant, base_ref: str) -> ImageInfo:
        local = None if self.settings.pull == "always" else self.engine.inspect_image(base_ref)
        if local is not None:
            return local
        if self.settings.pull == "never":
            raise EngineError(f"base image {base_ref} is not present locally and --pull never forbids pulling it")
        self.status(variant, f"pulling {base_ref}")
        try:
            return self.engine.pull(base_ref)
        except RegistryError as error:
            raise with_newer_bases(error, variant, self.renderer.kb) from error

    def _smoke(self, outcome: Outcome) -> Outcome:
        if outcome.status == "skipped" and smoke_passed_before(self.settings.state_dir, outcome.image_id):
            return outcome
        variant = outcome.variant
        self.status(variant, "smoke test")
        result = smoke_image(self.engine, outcome.image, variant, self.settings)
        if result.ok:
            remember_smoke_pass(self.settings.state_dir, outcome.image_id, result)
            return replace(outcome, smoke=result)
        return replace(outcome, status="failed", smoke=result, error="smoke: " + "; ".join(result.failures))


def pinned_base(base: ImageInfo, ref: str) -> str:
    """`repo@sha256:...` of the base as pulled by `ref`, else its image ID.

    An image known under several names carries one repo digest per name, listed in name
    order, so the first one changes whenever another name comes or goes; the digest of the
    repository the build pulls from does not.
    """
    repository = parse_repository_tag(ref)[0]
    own = [digest for digest in base.repo_digests if digest.startswith(repository + "@")]
    return (own or list(base.repo_digests) or [base.id])[0]


def newer_bases(kb: KnowledgeBase, variant: Variant) -> list[str]:
    """Base tags of the same image family the knowledge base knows, newest first.

    Vendors delete end-of-life tags (nvidia/cuda drops old patch releases), so a missing base
    usually means "move to one of these".
    """
    return vendors.get(variant.vendor).base_upgrades(kb, variant)


def with_newer_bases(error: RegistryError, variant: Variant, kb: KnowledgeBase) -> RegistryError:
    """A missing base's error, naming the upstream tag and the newer tags to move to."""
    if error.transient or "not found" not in error.message:
        return error
    newer = newer_bases(kb, variant)
    hint = (f"newer bases the knowledge base knows: {', '.join(newer)}" if newer
            else "the knowledge base knows no newer base for it")
    better = RegistryError(f"base image {variant.base_image} of {variant.key}: {error.message}",
                           hint=f"the tag may have been withdrawn upstream; {hint}")
    better.transient = False  # type: ignore[misc]
    return better


# ---- credentials in the package index URL -----------------------------------------------------

def index_credentials(url: str | None) -> str | None:
    """The `user:password` of an index URL, or None."""
    if not url:
        return None
    userinfo, at, _ = urlsplit(url).netloc.rpartition("@")
    return userinfo if at and userinfo else None


def credential_args(url: str | None) -> dict[str, str]:
    credentials = index_credentials(url)
    return {CREDENTIALS_ARG: credentials} if credentials else {}


_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def hide_credentials(text: str) -> str:
    """`https://user:password@host/...` -> `https://***@host/...`, for anything shown or stored."""
    return _URL_USERINFO.sub("***@", text)


_FROM_LINE = re.compile(r"^FROM\s", re.IGNORECASE | re.MULTILINE)


def withhold_credentials(context: RenderedContext, url: str | None) -> RenderedContext:
    """The context with the index URL's `user:password` replaced by a build arg reference.

    The Dockerfile, the build log (which echoes every step) and the final image's history then
    show `${ACCEL_PIP_CREDENTIALS}`; only the stage that runs pip declares the ARG, and that
    stage's layers never reach the final image.
    """
    credentials = index_credentials(url)
    if credentials is None or "Dockerfile" not in context.files:
        return context
    text = context.files["Dockerfile"].decode()
    text = text.replace(credentials + "@", "${" + CREDENTIALS_ARG + "}@")
    stages = _FROM_LINE.split(text)
    starts = _FROM_LINE.findall(text)
    out = [stages[0]]
    for keyword, stage in zip(starts, stages[1:]):
        if "${" + CREDENTIALS_ARG + "}" in stage:
            first_line, _, rest = stage.partition("\n")
            stage = f"{first_line}\nARG {CREDENTIALS_ARG}\n{rest}"
        out.append(keyword + stage)
    return replace(context, files={**context.files, "Dockerfile": "".join(out).encode()})


def smoke_image(engine: Engine, image: str, variant: Variant, settings: BuildSettings) -> SmokeResult:
    """Run the smoke workload in `image` with this host's devices for the variant's vendor."""
    present = devices.accelerator_present(variant.vendor)
    options = devices.device_options(variant.vendor) if present else None
    info = engine.inspect_image(image)
    promised = (info.labels.get(f"{LABEL_PREFIX}.companions", "") if info else "").split(",")
    expectation = replace(variant.expectation(), companions=tuple(filter(None, promised)))
    return run_smoke(engine, image, expectation, vendor_options=options,
                     require_accelerator=settings.require_accelerator, timeout_s=settings.smoke_timeout_s)


def run_each(work: Callable[[Item], Result], items: Sequence[Item], jobs: int) -> list[Result]:
    """`work` on every item, `jobs` at a time; results in the order given.

    Ctrl-C cancels what has not started and re-raises, so the caller's cleanup runs.
    """
    if jobs <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    results: dict[int, Result] = {}
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="build") as pool:
        futures = {pool.submit(work, item): index for index, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
        except KeyboardInterrupt:
            stopping.request_stop()  # running workers stop at their next checkpoint
            for future in futures:
                future.cancel()
            raise
    return [results[index] for index in range(len(items))]


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
        "notes": list(outcome.notes),
        "smoke": None if smoke is None else {
            "ok": smoke.ok, "ran_on": smoke.ran_on, "cpu_fallback": smoke.cpu_fallback,
            "failures": list(smoke.failures),
            "checks": [{"name": c.name, "ok": c.ok, "ms": c.ms, "detail": c.detail} for c in smoke.checks]},
    }
