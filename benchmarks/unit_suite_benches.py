"""The unit suite's wall time: `pytest -q -n 2 tests/unit` (README, `make test-fast`) against the same
suite on one worker, run alternately so a burst of load hits both alike.

The figure README states (at most 20 s on this 2-core machine, otherwise idle) is this row's target.
Each run writes no cache (`-p no:cacheprovider`) and finds the byte code a first warm-up run compiled.
"""

from __future__ import annotations

from benchmarks.harness import PYTHON, ROOT, BenchResult, Row, alternating, load_average, run_checked, shown

TARGET_S = 20.0
FULL_RUNS, QUICK_RUNS = 3, 1
QUICK_SCOPE = "tests/unit/test_versions.py"


def suite(scope: str, workers: bool) -> list[str]:
    return [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(["-n", "2"] if workers else ["-p", "no:xdist"]),
            scope]


def bench_unit_suite(quick: bool) -> BenchResult:
    result = BenchResult("unit_suite")
    scope = QUICK_SCOPE if quick else "tests/unit"
    commands = {workers: suite(scope, workers) for workers in (True, False)}
    for command in commands.values():
        run_checked(command, cwd=ROOT, timeout_s=900)   # warm-up: byte code, the file cache
        result.commands.append(shown(command))
    load_before = load_average()
    measured, baseline = alternating([("two workers", lambda: run_checked(commands[True], cwd=ROOT, timeout_s=900)),
                                      ("one worker", lambda: run_checked(commands[False], cwd=ROOT, timeout_s=900))],
                                     QUICK_RUNS if quick else FULL_RUNS)
    result.rows.append(Row("unit_suite", f"`pytest -q -n 2 {scope}`, wall time", measured, baseline,
                           baseline.median / measured.median, "faster", f"<= {TARGET_S:g} s" if not quick else
                           "report only", measured.median <= TARGET_S if not quick else None))
    result.notes += [f"Load average before the timed runs: {load_before}; after: {load_average()} (the target holds "
                     "for an otherwise idle machine).",
                     "Each figure includes start-up and collection on each worker (about 3 s: the test modules, "
                     "hypothesis, and 1.3 s for jsonschema's IRI grammars, which rfc3987-syntax builds at import)."]
    return result


UNIT_SUITE_BENCHES = {"unit_suite": bench_unit_suite}
