"""`build --smoke-nodes N` and `nightly --smoke-nodes N`: the N-node smoke test after the smoke test, its
verdict part of the smoke verdict (a failure stops publication as a failed smoke test does), its record in
every report; and the networks of killed runs reclaimed like their containers.

No engine: the smoke runs are stand-ins (the N-node run's verdict is the real judge's, on made-up node
output from tests/unit/test_smoke_nodes.py). The real N-node run: tests/integration/test_smoke_nodes_integration.py,
and test_build_integration.py's build of the suite's image by ID.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from accel_images.builder import builder as builder_module
from accel_images.builder.builder import passed_nodes, smoke_image
from accel_images.builder.leftovers import OWNER_LABEL, ContainerInfo, NetworkInfo, network_created, owner_token, reclaim
from accel_images.builder.outcome import Outcome, outcome_record, smoke_text
from accel_images.builder.settings import BuildSettings
from accel_images.cli import main
from accel_images.errors import EngineError
from accel_images.kb import compat
from accel_images.publish.nightly import NightlyOptions, nightly_record, run_nightly
from accel_images.publish.promote import Target
from accel_images.report.reports import write_reports
from accel_images.smoke.judge import NodesRecord, SmokeResult, with_nodes
from accel_images.smoke.nodes import NodesResult, judge_nodes
from accel_images.state import StateDir
from accel_images.plan.variants import Expansion

from fakes import FakeEngine, InMemoryRegistry, PushingEngine
from test_leftovers_unit import ended_process_token
from test_nightly import DEBIAN, NO_WAIT, NOW, TEMPLATES, UBUNTU, copied, expansion  # noqa: F401  (expansion: a fixture)
from test_smoke_nodes import PLAN, node_report, ran

GREEN = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=())
PASSED: NodesResult = judge_nodes(PLAN, [ran(node_report(0, bandwidth_gbps=0.58)), ran(node_report(1))], 4.2)
FAILED: NodesResult = judge_nodes(PLAN, [ran(node_report(0)), ran(None, exit_code=1, stderr="gloo: connection refused")],
                                  31.0)


def test_the_made_up_runs_are_what_the_tests_say() -> None:
    assert PASSED.ok and PASSED.bandwidth_gbps == 0.58
    assert not FAILED.ok and FAILED.failures[0].startswith("node1: no report (exit 1)")


# ---- the option ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["build", "--vendor", "cpu"], ["nightly", "--registry", "registry.example"]])
@pytest.mark.parametrize("value", ["9", "-1", "two"])
def test_smoke_nodes_out_of_bounds_is_one_line_and_exit_2(command: list[str], value: str) -> None:
    result = CliRunner().invoke(main, [*command, "--smoke-nodes", value])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-images: error: Invalid value for '--smoke-nodes': ")
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["build", "nightly"])
def test_smoke_nodes_reaches_the_build_settings(command: str, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """The option's value is what the run's BuildSettings carry (the run stops where it takes the state's lock)."""
    from accel_images.cli import build as cli_build, nightly as cli_nightly
    seen: list[int] = []

    class Stop(Exception):
        pass

    def held(*args: Any, **kwargs: Any) -> None:
        raise Stop

    real = BuildSettings.__init__

    def watching(self: BuildSettings, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        seen.append(self.smoke_nodes)

    monkeypatch.setattr(BuildSettings, "__init__", watching)
    monkeypatch.setattr(cli_build if command == "build" else cli_nightly, "held", held)   # after the settings
    args = ["--vendor", "cpu", "--state-dir", str(tmp_path / "state"), "--smoke-nodes", "2"]
    if command == "nightly":
        args += ["--registry", "registry.example"]
    result = CliRunner().invoke(main, [command, *args])
    assert isinstance(result.exception, Stop), result.output
    assert seen == [2]


# ---- the verdict ----------------------------------------------------------------------------------------------

def test_a_failed_n_node_run_fails_the_smoke_verdict_with_one_line_naming_it() -> None:
    result = with_nodes(GREEN, FAILED.brief())
    assert not result.ok and result.nodes == FAILED.brief()
    [cause] = result.failures
    assert cause.startswith("2-node smoke failed: node1: no report (exit 1)") and "\n" not in cause
    passed = with_nodes(GREEN, PASSED.brief())
    assert passed.ok and passed.failures == () and passed.nodes is not None and passed.nodes.ok


class Smokes:
    """Stand-ins for the single-node and the N-node run, as smoke_image calls them."""

    def __init__(self, single: SmokeResult = GREEN, nodes: NodesResult | Exception = PASSED) -> None:
        self.single, self.nodes = single, nodes
        self.node_runs: list[dict[str, Any]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Smokes:
        monkeypatch.setattr(builder_module, "run_smoke", lambda engine, image, *args, **kwargs: self.single)
        monkeypatch.setattr(builder_module, "run_nodes", self.run_nodes)
        return self

    def run_nodes(self, engine: object, image: str, plan: Any, **kwargs: Any) -> NodesResult:
        self.node_runs.append({"image": image, "nodes": plan.nodes, "backend": plan.collective.backend})
        if isinstance(self.nodes, Exception):
            raise self.nodes
        return self.nodes


@pytest.fixture
def variant(expansion: Expansion) -> Any:
    return next(v for v in expansion.variants if v.tag == DEBIAN)


@pytest.mark.parametrize("nodes", [0, 1])
def test_without_smoke_nodes_the_n_node_test_does_not_run(monkeypatch: pytest.MonkeyPatch, variant: Any,
                                                          tmp_path: Path, nodes: int) -> None:
    smokes = Smokes(nodes=FAILED).install(monkeypatch)
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke_nodes=nodes)
    result = smoke_image(FakeEngine(), "sha256:built", variant, settings)  # type: ignore[arg-type]
    assert result.ok and result.nodes is None and smokes.node_runs == []


def test_the_n_node_test_runs_on_the_image_the_smoke_test_passed(monkeypatch: pytest.MonkeyPatch, variant: Any,
                                                                  tmp_path: Path) -> None:
    smokes = Smokes(nodes=FAILED).install(monkeypatch)
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke_nodes=2)
    result = smoke_image(FakeEngine(), "sha256:built", variant, settings)  # type: ignore[arg-type]
    assert smokes.node_runs == [{"image": "sha256:built", "nodes": 2, "backend": "gloo"}]
    assert not result.ok and result.failures[0].startswith("2-node smoke failed: node1: ")


def test_a_failed_smoke_test_skips_the_n_node_test(monkeypatch: pytest.MonkeyPatch, variant: Any,
                                                   tmp_path: Path) -> None:
    red = replace(GREEN, ok=False, failures=("check matmul failed",))
    smokes = Smokes(single=red).install(monkeypatch)
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke_nodes=2)
    result = smoke_image(FakeEngine(), "sha256:built", variant, settings)  # type: ignore[arg-type]
    assert result == red and smokes.node_runs == []


