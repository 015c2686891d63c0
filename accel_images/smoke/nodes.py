"""The two-node smoke test: containers of one image joined by torchrun on a network of their own.

Training across nodes needs more than one node's smoke test shows: that the image's launcher can
form a process group across hosts and that the collective backend computes with it. Here each node
is a container of the image on a user-defined network made for the run (internal: the nodes reach
each other and nothing else); `python -m torch.distributed.run` (torchrun) in each joins them with
the static rendezvous on node0, and the in-image script (accel_images/smoke/allreduce.py) checks one
exact all-reduce and times a few large ones. The containers and the network carry the run's label
(NODES_LABEL) and go afterwards, on a failure or Ctrl-C too.

The containers are locked down as the single-node run's are (accel_images/smoke/launcher.py), the
same integrity checks come first, and the script is this package's file, mounted read-only at a path
drawn for the run; its report must carry the run's nonce. The verdict is taken here, not in the
image: the sum every node saw is compared with n(n+1)/2 for the number of nodes asked for.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Callable, Mapping, Sequence

from accel_images.errors import EngineError
from accel_images.model.devices import DeviceOptions
from accel_images.smoke import allreduce
from accel_images.smoke.integrity import FileReader, Recorded, differences
from accel_images.smoke.judge import NodesRecord, last_json_object, output_tail
from accel_images.smoke import launcher
from accel_images.vendors.base import Vendor
from accel_images.vendors.collective import GLOO
from accel_images.smoke.launcher import (NO_RECORD, SMOKE_LABEL, Launch, NotMounted, RunOutcome, check_mounted,
                                         container_options, inventory_of, launch_options)

NODES_LABEL = f"{SMOKE_LABEL}.nodes"
"""On the run's containers and network, its value the run's id: what cleanup and the tests look for."""
ALLREDUCE_FILE = Path(allreduce.__file__).resolve()
MASTER_PORT = 29500
"""torchrun's default rendezvous port. https://docs.pytorch.org/docs/stable/elastic/run.html"""
DEFAULT_NODES = 2
MAX_NODES = 8
"""More containers of one image on one machine prove no more than two and cost memory."""


class Runner(launcher.Runner, Protocol):
    """The part of accel_images.builder.engine.Engine the two-node run uses: the single-node run's, and more."""

    def network(self, name: str, labels: Mapping[str, str] | None = None) -> AbstractContextManager[str]: ...

    def run_together(self, image: str, commands: Sequence[list[str]], *, network: str, aliases: Sequence[str],
                     options: Mapping[str, Any] | None = None, timeout_s: float,
                     labels: Mapping[str, str] | None = None,
                     before_start: Callable[[FileReader], None] | None = None) -> Sequence[RunOutcome]: ...


@dataclass(frozen=True)
class CollectiveChoice:
    """The backend the nodes' all-reduce uses, on which device type, and why that one."""

    backend: str
    device: str
    why: str
    accelerated: bool = False
    """On the vendor's accelerator (its device options passed to the containers), not gloo on the CPU."""
    module: str = ""
    """The module the all-reduce imports first to register the backend (vendors.collective.Collective.module)."""


def collective_for(vendor: Vendor, accelerator_present: bool) -> CollectiveChoice:
    """The vendor's own collective (`Vendor.collective`, declared in its module) where its accelerator is on this
    host; gloo on the CPU otherwise (and saying so), as the single-node smoke test falls back to the CPU. Asked of
    the vendor, so a new vendor's backend comes from its own folder."""
    declared = vendor.collective
    if declared is None:
        return CollectiveChoice(GLOO.backend, GLOO.device,
                          f"no collective backend known for {vendor.smoke_backend}: gloo on the CPU")
    if not declared.accelerated:
        return CollectiveChoice(declared.backend, declared.device, "a CPU image")
    if not accelerator_present:
        return CollectiveChoice(GLOO.backend, GLOO.device, "no accelerator on this host: gloo on the CPU")
    return CollectiveChoice(declared.backend, declared.device, f"the image's {vendor.smoke_backend} accelerator",
                            accelerated=True, module=declared.module)


