"""Building variants: render a context, resolve the base, skip what is unchanged, build, smoke.

One variant's failure is recorded in its outcome and never stops the others; the caller
decides the exit code from the outcomes. Everything that talks to Docker goes through
`accel_images.builder.engine.Engine`. What the builder uses but does not decide lives beside it:
settings (accel_images.builder.settings), outcomes and their records (accel_images.builder.outcome), the
worker pool (accel_images.builder.workers), base digests and upgrade hints (accel_images.builder.bases),
remembered smoke passes (accel_images.smoke.records) and every path (accel_images.state).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence

from accel_images import stopping, vendors
from accel_images.builder import failure
from accel_images.builder.bases import ManifestReader, check_platform, pinned_base, platform_base, with_newer_bases
from accel_images.kb.compat import KnowledgeBase
from accel_images.builder.engine import Engine, ImageInfo
from accel_images.errors import AccelError, BuildFailed, EngineError, FactsContradicted, RegistryError, WheelFetchError
from accel_images.builder.fingerprint import FINGERPRINT_LABEL, fingerprint, load_digest_cache, save_digest_cache
from accel_images.builder.outcome import Outcome, describe
from accel_images.render.companions import BUILD_BACKEND
from accel_images.render.contexts import (RenderedContext, Renderer, tools_index_url, wheel_index_url,
                                          write_build_context)
from accel_images.model import platforms as platform_names
from accel_images.model.reference import mirrored, split_reference
from accel_images.builder.settings import BuildSettings, build_args, image_ref
from accel_images.smoke.integrity import Recorded
from accel_images.smoke.judge import Expectation, NodesRecord, SmokeResult, with_nodes
from accel_images.smoke.launcher import facts_of, inventory_of, run_smoke
from accel_images.smoke.nodes import NodesPlan, collective_for, run_nodes
from accel_images.kb.claims import contradiction
from accel_images.kb.wheels import machine_of, manylinux_tags
from accel_images.smoke.records import (built_here, last_smoke_pass, recorded_build, remember_build, remember_image,
                                       remember_smoke_pass)
from accel_images.model.variant import LABEL_PREFIX, Variant
from accel_images.plan.variants import Expansion
from accel_images.builder.wheels import Closure, RunWheelhouse, WheelRequest
from accel_images.builder.workers import run_each
from accel_images.model.wheels import Wheel

BASE_DIGEST_LABEL = "io.accel-images.base.digest"
CREATED_LABEL = "org.opencontainers.image.created"

Status = Callable[[Variant, str], None]


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
    """Build args that must reach the build but not the fingerprint, a log or a report (the renderer's)."""
    notes: tuple[str, ...] = ()
    """What the render left out on purpose (a companion the wheelhouse lacks), and a wheel the cache held
    changed and the run fetched again: shown, and kept in the record."""
    companions: tuple[str, ...] = ()
    """The companions the render installs: what the image's facts must show (accel_images.kb.claims)."""
    left_out: tuple[str, ...] = ()
    """The companions the user left out (--without-companion): every report and the catalogue say so."""
    wheels: tuple[Wheel, ...] = ()
    """The wheels the run fetched on the host for this build (accel_images.builder.wheels), for its provenance."""


class Builder:
    """Builds and smoke-tests variants against one engine."""

    def __init__(self, engine: Engine, kb: KnowledgeBase, expansion: Expansion, settings: BuildSettings,
                 status: Status | None = None, templates_dir: Path | None = None,
                 wheels: RunWheelhouse | None = None,
                 registries: Callable[[str], ManifestReader] | None = None) -> None:
        self.engine = engine
        self.expansion = expansion
        self.settings = settings
        self.renderer = Renderer(kb, templates_dir) if templates_dir else Renderer(kb)
        self.wheels = wheels or RunWheelhouse(settings.wheel_cache_dir)
        """The run's wheelhouse: each wheel fetched once on the host, whichever variants share it."""
        self.status = status or (lambda variant, text: None)
        self.finished: list[Outcome] = []
        """Outcomes so far, in completion order: what a partial report after Ctrl-C shows."""
        self._bases: dict[str, ImageInfo] = {}
        self._bases_lock = threading.Lock()
        self._registries = registries or _registry_client
        self._platform_bases: dict[tuple[str, str], str] = {}

    def run(self, variants: Sequence[Variant]) -> list[Outcome]:
        """Build every variant, `jobs` at a time; outcomes in the order given.

        File digests are kept in the state dir between runs, so a no-op rebuild does not
        re-hash the wheelhouse of every context.
        """
        cache = self.settings.state_dir.digest_cache
        load_digest_cache(cache)
        try:
            return run_each(self.one, variants, self.settings.jobs)
        finally:
            try:
                save_digest_cache(cache)
            except OSError:
                pass  # only a speed-up: a read-only state dir must not fail the build
            self.prune_wheels()

    def prune_wheels(self) -> None:
        """After the run: the wheel cache down to --cache-max-size (a failure only leaves it larger)."""
        try:
            self.wheels.prune(self.settings.wheel_cache_max)
        except (OSError, AccelError):
            pass

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
            outcome = replace(outcome, status="failed", error=error.one_line(), exit_code=error.exit_code)
        self.finished.append(outcome)
        self.status(variant, describe(outcome))
        return outcome

    def _build(self, variant: Variant, ref: str) -> Outcome:
        prepared = self.prepare(variant)
        existing = self.engine.inspect_image(ref)
        if existing and not self.settings.force and existing.labels.get(FINGERPRINT_LABEL) == prepared.fingerprint \
                and built_here(self.settings.state_dir, prepared.fingerprint, existing.id, existing.layers):
            skipped = Outcome(variant, "skipped", ref, existing.id, existing.size, None, prepared.fingerprint,
                              prepared.base_digest, notes=prepared.notes, without_companions=prepared.left_out)
            self.remember_name(prepared, existing.id)  # a build recorded before names were, named now
            return self.check_facts(prepared, skipped)
        return replace(self.build_prepared(prepared), notes=prepared.notes, without_companions=prepared.left_out)

    def prepare(self, variant: Variant) -> Prepared:
        """Render the context, resolve the base per the pull policy and fingerprint the result.

        Separate from the build so a caller can decide from the fingerprint (a nightly
        compares it with the registry's copy) whether to build at all.
        """
        self.status(variant, "rendering")
        context_dir = self.settings.state_dir.context(variant.vendor, variant.local_tag)
        base_ref = self._base_ref(variant)
        rendered = self.renderer.context(variant, self.expansion, self.settings.options,
                                         base_ref=base_ref if variant.multi_platform else None)
        for note in rendered.notes:
            self.status(variant, f"note: {note}")
        base = self._resolve_base(variant, base_ref)
        closure = self._fetch_wheels(variant, rendered, base)
        write_build_context(context_dir, rendered, closure.paths if closure else self.settings.options.pip_find_links)
        base_digest = pinned_base(base, base_ref)
        args = {**build_args(variant, self.expansion, self.settings), **rendered.build_args}
        return Prepared(variant, image_ref(self.expansion, variant), context_dir, args,
                        fingerprint(context_dir, args, base_digest), base_digest, dict(rendered.secret_args),
                        rendered.notes + (closure.notes if closure else ()), rendered.companions, rendered.left_out,
                        closure.wheels if closure else ())

    def _fetch_wheels(self, variant: Variant, rendered: RenderedContext, base: ImageInfo) -> Closure | None:
        """The variant's wheels from the run's wheelhouse, when the run fetches them on the host and the
        Dockerfile installs from the context's `wheels/` (a template that does not gets none)."""
        options = self.settings.options
        if not options.host_fetch or options.pip_find_links or not rendered.copies_wheels \
                or not rendered.pip_requirements:
            return None
        os_info = self.renderer.kb.os.get(variant.os)
        if os_info is None:
            raise WheelFetchError(f"the knowledge base has no glibc for {variant.os}: cannot tell which wheels"
                                  " its image takes", hint="build with --pip-fetch build")
        # What the base is (the engine's word), else the platform the variant is built for: arm64 -> aarch64.
        machine = machine_of(self.renderer.kb, base.architecture or platform_names.architecture(variant.platform))
        platforms = manylinux_tags(machine, os_info.glibc)
        def status(text: str) -> None:
            self.status(variant, text)

        torch = self.wheels.closure(WheelRequest(wheel_index_url(variant, options), rendered.pip_requirements,
                                                 (BUILD_BACKEND,), variant.python, machine, platforms), status=status)
        if not rendered.tools:
            return torch
        # IPython (companions.TOOLS) from the package index, which torch's indexes are not: a request of its own,
        # as the Dockerfile's pip call of its own.
        tools = self.wheels.closure(WheelRequest(tools_index_url(variant, options), rendered.tools, (), variant.python,
                                                 machine, platforms), status=status)
        return Closure(torch.wheels + tools.wheels, tuple(dict.fromkeys(torch.paths + tools.paths)),
                       torch.fetched_bytes + tools.fetched_bytes, torch.notes + tools.notes)

    def _base_ref(self, variant: Variant) -> str:
        """Where the build's FROM pulls the base from: the matrix's reference through the mirrors; for one
        platform of a multi-platform tag, that platform's own manifest digest (accel_images.builder.bases),
        asked once per run for each base and platform."""
        base_ref = mirrored(variant.base_image, self.settings.options.mirrors)
        if not variant.multi_platform:
            return base_ref
        key = (base_ref, variant.platform)
        with self._bases_lock:
            if key not in self._platform_bases:
                self.status(variant, f"finding the {variant.platform} image of {base_ref}")
                registry = self._registries(split_reference(base_ref)[0])
                try:
                    self._platform_bases[key] = platform_base(registry, base_ref, variant.platform)
                except RegistryError as error:
                    raise self._base_failure(error, variant, base_ref) from error
            return self._platform_bases[key]

    def _base_failure(self, error: RegistryError, variant: Variant, base_ref: str) -> RegistryError:
        """A base that could not be read or pulled, said the same way either way: the --registry-mirror
        mapping that pointed at an unreachable mirror, the way out of a missing base (accel_images.builder.bases)."""
        others = {v.os: v.base_image for v in self.expansion.variants
                  if v.vendor == variant.vendor and v.base_image != variant.base_image and v.os != variant.os}
        return with_newer_bases(error, variant, self.renderer.kb, pulled_from=base_ref,
                                mirrors=self.settings.options.mirrors, other_bases=others)

    def build_prepared(self, prepared: Prepared, *, nocache: bool = False) -> Outcome:
        """Build a prepared context unconditionally; a failing build is a failed Outcome.

        `nocache` (or the settings' `no_cache`) ignores the layer cache for this build.
        """
        variant, ref, print_, base_digest = prepared.variant, prepared.ref, prepared.fingerprint, prepared.base_digest
        self.status(variant, "building")
        log_path = self.settings.state_dir.log(variant.vendor, variant.local_tag)
        labels = {FINGERPRINT_LABEL: print_, BASE_DIGEST_LABEL: base_digest,
                  CREATED_LABEL: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        started = time.monotonic()
        try:
            built = self.engine.build(prepared.context_dir, ref, buildargs={**prepared.args, **prepared.secret_args},
                                      labels=labels,
                                      log_path=log_path, network_mode=self.settings.network_mode, pull=False,
                                      nocache=nocache or self.settings.no_cache,
                                      on_line=lambda line: self.status(variant, "building: " + shortened(line)),
                                      platform=variant.platform if variant.multi_platform else None)
            self.record_build(prepared, built.id)
        except BuildFailed as failed:
            options = self.settings.options
            cause = str(failure.explain(failed.detail, failed.step, failed.log_tail, wheelhouse=options.pip_find_links,
                                        apt_mirrors=options.apt_mirrors)) if failed.detail else None
            return Outcome(variant, "failed", ref, None, None, time.monotonic() - started, print_, base_digest,
                           error=cause or failed.one_line(), log_path=log_path, exit_code=failed.exit_code)
        except AccelError as error:
            return Outcome(variant, "failed", ref, None, None, time.monotonic() - started, print_, base_digest,
                           error=error.one_line(), log_path=log_path, exit_code=error.exit_code)
        return self.check_facts(prepared, Outcome(variant, "built", ref, built.id, built.size,
                                                  time.monotonic() - started, print_, base_digest, log_path=log_path))

    def check_facts(self, prepared: Prepared, outcome: Outcome) -> Outcome:
        """The outcome with the image's facts, failed where they are missing or contradict the knowledge base.

        After every build, and for an unchanged image taken instead of one (a skip here, a local build a
        nightly publishes): the image that failed the check stays under its name, so it must fail again
        rather than pass as unchanged. Before the smoke test, so a nightly never publishes it.
        """
        if not outcome.ok or outcome.image_id is None:
            return outcome
        variant = prepared.variant
        self.status(variant, "checking its facts against the knowledge base")
        try:
            facts = facts_of(self.engine, outcome.image_id)
        except AccelError as error:
            return replace(outcome, status="failed", error=error.one_line(), exit_code=error.exit_code)
        problem = contradiction(self.renderer.kb, variant, facts, prepared.companions)
        if problem is not None:
            return replace(outcome, status="failed", facts=facts, error=problem, exit_code=FactsContradicted.exit_code)
        return replace(outcome, facts=facts)

    def record_build(self, prepared: Prepared, image_id: str) -> None:
        """Keep the hashes of the interpreter and torch of the image just built (builds/<fingerprint>.json).

        Read from outside, before the image ever runs; a later smoke run of an image carrying this
        fingerprint must find the same files (accel_images.smoke.integrity).
        """
        info = self.engine.inspect_image(image_id)
        if info is None:
            raise EngineError(f"image {image_id} of {prepared.ref} vanished right after its build")
        if prepared.variant.multi_platform:
            check_platform(info, prepared.variant.platform, f"the image just built as {prepared.ref}")
        inventory = inventory_of(self.engine, info, prepared.variant.python)
        try:
            remember_build(self.settings.state_dir, prepared.fingerprint, info.id, inventory, info.layers)
        except OSError as error:
            raise EngineError(f"cannot keep the build record of {prepared.ref}: {error.strerror or error}") from error
        self.remember_name(prepared, info.id)

    def remember_name(self, prepared: Prepared, image_id: str) -> None:
        """Record the local name this build gave its image: the one name `run` and `recommend` may use without
        a registry (accel_images.host.sources), since the state directory vouches for it."""
        try:
            remember_image(self.settings.state_dir, prepared.ref, image_id, prepared.fingerprint)
        except OSError as error:
            raise EngineError(f"cannot keep the build record of {prepared.ref}: {error.strerror or error}") from error

    def _resolve_base(self, variant: Variant, base_ref: str) -> ImageInfo:
        """The base image as the build will see it, pulled per the pull policy.

        Resolved once per run for each distinct base: sixteen variants on one base cost one
        pull (and one registry round trip), not sixteen. A platform's base (a digest) must be of
        that platform.
        """
        with self._bases_lock:
            if base_ref not in self._bases:
                self._bases[base_ref] = self._fetch_base(variant, base_ref)
            base = self._bases[base_ref]
        if variant.multi_platform:
            check_platform(base, variant.platform, f"base image {base_ref}")
        return base

    def _fetch_base(self, variant: Variant, base_ref: str) -> ImageInfo:
        local = None if self.settings.pull == "always" else self.engine.inspect_image(base_ref)
        if local is not None:
            return local
        if self.settings.pull == "never":
            raise EngineError(f"base image {base_ref} is not present locally and --pull never forbids pulling it")
        self.status(variant, f"pulling {base_ref}")
        try:
            if variant.multi_platform:
                return self.engine.pull(base_ref, platform=variant.platform)
            return self.engine.pull(base_ref)
        except RegistryError as error:
            raise self._base_failure(error, variant, base_ref) from error

    def _smoke(self, outcome: Outcome) -> Outcome:
        earlier = last_smoke_pass(self.settings.state_dir, outcome.image_id) if outcome.status == "skipped" else None
        if earlier is not None and passed_nodes(earlier) >= self.settings.smoke_nodes:
            where = f"on {earlier.get('ran_on') or 'an unknown device'}" + (
                " (CPU mode)" if earlier.get("cpu_fallback") else "")
            return replace(outcome, earlier_smoke=where)
        variant = outcome.variant
        self.status(variant, "smoke test")
        # By the ID the build produced, not the local name another build on this engine may move meanwhile.
        result = smoke_image(self.engine, outcome.image_id or outcome.image, variant, self.settings,
                             status=lambda text: self.status(variant, f"smoke test: {text}"))
        if result.ok:
            remember_smoke_pass(self.settings.state_dir, outcome.image_id, result)
            return replace(outcome, smoke=result)
        return replace(outcome, status="failed", smoke=result, error="smoke: " + "; ".join(result.failures),
                       exit_code=1)


def passed_nodes(earlier: Mapping[str, object]) -> int:
    """How many nodes a recorded smoke pass's N-node test passed with (accel_images.smoke.records); 1 for none:
    an unchanged image is tested again when --smoke-nodes asks for more than it passed."""
    nodes = earlier.get("nodes")
    return nodes if isinstance(nodes, int) and not isinstance(nodes, bool) else 1


def _registry_client(host: str) -> ManifestReader:
    """The registry a base image's platform digests are read from (`docker login` credentials apply)."""
    from accel_images.registry import RegistryClient
    return RegistryClient(host)


def shortened(line: str) -> str:
    """A log line for the progress display: a step line whole (its label is read from what the step runs,
    which can come late in a long RUN line), any other line cut at 300 characters."""
    return line if line.startswith("Step ") else line[:300]


def smoke_image(engine: Engine, image: str, variant: Variant, settings: BuildSettings,
                status: Callable[[str], None] | None = None) -> SmokeResult:
    """Run the smoke workload in `image` with this host's devices for the variant's vendor."""
    present = vendors.accelerator_present(variant.vendor)
    options = vendors.device_options(variant.vendor) if present else None
    info = engine.inspect_image(image)
    promised = (info.labels.get(f"{LABEL_PREFIX}.companions", "") if info else "").split(",")
    expectation = replace(Expectation.of(variant), companions=tuple(filter(None, promised)))
    recorded = recorded_build(settings.state_dir, info.labels.get(FINGERPRINT_LABEL) if info else None)
    result = run_smoke(engine, image, expectation, vendor_options=options, recorded=recorded,
                       require_accelerator=settings.require_accelerator, timeout_s=settings.smoke_timeout_s,
                       status=status)
    if not result.ok or settings.smoke_nodes < 2:
        return result
    return with_nodes(result, smoke_nodes(engine, image, variant, settings, present, recorded, status))


def smoke_nodes(engine: Engine, image: str, variant: Variant, settings: BuildSettings, present: bool,
                recorded: Recorded | None, status: Callable[[str], None] | None = None) -> NodesRecord:
    """The N-node smoke test (accel_images.smoke.nodes) of `image`, the same image the smoke test just passed;
    an engine that fails it midway is its failure, kept in the record like any other."""
    vendor = vendors.get(variant.vendor)
    plan = NodesPlan(collective_for(vendor, present), nodes=settings.smoke_nodes,
                     timeout_s=settings.smoke_timeout_s)
    say = status or (lambda text: None)
    say(f"{plan.nodes}-node smoke test")
    try:
        result = run_nodes(engine, image, plan, python=variant.python, recorded=recorded,
                           vendor_options=vendors.device_options(variant.vendor) if plan.collective.accelerated
                           else None, status=lambda text: say(f"{plan.nodes}-node: {text}"))
    except EngineError as error:
        return NodesRecord(ok=False, nodes=plan.nodes, backend=plan.collective.backend, device=plan.collective.device,
                           result_ok=False, bandwidth_gbps=None, seconds=0.0, failures=(error.one_line(),))
    return result.brief()
