"""Hostile registry content: whatever a registry serves, reading it gives an image or one RegistryError.

Images are pushed by hand into the real local registry (a config blob and a manifest, written
over HTTP by the test), shaped as no tool would write them: a config that is a string, Labels
as a list, a label that is a number, an index whose entries are not objects, JSON nested
100,000 levels deep (a config, a tested record's label, a smoke record's copy of the labels).
A referrers list that lies (`[]`, `{"manifests": 5}`, HTML) is served by tests/faultproxy.py.
The nightly on top of it fails that variant alone, with one line, publishes the others and
writes the report; `verify` exits 4 in one line; the catalogue leaves such an image out.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_registry_hostile_unit.py.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from click.testing import CliRunner, Result

from accel_images.cli import fanout as cli_fanout, session as cli_session
from accel_images.cli.nightly import nightly_command
from accel_images.cli.verify import verify_command
from accel_images.errors import RegistryError
from accel_images.model import tags
from accel_images.model.hostinfo import HostInfo
from accel_images.publish import catalogue
from accel_images.publish.catalogue import write_record
from accel_images.publish.tested import RECORD_LABEL
from accel_images.registry import RegistryClient
from accel_images.smoke.judge import SmokeResult
from faultproxy import Canned, FaultProxy, RequestSink
from nightly_fixture.cleanup import remove_local_names
from nightly_fixture.rawregistry import CONFIG_TYPES, DOCKER_MANIFEST, OCI_MANIFEST, RawRegistry
from test_catalogue import CPU_NEW, CPU_OLD, CUDA, PASSED, VARIANTS
from test_catalogue_integration import host_file
from test_nightly import DEBIAN, UBUNTU
from test_nightly_integration import Site, site  # noqa: F401  (site is a fixture)
from test_supply import write_key

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(registry: str) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}/pytorch"
    yield name
    RawRegistry(registry).delete_repository(name)


def push_raw_config(raw: RawRegistry, repository: str, tag: str, config: Any) -> str:
    body = json.dumps(config).encode()
    digest = raw.upload_blob(repository, body)
    return raw.put_manifest(repository, tag, {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "layers": [],
                                              "config": {"mediaType": CONFIG_TYPES[DOCKER_MANIFEST],
                                                         "size": len(body), "digest": digest}}, DOCKER_MANIFEST)


HOSTILE_CONFIGS = [
    pytest.param({"config": "string"}, "the image config's config is a string, not an object", id="config-string"),
    pytest.param({"config": {"Labels": ["a=b"]}}, "the image config's config.Labels is a list, not an object",
                 id="labels-list"),
    pytest.param({"config": {"Labels": {"io.accel-images.fingerprint": 7}}},
                 "the image config's config.Labels['io.accel-images.fingerprint'] is a number, not a string", id="label-number"),
    pytest.param(["not", "an", "object"], "the registry answered JSON that is not an object", id="config-list"),
]


@pytest.mark.registry
@pytest.mark.parametrize(("config", "problem"), HOSTILE_CONFIGS)
def test_a_malformed_config_is_one_permanent_registry_error(registry: str, repo: str, config: Any,
                                                           problem: str) -> None:
    raw = RawRegistry(registry)
    push_raw_config(raw, repo, "bad", config)
    with pytest.raises(RegistryError) as caught:
        RegistryClient(registry, credentials=lambda host: None).image(repo, "bad")
    assert problem in caught.value.one_line()
    assert caught.value.transient is False
    assert "\n" not in caught.value.one_line()


@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize(("config", "problem"), HOSTILE_CONFIGS[:2])
def test_a_malformed_image_fails_its_variant_alone_and_the_report_is_written(site: Site, config: Any,
                                                                            problem: str) -> None:
    push_raw_config(site.raw, site.repository, DEBIAN, config)
    result = CliRunner().invoke(nightly_command, site.cli_args())
    assert "Traceback" not in result.output
    assert result.exit_code == 4, result.output   # the only failure is a registry one
    [line] = [line for line in result.stderr.splitlines() if line.startswith("FAILED")]
    assert line.startswith(f"FAILED cpu/{DEBIAN}: ") and problem in line
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    assert {r["tag"]: r["status"] for r in report["variants"]} == {DEBIAN: "failed", UBUNTU: "built"}
    assert site.digests()["latest-cpu"] == site.digests()[UBUNTU]


def ended_cleanly(result: Result) -> bool:
    """The command ended by exiting (with any code), not by an exception escaping it."""
    return (result.exception is None or isinstance(result.exception, SystemExit)) and "Traceback" not in result.output


# ---- JSON nested deeper than any parser's stack --------------------------------------------------

DEPTH = 100_000
"""Far past Python's recursion limit: json.loads raises RecursionError on it, not a ValueError."""