@dataclass(frozen=True)
class NodesPlan:
    """One run: how many nodes, which collective, the timed tensor, and the run's draws (nonce, mount path, id)."""

    collective: CollectiveChoice
    nodes: int = DEFAULT_NODES
    mib: int = allreduce.DEFAULT_MIB
    iterations: int = allreduce.DEFAULT_ITERATIONS
    timeout_s: float = 600
    launch: Launch = field(default_factory=Launch.draw)
    run_id: str = field(default_factory=lambda: secrets.token_hex(6))

    @property
    def network(self) -> str:
        return f"accel-images-nodes-{self.run_id}"

    @property
    def workload(self) -> str:
        return f"{self.launch.mount_dir}/allreduce.py"

    def alias(self, node: int) -> str:
        """How the others reach node `node` on the run's network."""
        return f"node{node}"

    @property
    def rendezvous(self) -> str:
        """Where torchrun's static rendezvous is: node0 holds it (its TCPStore)."""
        return self.alias(0)

    def labels(self, image: str) -> dict[str, str]:
        return {SMOKE_LABEL: "true", f"{SMOKE_LABEL}.image": image, NODES_LABEL: self.run_id}


def torchrun_command(plan: NodesPlan, node: int) -> list[str]:
    """The interpreter's arguments (it is the entry point) on node `node`: torchrun, one process per node,
    static rendezvous at node0 (`--master-addr`/`--master-port`), then the script and its checks.
    `python -m torch.distributed.run` is torchrun, run by the interpreter the integrity check vouched for.
    The static rendezvous waits 600 s unless its `timeout` says otherwise: the run's --timeout, so it
    neither gives up before the run does nor waits past it.
    https://docs.pytorch.org/docs/stable/elastic/run.html"""
    timeout = str(max(10, int(plan.timeout_s)))
    return ["-I", "-m", "torch.distributed.run", "--nnodes", str(plan.nodes), "--node-rank", str(node),
            "--nproc-per-node", "1", "--master-addr", plan.rendezvous, "--master-port", str(MASTER_PORT),
            "--rdzv-conf", f"timeout={timeout}",
            plan.workload, "--backend", plan.collective.backend, "--device", plan.collective.device,
            "--world-size", str(plan.nodes), "--mib", str(plan.mib), "--iterations", str(plan.iterations),
            "--timeout-s", timeout, "--nonce", plan.launch.nonce,
            *(["--import", plan.collective.module] if plan.collective.module else [])]


def node_options(vendor_options: DeviceOptions | None, interpreter: str, plan: NodesPlan, mounted: Path,
                 mem_limit: str) -> dict[str, Any]:
    """The single-node run's locked-down container, but on the run's network instead of none."""
    options = {**container_options(vendor_options, mem_limit=mem_limit),
               **launch_options(interpreter, plan.launch, mounted)}
    options.pop("network_disabled")
    return options


@dataclass(frozen=True)
class NodeResult:
    """What one node reported, as judged here."""

    node: int
    failures: tuple[str, ...]
    rank: int | None = None
    world_size: int | None = None
    sum: float | None = None             # what every element held, when they all held the same
    result_ok: bool = False              # that sum was exactly n(n+1)/2 for the nodes asked for
    bandwidth_gbps: float | None = None
    seconds: float | None = None
    exit_code: int | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures

    def line(self) -> str:
        """One human line: `node0: rank 0 of 2, sum 3 (exact), 1.23 GB/s` or its first failure."""
        if not self.ok:
            return f"node{self.node}: FAILED: {self.failures[0]}"
        return (f"node{self.node}: rank {self.rank} of {self.world_size}, all-reduce sum {self.sum:g} (exact), "
                f"{gbps(self.bandwidth_gbps)}, {self.seconds:.1f} s")

    def record(self) -> dict[str, Any]:
        return {"node": self.node, "ok": self.ok, "rank": self.rank, "world_size": self.world_size, "sum": self.sum,
                "result_ok": self.result_ok, "bandwidth_gbps": self.bandwidth_gbps, "seconds": self.seconds,
                "exit_code": self.exit_code, "timed_out": self.timed_out, "failures": list(self.failures)}


