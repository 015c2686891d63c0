"""What every benchmark shares: repeated timing, medians, ratios, the machine, the report.

A figure is a median over repeated runs; its baseline is measured in the same invocation,
interleaved where possible, so both see the same machine load and the ratio stays meaningful
on a noisy host.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
WHEELHOUSE = Path("/var/cache/accel-images/wheelhouse")
# The local wheelhouse (.ci/setup-host.sh) holds torch +cpu and its dependencies, no companion wheels:
# builds from it leave both companions out (2.15's torchaudio 2.11.1 included).
WITHOUT_COMPANION_ARGS = ("--without-companion", "torchvision", "--without-companion", "torchaudio")
WHEELHOUSE_ARGS = ("--pip-find-links", str(WHEELHOUSE), *WITHOUT_COMPANION_ARGS)


@dataclass(frozen=True)
class Series:
    """Repeated measurements of one quantity."""

    label: str
    values: tuple[float, ...]
    unit: str = "s"

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class Row:
    """One line of the results table: a measured series, its baseline and the target."""

    bench: str
    what: str
    measured: Series
    baseline: Series | None = None
    ratio: float | None = None          # see ratio_meaning
    ratio_meaning: str = ""
    target: str = ""
    met: bool | None = None             # None: no target for this row
    note: str = ""


@dataclass
class BenchResult:
    """What one benchmark produced: rows, the commands it ran, free-form notes."""

    name: str
    rows: list[Row] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None


def speedup(baseline: Series, measured: Series) -> float:
    """How many times faster `measured` is than `baseline` (medians)."""
    return baseline.median / measured.median if measured.median else float("inf")


def time_once(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def repeat(label: str, action: Callable[[], object], times: int) -> Series:
    return Series(label, tuple(time_once(action) for _ in range(times)))


def interleaved(first: tuple[str, Callable[[], object]], second: tuple[str, Callable[[], object]],
                times: int) -> tuple[Series, Series]:
    """Time two actions alternately, so a burst of load on the host hits both alike."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(times):
        a.append(time_once(first[1]))
        b.append(time_once(second[1]))
    return Series(first[0], tuple(a)), Series(second[0], tuple(b))


def alternating(actions: Sequence[tuple[str, Callable[[], object]]], times: int) -> list[Series]:
    """Time any number of actions in turn, round after round, so load bursts hit each alike."""
    values: list[list[float]] = [[] for _ in actions]
    for _ in range(times):
        for index, (_, action) in enumerate(actions):
            values[index].append(time_once(action))
    return [Series(label, tuple(v)) for (label, _), v in zip(actions, values, strict=True)]


def shown(command: Sequence[str]) -> str:
    """A command as a user would type it, paths relative to the repository where possible."""
    words = [str(w) for w in command]
    if words and words[0] == PYTHON:
        words[0] = ".venv/bin/python"
    return shlex.join(w.replace(str(ROOT) + "/", "") for w in words)


def run_checked(command: Sequence[str], *, timeout_s: float = 1800, cwd: Path = ROOT,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command; a non-zero exit is an error carrying its output tail."""
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout_s, env=env)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-2000:]
        raise RuntimeError(f"{shown(command)} exited {result.returncode}:\n{tail}")
    return result


# ---- the machine -------------------------------------------------------------------------------

def machine() -> dict[str, str]:
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "memory": _memory(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "docker": _docker_version(),
        "load average at start": load_average(),
    }


def load_average() -> str:
    """1, 5 and 15 minute load averages: other work on the host inflates every timing."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _docker_version() -> str:
    try:
        result = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    return result.stdout.strip() if result.returncode == 0 else "unavailable (engine not reachable)"


# ---- output ------------------------------------------------------------------------------------

def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "B":
        return f"{value / 1e6:,.1f} MB"
    if unit == "MiB":
        return f"{value:,.1f} MiB"
    if unit in ("images", "count"):
        return f"{value:g}"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}".strip()
    if abs(value) >= 1:
        return f"{value:.2f} {unit}".strip()
    return f"{value:.3f} {unit}".strip()


def table_rows(results: Sequence[BenchResult]) -> list[list[str]]:
    rows = []
    for result in results:
        if result.skipped or result.error:
            rows.append([result.name, "SKIPPED" if result.skipped else "ERROR", "-", "-", "-", "-", "-", "-", "-",
                         (result.skipped or result.error or "").splitlines()[0][:120]])
            continue
        for row in result.rows:
            m, b = row.measured, row.baseline
            rows.append([
                row.bench, row.what, str(len(m.values)), number(m.median, m.unit),
                f"{number(m.low, m.unit)} / {number(m.high, m.unit)}",
                f"{b.label}: {number(b.median, b.unit)}" if b else "-",
                f"{row.ratio:.2f}x {row.ratio_meaning}".strip() if row.ratio is not None else "-",
                row.target or "-",
                {True: "met", False: "NOT met", None: "-"}[row.met],
                row.note,
            ])
    return rows


HEADERS = ["bench", "what", "N", "median", "min / max", "baseline (median)", "ratio", "target", "verdict", "note"]


def markdown(results: Sequence[BenchResult], *, quick: bool, command: str, started: datetime,
             host: dict[str, str]) -> str:
    lines = ["# accel-images benchmarks", "",
             f"Generated by `{command}` on {started.strftime('%Y-%m-%d %H:%M UTC')}"
             + (" in QUICK mode (tiny sizes, single runs: these numbers only show the scripts run)." if quick else "."),
             "Each figure is the median over N runs; each baseline was measured in the same invocation,",
             "alternating with the measured runs where both are timings. Regenerate with `make bench`.", "",
             "## Machine", ""]
    lines += [f"- {key}: {value}" for key, value in host.items()]
    lines += ["", "## Results", "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table_rows(results)]
    for result in results:
        lines += ["", f"## {result.name}", ""]
        if result.skipped:
            lines.append(f"Skipped: {result.skipped}")
        if result.error:
            lines += ["Failed:", "", "```", result.error[-3000:], "```"]
        lines += [f"- {note}" for note in result.notes]
        if result.commands:
            lines += ["", "Commands:", "", "```"] + result.commands + ["```"]
    return "\n".join(lines) + "\n"


def as_json(results: Sequence[BenchResult], *, quick: bool, host: dict[str, str], started: datetime) -> dict:
    return {"quick": quick, "started": started.isoformat(), "machine": host,
            "results": [asdict(r) for r in results]}


def result_from_json(data: dict) -> BenchResult:
    """A BenchResult as_json wrote (results.json), to carry it into a report that did not re-run it."""
    def series(value: dict | None) -> Series | None:
        return None if value is None else Series(value["label"], tuple(value["values"]), value["unit"])
    rows = [Row(**{**row, "measured": series(row["measured"]), "baseline": series(row["baseline"])})
            for row in data["rows"]]
    return BenchResult(data["name"], rows, list(data["commands"]), list(data["notes"]), data["skipped"],
                       data["error"])


def now() -> datetime:
    return datetime.now(timezone.utc)