def deeply_nested(depth: int = DEPTH) -> str:
    return "[" * depth + "]" * depth


def push_config_text(raw: RawRegistry, repository: str, tag: str, text: str) -> str:
    """An image whose config blob is `text`, byte for byte (json.dumps cannot write what it must hold)."""
    body = text.encode()
    digest = raw.upload_blob(repository, body)
    return raw.put_manifest(repository, tag, {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "layers": [],
                                              "config": {"mediaType": CONFIG_TYPES[DOCKER_MANIFEST],
                                                         "size": len(body), "digest": digest}}, DOCKER_MANIFEST)


@pytest.mark.registry
def test_a_config_nested_deeper_than_the_parser_goes_is_one_permanent_registry_error(registry: str,
                                                                                    repo: str) -> None:
    push_config_text(RawRegistry(registry), repo, "deep", '{"config": {}, "history": ' + deeply_nested() + "}")
    with pytest.raises(RegistryError) as caught:
        RegistryClient(registry, credentials=lambda host: None).image(repo, "deep")
    assert "nested 100001 levels deep" in caught.value.one_line()
    assert caught.value.transient is False and caught.value.exit_code == 4


@pytest.mark.engine
@pytest.mark.registry
def test_a_deeply_nested_config_fails_its_variant_alone_and_the_report_is_written(site: Site) -> None:
    push_config_text(site.raw, site.repository, DEBIAN, '{"config": ' + deeply_nested() + "}")
    result = CliRunner().invoke(nightly_command, site.cli_args())
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("FAILED")]
    assert line.startswith(f"FAILED cpu/{DEBIAN}: ") and "nested" in line
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    assert {r["tag"]: r["status"] for r in report["variants"]} == {DEBIAN: "failed", UBUNTU: "built"}


@pytest.mark.engine
@pytest.mark.registry
def test_a_deeply_nested_tested_record_trusts_nothing_and_the_image_is_rebuilt(site: Site) -> None:
    first = CliRunner().invoke(nightly_command, [*site.cli_args(), "--os", "debian12"])
    assert first.exit_code == 0, first.output
    site.raw.push_config_image(site.repository, f"{DEBIAN}-tested", {RECORD_LABEL: deeply_nested()})
    result = CliRunner().invoke(nightly_command, [*site.cli_args(), "--os", "debian12"])
    assert ended_cleanly(result), result.output
    assert result.exit_code == 0, result.output
    [record] = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())["variants"]
    assert record["status"] == "built" and "never smoke-tested" in record["reason"]


def push_smoke_record(raw: RawRegistry, repository: str, digest: str, labels_text: str) -> None:
    """A smoke record (accel_images.publish.catalogue) for `digest` whose copy of the image's labels is `labels_text`."""
    empty = raw.upload_blob(repository, b"{}")
    layer = raw.upload_blob(repository, b'{"smoke": {}}')
    raw.put_manifest(repository, tags.record_tag(digest), {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": catalogue.ARTIFACT_TYPE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2, "digest": empty},
        "layers": [{"mediaType": "application/json", "size": 13, "digest": layer}],
        "annotations": {f"{catalogue.RECORD_PREFIX}.ok": "true", f"{catalogue.RECORD_PREFIX}.ran-on": "cpu",
                        catalogue.LABELS_ANNOTATION: labels_text}}, OCI_MANIFEST)


