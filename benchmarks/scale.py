"""Scale of the pure stages: validate, expand and render N synthetic variants.

Run as a script, one size per process, so peak memory (ru_maxrss) belongs to that size alone:
    python benchmarks/scale.py --variants 10000 [--profile]
It prints one JSON object: seconds per stage and peak resident memory.

The synthetic matrix is shaped like the real one: groups of 5 torch releases x 2 Pythons x
1 OS x 2 flavors (20 variants each), one vendor (cpu). The knowledge base gains one synthetic
torch release per torch value (a copy of the real 2.13 row), so every combination is allowed
and distinct; nothing else of the knowledge base changes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accel_images.plan import yamlpos
from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.plan.matrix import parse_matrix
from accel_images.render.contexts import Renderer, stale_paths
from accel_images.plan.variants import expand

PER_GROUP = 20
TORCH_PER_GROUP = 5
STAGES = ("validate", "expand", "render", "check")


def synthetic_torch(index: int) -> str:
    return f"9.{index}"


def synthetic_kb(kb: KnowledgeBase, releases: int) -> KnowledgeBase:
    template = kb.torch["2.13"]
    extra = {synthetic_torch(i): replace(template, minor=synthetic_torch(i), versions=(f"{synthetic_torch(i)}.0",))
             for i in range(releases)}
    return replace(kb, torch={**kb.torch, **extra})


def synthetic_matrix_yaml(variants: int) -> bytes:
    """A matrix.yaml with `variants` distinct cpu combinations."""
    lines = ["schema: 1", "image: accel-images/pytorch", "user: {name: dev, uid: 1000, gid: 1000}",
             "vendors:", "  cpu:"]
    for group in range(max(1, variants // PER_GROUP)):
        torch = ", ".join(f'"{synthetic_torch(group * TORCH_PER_GROUP + i)}"' for i in range(TORCH_PER_GROUP))
        lines += [f"    - torch: [{torch}]", '      python: ["3.12", "3.11"]',
                  "      os: [ubuntu24.04]", "      flavor: [runtime, devel]"]
    return ("\n".join(lines) + "\n").encode()


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


NODE_CAP = yamlpos.MAX_NODES
"""The matrix reader refuses documents of more nodes than this (a guard against alias bombs);
the 100k-variant matrix needs about 100k nodes, so the cap is lifted in this process only."""


def measure(variants: int) -> dict:
    raw = synthetic_matrix_yaml(variants)
    yamlpos.MAX_NODES = max(NODE_CAP, variants * 2)
    kb = synthetic_kb(load_kb(), (variants // PER_GROUP) * TORCH_PER_GROUP)
    renderer = Renderer(kb)
    seconds: dict[str, float] = {}
    rss: dict[str, float] = {"start": maxrss_mib()}

    started = time.perf_counter()
    matrix = parse_matrix(raw, "synthetic-matrix.yaml")
    seconds["validate"] = time.perf_counter() - started
    rss["validate"] = maxrss_mib()

    started = time.perf_counter()
    expansion = expand(matrix, kb)
    seconds["expand"] = time.perf_counter() - started
    rss["expand"] = maxrss_mib()

    started = time.perf_counter()
    contexts = renderer.render_all(expansion, expansion.variants)
    seconds["render"] = time.perf_counter() - started
    rss["render"] = maxrss_mib()

    with tempfile.TemporaryDirectory() as empty:
        started = time.perf_counter()
        stale = stale_paths(Path(empty), contexts)
        seconds["check"] = time.perf_counter() - started
    rss["check"] = maxrss_mib()

    if len(expansion.variants) != len(contexts) or not stale:
        raise SystemExit(f"expected {variants} variants, got {len(expansion.variants)}")
    return {"variants": len(expansion.variants), "seconds": seconds, "total_s": sum(seconds.values()),
            "maxrss_mib": maxrss_mib(), "rss_after_mib": rss, "yaml_bytes": len(raw),
            "node_cap_lifted": variants * 2 > NODE_CAP}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, required=True)
    parser.add_argument("--profile", action="store_true", help="Print the 25 costliest functions to stderr.")
    args = parser.parse_args()
    if args.profile:
        profiler = cProfile.Profile()
        result = profiler.runcall(measure, args.variants)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
        print(text.getvalue(), file=sys.stderr)
    else:
        result = measure(args.variants)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
