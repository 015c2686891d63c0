"""Ctrl-C and SIGTERM during `accel-images nightly`, and rebuilds for age that skip the layer cache.

The nightly runs as a subprocess (`python -m nightly_fixture nightly`: the CLI with the fixture's smoke stage) against the shared engine and the
local registry, in a `test-<uuid>` namespace of its own (the `site` fixture of test_nightly.py),
on the tiny fixture template made slow where the signal is meant to land: a sleeping build step,
a sleeping smoke stub, or a manifest PUT held by a proxy in front of the registry. Afterwards the
registry is read over its HTTP API directly: a stopped run must leave every real tag where the
last good run put it (or absent when there was none), no candidate tag, no smoke container, a
partial report, and a lock the next nightly can take.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_nightly_interrupt_unit.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest
from click.testing import CliRunner

from accel_images.kb import compat
from accel_images.cli.nightly import nightly_command
from accel_images.cli.options import load_expansion
from accel_images.builder.settings import BuildSettings
from accel_images.state import StateDir
from accel_images.builder.engine import Engine
from accel_images.publish.nightly import NightlyOptions, NightlyOutcome, run_nightly
from accel_images.publish.promote import Target
from accel_images.registry import RegistryClient
from accel_images.stopping import IN_FLIGHT_WAIT_S, WAITING
from accel_images.smoke.launcher import SMOKE_LABEL
from faultproxy import FaultProxy
from nightly_fixture.cleanup import remove_local_names
from test_nightly import DEBIAN, NO_WAIT
from test_nightly_integration import Site, site  # noqa: F401  (site is a fixture)

ROOT = Path(__file__).resolve().parents[2]
ONLY_DEBIAN = ("--os", "debian12")
SMOKE_STUB_FIRST_LINE = "'import json, platform, sys' \\"
LABEL_LINE = "LABEL {{ label_lines"


# ---- making the fixture template slow where the signal should land -----------------------------

def template(site: Site) -> Path:
    return site.templates / "vendors" / "cpu.Dockerfile.j2"


def edit_template(site: Site, old: str, new: str) -> str:
    """Replace `old` by `new` in the site's template; the original text, to put back later."""
    path = template(site)
    original = path.read_text()
    assert old in original, f"the fixture template no longer holds {old!r}"
    path.write_text(original.replace(old, new, 1))
    return original


def slow_build_step(site: Site, token: str) -> str:
    """A RUN step that prints `step-<token>-42` (the step line shows `$((40+2))`), then sleeps."""
    return edit_template(site, LABEL_LINE, f"RUN echo step-{token}-$((40+2)) && sleep 300\n{LABEL_LINE}")


def slow_smoke(site: Site) -> str:
    """The stub smoke workload sleeps before it answers."""
    return edit_template(site, SMOKE_STUB_FIRST_LINE, f"{SMOKE_STUB_FIRST_LINE}\n      'import time; time.sleep(300)' \\")


def changed_content(site: Site, token: str) -> str:
    """A harmless extra step: a content change that rebuilds, and whose smoke passes at once."""
    return edit_template(site, LABEL_LINE, f"RUN echo {token} > /content-change\n{LABEL_LINE}")


# ---- the run and what it leaves ------------------------------------------------------------------

def good_run(site: Site) -> dict[str, str | None]:
    """A nightly that publishes the Debian variant; the registry's tags and digests after it."""
    result = CliRunner().invoke(nightly_command, [*site.cli_args(), *ONLY_DEBIAN])
    assert result.exit_code == 0, result.output
    digests = site.digests()
    assert DEBIAN in digests
    return digests


def start_nightly(site: Site, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    """`accel-images nightly` in a process of its own; output to files, so no pipe can fill up."""
    output = tmp_path / "nightly.out"
    with open(output, "w") as sink:
        return subprocess.Popen([sys.executable, "-m", "nightly_fixture", "nightly", *site.cli_args(), *ONLY_DEBIAN,
                                 "--report-dir", str(reports_of(tmp_path)), *extra],
                                cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "COLUMNS": "250", "PYTHONPATH": str(ROOT / "tests")})