@dataclass(frozen=True)
class NodesResult:
    """The verdict on one run across nodes; `record()` is what --json prints and a report keeps."""

    ok: bool
    nodes: int
    collective: CollectiveChoice
    per_node: tuple[NodeResult, ...]
    failures: tuple[str, ...]
    seconds: float = 0.0
    mib: int = allreduce.DEFAULT_MIB
    run_id: str = ""

    @property
    def world_size(self) -> int | None:
        """The world size every node agreed on; None when they did not (or none said)."""
        seen = {node.world_size for node in self.per_node}
        return seen.pop() if len(seen) == 1 else None

    @property
    def result_ok(self) -> bool:
        return len(self.per_node) == self.nodes and all(node.result_ok for node in self.per_node)

    @property
    def bandwidth_gbps(self) -> float | None:
        """The slowest node's: every node takes part in every all-reduce, so the run is as fast as it."""
        seen = [node.bandwidth_gbps for node in self.per_node if node.bandwidth_gbps is not None]
        return min(seen) if len(seen) == len(self.per_node) and seen else None

    def record(self) -> dict[str, Any]:
        return {"schema": 1, "kind": "nodes", "ok": self.ok, "nodes": self.nodes, "world_size": self.world_size,
                "backend": self.collective.backend, "device": self.collective.device,
                "backend_reason": self.collective.why, "result_ok": self.result_ok,
                "bandwidth_gbps": self.bandwidth_gbps, "tensor_mib": self.mib, "seconds": round(self.seconds, 3),
                "run_id": self.run_id, "failures": list(self.failures),
                "per_node": [node.record() for node in self.per_node]}

    def brief(self) -> NodesRecord:
        """What a build's or a nightly's smoke result keeps of the run (accel_images.smoke.judge.NodesRecord)."""
        return NodesRecord(ok=self.ok, nodes=self.nodes, backend=self.collective.backend,
                           device=self.collective.device, result_ok=self.result_ok,
                           bandwidth_gbps=self.bandwidth_gbps, seconds=self.seconds, failures=self.failures)

    def verdict(self) -> str:
        """One line: passed or failed, on what, how fast."""
        head = f"{self.nodes}-node smoke {'passed' if self.ok else 'FAILED'}"
        body = (f"world size {self.world_size}, all-reduce exact, {self.collective.backend} on {self.collective.device}"
                f" ({self.collective.why}), {gbps(self.bandwidth_gbps)} ({self.mib} MiB), {self.seconds:.1f} s")
        return f"{head}: {body}" if self.ok else f"{head}: {'; '.join(self.failures)}"


def gbps(value: float | None) -> str:
    return f"{value:.2f} GB/s" if value is not None else "bandwidth unknown"


def judge_node(plan: NodesPlan, node: int, outcome: RunOutcome) -> NodeResult:
    """One node's report against the plan: its own nonce, world size and rank, the exact sum for the
    number of nodes asked for (not the one the node reports), the backend asked for."""
    report = last_json_object(outcome.stdout)
    if report is None or report.get("schema") != allreduce.SCHEMA:
        return NodeResult(node, (f"node{node}: {no_report(plan, outcome)}",), exit_code=outcome.exit_code,
                          timed_out=outcome.timed_out)
    failures = report_failures(plan, node, report)
    low, high = number(report.get("seen_min"), float), number(report.get("seen_max"), float)
    if outcome.exit_code != 0 and not failures:
        failures.append(f"exited {outcome.exit_code}")
    return NodeResult(node, tuple(f"node{node}: {failure}" for failure in failures),
                      rank=number(report.get("rank"), int), world_size=number(report.get("world_size"), int),
                      sum=high if low == high else None, result_ok=low == high == allreduce.expected_sum(plan.nodes),
                      bandwidth_gbps=number(report.get("bandwidth_gbps"), float),
                      seconds=number(report.get("seconds"), float), exit_code=outcome.exit_code,
                      timed_out=outcome.timed_out)


def report_failures(plan: NodesPlan, node: int, report: Mapping[str, Any]) -> list[str]:
    """What is wrong with one node's report; empty when it passed."""
    if report.get("nonce") != plan.launch.nonce:
        return ["the report does not carry this run's nonce: not the mounted script's"]
    failures = []
    if report.get("error"):
        failures.append(str(report["error"]))
    if report.get("world_size") != plan.nodes:
        failures.append(f"world size {report.get('world_size')}, expected {plan.nodes}")
    if report.get("rank") != node:
        failures.append(f"rank {report.get('rank')}, expected {node} (one process per node)")
    want = allreduce.expected_sum(plan.nodes)
    if not report.get("error") and not (report.get("seen_min") == report.get("seen_max") == want):
        failures.append(f"all-reduce sum {report.get('seen_min')}..{report.get('seen_max')}, expected exactly {want:g}")
    if report.get("backend") != plan.collective.backend:
        failures.append(f"backend {report.get('backend')}, expected {plan.collective.backend}")
    if report.get("ok") is not True and not failures:
        failures.append("the script's own verdict is a failure")
    return failures


