"""benchmarks/run.py runs and reports in the promised shape (quick mode; no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import BenchResult, Row, Series, table_rows  # noqa: E402

ROW_KEYS = {"bench", "what", "measured", "baseline", "ratio", "ratio_meaning", "target", "met", "note"}


def run_quick(out: Path, *only: str, timeout_s: int = 900) -> dict:
    args = [a for name in only for a in ("--only", name)]
    result = subprocess.run([sys.executable, "benchmarks/run.py", "--quick", "--out", str(out), *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / "RESULTS.md").is_file()
    return json.loads((out / "results.json").read_text())


def check_rows(result: dict) -> None:
    assert result["error"] is None, result["error"]
    assert result["rows"], f"{result['name']} produced no rows"
    for row in result["rows"]:
        assert set(row) == ROW_KEYS
        measured = row["measured"]
        assert measured["values"], row
        assert min(measured["values"]) <= sorted(measured["values"])[len(measured["values"]) // 2] <= max(
            measured["values"])
        if row["baseline"] is not None:
            assert row["baseline"]["values"]
    assert result["commands"], f"{result['name']} lists no commands"


def test_quick_scale_run_reports_every_size_with_stages_and_memory(tmp_path: Path) -> None:
    report = run_quick(tmp_path, "scale")
    assert report["quick"] is True
    assert {"cpu", "cores", "memory", "docker", "load average at start", "load average at end"} <= set(report["machine"])
    [scale] = report["results"]
    assert scale["name"] == "scale"
    check_rows(scale)
    timed = [r for r in scale["rows"] if r["what"].startswith("validate+expand+render+check")]
    memory = [r for r in scale["rows"] if r["what"].startswith("peak memory")]
    assert len(timed) == len(memory) == 2
    assert timed[0]["baseline"] is None and timed[1]["baseline"] is not None
    assert timed[1]["ratio"] is not None and timed[1]["met"] in (True, False)
    assert all("render" in r["note"] and "peak RSS" in r["note"] for r in timed)
    text = (tmp_path / "RESULTS.md").read_text()
    assert "QUICK mode" in text and "## Machine" in text and "| bench | what | N | median" in text


def test_quick_startup_run_times_each_command_against_the_flat_cli(tmp_path: Path) -> None:
    [startup] = run_quick(tmp_path, "startup")["results"]
    check_rows(startup)
    whats = [row["what"] for row in startup["rows"]]
    for command in ("--help", "list", "compat torch==2.14 cuda==13.0"):
        assert sum(f"`accel-images {command}` start-up" in what for what in whats) == 2  # cached and not
    for row in startup["rows"]:
        assert row["baseline"]["label"].endswith("(flat cli.py)") and row["ratio"] > 0
        cached = "bytecode cached" in row["what"]
        assert (row["target"], row["met"] in (True, False)) == (("<= 0.12 s", True) if cached else ("report only", False))


def test_quick_unit_suite_times_two_workers_against_one(tmp_path: Path) -> None:
    [suite] = run_quick(tmp_path, "unit_suite")["results"]
    check_rows(suite)
    [row] = suite["rows"]
    assert row["measured"]["label"] == "two workers" and row["baseline"]["label"] == "one worker"
    assert row["ratio"] > 0 and row["target"] == "report only"   # quick mode times one file, not the suite
    assert any(note.startswith("Load average before the timed runs") for note in suite["notes"])


def test_quick_guard_facts_times_the_guard_with_its_facts_file_against_without(tmp_path: Path) -> None:
    [guard] = run_quick(tmp_path, "guard_facts")["results"]
    check_rows(guard)
    [row] = guard["rows"]
    assert (row["measured"]["label"], row["baseline"]["label"]) == ("facts file read", "no facts file")
    assert row["ratio"] > 0 and row["note"].endswith("ms a container start")


def test_a_partial_full_run_keeps_the_other_benchmarks_results(tmp_path: Path) -> None:
    from benchmarks import run
    earlier = BenchResult("scale", rows=[Row("scale", "x", Series("a", (1.0,)))], commands=["c"])
    (tmp_path / "results.json").write_text(json.dumps(
        {"quick": False, "started": "2026-12-01T10:00:00+00:00", "results": [
            {"name": "scale", "rows": [{**row.__dict__, "measured": row.measured.__dict__, "baseline": None}
                                       for row in earlier.rows],
             "commands": ["c"], "notes": [], "skipped": None, "error": None}]}))
    fresh = BenchResult("startup", rows=[Row("startup", "y", Series("b", (2.0,)))])
    merged = run.with_earlier_results([fresh], tmp_path / "results.json")
    assert [r.name for r in merged] == ["startup", "scale"]
    assert merged[1].rows == earlier.rows and merged[1].notes[0].startswith("Carried over from the run of 2026-12-01")


def test_quick_mode_never_touches_the_checked_in_results(tmp_path: Path) -> None:
    results = ROOT / "benchmarks" / "RESULTS.md"
    before = results.read_bytes() if results.exists() else None
    run_quick(tmp_path, "scale")
    assert (results.read_bytes() if results.exists() else None) == before


def test_table_shows_skipped_and_failed_benchmarks_with_their_reason() -> None:
    rows = table_rows([BenchResult("noop", skipped="docker engine not reachable"),
                       BenchResult("scale", error="boom\ntraceback"),
                       BenchResult("parallel", rows=[Row("parallel", "x", Series("a", (3.0, 1.0, 2.0)),
                                                         Series("b", (4.0,)), 2.0, "faster", "t", True)])])
    assert rows[0][1] == "SKIPPED" and "not reachable" in rows[0][-1]
    assert rows[1][1] == "ERROR" and rows[1][-1] == "boom"
    assert rows[2][3] == "2.00 s" and rows[2][8] == "met" and rows[2][6] == "2.00x faster"


def test_the_ratio_without_start_up_is_none_where_start_up_alone_took_longer() -> None:
    from benchmarks.engine_benches import without_startup
    loop, startup = Series("loop", (4.0,)), Series("start-up", (1.0,))
    assert without_startup(Series("ours", (1.5,)), loop, startup) == "8.0x without start-up"
    assert without_startup(Series("ours", (0.95,)), loop, startup).startswith("start-up alone was no faster")


def _engine_problem() -> str | None:
    from benchmarks.engine_benches import engine_reachable
    return engine_reachable()


@pytest.fixture(scope="module")
def docker_engine() -> None:
    """The engine benchmarks need Docker: fail in CI when it is missing, skip elsewhere."""
    problem = _engine_problem()
    if problem:
        unavailable(problem)


@pytest.mark.engine
@pytest.mark.slow
def test_quick_engine_benchmarks_run_and_rebuild_only_the_edited_vendor(docker_engine: None, tmp_path: Path) -> None:
    report = run_quick(tmp_path, "noop", "incremental", "parallel", "image_size", "smoke_latency", timeout_s=1800)
    by_name = {r["name"]: r for r in report["results"]}
    assert set(by_name) == {"noop", "incremental", "parallel", "image_size", "smoke_latency"}
    for name in ("noop", "incremental", "parallel"):
        check_rows(by_name[name])
    nightly, build_skip, startup = by_name["noop"]["rows"]
    assert nightly["what"].startswith("no-op nightly, 4 CPU variants") and nightly["target"] == ">= 20x faster"
    assert nightly["baseline"]["label"].startswith("docker build loop") and nightly["ratio"] > 0
    assert nightly["met"] in (True, False) and "per variant" in nightly["note"]
    assert build_skip["what"].startswith("build-skip no-op") and build_skip["baseline"] == nightly["baseline"]
    assert startup["what"].startswith("CLI start-up") and startup["baseline"] is None
    assert any("nightly" in command and "--registry" in command for command in by_name["noop"]["commands"])
    [count, timing] = by_name["incremental"]["rows"]
    assert count["measured"]["values"] == count["baseline"]["values"]  # rebuilt == affected variants
    assert count["met"] is True and timing["ratio"] > 0
    assert {r["what"].rsplit(" ", 1)[-1] for r in by_name["parallel"]["rows"]} == {"2", "4"}
    for name in ("image_size", "smoke_latency"):  # these need the published CPU image; quick mode never builds it
        if by_name[name]["skipped"] is None:
            check_rows(by_name[name])
