"""Run the accel-images benchmarks: `python benchmarks/run.py [--quick] [--only NAME ...]`.

Full mode rewrites benchmarks/RESULTS.md (and results.json next to it); --quick runs tiny sizes
once, only to show every script works, and writes to benchmarks/out/ instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness
from benchmarks.engine_benches import ENGINE_BENCHES as LIGHT_ENGINE_BENCHES, engine_reachable
from benchmarks.fetch_benches import FETCH_BENCHES
from benchmarks.guard_benches import GUARD_BENCHES
from benchmarks.pure_benches import PURE_BENCHES
from benchmarks.registry_benches import REGISTRY_BENCHES
from benchmarks.startup_benches import STARTUP_BENCHES
from benchmarks.unit_suite_benches import UNIT_SUITE_BENCHES
from benchmarks.wheel_sizes import WHEEL_BENCHES
from benchmarks.cuda_image_benches import CUDA_IMAGE_BENCHES
from benchmarks.mutation_benches import MUTATION_BENCHES

HERE = Path(__file__).resolve().parent
ORDER = ("startup", "unit_suite", "guard_facts", "noop", "incremental", "scale", "parallel", "image_size",
         "smoke_latency", "republish", "fetch", "catalogue", "cuda_size", "cuda_image", "cluster_stack", "mutation")
ENGINE_BENCHES = {**LIGHT_ENGINE_BENCHES, **FETCH_BENCHES, **CUDA_IMAGE_BENCHES}
ALL = {**STARTUP_BENCHES, **UNIT_SUITE_BENCHES, **GUARD_BENCHES, **PURE_BENCHES, **ENGINE_BENCHES, **REGISTRY_BENCHES,
       **WHEEL_BENCHES, **MUTATION_BENCHES}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Tiny sizes, one run each; no RESULTS.md.")
    parser.add_argument("--only", action="append", choices=ORDER, metavar="NAME",
                        help=f"Run only this benchmark (repeatable): {', '.join(ORDER)}.")
    parser.add_argument("--out", type=Path, default=None,
                        help="Where RESULTS.md and results.json go (default: benchmarks/, or benchmarks/out/ "
                             "with --quick). With --only, the other benchmarks' results already there are kept.")
    return parser.parse_args(argv)


def run_one(name: str, quick: bool, engine_problem: str | None) -> harness.BenchResult:
    if name in ENGINE_BENCHES and engine_problem:
        return harness.BenchResult(name, skipped=engine_problem)
    print(f"running {name}{' (quick)' if quick else ''} ...", file=sys.stderr, flush=True)
    try:
        return ALL[name](quick)
    except Exception as error:  # noqa: BLE001 - one failing benchmark never hides the others' numbers
        return harness.BenchResult(name, error=f"{error}\n{traceback.format_exc()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n for n in ORDER if not args.only or n in args.only]
    out_dir = args.out or (HERE / "out" if args.quick else HERE)
    out_dir.mkdir(parents=True, exist_ok=True)
    started, host = harness.now(), harness.machine()
    engine_problem = engine_reachable() if any(n in ENGINE_BENCHES for n in names) else None
    results = [run_one(name, args.quick, engine_problem) for name in names]
    if args.only and not args.quick:
        results = with_earlier_results(results, out_dir / "results.json")
    host = {**host, "load average at end": harness.load_average()}
    only = "".join(f" --only {n}" for n in args.only or [])
    command = "benchmarks/run.py" + (" --quick" if args.quick else "") + only
    (out_dir / "RESULTS.md").write_text(harness.markdown(results, quick=args.quick, command=command,
                                                         started=started, host=host))
    (out_dir / "results.json").write_text(json.dumps(harness.as_json(results, quick=args.quick, host=host,
                                                                     started=started), indent=2, default=str))
    print_table(results)
    print(f"\nwrote {out_dir / 'RESULTS.md'}", file=sys.stderr)
    return 1 if any(r.error for r in results) else 0


def with_earlier_results(results: list[harness.BenchResult], path: Path) -> list[harness.BenchResult]:
    """The results of this run, and in their place in ORDER those of an earlier full run that this one skipped."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return results
    if earlier.get("quick"):
        return results
    fresh = {result.name: result for result in results}
    kept = {data["name"]: harness.result_from_json(data) for data in earlier.get("results", [])}
    for name, result in kept.items():
        if name not in fresh and not (result.notes and result.notes[0].startswith("Carried over")):
            result.notes.insert(0, f"Carried over from the run of {earlier.get('started', '?')[:16]} UTC (not re-run"
                                   f" this time).")
    merged = {**kept, **fresh}
    return [merged[name] for name in ORDER if name in merged]


def print_table(results: list[harness.BenchResult]) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(box=None, header_style="bold")
    for header in harness.HEADERS:
        table.add_column(header)
    for row in harness.table_rows(results):
        table.add_row(*row)
    Console(width=250 if not sys.stdout.isatty() else None).print(table)


if __name__ == "__main__":
    sys.exit(main())
