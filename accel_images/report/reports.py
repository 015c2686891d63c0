"""Run reports: JSON for machines, Markdown and a static HTML grid for people, JUnit XML for CI.

Every report is rendered from the same list of per-variant records (`accel_images.builder.outcome.outcome_record`,
plus `pushed_tags` and `digest` from a nightly run) and the same run metadata, by pure functions;
`write_reports` only renders all four and then moves each into place atomically, so a reader never
sees half a file and an interrupted run never leaves one report disagreeing with another. Error
text is arbitrary (it quotes build logs), so the HTML is autoescaped, the Markdown keeps it in code
fences, and the XML drops what XML cannot carry. Every renderer masks credentials in what it is given
(accel_images.credentials.hide_credentials), whichever caller built the records and the metadata.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field as dataclass_field, fields, is_dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeGuard
from collections.abc import Callable, Iterable, Mapping, Sequence

import jinja2

from accel_images import untrusted, vendors
from accel_images.credentials import hide_credentials
from accel_images.errors import InputError
from accel_images.formatting import inert_json
from accel_images.model.imagefacts import ImageFacts
from accel_images.versions import key as version_key, newest_first

SCHEMA = 1
STATUSES = ("built", "skipped", "failed")
NIGHTLY_STATUSES = ("built", "kept", "skipped", "failed")
"""A nightly's, in the order of its summary line: '1 published, 0 kept, 0 skipped, 0 failed'."""
REPORT_FILES = {"json": "report.json", "markdown": "summary.md", "html": "index.html", "junit": "junit.xml"}
TIMED_CHECKS = (("matmul_float32", "matmul fp32"), ("matmul_bfloat16", "matmul bf16"), ("mlp_training", "training"))
"""The smoke checks whose timings the reports quote, with their short names."""
META_LABELS = (("command", "Command"), ("started", "Started"), ("finished", "Finished"), ("duration", "Duration"),
               ("host", "Host"), ("registry", "Registry"), ("revision", "Git revision"))
CODE_LABELS = ("Command", "Git revision")
"""Metadata shown as code: what a reader copies."""
PARTIAL_NOTE = ("The run was interrupted: only the variants that finished are reported; "
                "the others were neither built nor checked.")
ERROR_EXCERPT_CHARS = 220
TEMPLATES_DIR = Path(__file__).parent / "templates"
PAGE_TEMPLATE = "report.html.j2"
"""The HTML page: inline CSS, no script, no external resource."""

_ANSI_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_NOT_IN_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


Renderer = Callable[[Sequence[Mapping[str, Any]], Mapping[str, Any]], str]


# ---- credentials -------------------------------------------------------------------------------

def without_credentials(value: Any) -> Any:
    """`value` with every string's URL userinfo masked, all the way down (mappings, lists, tuples, frozen
    dataclasses such as Changes): a command line, an error quoting a URL, yesterday's causes."""
    if isinstance(value, str):
        return hide_credentials(value)
    if isinstance(value, Mapping):
        return {key: without_credentials(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(without_credentials(item) for item in value)
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: without_credentials(getattr(value, f.name)) for f in fields(value)})
    return value


