"""The two-node smoke test without an engine: the torchrun command, the backend a vendor gets, the verdict on
what the nodes report, the record --json prints, and the run's wiring (network made and always removed).

The real run on the suite's CPU image: tests/integration/test_smoke_nodes_integration.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pytest

from accel_images import vendors
from accel_images.builder.engine import RunResult
from accel_images.smoke import allreduce
from accel_images.smoke.launcher import Launch
from accel_images.smoke.nodes import (NODES_LABEL, CollectiveChoice, NodesPlan, collective_for, judge_nodes, node_options,
                                      run_nodes, torchrun_command)
from accel_images.vendors.base import VendorBase
from accel_images.vendors.collective import Collective as Declared

from fakeimage import FakeEngine, FakeFiles, file_entry, honest_record

NONCE = "cd" * 16
LAUNCH = Launch(nonce=NONCE, mount_dir="/run/accel-images-smoke-0123456789abcdef")
GLOO = CollectiveChoice("gloo", "cpu", "a CPU image")
PLAN = NodesPlan(GLOO, nodes=2, timeout_s=120, launch=LAUNCH, run_id="0123456789ab")


def node_report(rank: int, **changes: Any) -> dict[str, Any]:
    """What allreduce.py prints on a node that passed, changed where a test says."""
    report = {"schema": 1, "ok": True, "nonce": NONCE, "rank": rank, "node_rank": rank, "world_size": 2,
              "backend": "gloo", "device": "cpu", "torch": "2.13.0+cpu", "expected_sum": 3.0, "seen_min": 3.0,
              "seen_max": 3.0, "result_ok": True, "bytes": 64 << 20, "iterations": 5,
              "seconds_per_allreduce": 0.05, "bandwidth_gbps": 1.34, "seconds": 2.5, "error": None}
    return {**report, **changes}


def ran(report: Mapping[str, Any] | None, exit_code: int = 0, *, timed_out: bool = False,
        stderr: str = "") -> RunResult:
    stdout = "torchrun's own lines\n" + (json.dumps(report) + "\n" if report is not None else "")
    return RunResult(exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=timed_out)


# ---- the command and the container ------------------------------------------------------------------------

def test_torchrun_command_joins_node0_statically_with_one_process_per_node():
    assert torchrun_command(PLAN, 1) == [
        "-I", "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "1",
        "--master-addr", "node0", "--master-port", "29500", "--rdzv-conf", "timeout=120",
        "/run/accel-images-smoke-0123456789abcdef/allreduce.py", "--backend", "gloo", "--device", "cpu",
        "--world-size", "2", "--mib", "64", "--iterations", "5", "--timeout-s", "120", "--nonce", NONCE]
    assert torchrun_command(PLAN, 0)[6] == "0"


def test_the_command_parses_as_the_script_reads_it():
    command = torchrun_command(PLAN, 0)
    args = allreduce.parse_args(command[command.index(PLAN.workload) + 1:])
    assert (args.backend, args.device, args.world_size, args.mib, args.nonce) == ("gloo", "cpu", 2, 64, NONCE)


def test_node_containers_are_locked_down_but_networked(tmp_path):
    options = node_options(None, "/opt/venv/bin/python", PLAN, tmp_path, "4g")
    assert "network_disabled" not in options
    assert options["cap_drop"] == ["ALL"] and options["security_opt"] == ["no-new-privileges"]
    assert options["entrypoint"] == ["/opt/venv/bin/python"]
    assert options["volumes"] == {str(tmp_path): {"bind": LAUNCH.mount_dir, "mode": "ro"}}


def test_the_run_is_labelled_with_its_id():
    assert PLAN.labels("img")[NODES_LABEL] == "0123456789ab"
    assert PLAN.network == "accel-images-nodes-0123456789ab"
    assert NodesPlan(GLOO).run_id != NodesPlan(GLOO).run_id


# ---- the backend ------------------------------------------------------------------------------------------

NO_COLLECTIVE = cast(vendors.Vendor, VendorBase(name="tpu", title="Example TPU", stack_name="", smoke_backend="tpu",
                                                kb_file=Path("tpu.yaml")))
"""A vendor that declares no collective (`Vendor.collective` None)."""


@pytest.mark.parametrize(("name", "backend", "device"), [
    ("cuda", "nccl", "cuda"), ("rocm", "nccl", "cuda"), ("xpu", "xccl", "xpu"), ("gaudi", "hccl", "hpu")])
def test_an_accelerator_gets_its_vendors_backend(name, backend, device):
    chosen = collective_for(vendors.get(name), accelerator_present=True)
    assert (chosen.backend, chosen.device, chosen.accelerated) == (backend, device, True)


def test_the_backend_is_the_vendors_own_attribute():
    """Asked of the vendor's definition, not of a table beside it: another value there is the one chosen."""
    other = cast(vendors.Vendor, replace(cast(VendorBase, vendors.get("cuda")),
                                         collective=Declared("ncclx", "cuda", library="ncclx")))
    assert collective_for(other, accelerator_present=True).backend == "ncclx"