def reports_of(tmp_path: Path) -> Path:
    return tmp_path / "interrupted-reports"


def output_of(tmp_path: Path) -> str:
    return (tmp_path / "nightly.out").read_text()


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[str], tmp_path: Path, what: str,
               timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            raise AssertionError(f"the nightly ended (exit {process.returncode}) before {what}:\n"
                                 f"{output_of(tmp_path)}")
        time.sleep(0.2)
    process.kill()
    raise AssertionError(f"{what} never happened:\n{output_of(tmp_path)}")


def stop(process: subprocess.Popen[str], signum: int) -> int:
    process.send_signal(signum)
    try:
        return process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the nightly did not stop after the signal") from None


def log_says(state: Path, text: str) -> bool:
    logs = state / "logs"
    return logs.is_dir() and any(text in log.read_text(errors="replace") for log in logs.rglob("*.log"))


def smoke_containers(client: docker.DockerClient, site: Site, **filters: str) -> list[str]:
    """Smoke containers of this site's images (the label names the image they test). One list call: the
    SDK's containers.list inspects each container after listing them, and fails when another run on the
    shared engine removes one in between."""
    mine = f"{site.registry}/{site.namespace}/"
    return [c["Id"] for c in client.api.containers(all=True, filters={"label": SMOKE_LABEL, **filters})
            if (c.get("Labels") or {}).get(f"{SMOKE_LABEL}.image", "").startswith(mine)]


def containers_running(client: docker.DockerClient, token: str) -> list[str]:
    """Containers whose command carries `token` (a build step's intermediate container); one list call."""
    return [c["Id"] for c in client.api.containers(all=True) if token in (c.get("Command") or "")]


def eventually_empty(find: Callable[[], list[str]], timeout_s: float = 60) -> list[str]:
    """The daemon removes a cancelled build's container asynchronously; give it a moment."""
    deadline = time.monotonic() + timeout_s
    left = find()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = find()
    return left


def assert_stopped_cleanly(site: Site, tmp_path: Path, client: docker.DockerClient, returncode: int, code: int,
                           good: dict[str, str | None] | None) -> None:
    """Exit code, one-line output, partial report, registry untouched, no candidate, no smoke container."""
    output = output_of(tmp_path)
    assert returncode == code, output
    assert "Traceback" not in output
    assert "accel-images: stopped; partial report:" in output and "accel-images: interrupted" in output
    report = json.loads((reports_of(tmp_path) / "report.json").read_text())
    assert report["meta"]["partial"] is True
    assert [(r["tag"], r["status"]) for r in report["variants"]] == [(DEBIAN, "interrupted")]
    tags_now = site.raw.tags(site.repository)
    assert not [tag for tag in tags_now if "-candidate-" in tag]
    assert site.digests() == (good or {})   # every real tag where the last good run left it, or absent
    assert eventually_empty(lambda: smoke_containers(client, site)) == []


def assert_next_nightly_runs(site: Site, original_template: str, good: dict[str, str | None] | None) -> None:
    """The lock is free again: the next nightly (on the original template) runs to the end."""
    template(site).write_text(original_template)
    result = CliRunner().invoke(nightly_command, [*site.cli_args(), *ONLY_DEBIAN])
    assert result.exit_code == 0, result.output
    expected = "0 published, 0 kept, 1 skipped, 0 failed" if good else "1 published, 0 kept, 0 skipped, 0 failed"
    assert expected in result.output
    if good:
        assert site.digests() == good


SIGNALS = [pytest.param(signal.SIGINT, 130, False, id="SIGINT-first-run"),
           pytest.param(signal.SIGTERM, 143, True, id="SIGTERM-after-a-good-run")]
SIGNALS_SWAPPED = [pytest.param(signal.SIGINT, 130, True, id="SIGINT-after-a-good-run"),
                   pytest.param(signal.SIGTERM, 143, False, id="SIGTERM-first-run")]