def test_an_engine_failure_midway_is_the_n_node_tests_failure(monkeypatch: pytest.MonkeyPatch, variant: Any,
                                                               tmp_path: Path) -> None:
    Smokes(nodes=EngineError("creating network accel-images-nodes-x: pool overlaps")).install(monkeypatch)
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke_nodes=2)
    result = smoke_image(FakeEngine(), "sha256:built", variant, settings)  # type: ignore[arg-type]
    assert not result.ok and result.nodes is not None
    assert result.failures == ("2-node smoke failed: creating network accel-images-nodes-x: pool overlaps",)


def test_an_earlier_pass_counts_only_for_as_many_nodes_as_it_passed() -> None:
    assert passed_nodes({"ok": True}) == 1                 # a pass recorded before --smoke-nodes, or without it
    assert passed_nodes({"ok": True, "nodes": None}) == 1
    assert passed_nodes({"ok": True, "nodes": 2}) == 2
    assert passed_nodes({"ok": True, "nodes": True}) == 1  # the record is read back from disk: never trusted


def nightly(expansion: Expansion, engine: PushingEngine, registry: InMemoryRegistry,
            tmp_path: Path, smoke_nodes: int = 2) -> list[Any]:
    """A nightly whose smoke test is the real smoke_image (with its runs stood in for): no `smoke=` runner."""
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke_nodes=smoke_nodes)
    options = NightlyOptions(Target(registry.host, "team/pytorch"), now=NOW, run_id="r1", retry=NO_WAIT, attest=False)
    return run_nightly(engine, compat.load_kb(), expansion, expansion.variants, registry,  # type: ignore[arg-type]
                       settings, options, templates_dir=TEMPLATES)