@pytest.mark.registry
def test_catalogue_and_recommend_leave_out_deeply_nested_images_and_records(registry: str, repo: str,
                                                                           tmp_path: Path) -> None:
    raw = RawRegistry(registry)
    good = raw.push_config_image(repo, CPU_OLD, VARIANTS[CPU_OLD].labels())
    write_record(RegistryClient(registry), repo, good, PASSED, "test")
    deep_record = raw.push_config_image(repo, CPU_NEW, VARIANTS[CPU_NEW].labels())
    push_smoke_record(raw, repo, deep_record, '{"a": ' + deeply_nested() + "}")
    push_config_text(raw, repo, CUDA, '{"config": {"Labels": ' + deeply_nested() + "}}")
    namespace, _, image = repo.partition("/")
    args = ["--registry", f"{registry}/{namespace}", "--image", image]

    listed = CliRunner().invoke(cli_session.catalogue_command, [*args, "--json"])
    assert ended_cleanly(listed), listed.output
    assert listed.exit_code == 0, listed.output
    images = {entry["tag"]: entry for entry in json.loads(listed.stdout)["images"]}
    assert images[CPU_OLD]["offered"] is True
    assert images[CPU_NEW]["offered"] is False     # its record is unreadable: nothing vouches for it
    assert CUDA not in images
    assert f"left out {CUDA}: " in listed.stderr and "nested" in listed.stderr

    chosen = CliRunner().invoke(cli_fanout.recommend_command, [*args, "--host-json", host_file(tmp_path, HostInfo())])
    assert ended_cleanly(chosen), chosen.output
    assert chosen.exit_code == 0, chosen.output
    assert chosen.stdout.strip().endswith(f"{repo}:{CPU_OLD}")


# ---- a referrers API that lies ---------------------------------------------------------------------

LIES = [pytest.param(b"[]", "not an object", id="a-list"),
        pytest.param(b'{"manifests": 5}', "manifests is a number, not a list", id="manifests-a-number"),
        pytest.param(b'{"manifests": [5]}', "manifests[0] is a number, not an object", id="an-entry-a-number"),
        pytest.param(b"<html>not json</html>", "not JSON", id="not-json")]


WHERE = {"api": r"/v2/.+/referrers/sha256:",           # the OCI 1.1 referrers API
         "tag": r"/v2/.+/manifests/sha256-[0-9a-f]{64}$"}  # its fallback, the sha256-<hex> tag (distribution 2.8)


def lying_referrers(proxy: FaultProxy, body: bytes, where: str = "api") -> None:
    proxy.faults.canned.append(Canned("GET", WHERE[where], 200, body, "application/vnd.oci.image.index.v1+json"))


@pytest.mark.registry
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("body", "problem"), LIES)
def test_verify_against_a_lying_referrers_list_is_one_line_and_exit_4(registry: str, repo: str, tmp_path: Path,
                                                                     body: bytes, problem: str, where: str) -> None:
    RawRegistry(registry).push_config_image(repo, "t", {})
    _, pub = write_key(tmp_path)
    with FaultProxy(registry) as proxy:
        lying_referrers(proxy, body, where)
        result = CliRunner().invoke(verify_command, [f"{proxy.host}/{repo}:t", "--key", str(pub)])
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    [line] = result.output.splitlines()
    assert line.startswith("accel-images: error: ") and problem in line and "referrers" in line
# ---- a tag list's next page (the `Link` header) -----------------------------------------------------

SECRET = f"pagination-secret-{uuid.uuid4().hex[:8]}"


def logged_in(tmp_path: Path, host: str) -> dict[str, str]:
    """The environment of a process whose `docker login HOST` is builder / SECRET."""
    auth = base64.b64encode(f"builder:{SECRET}".encode()).decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return {**os.environ, "DOCKER_CONFIG": str(tmp_path), "PYTHONPATH": str(ROOT / "tests")}


def run_catalogue(host: str, repository: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "accel_images", "catalogue", "--registry", host,
                             "--image", repository], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return result, time.monotonic() - started