# ---- (a) during the build ------------------------------------------------------------------------

@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize(("signum", "code", "previous"), SIGNALS)
def test_a_signal_during_the_build_publishes_nothing(site: Site, tmp_path: Path,
                                                     docker_client: docker.DockerClient,
                                                     signum: int, code: int, previous: bool) -> None:
    good = good_run(site) if previous else None
    token = uuid.uuid4().hex
    original = slow_build_step(site, token)
    process = start_nightly(site, tmp_path)
    wait_until(lambda: log_says(site.state, f"step-{token}-42"), process, tmp_path, "the slow build step")
    returncode = stop(process, signum)
    assert_stopped_cleanly(site, tmp_path, docker_client, returncode, code, good)
    assert eventually_empty(lambda: containers_running(docker_client, token)) == []
    assert_next_nightly_runs(site, original, good)


# ---- (b) during the candidate's smoke test ---------------------------------------------------------

@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize(("signum", "code", "previous"), SIGNALS_SWAPPED)
def test_a_signal_during_the_smoke_test_removes_candidate_and_container(
        site: Site, tmp_path: Path, docker_client: docker.DockerClient, signum: int, code: int,
        previous: bool) -> None:
    good = good_run(site) if previous else None
    original = slow_smoke(site)
    process = start_nightly(site, tmp_path)
    wait_until(lambda: bool(smoke_containers(docker_client, site, status="running")), process, tmp_path,
               "a running smoke container")
    candidates = [tag for tag in site.raw.tags(site.repository) if "-candidate-" in tag]
    assert len(candidates) == 1                       # the smoke runs on the pushed candidate
    returncode = stop(process, signum)
    assert_stopped_cleanly(site, tmp_path, docker_client, returncode, code, good)
    assert_next_nightly_runs(site, original, good)


# ---- (c) between promotion pushes ------------------------------------------------------------------

class HoldingProxy(FaultProxy):
    """Forwards to the registry, except the first manifest `method` (PUT, or DELETE) of a reference (a
    tag, or a digest) matching `held`: that one is read, then held until `release` is set; then it is
    answered 500 without ever reaching the registry, or (`lands=True`) forwarded to it late, as a slow
    registry would apply it. `holding` is set once the request is held."""

    def __init__(self, upstream: str, held: re.Pattern[str], lands: bool = False, method: str = "PUT") -> None:
        super().__init__(upstream)
        self.holding = threading.Event()
        self.release = threading.Event()
        forwarding = self._server.RequestHandlerClass
        proxy = self

        class Holding(forwarding):  # type: ignore[misc, valid-type]
            def _handle(self) -> None:
                tag = self.path.rsplit("/manifests/", 1)[-1] if "/manifests/" in self.path else ""
                if self.command == method and held.fullmatch(tag) and not proxy.holding.is_set():
                    body = self._body()
                    proxy.holding.set()
                    proxy.release.wait(600)
                    if lands:
                        self._forward(body)
                        return
                    self._answer(500, b'{"errors":[{"code":"UNKNOWN","message":"held, then refused"}]}',
                                 {"Content-Type": "application/json"})
                    return
                super()._handle()

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _handle

        self._server.RequestHandlerClass = Holding


WAITING_SAID = WAITING.format(IN_FLIGHT_WAIT_S)
"""What the nightly says when a stop waits for a registry request in flight."""


def stop_while_held(process: subprocess.Popen[str], signum: int, proxy: HoldingProxy, tmp_path: Path) -> int:
    """Send the stop while the proxy holds a request, release the request once the nightly says it waits for
    it (stopping.WAITING), then wait for the exit: the stop comes first, whatever the machine's load."""
    process.send_signal(signum)
    wait_until(lambda: WAITING_SAID in output_of(tmp_path), process, tmp_path, "the notice that the stop waits")
    time.sleep(2)   # a nightly that waits as it says is alive however long this takes: no load can fail it
    assert process.poll() is None, "the stop did not wait for the request in flight:\n" + output_of(tmp_path)
    proxy.release.set()
    try:
        return process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the nightly did not stop after the held request ended") from None