def masking(render: Renderer) -> Renderer:
    """A renderer that masks credentials in its records and metadata first: a report is written to disk,
    printed by `--json` and kept as a CI artifact, so no caller may be trusted to have masked them."""
    @functools.wraps(render)
    def masked(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
        return render(without_credentials(list(records)), without_credentials(meta))
    return masked


# ---- one record as every report shows it ------------------------------------------------------

@dataclass(frozen=True)
class Timing:
    label: str
    ms: float

    def text(self) -> str:
        return f"{self.label} {self.ms:.1f} ms"


@dataclass(frozen=True)
class NodesView:
    """The N-node smoke test of one image (the record's `smoke.nodes`), as every report says it."""

    count: str                      # '2'; '?' where the record does not say
    ok: bool
    backend: str
    device: str
    bandwidth: str                  # '0.58 GB/s', 'bandwidth unknown'
    seconds: float
    first_failure: str

    @property
    def line(self) -> str:
        """'2-node: passed, gloo on cpu, 0.58 GB/s' or '2-node: failed: <its first failure>'."""
        if self.ok:
            return f"{self.count}-node: passed, {self.backend} on {self.device}, {self.bandwidth}"
        return f"{self.count}-node: failed: {self.first_failure}"

    @property
    def name(self) -> str:
        """'2-node smoke': the test's name in JUnit and in a failure's cause."""
        return f"{self.count}-node smoke"

    @property
    def cause(self) -> str:
        """'2-node smoke failed: <its first failure>', as the smoke verdict's failure says it."""
        return f"{self.name} failed: {self.first_failure}"


def nodes_view(smoke: Mapping[str, Any] | None) -> NodesView | None:
    """The record's N-node smoke test; None where it did not run (or the record is not a mapping: it is read
    back from a previous report.json too, and never trusted)."""
    nodes = (smoke or {}).get("nodes")
    if not isinstance(nodes, Mapping):
        return None
    count, bandwidth, seconds = nodes.get("nodes"), nodes.get("bandwidth_gbps"), nodes.get("seconds")
    failures = [clean_text(" ".join(_text(f).split())) for f in _items(nodes.get("failures"))]
    return NodesView(count=str(int(count)) if _is_number(count) else "?", ok=nodes.get("ok") is True,
                     backend=clean_text(nodes.get("backend")) or "?", device=clean_text(nodes.get("device")) or "?",
                     bandwidth=f"{float(bandwidth):.2f} GB/s" if _is_number(bandwidth) else "bandwidth unknown",
                     seconds=float(seconds) if _is_number(seconds) else 0.0,
                     first_failure=next((f for f in failures if f), "failed without a message"))


@dataclass(frozen=True)
class VariantView:
    """A record's display values, derived once so the reports cannot disagree."""

    key: str
    vendor: str
    stack: str
    torch: str
    tag: str
    python: str
    os: str
    flavor: str
    status: str
    image: str
    size_gb: str
    build_time: str
    build_s: float
    smoke_verdict: str              # 'passed on cuda', 'failed on cpu', 'not run'
    smoke_ok: bool | None           # None: no smoke result
    ran_on: str | None
    cpu_fallback: bool
    timings: tuple[Timing, ...]
    error: str
    log: str
    smoke_failures: tuple[str, ...]
    pushed_tags: tuple[str, ...] | None   # None: not a nightly record
    digest: str
    supply: str = ""                # 'SBOM sha256:… (123 components) · provenance sha256:… signed'
    supply_ok: bool | None = None   # None: nothing attached or checked
    reason: str = ""                # why a nightly rebuilt it, or why it was skipped ('unchanged since ...')
    full_ref: str = ""              # registry/repository:tag a nightly published it under
    holds: str = ""                 # what the image's own torch said it holds ('torch 2.13.0+cpu · Python 3.11.2 · …')
    without: tuple[str, ...] = ()   # companions left out on purpose (--without-companion)
    packages: str = ""              # its package list's page, relative to the report (attestations/<tag>/...)
    nodes: NodesView | None = None  # the N-node smoke test (--smoke-nodes), where it ran

    @property
    def without_text(self) -> str:
        """'without torchvision (--without-companion)', or '' when nothing was left out."""
        return f"without {', '.join(self.without)} (--without-companion)" if self.without else ""

    @property
    def pull(self) -> str:
        """The command that fetches exactly what passed: by digest where the run knows it."""
        if not self.full_ref or self.status == "failed" or self.status == "interrupted":
            return ""
        repository = self.full_ref.rsplit(":", 1)[0]
        return f"docker pull {repository}@{self.digest}" if self.digest else f"docker pull {self.full_ref}"

    @property
    def label(self) -> str:
        """What tells variants apart inside one vendor/stack/torch cell."""
        return f"py{self.python} · {self.os} · {self.flavor}"

    @property
    def smoke(self) -> str:
        """The verdict, with CPU mode said: 'passed on cpu (CPU mode)'."""
        return self.smoke_verdict + (" (CPU mode)" if self.cpu_fallback else "")

    @property
    def facts(self) -> str:
        """'9.87 GB · built in 23 min 32 s', '2.10 GB · unchanged, not rebuilt'."""
        parts = [f"{self.size_gb} GB"] if self.size_gb != "–" else ["size unknown"]
        if self.status == "skipped":
            parts.append("unchanged, not rebuilt")
        elif self.build_time != "–":
            parts.append(f"built in {self.build_time}" if self.status in ("built", "kept")
                         else f"ran {self.build_time}")
        return " · ".join(parts)

    @property
    def unsaid_smoke_failures(self) -> tuple[str, ...]:
        """Smoke failures the error message does not already quote."""
        return tuple(f for f in self.smoke_failures if f not in self.error)

    def timings_text(self) -> str:
        return ", ".join(timing.text() for timing in self.timings)

    def error_excerpt(self) -> str:
        if len(self.error) <= ERROR_EXCERPT_CHARS:
            return self.error
        return self.error[:ERROR_EXCERPT_CHARS].rstrip() + "…"


def view(record: Mapping[str, Any]) -> VariantView:
    """The display values of one record; missing fields read as unknown, never as an error."""
    smoke = record.get("smoke") if isinstance(record.get("smoke"), Mapping) else None
    build_s = record.get("build_s")
    pushed = record.get("pushed_tags")
    return VariantView(
        key=_text(record.get("variant")) or f"{record.get('vendor')}/{record.get('tag')}",
        vendor=_text(record.get("vendor")) or "unknown", stack=_text(record.get("stack")),
        torch=_text(record.get("torch")) or "?", tag=_text(record.get("tag")),
        python=_text(record.get("python")) or "?", os=_text(record.get("os")) or "?",
        flavor=_text(record.get("flavor")) or "?", status=status_of(record),
        image=_text(record.get("image")), size_gb=size_gb(record.get("size")),
        build_time=duration_text(build_s), build_s=float(build_s) if _is_number(build_s) else 0.0,
        smoke_verdict=smoke_verdict(smoke, _text(record.get("smoke_earlier")) or None),
        smoke_ok=(True if record.get("smoke_earlier") else None) if smoke is None else smoke.get("ok") is True,
        ran_on=(_text(smoke.get("ran_on")) or None) if smoke else None,
        cpu_fallback=bool(smoke and smoke.get("cpu_fallback")), timings=timings(smoke),
        error=clean_text(record.get("error")), log=_text(record.get("log")),
        smoke_failures=tuple(clean_text(f) for f in _items((smoke or {}).get("failures"))),
        pushed_tags=tuple(_text(t) for t in pushed) if isinstance(pushed, (list, tuple)) else None,
        digest=_text(record.get("digest")),
        supply=supply_text(record), supply_ok=supply_ok(record),
        reason=clean_text(record.get("reason")), full_ref=_text(record.get("full_ref")),
        holds=holds_text(record.get("facts")),
        without=tuple(clean_text(n) for n in record.get("without_companions") or () if isinstance(n, str)),
        packages=_text(record.get("packages")), nodes=nodes_view(smoke),
    )


def status_of(record: Mapping[str, Any]) -> str:
    """The record's status, with a nightly's rebuild whose content was identical (`kept`: nothing pushed, the
    published image stays) told apart from a publication: the word the command's summary line uses too."""
    status = _text(record.get("status")) or "unknown"
    return "kept" if status == "built" and record.get("kept") is True else status


def holds_text(facts: Any) -> str:
    """A record's facts (ImageFacts.compact) as one line for people; '' when the record has none."""
    parsed = ImageFacts.from_compact(facts) if isinstance(facts, Mapping) else None
    return clean_text(parsed.summary()) if parsed is not None else ""


def supply_text(record: Mapping[str, Any]) -> str:
    """What the nightly attached to the digest, or what checking the registry's image found."""
    parts = []
    sbom, provenance = record.get("sbom"), record.get("provenance")
    if isinstance(sbom, Mapping):
        parts.append(f"SBOM {_text(sbom.get('manifest'))[:19]} ({_text(sbom.get('components'))} components)")
    if isinstance(provenance, Mapping):
        signed = "signed" if provenance.get("signed") else "unsigned"
        parts.append(f"provenance {_text(provenance.get('manifest'))[:19]} {signed}")
    verified = record.get("verified")
    if isinstance(verified, Mapping) and not parts:
        parts.append(f"provenance {_text(verified.get('provenance'))[:19]} verified" if verified.get("ok")
                     else f"NOT verified: {clean_text(verified.get('reason'))}")
    return " · ".join(parts)


def supply_ok(record: Mapping[str, Any]) -> bool | None:
    verified = record.get("verified")
    if isinstance(verified, Mapping):
        return verified.get("ok") is True
    provenance = record.get("provenance")
    return bool(provenance.get("signed")) if isinstance(provenance, Mapping) else None


def size_gb(size: Any) -> str:
    """Bytes as decimal gigabytes, the unit image sizes are quoted in; '–' when unknown."""
    return f"{size / 1e9:.2f}" if _is_number(size) else "–"


def duration_text(seconds: Any) -> str:
    """'42 s', '12 min 05 s', '1 h 02 min'; '–' when there was no build."""
    if not _is_number(seconds):
        return "–"
    total = round(float(seconds))
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{total // 60} min {total % 60:02d} s"
    return f"{total // 3600} h {total % 3600 // 60:02d} min"


def smoke_verdict(smoke: Mapping[str, Any] | None, earlier: str | None = None) -> str:
    """As the terminal's tables say it (accel_images.builder.outcome.smoke_text): a skipped image's earlier pass
    is 'passed earlier on cpu', never 'not run'."""
    if smoke is None:
        return f"passed earlier {earlier}" if earlier else "not run"
    where = _text(smoke.get("ran_on")) or "unknown device"
    return f"{'passed' if smoke.get('ok') is True else 'failed'} on {where}"


def timings(smoke: Mapping[str, Any] | None) -> tuple[Timing, ...]:
    checks = {c["name"]: c for c in _items((smoke or {}).get("checks"))
              if isinstance(c, Mapping) and isinstance(c.get("name"), str)}
    return tuple(Timing(label, float(checks[name]["ms"])) for name, label in TIMED_CHECKS
                 if name in checks and _is_number(checks[name].get("ms")))


def clean_text(value: Any) -> str:
    """Text as every report can carry it: no terminal colour codes, nothing XML 1.0 forbids."""
    return _NOT_IN_XML.sub("", _ANSI_SEQUENCE.sub("", _text(value)))


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _items(value: Any) -> Sequence[Any]:
    """A record's list, or none: a previous run's report.json may be damaged, and is read, never trusted."""
    return value if isinstance(value, (list, tuple)) else ()


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def vendor_rank(vendor: str) -> tuple[int, str]:
    return (vendors.rank(vendor), vendor)


def by_vendor(views: Iterable[VariantView]) -> dict[str, list[VariantView]]:
    """Views grouped by vendor, vendors in the project's order, records in the order given."""
    groups: dict[str, list[VariantView]] = {}
    for item in sorted(views, key=lambda v: vendor_rank(v.vendor)):
        groups.setdefault(item.vendor, []).append(item)
    return groups


# ---- run metadata and summary -----------------------------------------------------------------

def normalize_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready metadata: times as ISO 8601, a command line as one string, `partial` as a bool."""
    result: dict[str, Any] = {}
    for name, value in meta.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            value = value.astimezone(timezone.utc).isoformat(timespec="seconds")
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, Changes):
            continue  # the document's own `changes` section
        elif name == "command" and isinstance(value, (list, tuple)):
            value = shlex.join(str(part) for part in value)
        result[name] = value
    result["partial"] = bool(meta.get("partial"))
    return result


def run_duration(meta: Mapping[str, Any]) -> str | None:
    """Finished minus started, when both are ISO 8601 times."""
    try:
        started = datetime.fromisoformat(str(meta["started"]))
        finished = datetime.fromisoformat(str(meta["finished"]))
        return duration_text((finished - started).total_seconds())
    except (KeyError, ValueError, TypeError):
        return None


def meta_rows(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The metadata a person reads, labelled, in a fixed order."""
    known = dict(normalize_meta(meta))
    duration = run_duration(known)
    if duration:
        known["duration"] = duration
    return [(label, clean_text(known[name])) for name, label in META_LABELS if known.get(name) not in (None, "")]


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts per status (the three always present, a nightly's `kept` too) and the keys of the failed variants."""
    views = [view(r) for r in records]
    nightly = any("kept" in record for record in records)  # a nightly's records say whether each was kept
    counts = dict.fromkeys(NIGHTLY_STATUSES if nightly else STATUSES, 0)
    for item in views:
        counts[item.status] = counts.get(item.status, 0) + 1
    return {"total": len(views), "counts": counts, "failed": [v.key for v in views if v.status == "failed"]}


def verdict(summary: Mapping[str, Any]) -> str:
    """The answer to "is everything green?": the first thing a morning reader looks for."""
    failed = summary["counts"].get("failed", 0)
    if summary["total"] == 0:
        return "nothing was built"
    if not failed:
        return f"all green: {plural(summary['total'], 'variant')} ok"
    return f"{failed} of {plural(summary['total'], 'variant')} failed"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


@dataclass(frozen=True)
class FailureView:
    """Failed variants that share one cause, shown once (accel_images.builder.failure.group)."""

    cause: str
    items: tuple[VariantView, ...]
    anchor: str


def failure_views(views: Sequence[VariantView]) -> list[FailureView]:
    """The failed views grouped by their cause, the largest group first."""
    from accel_images.builder import failure
    failed = {v.key: v for v in views if v.status == "failed"}
    groups = failure.group(failure.Failure(v.key, v.error or "failed without a message", v.log or None)
                           for v in failed.values())
    return [FailureView(g.cause, tuple(failed[key] for key in g.keys), f"failure-{n}")
            for n, g in enumerate(groups, 1)]


def headline(summary: Mapping[str, Any], said: Callable[[str], str] = str) -> str:
    """'3 built, 1 skipped, 1 failed' (a nightly's: '3 published, ...'; other statuses, if any, after)."""
    return ", ".join(f"{count} {said(status)}" for status, count in summary["counts"].items())


def title(meta: Mapping[str, Any]) -> str:
    """'accel-images nightly report, 2026-12-03 02:00 UTC': which run, and of which morning."""
    started = normalize_meta(meta).get("started")
    try:
        when = datetime.fromisoformat(str(started)).astimezone(timezone.utc).strftime(", %Y-%m-%d %H:%M UTC")
    except ValueError:
        when = ""
    kind = _text(meta.get("kind")) or "run"
    return f"accel-images {kind} report{when}" + (" (PARTIAL)" if meta.get("partial") else "")


# ---- what changed since the previous run --------------------------------------------------------

@dataclass(frozen=True)
class Changes:
    """This run against the previous one: the second morning question, "what changed since yesterday?"."""

    previous: str | None                  # when the previous run started (None: no previous report)
    new_failures: tuple[str, ...] = ()    # failing now, not failing then
    still_failing: tuple[str, ...] = ()   # failing in both, for the same cause
    fixed: tuple[str, ...] = ()           # failing then, not now
    last_good: Mapping[str, Mapping[str, str]] = dataclass_field(default_factory=dict)
    """Per failing variant: the last run it passed in and what it published then (carried run to run)."""
    other_cause: Mapping[str, str] = dataclass_field(default_factory=dict)
    """Failing in both runs, for another cause now: the variant -> the cause it failed for before. Not
    "still failing": a fix of yesterday's cause may have worked, and today's is news."""

    def record(self) -> dict[str, Any]:
        return {"previous": self.previous, "new_failures": list(self.new_failures),
                "still_failing": list(self.still_failing), "fixed": list(self.fixed),
                "other_cause": dict(self.other_cause),
                "last_good": {key: dict(value) for key, value in self.last_good.items()}}


def read_previous(directory: Path) -> dict[str, Any] | None:
    """The report.json of the previous run (the `<kind>-latest` link before this run moves it); None
    when there is none or it cannot be read: a first run, or a damaged file, has nothing to compare."""
    try:
        document = untrusted.loads((directory / REPORT_FILES["json"]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) and isinstance(document.get("variants"), list) else None


def compare(records: Sequence[Mapping[str, Any]], previous: Mapping[str, Any] | None) -> Changes:
    """New failures, those still failing for the same cause, those failing for another, those fixed,
    and each failure's last good run."""
    if previous is None:
        return Changes(None)
    before = {view(r).key: r for r in _items(previous.get("variants")) if isinstance(r, Mapping)}
    meta, changes = _mapping(previous.get("meta")), _mapping(previous.get("changes"))
    carried = _mapping(changes.get("last_good"))
    new: list[str] = []
    still: list[str] = []
    fixed: list[str] = []
    other: dict[str, str] = {}
    last_good: dict[str, dict[str, str]] = {}
    for record in records:
        now, then = view(record), before.get(view(record).key)
        was_failing = then is not None and view(then).status == "failed"
        if now.status == "failed":
            if not was_failing:
                new.append(now.key)
            elif then is not None and view(then).error and view(then).error != now.error:
                other[now.key] = view(then).error   # a cause not recorded then is no evidence of another one
            else:
                still.append(now.key)
            good = _good_run(then, meta) if then is not None and not was_failing else carried.get(now.key)
            if isinstance(good, Mapping):
                last_good[now.key] = {k: _text(v) for k, v in good.items()}
        elif was_failing:
            fixed.append(now.key)
    return Changes(_text(meta.get("started")) or "unknown", tuple(new), tuple(still), tuple(fixed), last_good, other)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _good_run(record: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, str]:
    item = view(record)
    return {"run": _text(meta.get("started")), "tag": item.tag, "ref": item.full_ref or item.image,
            "digest": item.digest}


def changes_of(meta: Mapping[str, Any]) -> Changes | None:
    """The comparison the caller put in `meta["changes"]` (write_reports does), if any."""
    value = meta.get("changes")
    return value if isinstance(value, Changes) else None


# ---- JSON -------------------------------------------------------------------------------------

def build_document(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, Any]:
    changes = changes_of(meta)
    return {"schema": SCHEMA, "meta": normalize_meta(meta), "summary": summarize(records),
            "changes": changes.record() if changes else None, "variants": [dict(r) for r in records]}


@masking
def render_json(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """report.json: readable in any script, inert on a terminal, where `--json` prints it (formatting.inert_json)."""
    return inert_json(json.dumps(build_document(records, meta), indent=2, ensure_ascii=False, default=str)) + "\n"


# ---- Markdown ---------------------------------------------------------------------------------

@masking
def render_markdown(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    views = [view(r) for r in records]
    summary = summarize(records)
    lines = [f"# {title(meta)}", ""]
    if meta.get("partial"):
        lines += [f"> **PARTIAL REPORT.** {PARTIAL_NOTE}", ""]
    said = status_words(meta, views)
    lines += [f"**{verdict(summary)}** ({headline(summary, said)})", ""]
    lines += [f"- {label}: {_md_code(value) if label in CODE_LABELS else _md_cell(value)}"
              for label, value in meta_rows(meta)]
    changes = changes_of(meta)
    lines += ["", "## Since the previous run", ""] + [f"- {_md_cell(line)}" for line in change_lines(changes)]
    for vendor, items in by_vendor(views).items():
        lines += ["", f"## {vendors.title(vendor)}", ""] + _md_table(items, said)
    held = [item for item in views if item.holds or item.without]
    if held:
        lines += ["", "## What each image holds", ""] + [
            f"- {_md_code(item.key)}: " + _md_cell(" · ".join(part for part in (item.holds, item.without_text) if part))
            for item in held]
    across = [item for item in views if item.nodes is not None]
    if across:
        lines += ["", "## Across nodes", ""] + [
            f"- {_md_code(item.key)}: {_md_cell(item.nodes.line)}" for item in across if item.nodes is not None]
    pulls = [item for item in views if item.pull]
    if pulls:
        lines += ["", "## What to pull", ""] + [f"- {_md_code(item.key)}: {_md_code(item.pull)}" for item in pulls]
    lines += ["", "## Failures", ""]
    groups = failure_views(views)
    for group in groups:
        lines += _md_failure(group, changes)
    if not groups:
        lines.append("None.")
    return "\n".join(lines).rstrip() + "\n"


def _md_table(items: list[VariantView], said: Callable[[str], str] = str) -> list[str]:
    nightly = any(item.pushed_tags is not None for item in items)
    header = ["Tag", "Status", "Size (GB)", "Build time", "Smoke", "Smoke timings"] + (
        ["Pushed", "SBOM and provenance"] if nightly else [])
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for item in items:
        cells = [_md_code(item.tag), said(item.status), item.size_gb, item.build_time, item.smoke,
                 item.timings_text() or "–"]
        if nightly:
            cells.append(f"{len(item.pushed_tags)} tags" if item.pushed_tags else "–")
            cells.append(item.supply or "–")
        rows.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return rows


def _md_failure(group: FailureView, changes: Changes | None = None) -> list[str]:
    """One cause, once: `### 36 variants` (or the one variant's key), the cause, then each log."""
    first = group.items[0]
    heading = _md_code(first.key) if len(group.items) == 1 else plural(len(group.items), "variant")
    lines = [f"### {heading}", ""] + _md_fenced(group.cause) + [""]
    if not any(item.log for item in group.items):
        lines += [f"No build log: {'they' if len(group.items) > 1 else 'it'} failed before a build began.", ""]
    shown = trend(changes)
    for item in group.items:
        said = "; ".join(filter(None, (shown.get(item.key), f"log: {_md_code(item.log)}" if item.log else "")))
        if len(group.items) > 1:
            lines.append(f"- {_md_code(item.key)}" + (f": {said}" if said else ""))
        elif said:
            lines.append(said[0].upper() + said[1:] + ".")
        lines += [f"  - {_md_code(failure)}" for failure in item.unsaid_smoke_failures]
    return lines + [""]


def _md_fenced(text: str) -> list[str]:
    """A code block whose fence is longer than any backtick run inside, so text cannot end it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", text, fence]


def _md_code(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{ticks}{padded}{ticks}"


def _md_cell(text: str) -> str:
    """Table-safe: one line, pipes escaped, no raw HTML."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


# ---- HTML -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GridCell:
    torch: str
    items: tuple[VariantView, ...]


@dataclass(frozen=True)
class GridRow:
    vendor: str
    stack: str
    cells: tuple[GridCell, ...]
    first_of_vendor: bool

    @property
    def vendor_name(self) -> str:
        return vendors.title(self.vendor)

    @property
    def stack_label(self) -> str:
        """'CUDA 13.2', '' for CPU."""
        return vendors.stack_label(self.vendor, self.stack)


@dataclass(frozen=True)
class Grid:
    """Rows are vendor + stack, columns torch versions, newest first; cells hold the variants."""

    torches: tuple[str, ...]
    rows: tuple[GridRow, ...]


def grid(views: Sequence[VariantView]) -> Grid:
    torches = tuple(sorted({v.torch for v in views}, key=version_key, reverse=True))
    row_keys = sorted({(v.vendor, v.stack) for v in views},
                      key=lambda vs: (vendor_rank(vs[0]), newest_first(vs[1])))
    rows = tuple(GridRow(vendor, stack, tuple(
        GridCell(torch, tuple(v for v in views if (v.vendor, v.stack, v.torch) == (vendor, stack, torch)))
        for torch in torches), first_of_vendor=n == 0 or row_keys[n - 1][0] != vendor)
        for n, (vendor, stack) in enumerate(row_keys))
    return Grid(torches, rows)


@functools.lru_cache(maxsize=1)
def _page_template() -> jinja2.Template:
    """The page template, compiled once; autoescaped, so no record text can become markup.

    It ships inside the package (found next to this module, so an installed wheel has it too).
    """
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True,
                                     undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return environment.get_template(PAGE_TEMPLATE)


@masking
def render_html(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """One static page: inline CSS, no script, no external resource."""
    views = [view(r) for r in records]
    groups = failure_views(views)
    summary = summarize(records)
    return _page_template().render(
        title=title(meta), partial=bool(meta.get("partial")), partial_note=PARTIAL_NOTE,
        summary=summary, verdict=verdict(summary), meta_rows=meta_rows(meta), grid=grid(views), groups=groups,
        anchors={item.key: group.anchor for group in groups for item in group.items}, files=REPORT_FILES,
        sizes={item.key: len(group.items) for group in groups for item in group.items},
        schema=SCHEMA, plural=plural, code_labels=CODE_LABELS, changes=changes_of(meta),
        change_lines=change_lines(changes_of(meta)), trend=trend(changes_of(meta)), group_trend=group_trend,
        pulls=[item for item in views if item.pull], nightly=is_nightly(meta, views), said=status_words(meta, views),
        log_href=log_href,
    )


def is_nightly(meta: Mapping[str, Any], views: Sequence[VariantView]) -> bool:
    """A run that publishes (its records carry what was pushed), as opposed to a local `build`."""
    return meta.get("kind") == "nightly" or any(item.pushed_tags is not None for item in views)


def status_words(meta: Mapping[str, Any], views: Sequence[VariantView]) -> Callable[[str], str]:
    """The word for a status, the same in every place of one report and as the command said it: a
    nightly's image that was built, tested and pushed is "published" (its summary line's word), a
    build's is "built"."""
    words = NIGHTLY_WORDS if is_nightly(meta, views) else {}
    return lambda status: words.get(status, status)


NIGHTLY_WORDS = {"built": "published"}


def log_href(log: str) -> str:
    """A link to a build log: a file: URL for an absolute path (the report and the logs share a state
    directory), the path itself otherwise."""
    path = Path(log)
    return path.as_uri() if path.is_absolute() else log


def change_lines(changes: Changes | None) -> list[str]:
    """What changed since the previous run, one line per kind of change: the HTML and Markdown say the same."""
    if changes is None or changes.previous is None:
        return ["No previous report to compare with: this is the first run here."]
    lines = [f"{count}: {_some(keys)}" for keys, count in (
        (changes.new_failures, plural(len(changes.new_failures), "new failure")),
        (changes.still_failing, f"{len(changes.still_failing)} still failing, for the same cause"),
        (tuple(changes.other_cause), f"{len(changes.other_cause)} failing for another cause than before"),
        (changes.fixed, f"{len(changes.fixed)} fixed")) if keys]
    return lines or ["Nothing changed: the same variants pass as in the previous run."]


def _some(keys: Sequence[str], shown: int = 5) -> str:
    """'a, b, c' or 'a, b, c, d, e and 31 more (under Failures)': a line stays a line."""
    if len(keys) <= shown:
        return ", ".join(keys)
    return f"{', '.join(keys[:shown])} and {len(keys) - shown} more (under Failures)"


def trend(changes: Changes | None) -> dict[str, str]:
    """Per failing variant: 'new failure' or 'still failing', with its last good run when known."""
    if changes is None:
        return {}
    shown = {key: "new failure" for key in changes.new_failures}
    shown |= {key: "still failing" for key in changes.still_failing}
    shown |= {key: f"failing for another cause ({_excerpt(cause)})" for key, cause in changes.other_cause.items()}
    for key, good in changes.last_good.items():
        shown[key] = f"{shown.get(key, 'failing')}; last good: {last_good_text(good)}"
    return shown


def _excerpt(cause: str, chars: int = 80) -> str:
    """The start of a cause, for a line that also says something else: 'before: step 17/32 (…)…'."""
    return "before: " + (cause if len(cause) <= chars else cause[:chars].rstrip() + "…")


def last_good_text(good: Mapping[str, str]) -> str:
    """'the run of 2026-12-01 02:00 UTC, sha256:0a1b2c3d4e5f…': when it last passed, and what it published then."""
    run = good.get("run", "")[:16].replace("T", " ")
    published = f", {good['digest'][:19]}…" if good.get("digest") else ""
    return f"the run of {run} UTC{published}" if run else "unknown"


def group_trend(group: FailureView, shown: Mapping[str, str]) -> str:
    """The trend every variant of a group shares ('still failing; last good: the run of ...' without the
    digests, which differ), said once in the group's heading; '' when they differ."""
    notes = {shown.get(item.key, "").split(", sha256:")[0] for item in group.items}
    return notes.pop() if len(notes) == 1 and len(group.items) > 1 else ""


# ---- JUnit XML --------------------------------------------------------------------------------

@masking
def render_junit(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """testsuites / one testsuite per vendor / one testcase per variant; a partial run adds a failing case."""
    known = normalize_meta(meta)
    root = ET.Element("testsuites", name=title(meta))
    for vendor, items in by_vendor(view(r) for r in records).items():
        suite = _suite(root, vendor, known)
        for item in items:
            _testcase(suite, item)
            if item.nodes is not None:
                _nodes_testcase(suite, item, item.nodes)
    if known["partial"]:
        suite = _suite(root, "run", known)
        case = ET.SubElement(suite, "testcase", classname="accel-images.run", name="complete", time="0")
        ET.SubElement(case, "failure", message="interrupted: partial report", type="partial").text = PARTIAL_NOTE
    for suite in root:
        _count(suite)
    _count(root)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _suite(root: ET.Element, name: str, meta: Mapping[str, Any]) -> ET.Element:
    suite = ET.SubElement(root, "testsuite", name=name)
    for attribute, field in (("timestamp", "started"), ("hostname", "host")):
        if meta.get(field):
            suite.set(attribute, clean_text(meta[field]))
    properties = ET.SubElement(suite, "properties")
    for field in ("command", "registry", "revision", "partial"):
        if field in meta:
            value = meta[field]
            ET.SubElement(properties, "property", name=field,
                          value=str(value).lower() if isinstance(value, bool) else clean_text(value))
    return suite


def _testcase(suite: ET.Element, item: VariantView) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"accel-images.{item.vendor}",
                         name=clean_text(item.tag or item.key), time=f"{item.build_s:.3f}")
    if item.status == "failed":
        failure = ET.SubElement(case, "failure", message=item.error or "failed", type="failed")
        failure.text = "\n".join([item.error, f"log: {item.log or 'none'}", f"smoke: {item.smoke}",
                                  *item.smoke_failures])
    elif item.status == "skipped":
        ET.SubElement(case, "skipped", message="unchanged image: its fingerprint matches, not rebuilt")
    out = [f"image: {item.image}", f"size: {item.size_gb} GB", f"smoke: {item.smoke}"]
    out += [f"holds: {item.holds}"] if item.holds else []
    out += [item.without_text] if item.without else []
    out += [f"timings: {item.timings_text()}"] if item.timings else []
    out += [f"nodes: {item.nodes.line}"] if item.nodes is not None else []
    out += [f"pushed: {' '.join(item.pushed_tags)}"] if item.pushed_tags else []
    out += [f"log: {item.log}"] if item.log else []
    ET.SubElement(case, "system-out").text = clean_text("\n".join(out))


def _nodes_testcase(suite: ET.Element, item: VariantView, nodes: NodesView) -> None:
    """The image's N-node smoke test, a testcase of its own beside the image's: '<tag> [2-node smoke]'."""
    case = ET.SubElement(suite, "testcase", classname=f"accel-images.{item.vendor}",
                         name=clean_text(f"{item.tag or item.key} [{nodes.name}]"), time=f"{nodes.seconds:.3f}")
    if not nodes.ok:
        ET.SubElement(case, "failure", message=nodes.cause, type="failed").text = nodes.cause
    ET.SubElement(case, "system-out").text = clean_text(f"image: {item.image}\n{nodes.line}")


def _count(element: ET.Element) -> None:
    """tests/failures/skipped/errors/time attributes from the testcases below."""
    cases = list(element.iter("testcase"))
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    element.set("errors", "0")
    element.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    element.set("time", f"{sum(float(c.get('time', '0')) for c in cases):.3f}")


# ---- writing ----------------------------------------------------------------------------------

RENDERERS = {"json": render_json, "markdown": render_markdown, "html": render_html, "junit": render_junit}


def render_all(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, str]:
    """Every report's text, keyed like REPORT_FILES."""
    return {kind: RENDERERS[kind](records, meta) for kind in REPORT_FILES}


def write_reports(records: Sequence[Mapping[str, Any]], out_dir: Path, meta: Mapping[str, Any]) -> dict[str, Path]:
    """Render all four reports first, then move each into `out_dir`; returns their paths by kind."""
    texts = render_all(records, meta)
    out_dir = Path(out_dir)
    paths = {}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for kind, text in texts.items():
            paths[kind] = out_dir / REPORT_FILES[kind]
            atomic_write(paths[kind], text)
    except OSError as err:
        raise InputError(f"cannot write the reports: {err.strerror}", file=str(err.filename or out_dir),
                         hint="the report directory must be a writable directory") from None
    return paths


def atomic_write(path: Path, text: str) -> None:
    """Write beside the target, then rename over it: readers see the old file or the new one."""
    # Not opened in the with below: its name is needed after it closes, for the rename or the cleanup.
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",  # noqa: SIM115
                                         suffix=".tmp", delete=False)
    try:
        with handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, 0o644)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
