"""The two-node smoke workload: one torch.distributed all-reduce across the containers torchrun joined.

torchrun (the image's own launcher, `python -m torch.distributed.run`) starts this file once per node
and sets RANK, WORLD_SIZE and GROUP_RANK (the node's rank); the launcher (accel_images/smoke/nodes.py)
mounts it read-only, the same way as the single-node workload. It proves that the image's torch can
form a process group across hosts and compute with it: every rank contributes rank+1, so after a sum
all-reduce every element must be exactly n(n+1)/2 for n ranks, and a few all-reduces of a larger
tensor give the bandwidth the collective reached (algorithm bandwidth: bytes of the tensor / seconds
per all-reduce, as nccl-tests reports `algbw`).

The outcome is ONE JSON object on the last line of stdout and the exit status (0 passed, 1 failed,
2 bad arguments). The file must stay self-contained (standard library + torch, Python 3.10-3.14);
torch is imported inside run(), so the host imports the names here without torch.

JSON schema 1 (every key always present):
    {"schema": 1, "ok": bool, "nonce": str|null,
     "rank": int|null, "node_rank": int|null, "world_size": int|null,
     "backend": str, "device": str, "torch": str|null,
     "expected_sum": float|null, "seen_min": float|null, "seen_max": float|null, "result_ok": bool,
     "bytes": int, "iterations": int, "seconds_per_allreduce": float|null, "bandwidth_gbps": float|null,
     "seconds": float, "error": str|null}
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import re
import sys
import time
import traceback
from typing import Any

SCHEMA = 1
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_ARGUMENTS = 2

NAME = re.compile(r"[a-z][a-z0-9_]*")
"""A torch.distributed backend's or a torch device type's name. Which ones a vendor uses is the vendor's
(accel_images/vendors/<name>: its `collective`), passed on the command line: this file names none."""
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
PROBE_ELEMENTS = 1024
DEFAULT_MIB = 64
DEFAULT_ITERATIONS = 5
WARMUP_ITERATIONS = 1
FLOAT32_BYTES = 4


def expected_sum(world_size: int) -> float:
    """What every element holds after a sum all-reduce where rank r contributed r+1."""
    return world_size * (world_size + 1) / 2


def algorithm_bandwidth(nbytes: int, seconds_per_allreduce: float) -> float | None:
    """GB/s (10^9 bytes) of one all-reduce of `nbytes`; None for a time too short to divide by."""
    return nbytes / seconds_per_allreduce / 1e9 if seconds_per_allreduce > 0 else None


def elements_of(mib: int) -> int:
    return mib * 1024 * 1024 // FLOAT32_BYTES


def matching(pattern: re.Pattern[str]) -> Any:
    """An argparse type: the argument as it is, when the whole of it matches `pattern`."""
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise argparse.ArgumentTypeError(f"not a name: {value!r}")
        return value
    return check


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", type=matching(NAME), required=True, help="torch.distributed's name for it")
    parser.add_argument("--device", type=matching(NAME), required=True, help="the torch device type")
    parser.add_argument("--import", dest="module", type=matching(MODULE), default=None,
                        help="a module that registers the backend, imported first")
    parser.add_argument("--world-size", type=int, required=True, help="the ranks the launcher started")
    parser.add_argument("--mib", type=int, default=DEFAULT_MIB, help="the timed tensor's size")
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    parser.add_argument("--timeout-s", type=float, default=120.0, help="the process group's timeout")
    parser.add_argument("--nonce", default=None)
    return parser.parse_args(argv)


def empty_report(args: argparse.Namespace) -> dict[str, Any]:
    """Every key of the schema, as a run that got nowhere reports it."""
    return {"schema": SCHEMA, "ok": False, "nonce": args.nonce, "rank": None, "node_rank": None,
            "world_size": None, "backend": args.backend, "device": args.device, "torch": None,
            "expected_sum": expected_sum(args.world_size), "seen_min": None, "seen_max": None, "result_ok": False,
            "bytes": elements_of(args.mib) * FLOAT32_BYTES, "iterations": args.iterations,
            "seconds_per_allreduce": None, "bandwidth_gbps": None, "seconds": 0.0, "error": None}


def device_of(torch: Any, kind: str, node_rank: int) -> Any:
    """The device this rank computes on: one accelerator per node, the node's rank choosing which, so two
    containers given the same GPUs never share one (a collective library refuses two ranks on one device)."""
    if kind == "cpu":
        return torch.device("cpu")
    module = getattr(torch, kind)
    index = node_rank % max(1, int(module.device_count()))
    module.set_device(index)
    return torch.device(kind, index)


def synchronize(torch: Any, device: Any) -> None:
    """An accelerator's collective returns before it finishes; the clock must wait for it."""
    if device.type != "cpu":
        getattr(torch, device.type).synchronize()


def exact_result(torch: Any, dist: Any, device: Any, rank: int, world_size: int) -> dict[str, Any]:
    """Each rank contributes rank+1; the sum must be exact in every element (small integers are exact
    in float32), checked against the world size the launcher asked for, not the one the group reports."""
    probe = torch.full((PROBE_ELEMENTS,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(probe, op=dist.ReduceOp.SUM)
    synchronize(torch, device)
    seen = probe.cpu()
    low, high = float(seen.min()), float(seen.max())
    want = expected_sum(world_size)
    return {"expected_sum": want, "seen_min": low, "seen_max": high, "result_ok": low == high == want}


def timed_allreduce(torch: Any, dist: Any, device: Any, mib: int, iterations: int) -> dict[str, Any]:
    """Seconds per all-reduce of a `mib` MiB float32 tensor, after a warm-up, and the bandwidth it gives."""
    tensor = torch.ones(elements_of(mib), dtype=torch.float32, device=device)
    for _ in range(WARMUP_ITERATIONS):
        dist.all_reduce(tensor)
    synchronize(torch, device)
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    synchronize(torch, device)
    each = (time.perf_counter() - started) / max(1, iterations)
    nbytes = tensor.numel() * tensor.element_size()
    return {"bytes": nbytes, "iterations": iterations, "seconds_per_allreduce": each,
            "bandwidth_gbps": algorithm_bandwidth(nbytes, each)}


def run(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Join the group torchrun set up (env://), check one exact all-reduce, time a few large ones."""
    import torch
    import torch.distributed as dist
    report["torch"] = str(torch.__version__)
    if args.module:
        importlib.import_module(args.module)
    node_rank = int(os.environ.get("GROUP_RANK", os.environ.get("RANK", "0")))
    report["node_rank"] = node_rank
    device = device_of(torch, args.device, node_rank)
    dist.init_process_group(backend=args.backend, timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        rank, world_size = dist.get_rank(), dist.get_world_size()
        report.update(rank=rank, world_size=world_size)
        report.update(exact_result(torch, dist, device, rank, args.world_size))
        report.update(timed_allreduce(torch, dist, device, args.mib, args.iterations))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    report["ok"] = bool(report["result_ok"]) and report["world_size"] == args.world_size


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit:
        return EXIT_BAD_ARGUMENTS
    report = empty_report(args)
    started = time.perf_counter()
    try:
        run(args, report)
    except Exception as error:  # noqa: BLE001 - whatever torch raises is the report's error, on one line
        report["ok"] = False
        report["error"] = " ".join(f"{type(error).__name__}: {error}".split())[:400]
        traceback.print_exc(file=sys.stderr)
    report["seconds"] = round(time.perf_counter() - started, 3)
    print(json.dumps(report), flush=True)
    return EXIT_OK if report["ok"] else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