@pytest.fixture
def holding_proxy(registry: str) -> Iterator[HoldingProxy]:
    """Holds the push of the dated tag, the second real tag: the full tag is promoted by then."""
    with HoldingProxy(registry, re.compile(re.escape(DEBIAN) + r"-\d{8}")) as proxy:
        try:
            yield proxy
        finally:
            proxy.release.set()


@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize(("signum", "code", "previous"), SIGNALS_SWAPPED)
def test_a_signal_between_promotion_pushes_puts_the_promoted_tags_back(
        site: Site, tmp_path: Path, docker_client: docker.DockerClient, holding_proxy: HoldingProxy,
        signum: int, code: int, previous: bool) -> None:
    good = good_run(site) if previous else None
    original = changed_content(site, uuid.uuid4().hex)
    try:
        process = start_nightly(site, tmp_path, "--registry", holding_proxy.host)
        wait_until(holding_proxy.holding.is_set, process, tmp_path, "the push of the dated tag")
        promoted = site.raw.digest(site.repository, DEBIAN)
        assert promoted is not None and promoted != (good or {}).get(DEBIAN)   # the full tag had moved
        returncode = stop_while_held(process, signum, holding_proxy, tmp_path)
        assert_stopped_cleanly(site, tmp_path, docker_client, returncode, code, good)
    finally:
        remove_local_names(docker_client, f"{holding_proxy.host}/{site.namespace}/")
    assert_next_nightly_runs(site, original, good)


# ---- (d) while a real tag's manifest PUT is in flight, landing late ----------------------------------

@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize(("signum", "code"), [pytest.param(signal.SIGINT, 130, id="SIGINT"),
                                              pytest.param(signal.SIGTERM, 143, id="SIGTERM")])
def test_a_stop_while_a_real_tag_put_is_in_flight_waits_for_it_then_puts_the_tag_back(
        site: Site, tmp_path: Path, docker_client: docker.DockerClient, registry: str, signum: int,
        code: int) -> None:
    """The full tag's PUT is held by a slow registry and lands 4 s after the signal: the stop must
    wait for it, put the tag back after it landed, and say so in the report."""
    good = good_run(site)
    original = changed_content(site, uuid.uuid4().hex)
    with HoldingProxy(registry, re.compile(re.escape(DEBIAN)), lands=True) as proxy:
        try:
            process = start_nightly(site, tmp_path, "--registry", proxy.host)
            wait_until(proxy.holding.is_set, process, tmp_path, "the push of the full tag")
            assert site.raw.digest(site.repository, DEBIAN) == good[DEBIAN]       # held: not landed yet
            returncode = stop_while_held(process, signum, proxy, tmp_path)
            time.sleep(1)                     # anything still on its way would land by now
            assert_stopped_cleanly(site, tmp_path, docker_client, returncode, code, good)
        finally:
            proxy.release.set()
            remove_local_names(docker_client, f"{proxy.host}/{site.namespace}/")
    [record] = json.loads((reports_of(tmp_path) / "report.json").read_text())["variants"]
    assert record["pushed_tags"] == [] and record["digest"] == good[DEBIAN]
    assert record["candidate_digest"] not in (None, good[DEBIAN])
    assert record["tags_after_stop"] == {tag: good.get(tag) for tag in record["tags_after_stop"]}
    assert DEBIAN in record["tags_after_stop"]
    assert_next_nightly_runs(site, original, good)


# ---- (f) after a finished promotion, while the candidate is deleted ------------------------------------

TOMBSTONE_DELETE = re.compile(r"sha256:(?!0{64})[0-9a-f]{64}")
"""A manifest DELETE by digest, other than the check that deletes are allowed (RegistryClient.check_deletes,
which deletes the all-zero digest no manifest has): the delete of a tag's tombstone."""