@pytest.mark.registry
def test_a_next_page_on_another_host_is_refused_and_gets_no_request_nor_credentials(
        registry: str, repo: str, tmp_path: Path) -> None:
    """The registry (the proxy, which wants the user's login) points the tag list's next page at a sink."""
    RawRegistry(registry).push_config_image(repo, "one", {})
    with FaultProxy(registry) as proxy, RequestSink() as sink:
        proxy.faults.basic = ("builder", SECRET)
        proxy.faults.next_link = f"http://{sink.host}/v2/{repo}/tags/list?n=1000&last=one"
        result, _ = run_catalogue(proxy.host, repo, logged_in(tmp_path, proxy.host))
        with pytest.raises(RegistryError) as caught:
            RegistryClient(proxy.host, credentials=lambda host: {"username": "builder", "password": SECRET}).tags(repo)
    assert sink.received == [], [(r.method, r.path, r.headers.get("Authorization")) for r in sink.received]
    assert "Traceback" not in result.stderr and result.returncode == 4, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("accel-images: error: ") and f"on another host (http://{sink.host})" in line, line
    assert f"on another host (http://{sink.host})" in caught.value.one_line()
    assert SECRET not in result.stderr + caught.value.one_line()


@pytest.mark.registry
def test_a_next_page_in_another_repository_is_refused(registry: str, repo: str) -> None:
    """Same host, another repository's tag list: its tags are not this repository's."""
    RawRegistry(registry).push_config_image(repo, "one", {})
    with FaultProxy(registry) as proxy:
        proxy.faults.next_link, proxy.faults.next_link_on = "/v2/library/debian/tags/list?n=1000", f"/v2/{repo}/"
        with pytest.raises(RegistryError) as caught:
            RegistryClient(proxy.host, credentials=lambda host: None).tags(repo)
    assert "/v2/library/debian/tags/list" in caught.value.one_line()
    assert f"not the tag list of {repo}" in caught.value.one_line()


@pytest.mark.registry
def test_a_tag_list_whose_next_page_is_itself_stops_at_the_repeat(registry: str, repo: str,
                                                                  tmp_path: Path) -> None:
    """Before: `catalogue` asked again and again (868 requests in 40 s) and never ended."""
    RawRegistry(registry).push_config_image(repo, "one", {})
    with FaultProxy(registry) as proxy:
        proxy.faults.next_link = f"{{self}}/v2/{repo}/tags/list?n=1000"
        result, took = run_catalogue(proxy.host, repo, logged_in(tmp_path, "nowhere.example"))
        listed = [request for request in proxy.faults.seen if "/tags/list" in request]
    assert "Traceback" not in result.stderr and result.returncode == 4, result.stderr
    [line] = result.stderr.splitlines()
    assert "repeats a page already read" in line, line
    assert len(listed) == 1 and took < 20, (listed, took)   # the first page names itself as the next


@pytest.mark.engine
@pytest.mark.registry
def test_a_lying_referrers_api_fails_the_variant_it_was_asked_for_and_the_report_is_written(
        site: Site, tmp_path: Path) -> None:
    first = CliRunner().invoke(nightly_command, [*site.cli_args(), "--os", "debian12"])
    assert first.exit_code == 0, first.output
    key, _ = write_key(tmp_path)
    with FaultProxy(site.registry) as proxy:
        lying_referrers(proxy, b'{"manifests": 5}')
        result = CliRunner().invoke(nightly_command, [*site.cli_args(), "--registry", proxy.host,
                                                      "--sign-key", str(key)])
        remove_local_names(docker.from_env(), f"{proxy.host}/{site.namespace}/")
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    statuses = {r["tag"]: (r["status"], r["error"]) for r in report["variants"]}
    assert statuses[DEBIAN][0] == "failed" and "manifests is a number" in statuses[DEBIAN][1]