@pytest.mark.parametrize("vendor", [*(vendors.get(name) for name in ("cuda", "rocm", "xpu", "gaudi")), NO_COLLECTIVE],
                         ids=lambda vendor: vendor.name)
def test_without_the_accelerator_it_is_gloo_and_says_so(vendor):
    chosen = collective_for(vendor, accelerator_present=False)
    assert (chosen.backend, chosen.device) == ("gloo", "cpu")
    assert "gloo on the CPU" in chosen.why


def test_a_vendor_without_a_collective_is_gloo_even_with_its_accelerator():
    chosen = collective_for(NO_COLLECTIVE, accelerator_present=True)
    assert (chosen.backend, chosen.device, chosen.accelerated) == ("gloo", "cpu", False)
    assert chosen.why == "no collective backend known for tpu: gloo on the CPU"


def test_a_cpu_image_is_gloo():
    assert collective_for(vendors.get("cpu"), accelerator_present=True) == GLOO


def test_every_vendor_has_a_backend_the_script_accepts():
    """What each vendor declares reaches the in-image script as it is: backend, device, and the module that
    registers the backend (Gaudi's), which no other vendor asks for."""
    modules = {}
    for vendor in vendors.registry().values():
        declared = vendor.collective
        assert declared is not None, vendor.name
        plan = NodesPlan(collective_for(vendor, accelerator_present=True), launch=LAUNCH)
        command = torchrun_command(plan, 0)
        args = allreduce.parse_args(command[command.index(plan.workload) + 1:])
        assert (args.backend, args.device, args.module or "") == (declared.backend, declared.device, declared.module)
        modules[vendor.name] = args.module
    assert {name: module for name, module in modules.items() if module} == {
        "gaudi": "habana_frameworks.torch.distributed.hccl"}


# ---- the verdict ------------------------------------------------------------------------------------------

def test_two_nodes_with_the_exact_sum_pass():
    result = judge_nodes(PLAN, [ran(node_report(0)), ran(node_report(1, bandwidth_gbps=1.2))], 9.5)
    assert result.ok and result.failures == ()
    assert result.world_size == 2 and result.result_ok and result.bandwidth_gbps == 1.2
    assert [node.line() for node in result.per_node][1] == (
        "node1: rank 1 of 2, all-reduce sum 3 (exact), 1.20 GB/s, 2.5 s")
    assert result.verdict().startswith("2-node smoke passed: world size 2, all-reduce exact, gloo on cpu")


def test_a_wrong_sum_fails():
    result = judge_nodes(PLAN, [ran(node_report(0)), ran(node_report(1, seen_min=2.0, seen_max=3.0))], 1.0)
    assert not result.ok and not result.result_ok
    assert result.failures == ("node1: all-reduce sum 2.0..3.0, expected exactly 3",)


def test_a_world_of_one_fails_even_when_the_script_agrees_with_itself():
    """Two nodes that each formed a group of one: each sum is 1 = 1*2/2, and the script's own verdict says ok."""
    alone = [ran(node_report(0, world_size=1, expected_sum=1.0, seen_min=1.0, seen_max=1.0)),
             ran(node_report(0, world_size=1, expected_sum=1.0, seen_min=1.0, seen_max=1.0))]
    result = judge_nodes(PLAN, alone, 1.0)
    assert not result.ok
    assert "node0: world size 1, expected 2" in result.failures
    assert "node1: rank 0, expected 1 (one process per node)" in result.failures
    assert any("expected exactly 3" in failure for failure in result.failures)