@pytest.mark.engine
@pytest.mark.registry
def test_a_stop_while_the_candidate_is_deleted_reports_the_finished_promotion(
        site: Site, tmp_path: Path, docker_client: docker.DockerClient, registry: str) -> None:
    """Every real tag has moved; Ctrl-C comes while the candidate's delete is held (and then refused).
    The report says so: the variant published, its tags pushed, the new digest, the candidate left."""
    good = good_run(site)                  # its layers in the registry: the run behind the proxy pushes one
    changed_content(site, uuid.uuid4().hex)
    with HoldingProxy(registry, TOMBSTONE_DELETE, method="DELETE") as proxy:
        try:
            process = start_nightly(site, tmp_path, "--registry", proxy.host)
            wait_until(proxy.holding.is_set, process, tmp_path, "the delete of the candidate")
            returncode = stop_while_held(process, signal.SIGINT, proxy, tmp_path)
        finally:
            proxy.release.set()
            remove_local_names(docker_client, f"{proxy.host}/{site.namespace}/")
    output = output_of(tmp_path)
    assert returncode == 130 and "Traceback" not in output, output
    now = site.digests()
    assert now[DEBIAN] != good[DEBIAN]                                  # promoted before the stop
    [record] = json.loads((reports_of(tmp_path) / "report.json").read_text())["variants"]
    assert record["status"] == "built" and record["digest"] == now[DEBIAN] == record["candidate_digest"]
    assert sorted(record["pushed_tags"]) == sorted(tag for tag, digest in now.items()
                                                   if digest == now[DEBIAN] and "-candidate-" not in tag)
    [candidate] = [tag for tag in site.raw.tags(site.repository) if "-candidate-" in tag]
    assert record["candidate_left"] is True and record["candidate"].endswith(f":{candidate}")
    assert site.raw.digest(site.repository, candidate) == now[DEBIAN]   # left on its image, not on a tombstone


# ---- (g) during retention ------------------------------------------------------------------------------

@pytest.mark.engine
@pytest.mark.registry
def test_a_stop_during_retention_still_writes_the_report_and_leaves_no_tombstone(
        site: Site, tmp_path: Path, docker_client: docker.DockerClient, registry: str) -> None:
    good = good_run(site)
    old = f"{DEBIAN}-20200101"
    old_digest = site.raw.push_config_image(site.repository, old, {"an": "older image"})
    with HoldingProxy(registry, TOMBSTONE_DELETE, method="DELETE") as proxy:
        try:
            process = start_nightly(site, tmp_path, "--registry", proxy.host, "--keep-dated", "1")
            wait_until(proxy.holding.is_set, process, tmp_path, "the delete of an old dated tag")
            returncode = stop_while_held(process, signal.SIGINT, proxy, tmp_path)
        finally:
            proxy.release.set()
            remove_local_names(docker_client, f"{proxy.host}/{site.namespace}/")
    output = output_of(tmp_path)
    assert returncode == 130 and "Traceback" not in output, output
    assert "accel-images: stopped during retention; report:" in output
    report = json.loads((reports_of(tmp_path) / "report.json").read_text())
    assert [(r["tag"], r["status"]) for r in report["variants"]] == [(DEBIAN, "skipped")]
    assert report["meta"]["retention"]["interrupted"] is True and report["meta"]["retention"]["pruned"] == []
    assert site.raw.digest(site.repository, old) == old_digest            # never left on a tombstone
    assert {tag: digest for tag, digest in site.digests().items() if tag != old} == good


# ---- (e) SIGKILL during promotion: the next run heals every tag and sweeps the candidate -------------