def test_a_nightly_behind_a_self_referencing_tag_list_ends_and_publishes(site: Site, tmp_path: Path) -> None:
    """The nightly lists tags twice (its sweep of old candidates, retention): both give up at the repeat,
    with a line each, and the run publishes and reports as before."""
    with FaultProxy(site.registry) as proxy:
        proxy.faults.next_link = f"{{self}}/v2/{site.repository}/tags/list?n=1000"
        args = [arg if arg != site.registry else proxy.host for arg in site.cli_args()] + ["--os", "debian12"]
        result = subprocess.run([sys.executable, "-m", "nightly_fixture", "nightly", *args], cwd=ROOT,
                                env=logged_in(tmp_path, "nowhere.example"), capture_output=True, text=True,
                                timeout=300)
        listed = [request for request in proxy.faults.seen if "/tags/list" in request]
    assert "Traceback" not in result.stderr, result.stderr
    assert "repeats a page already read" in result.stderr, result.stderr
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    assert {r["tag"]: r["status"] for r in report["variants"]} == {DEBIAN: "built"}
    assert len(listed) <= 10, listed


# ---- escape sequences in what a registry says ----------------------------------------------------------

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x9b1m\u202eevil"
"""A window title, a screen clear, a colour, a C1 CSI and a right-to-left override."""


def controls_in(text: str) -> list[str]:
    """Every character a terminal would act on, but the newlines that end lines."""
    return [char for char in text if char != "\n" and (not char.isprintable() or char == "\u202e")]


@pytest.mark.registry
def test_escape_sequences_in_a_smoke_record_reach_no_terminal(registry: str, repo: str, tmp_path: Path) -> None:
    """Before: the record's `ran-on` and device went to the terminal raw in `catalogue` and `recommend`."""
    digest = RawRegistry(registry).push_config_image(repo, CPU_OLD, VARIANTS[CPU_OLD].labels())
    write_record(RegistryClient(registry), repo, digest,
                 SmokeResult(True, f"cpu{ESCAPES}", False, (), (), raw={"device_name": f"AMD{ESCAPES}"}), "r1")
    host = tmp_path / "host.json"
    host.write_text('{"vendor": "cpu"}')
    env = {**os.environ, "COLUMNS": "250"}
    listed = subprocess.run([sys.executable, "-m", "accel_images", "catalogue", "--registry", registry,
                             "--image", repo], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    chosen = subprocess.run([sys.executable, "-m", "accel_images", "recommend", "--registry", registry,
                             "--image", repo, "--host-json", str(host)], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    for result in (listed, chosen):
        assert result.returncode == 0, result.stderr
        assert controls_in(result.stdout + result.stderr) == [], result.stdout + result.stderr
    assert "passed on cpu\\x1b]0;owned\\x07\\x1b[2J" in listed.stdout, listed.stdout    # shown, escaped
    assert "\\u202eevil" in chosen.stderr, chosen.stderr


@pytest.mark.engine
@pytest.mark.registry
def test_escape_sequences_in_a_registry_error_reach_no_terminal(site: Site) -> None:
    """The registry refuses to serve a variant's manifest with an error message full of escape sequences:
    the nightly's FAILED line, its table and `catalogue`'s error line show them escaped."""
    error = json.dumps({"errors": [{"code": "DENIED", "message": f"go away{ESCAPES}"}]}).encode()
    with FaultProxy(site.registry) as proxy:
        proxy.faults.canned = [Canned("GET", f"/manifests/{DEBIAN}", 400, error)]
        args = [arg if arg != site.registry else proxy.host for arg in site.cli_args()] + ["--os", "debian12"]
        night = CliRunner().invoke(nightly_command, args)
        proxy.faults.canned = [Canned("GET", "/tags/list", 400, error)]
        listed = subprocess.run([sys.executable, "-m", "accel_images", "catalogue", "--registry", proxy.host,
                                 "--image", site.repository], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in night.output and night.exit_code == 4, night.output
    assert controls_in(night.output) == [], night.output
    [failed] = [line for line in night.stderr.splitlines() if line.startswith("FAILED")]
    assert "DENIED: go away\\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\x9b1m\\u202eevil" in failed, failed
    assert listed.returncode == 4 and controls_in(listed.stderr) == [], listed.stderr
    assert len(listed.stderr.splitlines()) == 1 and "go away\\x1b]0;owned" in listed.stderr, listed.stderr
