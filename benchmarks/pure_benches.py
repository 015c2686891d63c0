"""The pure-stage benchmark: validate, expand, render and check N synthetic variants.

Each size runs in its own process (benchmarks/scale.py) so its peak memory is its own. The
baseline of a size is the smallest size scaled linearly: a ratio near 1 means linear growth.
"""

from __future__ import annotations

import json

from benchmarks.harness import PYTHON, ROOT, BenchResult, Row, Series, run_checked, shown
from benchmarks.scale import STAGES

FULL_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (100, 400)
LINEAR_SLACK = 1.5
"""Per-variant cost at the largest size may exceed the smallest size's by this factor (noise,
allocator) before growth counts as not linear."""
TARGET_SIZE, TARGET_S = 10_000, 5.0
LARGEST_REPEATS = 2
"""The largest size takes about a minute a run: it runs fewer times than the others."""


def run_size(variants: int) -> dict:
    return json.loads(run_checked([PYTHON, str(ROOT / "benchmarks" / "scale.py"), "--variants", str(variants)],
                                  timeout_s=1800).stdout)


def bench_scale(quick: bool) -> BenchResult:
    result = BenchResult("scale")
    sizes = QUICK_SIZES if quick else FULL_SIZES
    repeats = 1 if quick else 3
    runs: dict[int, list[dict]] = {n: [] for n in sizes}
    for run in range(repeats):            # sizes alternate, so load drifts hit each alike
        for n in sizes:
            if run < LARGEST_REPEATS or n != sizes[-1]:
                runs[n].append(run_size(n))
    result.commands = [shown([PYTHON, str(ROOT / "benchmarks" / "scale.py"), "--variants", str(n)]) for n in sizes]
    smallest = sizes[0]
    base_total = Series(f"{smallest} scaled", tuple(r["total_s"] for r in runs[smallest]))
    for n in sizes:
        total = Series(f"{n} variants", tuple(r["total_s"] for r in runs[n]))
        factor = n / smallest
        linear = Series(f"{smallest:,} x {factor:g}", tuple(v * factor for v in base_total.values))
        ratio = total.median / linear.median
        stages = ", ".join(f"{stage} {_median([r['seconds'][stage] for r in runs[n]]):.2f} s" for stage in STAGES)
        memory = _median([r["maxrss_mib"] for r in runs[n]])
        target, met = ("linear (<= 1.5x)", ratio <= LINEAR_SLACK) if n != smallest else ("baseline size", None)
        if n == TARGET_SIZE:
            target, met = f"<= {TARGET_S:g} s and linear", total.median <= TARGET_S and ratio <= LINEAR_SLACK
        result.rows.append(Row("scale", f"validate+expand+render+check {n:,} variants", total,
                               linear if n != smallest else None, ratio if n != smallest else None,
                               "of linear", target, met if n != smallest or n == TARGET_SIZE else None,
                               f"{stages}; peak RSS {memory:,.0f} MiB"))
        result.rows.append(Row("scale", f"peak memory, {n:,} variants",
                               Series("peak RSS", tuple(r["maxrss_mib"] for r in runs[n]), "MiB")))
    if any(r.get("node_cap_lifted") for rs in runs.values() for r in rs):
        result.notes.append("The matrix reader refuses YAML documents of more than 50,000 nodes "
                            "(accel_images/plan/yamlpos.py MAX_NODES); the 100k matrix needs more, so scale.py lifts "
                            "the cap in its own process. A real matrix of that size would be refused.")
    result.notes.append("Synthetic matrix: groups of 5 torch releases x 2 Pythons x 1 OS x 2 flavors (cpu), "
                        "each torch value a synthetic knowledge-base row copied from torch 2.13. 'render' renders "
                        "every build context in memory; 'check' is `render --check` against an empty tree.")
    return result


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


PURE_BENCHES = {"scale": bench_scale}