def test_a_report_without_the_runs_nonce_fails():
    result = judge_nodes(PLAN, [ran(node_report(0, nonce="ee" * 16)), ran(node_report(1))], 1.0)
    assert result.failures == ("node0: the report does not carry this run's nonce: not the mounted script's",)


def test_another_backend_than_asked_fails():
    result = judge_nodes(PLAN, [ran(node_report(0)), ran(node_report(1, backend="nccl"))], 1.0)
    assert result.failures == ("node1: backend nccl, expected gloo",)


def test_a_rendezvous_that_timed_out_says_so_in_one_line():
    result = judge_nodes(PLAN, [ran(None, 137, timed_out=True, stderr="waiting for node0\n"),
                                ran(None, 1, stderr="Traceback (most recent call last):\nRuntimeError: refused\n")],
                         120.0)
    assert not result.ok and result.per_node[0].timed_out
    assert result.failures[0].startswith("node0: no report within the 120 s timeout (the rendezvous at node0:29500")
    assert result.failures[1].startswith("node1: no report (exit 1): ")
    assert not any("\n" in failure for failure in result.failures)
    assert result.bandwidth_gbps is None and result.world_size is None


def test_the_scripts_error_is_the_failure():
    error = node_report(1, ok=False, error="DistNetworkError: connection reset", seen_min=None, seen_max=None,
                        result_ok=False, bandwidth_gbps=None)
    result = judge_nodes(PLAN, [ran(node_report(0)), ran(error, 1)], 1.0)
    assert result.failures == ("node1: DistNetworkError: connection reset",)


def test_a_missing_node_fails():
    assert judge_nodes(PLAN, [ran(node_report(0))], 1.0).failures == ("1 node(s) ran, expected 2",)


# ---- the record --json prints -----------------------------------------------------------------------------

RECORD_KEYS = {"schema", "kind", "ok", "nodes", "world_size", "backend", "device", "backend_reason", "result_ok",
               "bandwidth_gbps", "tensor_mib", "seconds", "run_id", "failures", "per_node"}
NODE_KEYS = {"node", "ok", "rank", "world_size", "sum", "result_ok", "bandwidth_gbps", "seconds", "exit_code", "timed_out",
             "failures"}


def test_the_record_holds_every_key_and_survives_json():
    passed = judge_nodes(PLAN, [ran(node_report(0)), ran(node_report(1))], 9.54321).record()
    failed = judge_nodes(PLAN, [ran(None, 1), ran(None, 1)], 1.0).record()
    for record in (passed, failed):
        assert set(record) == RECORD_KEYS and record["schema"] == 1 and record["kind"] == "nodes"
        assert all(set(node) == NODE_KEYS for node in record["per_node"])
        assert json.loads(json.dumps(record)) == record
    assert passed["ok"] is True and passed["world_size"] == 2 and passed["backend"] == "gloo"
    assert passed["result_ok"] is True and passed["bandwidth_gbps"] == 1.34 and passed["seconds"] == 9.543
    assert failed["ok"] is False and failed["result_ok"] is False and failed["bandwidth_gbps"] is None


# ---- the script's pieces that need no torch ---------------------------------------------------------------

def test_the_expected_sum_is_n_n_plus_1_over_2():
    assert [allreduce.expected_sum(n) for n in (1, 2, 3, 8)] == [1, 3, 6, 36]


def test_algorithm_bandwidth_is_bytes_per_second():
    assert allreduce.algorithm_bandwidth(64 << 20, 0.5) == pytest.approx(0.134217728)
    assert allreduce.algorithm_bandwidth(64 << 20, 0.0) is None


@pytest.mark.parametrize("argument", [["--backend", "nccl;id"], ["--device", "cuda:0"], ["--import", "os; id"],
                                      ["--import", "a..b"]])
def test_bad_arguments_exit_2_before_torch(capsys, argument):
    arguments = {"--backend": "gloo", "--device": "cpu", **dict([argument])}
    argv = [*(item for pair in arguments.items() for item in pair), "--world-size", "2"]
    assert allreduce.main(argv) == allreduce.EXIT_BAD_ARGUMENTS


