"""What happened to one variant in a run, as a value, a progress line and a report record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping

from accel_images.formatting import human_size
from accel_images.model.imagefacts import ImageFacts
from accel_images.smoke.judge import SmokeResult
from accel_images.model.variant import Variant


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
    """The short cause of a failure (accel_images.builder.failure): never the variant's name, never a log."""
    log_path: Path | None = None
    notes: tuple[str, ...] = ()      # what the render left out and why (--without-companion torchvision)
    exit_code: int = 0
    """The exit code of the failure (1 a build or smoke test, 4 a registry out of reach)."""
    earlier_smoke: str | None = None
    """An unchanged image not tested again: where its recorded pass was ('cpu', 'the run of 2026-12-01'),
    so every table and report says "passed earlier" for it instead of "not run"."""
    without_companions: tuple[str, ...] = ()
    """Companions the user left out (--without-companion): the image lacks them on purpose, and says so."""
    facts: ImageFacts | None = None
    """What the image's own torch said it holds at build time (/opt/accel-images/facts.json), as read back
    after the build and checked against the knowledge base; None where it was not read."""

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def smoke_text(outcome: Outcome) -> str:
    """The smoke column everywhere: 'passed on cpu', 'passed earlier on cpu', 'failed on cuda: ...', 'not run';
    with the N-node test's line after a pass ('passed on cpu; 2-node: passed, gloo on cpu, 0.58 GB/s'). A failed
    N-node test is one of the failures already."""
    if outcome.smoke is not None:
        nodes = outcome.smoke.nodes
        said = outcome.smoke.summary().removeprefix("smoke ")
        return f"{said}; {nodes.text()}" if nodes is not None and nodes.ok else said
    if outcome.earlier_smoke is not None:
        return f"passed earlier {outcome.earlier_smoke}"
    return "not run"


def describe(outcome: Outcome) -> str:
    """A short status line for progress displays."""
    if outcome.status == "failed":
        return f"FAILED: {outcome.error}"
    smoke = f", smoke {smoke_text(outcome)}" if outcome.smoke is not None or outcome.earlier_smoke else ""
    size = f", {human_size(outcome.size)}" if outcome.size else ""
    verb = "unchanged, skipped" if outcome.status == "skipped" else f"built in {outcome.build_s:.0f} s"
    return verb + size + smoke


def outcome_record(outcome: Outcome) -> Mapping[str, object]:
    """JSON-ready view of an outcome, for reports."""
    smoke = outcome.smoke
    return {
        "variant": outcome.variant.key, "vendor": outcome.variant.vendor, "tag": outcome.variant.tag,
        "torch": outcome.variant.torch, "stack": outcome.variant.stack, "python": outcome.variant.python,
        "os": outcome.variant.os, "flavor": outcome.variant.flavor, "platform": outcome.variant.platform,
        "status": outcome.status, "image": outcome.image, "image_id": outcome.image_id, "size": outcome.size,
        "build_s": outcome.build_s, "fingerprint": outcome.fingerprint, "base_digest": outcome.base_digest,
        "error": outcome.error, "log": str(outcome.log_path) if outcome.log_path else None,
        "notes": list(outcome.notes), "smoke_earlier": outcome.earlier_smoke,
        "facts": outcome.facts.compact() if outcome.facts is not None else None,
        "without_companions": list(outcome.without_companions),
        "smoke": None if smoke is None else {
            "ok": smoke.ok, "ran_on": smoke.ran_on, "cpu_fallback": smoke.cpu_fallback,
            "failures": list(smoke.failures),
            "checks": [{"name": c.name, "ok": c.ok, "ms": c.ms, "detail": c.detail} for c in smoke.checks],
            "nodes": smoke.nodes.record() if smoke.nodes is not None else None},
    }