def test_a_failed_n_node_smoke_publishes_nothing_and_says_why(expansion: Expansion, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    Smokes(nodes=FAILED).install(monkeypatch)
    registry = InMemoryRegistry()
    engine = PushingEngine(registry)
    nights = nightly(expansion, engine, registry, tmp_path)
    assert [night.status for night in nights] == ["failed", "failed"]
    for night in nights:
        assert night.publication is not None and night.publication.promoted == ()
        assert night.outcome.error.startswith("smoke: 2-node smoke failed: node1: no report (exit 1)")
        assert "\n" not in night.outcome.error
    pushed = {ref.rsplit(":", 1)[1] for call, ref in engine.calls if call == "push"}
    assert pushed == {f"{UBUNTU}-candidate-r1", f"{DEBIAN}-candidate-r1"}   # the candidates only: no real tag
    assert copied(registry) == [] and not any(tag.endswith("-tested") for tag in registry.tagged)
    assert registry.serving(UBUNTU) is None and registry.serving(DEBIAN) is None
    record = nightly_record(nights[1], Target(registry.host, "team/pytorch"))
    assert record["smoke"]["ok"] is False and record["smoke"]["nodes"]["ok"] is False


def test_a_passed_n_node_smoke_is_published_with_its_record(expansion: Expansion, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    Smokes(nodes=PASSED).install(monkeypatch)
    registry = InMemoryRegistry()
    nights = nightly(expansion, PushingEngine(registry), registry, tmp_path)
    assert [night.status for night in nights] == ["built", "built"]
    assert all(night.publication is not None and night.publication.promoted for night in nights)
    assert all(night.publication and registry.serving(night.outcome.variant.tag) == night.publication.digest
               for night in nights)
    nodes = nightly_record(nights[1], Target(registry.host, "team/pytorch"))["smoke"]["nodes"]
    assert nodes == {"ok": True, "nodes": 2, "backend": "gloo", "device": "cpu", "result_ok": True,
                     "bandwidth_gbps": 0.58, "seconds": 4.2, "failures": []}
    assert smoke_text(nights[1].outcome) == "passed on cpu; 2-node: passed, gloo on cpu, 0.58 GB/s"


# ---- the reports ------------------------------------------------------------------------------------------------

HOSTILE = "<script>alert('x')</script>"


def outcomes(expansion: Expansion) -> list[Outcome]:
    ubuntu, debian = expansion.variants
    good = with_nodes(GREEN, PASSED.brief())
    bad_nodes = replace(FAILED.brief(), failures=(f"node1: no report (exit 1): {HOSTILE}",))
    bad = with_nodes(GREEN, bad_nodes)
    return [Outcome(ubuntu, "built", f"team/pytorch:{UBUNTU}", "sha256:u", 10**9, 60.0, smoke=good),
            Outcome(debian, "failed", f"team/pytorch:{DEBIAN}", "sha256:d", 10**9, 60.0, smoke=bad,
                    error="smoke: " + "; ".join(bad.failures), exit_code=1)]


@pytest.fixture
def reports(expansion: Expansion, tmp_path: Path) -> dict[str, str]:
    paths = write_reports([outcome_record(o) for o in outcomes(expansion)], tmp_path / "reports",
                          {"kind": "build", "started": NOW, "finished": NOW + timedelta(minutes=3)})
    return {kind: path.read_text() for kind, path in paths.items()}


def test_report_json_has_the_nodes_object(reports: dict[str, str]) -> None:
    ubuntu, debian = json.loads(reports["json"])["variants"]
    assert ubuntu["smoke"]["nodes"] == {"ok": True, "nodes": 2, "backend": "gloo", "device": "cpu",
                                        "result_ok": True, "bandwidth_gbps": 0.58, "seconds": 4.2, "failures": []}
    nodes = debian["smoke"]["nodes"]
    assert (nodes["ok"], nodes["nodes"], nodes["backend"], nodes["device"], nodes["result_ok"]) == (
        False, 2, "gloo", "cpu", False)
    assert nodes["bandwidth_gbps"] is None and nodes["seconds"] == 31.0
    assert debian["error"].startswith("smoke: 2-node smoke failed: node1: no report (exit 1)")


def test_summary_md_has_a_line_per_image(reports: dict[str, str]) -> None:
    lines = reports["markdown"].splitlines()
    section = lines[lines.index("## Across nodes") + 2:]
    assert section[0] == f"- `cpu/{UBUNTU}`: 2-node: passed, gloo on cpu, 0.58 GB/s"
    assert section[1].startswith(f"- `cpu/{DEBIAN}`: 2-node: failed: node1: no report (exit 1): ")
    assert "<script>" not in section[1] and "&lt;script&gt;" in section[1]


class NodesLines(HTMLParser):
    """Each card's N-node line: data-variant -> (class, data-nodes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.variant = ""
        self.inside = False
        self.found: dict[str, tuple[str, str, str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if "data-variant" in attributes:
            self.variant = attributes["data-variant"] or ""
        if tag == "div" and (attributes.get("class") or "").split()[:1] == ["nodes"]:
            self.inside = True
            self.found[self.variant] = (attributes.get("class") or "", attributes.get("data-nodes") or "", "")

    def handle_endtag(self, tag: str) -> None:
        self.inside = self.inside and tag != "div"

    def handle_data(self, data: str) -> None:
        if self.inside:
            css, count, text = self.found[self.variant]
            self.found[self.variant] = (css, count, text + data)


def test_index_html_has_the_line_in_each_card(reports: dict[str, str]) -> None:
    parser = NodesLines()
    parser.feed(reports["html"])
    assert parser.found[f"cpu/{UBUNTU}"] == ("nodes ok", "2", "2-node: passed, gloo on cpu, 0.58 GB/s")
    css, count, text = parser.found[f"cpu/{DEBIAN}"]
    assert (css, count) == ("nodes bad", "2") and text.startswith("2-node: failed: node1: no report (exit 1)")
    assert HOSTILE in text and HOSTILE not in reports["html"]   # the failure's text, escaped


def test_junit_has_a_testcase_per_image_for_the_n_node_smoke(reports: dict[str, str]) -> None:
    root = ET.fromstring(reports["junit"])
    cases = {case.get("name"): case for case in root.iter("testcase")}
    passed, failed = cases[f"{UBUNTU} [2-node smoke]"], cases[f"{DEBIAN} [2-node smoke]"]
    assert passed.find("failure") is None and passed.get("time") == "4.200"
    assert "2-node: passed, gloo on cpu, 0.58 GB/s" in (passed.findtext("system-out") or "")
    failure = failed.find("failure")
    assert failure is not None and failure.get("message", "").startswith("2-node smoke failed: node1: no report")
    assert HOSTILE in failure.get("message", "")
    assert root.get("tests") == "4" and root.get("failures") == "2"   # each image's case and its N-node case


def test_without_the_n_node_test_no_report_says_anything_of_it(expansion: Expansion,
                                                               tmp_path: Path) -> None:
    records = [outcome_record(replace(o, smoke=replace(o.smoke, nodes=None) if o.smoke else None))
               for o in outcomes(expansion)]
    paths = write_reports(records, tmp_path / "plain", {"kind": "build", "started": NOW})
    assert "Across nodes" not in paths["markdown"].read_text()
    assert 'class="nodes' not in paths["html"].read_text()
    assert "node smoke]" not in paths["junit"].read_text()
    assert all(v["smoke"]["nodes"] is None for v in json.loads(paths["json"].read_text())["variants"])


def test_a_damaged_nodes_object_reads_as_unknown_not_an_error(expansion: Expansion, tmp_path: Path) -> None:
    [record, _] = [dict(outcome_record(o)) for o in outcomes(expansion)]
    smoke: dict[str, Any] = json.loads(json.dumps(record["smoke"]))
    record["smoke"] = {**smoke, "nodes": {"ok": True, "nodes": "two", "bandwidth_gbps": "fast"}}
    paths = write_reports([record], tmp_path / "damaged", {"kind": "build", "started": NOW})
    assert f"- `cpu/{UBUNTU}`: ?-node: passed, ? on ?, bandwidth unknown" in paths["markdown"].read_text()


# ---- what killed runs leave ----------------------------------------------------------------------------------

class Leftovers:
    """A fake engine's containers and networks; it records what reclaim removes."""

    def __init__(self, networks: list[NetworkInfo], containers: list[ContainerInfo] | None = None,
                 refuse: set[str] | None = None) -> None:
        self.networks, self.containers, self.refuse = networks, containers or [], refuse or set()
        self.removed: list[str] = []

    def managed_containers(self) -> list[ContainerInfo]:
        return self.containers

    def remove_container(self, container_id: str) -> None:
        self.removed.append(f"container {container_id}")

    def managed_networks(self) -> list[NetworkInfo]:
        return self.networks

    def remove_network(self, network_id: str) -> None:
        if network_id in self.refuse:
            raise EngineError(f"removing network {network_id}: has active endpoints")
        self.removed.append(f"network {network_id}")


def test_reclaim_removes_the_networks_of_ended_runs_after_their_containers() -> None:
    started = datetime.now(timezone.utc)
    before = started - timedelta(minutes=5)
    ended = {OWNER_LABEL: ended_process_token()}
    store = Leftovers(
        networks=[NetworkInfo("ended", ended, before),
                  NetworkInfo("mine", {OWNER_LABEL: owner_token()}, before),          # this run's: running
                  NetworkInfo("elsewhere", {OWNER_LABEL: "another.host:1:1"}, before),  # another host's: unknown
                  NetworkInfo("ownerless", {}, before),
                  NetworkInfo("newer", ended, started + timedelta(seconds=1)),          # made after this run began
                  NetworkInfo("undated", ended, None),
                  NetworkInfo("busy", ended, before)],
        containers=[ContainerInfo("c1", ended, before, False)], refuse={"busy"})
    removed = reclaim(store, started)
    assert store.removed == ["container c1", "network ended"]
    assert removed == ["c1", "ended"]


def test_a_network_listing_that_fails_leaves_the_run_going() -> None:
    class Down(Leftovers):
        def managed_networks(self) -> list[NetworkInfo]:
            raise EngineError("listing networks labelled io.accel-images.managed: daemon gone")

    assert reclaim(Down([]), datetime.now(timezone.utc)) == []


@pytest.mark.parametrize("text,expected", [
    ("2026-12-07T09:40:50.539590683Z", datetime(2026, 12, 7, 9, 40, 50, 539590, tzinfo=timezone.utc)),
    ("2026-12-07T09:40:50Z", datetime(2026, 12, 7, 9, 40, 50, tzinfo=timezone.utc)),
    ("2026-12-07T10:40:50.5+01:00", datetime(2026, 12, 7, 9, 40, 50, 500000, tzinfo=timezone.utc)),
    ("2026-12-07T09:40:50", None), ("yesterday", None), (None, None), (1733564450, None)])
def test_a_networks_creation_time_as_the_engine_writes_it(text: object, expected: datetime | None) -> None:
    assert network_created(text) == expected


def test_the_record_type_is_what_smoke_result_carries() -> None:
    record = PASSED.brief()
    assert isinstance(record, NodesRecord) and record.text() == "2-node: passed, gloo on cpu, 0.58 GB/s"
    assert FAILED.brief().text().startswith("2-node: failed: node1: no report (exit 1)")