def test_an_empty_report_has_every_key_of_the_schema():
    report = allreduce.empty_report(allreduce.parse_args(["--backend", "gloo", "--device", "cpu", "--world-size", "2"]))
    assert set(node_report(0)) == set(report) and report["ok"] is False and report["expected_sum"] == 3


# ---- the wiring, with a fake engine -----------------------------------------------------------------------

@dataclass
class FakeNodesEngine(FakeEngine):
    """FakeEngine with a network and containers run together; it records what was made and removed."""

    outcomes: Sequence[RunResult] = ()
    raise_in_run: BaseException | None = None
    networks: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    @contextmanager
    def network(self, name: str, labels: Mapping[str, str] | None = None) -> Iterator[str]:
        self.events.append(f"network {name} {dict(labels or {}).get(NODES_LABEL)}")
        self.networks.append(name)
        try:
            yield name
        finally:
            self.networks.remove(name)
            self.events.append(f"removed {name}")

    def run_together(self, image: str, commands: Sequence[list[str]], *, network: str, aliases: Sequence[str],
                     options: Mapping[str, Any] | None = None, timeout_s: float,
                     labels: Mapping[str, str] | None = None,
                     before_start: Callable[[FakeFiles], None] | None = None) -> Sequence[RunResult]:
        self.calls.append({"commands": commands, "network": network, "aliases": aliases, "options": options,
                           "labels": dict(labels or {})})
        mount = dict(options or {})["volumes"]
        (source, bind), = mount.items()
        from pathlib import Path
        seen = {f"{bind['bind']}/allreduce.py": file_entry(f"{bind['bind']}/allreduce.py",
                                                             (Path(source) / "allreduce.py").read_bytes())}
        if before_start is not None:
            before_start(FakeFiles({**self.files, **seen}))
        if self.raise_in_run is not None:
            raise self.raise_in_run
        return self.outcomes


def fake(outcomes: Sequence[RunResult] = (), raise_in_run: BaseException | None = None) -> FakeNodesEngine:
    return FakeNodesEngine(RunResult(0, "", "", False), outcomes=outcomes, raise_in_run=raise_in_run)


def test_a_run_uses_its_network_and_removes_it():
    engine = fake([ran(node_report(0)), ran(node_report(1))])
    result = run_nodes(engine, "img", PLAN, python="3.11", recorded=honest_record(), vendor_options=None)
    assert result.ok, result.failures
    assert engine.events == ["network accel-images-nodes-0123456789ab 0123456789ab",
                             "removed accel-images-nodes-0123456789ab"]
    call = engine.calls[0]
    assert call["network"] == PLAN.network and call["aliases"] == ["node0", "node1"]
    assert call["labels"][NODES_LABEL] == PLAN.run_id
    assert [command[6] for command in call["commands"]] == ["0", "1"]


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), RuntimeError("daemon gone")])
def test_ctrl_c_or_a_failure_still_removes_the_network(stop):
    engine = fake(raise_in_run=stop)
    with pytest.raises(type(stop)):
        run_nodes(engine, "img", PLAN, python="3.11", recorded=honest_record(), vendor_options=None)
    assert engine.networks == [] and engine.events[-1] == f"removed {PLAN.network}"


def test_an_image_without_a_build_record_is_refused_before_any_network():
    engine = fake()
    result = run_nodes(engine, "img", PLAN, python="3.11", recorded=None, vendor_options=None)
    assert not result.ok and result.failures[0].startswith("refused before the run: no build record")
    assert engine.events == []


# ---- the command line, with no daemon ---------------------------------------------------------------------

def test_a_daemon_that_is_down_is_one_line_and_no_traceback(monkeypatch, tmp_path):
    from click.testing import CliRunner
    from accel_images.cli import main
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    result = CliRunner().invoke(main, ["smoke", "--nodes", "2", "some/image:tag", "--json"])
    assert result.exit_code not in (0, None)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-images: error: Docker daemon not reachable at unix://")
    assert "Traceback" not in result.output


def test_nodes_is_bounded():
    from click.testing import CliRunner
    from accel_images.cli import main
    result = CliRunner().invoke(main, ["smoke", "--nodes", "0", "some/image:tag"])
    assert result.exit_code == 2 and "--nodes" in result.output