@pytest.mark.engine
@pytest.mark.registry
def test_a_run_killed_during_promotion_is_healed_and_swept_by_the_next_run(
        site: Site, tmp_path: Path, docker_client: docker.DockerClient, holding_proxy: HoldingProxy) -> None:
    good = good_run(site)
    changed_content(site, uuid.uuid4().hex)            # kept: the next run finds this very image unchanged
    try:
        process = start_nightly(site, tmp_path, "--registry", holding_proxy.host)
        wait_until(holding_proxy.holding.is_set, process, tmp_path, "the push of the dated tag")
        process.kill()                                  # no cleanup at all
        process.wait(timeout=60)
        holding_proxy.release.set()
    finally:
        remove_local_names(docker_client, f"{holding_proxy.host}/{site.namespace}/")
    left = site.digests()
    promoted = left[DEBIAN]
    assert promoted != good[DEBIAN]                                      # the full tag moved, then the kill
    dated = next(tag for tag in left if re.fullmatch(re.escape(DEBIAN) + r"-\d{8}", tag))
    assert left[dated] == good[dated] != promoted and left["2.13-cpu"] == good["2.13-cpu"]
    [candidate] = [tag for tag in site.raw.tags(site.repository) if "-candidate-" in tag]
    time.sleep(1.1)                                     # the next run starts in a later second

    result = CliRunner().invoke(nightly_command, [*site.cli_args(), *ONLY_DEBIAN])
    assert result.exit_code == 0, result.output
    assert "0 published, 0 kept, 1 skipped, 0 failed" in result.output
    healed = site.digests()
    assert {tag: healed[tag] for tag in (DEBIAN, dated, "2.13-cpu")} == dict.fromkeys((DEBIAN, dated, "2.13-cpu"),
                                                                                   promoted)
    assert not [tag for tag in site.raw.tags(site.repository) if "-candidate-" in tag]
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    [record] = report["variants"]
    assert record["swept_candidates"] == [candidate]
    assert sorted(record["pushed_tags"]) == sorted([dated, "2.13-cpu"])


def nightly_debian(site: Site, max_age_days: float) -> NightlyOutcome:
    expansion = load_expansion(str(site.matrix))
    variants = [v for v in expansion.variants if v.tag == DEBIAN]
    # attest=False: the stub images have no torch to inventory (tests/unit/test_supply.py attests)
    options = NightlyOptions(Target(site.registry, site.repository), max_age_days=max_age_days, retry=NO_WAIT,
                             attest=False)
    [night] = run_nightly(Engine.connect(), compat.load_kb(), expansion, variants, RegistryClient(site.registry),
                          BuildSettings(options=site.options(), state_dir=StateDir(site.state), network_mode="none"),
                          options, templates_dir=site.templates)
    assert night.status == "built", night.outcome.error
    return night


def own_layers(client: docker.DockerClient, site: Site, base: str) -> list[str]:
    """The layers the template added on top of the base (RootFS.Layers past the base's)."""
    layers = client.images.get(f"{site.repository}:{DEBIAN}").attrs["RootFS"]["Layers"]
    under = client.images.get(base).attrs["RootFS"]["Layers"]
    assert layers[:len(under)] == under
    return layers[len(under):]


@pytest.mark.engine
@pytest.mark.registry
def test_a_rebuild_for_age_shares_no_layer_and_a_content_rebuild_uses_the_cache(
        site: Site, docker_client: docker.DockerClient, base_images) -> None:
    first = nightly_debian(site, max_age_days=7)
    old = own_layers(docker_client, site, base_images.python)
    assert old

    aged = nightly_debian(site, max_age_days=0)
    assert aged.reason.startswith("older than 0 days")
    assert aged.outcome.fingerprint == first.outcome.fingerprint
    fresh = own_layers(docker_client, site, base_images.python)
    assert len(fresh) == len(old) and set(fresh).isdisjoint(old)
    assert log_says(site.state, "nocache=True")
    assert site.raw.digest(site.repository, DEBIAN) == aged.registry_digest != first.registry_digest

    changed_content(site, uuid.uuid4().hex)
    content = nightly_debian(site, max_age_days=7)
    assert content.reason == "template, build context or build args changed"
    layers = own_layers(docker_client, site, base_images.python)
    assert layers[:len(fresh)] == fresh and len(layers) == len(fresh) + 1   # cached steps, one new