def no_report(plan: NodesPlan, outcome: RunOutcome) -> str:
    """Why a node said nothing readable: the deadline (a rendezvous that never completed, a hung
    collective) or a crash, with the end of its output."""
    tail = output_tail(outcome.stdout, outcome.stderr, limit=300).replace("\n", " | ").strip()
    if outcome.timed_out:
        cause = (f"no report within the {plan.timeout_s:.0f} s timeout (the rendezvous at"
                 f" {plan.rendezvous}:{MASTER_PORT} or the all-reduce did not finish, or a peer failed)")
    else:
        cause = f"no report (exit {outcome.exit_code})"
    return f"{cause}{': ' + tail if tail else ''}"


def number(value: Any, kind: type[int] | type[float]) -> Any:
    """A reported number, or None for anything else (a string, a bool: the report is the image's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)


def judge_nodes(plan: NodesPlan, outcomes: Sequence[RunOutcome], seconds: float) -> NodesResult:
    """Every node judged, and the ranks must be each node's own (no two nodes claiming one rank)."""
    per_node = tuple(judge_node(plan, node, outcome) for node, outcome in enumerate(outcomes))
    failures = [failure for node in per_node for failure in node.failures]
    if len(per_node) != plan.nodes:
        failures.append(f"{len(per_node)} node(s) ran, expected {plan.nodes}")
    return NodesResult(ok=not failures, nodes=plan.nodes, collective=plan.collective, per_node=per_node,
                       failures=tuple(failures), seconds=seconds, mib=plan.mib, run_id=plan.run_id)


def refused(plan: NodesPlan, problems: Sequence[str]) -> NodesResult:
    """The verdict on an image the launcher would not run the script in."""
    return NodesResult(ok=False, nodes=plan.nodes, collective=plan.collective, per_node=(),
                       failures=tuple(f"refused before the run: {problem}" for problem in problems),
                       mib=plan.mib, run_id=plan.run_id)


def run_nodes(engine: Runner, image: str, plan: NodesPlan, *, python: str, recorded: Recorded | None,
              vendor_options: DeviceOptions | None, mem_limit: str = "4g",
              status: Callable[[str], None] | None = None) -> NodesResult:
    """Check `image` from outside as the single-node run does, then run the nodes together and judge them.

    Engine failures (image missing, daemon gone) raise EngineError; the network and every container
    are removed on the way out, whatever happened."""
    say = status or (lambda text: None)
    info = engine.inspect_image(image)
    if info is None:
        raise EngineError(f"image {image} not found locally: build or pull it first")
    say("checking the image's interpreter and torch from outside (file hashes, nothing runs)")
    inventory = inventory_of(engine, info, python)
    problems = [*inventory.failures, *(differences(inventory, recorded) if recorded is not None else [NO_RECORD])]
    if problems:
        return refused(plan, problems)
    source = ALLREDUCE_FILE.read_bytes()
    expected = hashlib.sha256(source).hexdigest()
    say(f"{plan.nodes} containers on network {plan.network}: torchrun, {plan.collective.backend} on"
        f" {plan.collective.device} ({plan.collective.why}); at most {plan.timeout_s:.0f} s")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="accel-images-nodes-") as mounted:
        (Path(mounted) / "allreduce.py").write_bytes(source)
        os.chmod(mounted, 0o755)
        options = node_options(vendor_options, inventory.interpreter, plan, Path(mounted), mem_limit)
        try:
            with engine.network(plan.network, plan.labels(image)) as network:
                outcomes = engine.run_together(
                    info.id, [torchrun_command(plan, node) for node in range(plan.nodes)], network=network,
                    aliases=[plan.alias(node) for node in range(plan.nodes)], options=options,
                    timeout_s=plan.timeout_s, labels=plan.labels(image),
                    before_start=lambda container: check_mounted(container, plan.workload, expected))
        except NotMounted as problem:
            return refused(plan, [str(problem)])
    return judge_nodes(plan, outcomes, time.monotonic() - started)
