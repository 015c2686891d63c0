"""The nightly rebuild: what is skipped and why, promote on green, the lock, and the command.

The end-to-end tests use a tiny template set (tests/nightly_fixture/templates: the base image
plus a stub smoke workload that reports what the image promises) on top of local/debian:bookworm,
published under a repository of their own in the local registry; each run takes seconds.
Registry state is checked over the registry's HTTP API directly, not through accel_images.registry.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_nightly.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from io import BytesIO
from pathlib import Path

import docker
import pytest
from click.testing import CliRunner

from accel_images.kb import compat
from accel_images.model import tags
from accel_images.cli.nightly import nightly_command
from accel_images.cli.options import load_expansion
from accel_images.builder.settings import BuildSettings
from accel_images.state import StateDir
from accel_images.builder.engine import Engine
from accel_images.builder.fingerprint import FINGERPRINT_LABEL
from accel_images.publish.nightly import NightlyOptions, NightlyOutcome, run_nightly
from accel_images.publish.promote import Target
from accel_images.registry import RegistryClient
from accel_images.model.reference import Mirror
from accel_images.render.contexts import RenderOptions
from accel_images.publish.tested import SmokedRecord
from nightly_fixture import stubsmoke
from nightly_fixture.cleanup import remove_local_names
from nightly_fixture.rawregistry import RawRegistry
from test_nightly import TEMPLATES, DEBIAN, UBUNTU, NO_WAIT, write_matrix


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- end to end: real engine, real local registry ----------------------------------------------

@dataclass(frozen=True)
class Site:
    """One test's own corner of the local registry, its matrix, templates and state.

    Builds run with network mode `none`: the fixture template needs no network, and so the
    tests do not depend on the daemon's default bridge."""

    registry: str
    namespace: str
    matrix: Path
    templates: Path
    state: Path

    @property
    def repository(self) -> str:
        return f"{self.namespace}/pytorch"

    @property
    def raw(self) -> RawRegistry:
        return RawRegistry(self.registry)

    def base(self, name: str) -> str:
        return f"{self.registry}/{self.namespace}/library/{name}"

    def options(self) -> RenderOptions:
        return RenderOptions(mirrors=(Mirror("docker.io", f"{self.registry}/{self.namespace}"),))

    def cli_args(self) -> list[str]:
        return ["--registry", self.registry, "--matrix", str(self.matrix), "--templates", str(self.templates),
                "--registry-mirror", f"docker.io={self.registry}/{self.namespace}", "--state-dir", str(self.state),
                "--network", "none", "--no-attest"]  # the stub images have no torch to inventory

    def digests(self) -> dict[str, str | None]:
        """Every tag but the records (`<full>-tested`: records(); `sha256-<hex>.smoke`: smoke_records()), with its digest."""
        return {tag: self.raw.digest(self.repository, tag) for tag in self.raw.tags(self.repository)
                if not tag.endswith(("-tested", tags.RECORD_SUFFIX))}

    def records(self) -> dict[str, SmokedRecord]:
        """The smoke-tested digests recorded for each full tag, read over the registry's API."""
        return {tag.removesuffix("-tested"): SmokedRecord.from_labels(self.raw.labels(self.repository, tag))
                for tag in self.raw.tags(self.repository) if tag.endswith("-tested")}

    def smoke_records(self) -> set[str]:
        """The catalogue's smoke record tags (accel_images.publish.catalogue)."""
        return {tag for tag in self.raw.tags(self.repository) if tag.endswith(tags.RECORD_SUFFIX)}


@pytest.fixture
def site(registry: str, docker_client: docker.DockerClient, base_images, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    stubsmoke.install(monkeypatch)
    namespace = f"test-{uuid.uuid4().hex[:12]}"
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    here = Site(registry, namespace, write_matrix(tmp_path, f"{namespace}/pytorch"), templates, tmp_path / "state")
    for base in (here.base("debian:bookworm-slim"), here.base("ubuntu:24.04")):
        push_base(docker_client, base_images.python, base)
    yield here
    for repository in ("pytorch", "library/debian", "library/ubuntu"):
        here.raw.delete_repository(f"{namespace}/{repository}")
    remove_local_names(docker_client, f"{registry}/{namespace}/", f"{namespace}/")


def push_base(client: docker.DockerClient, source: str, ref: str) -> None:
    repository, tag = ref.rsplit(":", 1)
    client.images.get(source).tag(repository, tag)
    for line in client.images.push(repository, tag, stream=True, decode=True):
        assert "error" not in line, line


def nightly(site: Site, **settings: object) -> list[NightlyOutcome]:
    expansion = load_expansion(str(site.matrix))
    # attest=False: the stub images have no torch to inventory (tests/unit/test_supply.py attests)
    options = NightlyOptions(Target(site.registry, site.repository), retry=NO_WAIT, attest=False)
    return run_nightly(Engine.connect(), compat.load_kb(), expansion, expansion.variants,
                       RegistryClient(site.registry),
                       BuildSettings(options=site.options(), state_dir=StateDir(site.state), network_mode="none",
                                     **settings),  # type: ignore[arg-type]
                       options, templates_dir=site.templates)


def real_tags(site: Site) -> dict[str, tuple[str, ...]]:
    expansion = load_expansion(str(site.matrix))
    day = datetime.now(timezone.utc).date()
    return {v.tag: tags.all_tags(v, expansion.variants, day) for v in expansion.variants}


def by_tag(nights: list[NightlyOutcome]) -> dict[str, NightlyOutcome]:
    return {night.outcome.variant.tag: night for night in nights}


@pytest.mark.engine
@pytest.mark.registry
def test_first_nightly_promotes_and_the_second_skips_everything(site: Site) -> None:
    first = CliRunner().invoke(nightly_command, [*site.cli_args(), "--jobs", "2"])
    assert first.exit_code == 0, first.output
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    first_dir = (site.state / "reports" / "nightly-latest").resolve()
    records = {record["tag"]: record for record in report["variants"]}
    expected = real_tags(site)
    assert {tag: record["status"] for tag, record in records.items()} == {DEBIAN: "built", UBUNTU: "built"}

    digests = site.digests()
    assert sorted(digests) == sorted(t for group in expected.values() for t in group)  # no candidate left
    for tag, group in expected.items():
        assert records[tag]["pushed_tags"] == list(group)
        assert records[tag]["smoke"]["ok"] is True and records[tag]["smoke_ran_on"] == "cpu"
        assert {digests[t] for t in group} == {records[tag]["digest"]}
        assert site.raw.labels(site.repository, tag)[FINGERPRINT_LABEL] == records[tag]["fingerprint"]
    assert digests["latest-cpu"] == records[UBUNTU]["digest"] and digests["2.13-cpu"] == records[DEBIAN]["digest"]
    assert {tag: [e.digest for e in record.entries] for tag, record in site.records().items()} == {
        tag: [records[tag]["digest"]] for tag in expected}
    assert {path.name for path in (site.state / "reports").glob("*/*")} >= {"report.json", "summary.md",
                                                                             "index.html", "junit.xml"}
    assert site.smoke_records() == {tags.record_tag(records[tag]["digest"]) for tag in expected}  # one per image

    second = CliRunner().invoke(nightly_command, site.cli_args())
    assert second.exit_code == 0, second.output
    assert "0 published, 0 kept, 2 skipped, 0 failed; uploaded 0 B" in second.output
    assert site.digests() == digests
    second_dir = (site.state / "reports" / "nightly-latest").resolve()
    assert second_dir != first_dir and (first_dir / "report.json").is_file()  # the first run's report is kept


@pytest.mark.engine
@pytest.mark.registry
def test_a_moved_base_rebuilds_exactly_the_variants_on_it(site: Site, docker_client: docker.DockerClient,
                                                          base_images) -> None:
    before = by_tag(nightly(site))
    assert {tag: night.status for tag, night in before.items()} == {DEBIAN: "built", UBUNTU: "built"}
    old = site.digests()

    moved, _ = docker_client.images.build(
        fileobj=BytesIO(f"FROM {base_images.python}\nLABEL moved={uuid.uuid4().hex}\n".encode()), rm=True,
        network_mode="none")
    push_base(docker_client, moved.id, site.base("debian:bookworm-slim"))

    after = by_tag(nightly(site))
    assert after[DEBIAN].status == "built", after[DEBIAN].outcome.error
    assert after[DEBIAN].reason.startswith("base image changed (")
    assert after[UBUNTU].status == "skipped"
    now = site.digests()
    assert now[DEBIAN] == after[DEBIAN].registry_digest != old[DEBIAN]
    assert now["2.13-cpu"] == now[DEBIAN]
    assert now[UBUNTU] == old[UBUNTU] and now["latest-cpu"] == old["latest-cpu"]


@pytest.mark.engine
@pytest.mark.registry
def test_aliases_follow_the_matrix_onto_an_unchanged_image(site: Site) -> None:
    assert [night.status for night in nightly(site)] == ["built", "built"]
    before = site.digests()
    matrix = site.matrix.read_text()
    site.matrix.write_text(matrix[: matrix.index('    - torch: ["2.14"]')])   # the newer variant leaves

    [night] = nightly(site)
    assert night.status == "skipped" and night.realigned == ("latest-cpu",)
    after = site.digests()
    assert after["latest-cpu"] == after[DEBIAN] == before[DEBIAN]
    assert after["2.14-cpu"] == before["2.14-cpu"]          # no variant claims it any more: left alone


@pytest.mark.engine
@pytest.mark.registry
def test_a_failing_smoke_moves_no_tag(site: Site) -> None:
    assert [night.status for night in nightly(site)] == ["built", "built"]
    good = site.digests()
    template = site.templates / "vendors" / "cpu.Dockerfile.j2"
    template.write_text(template.read_text().replace('{% set verdict = "pass" %}', '{% set verdict = "fail" %}'))

    broken = nightly(site, jobs=2)
    assert [night.status for night in broken] == ["failed", "failed"]
    for night in broken:
        assert night.reason == "template, build context or build args changed"
        assert (night.outcome.error or "").startswith("smoke: check stub failed: verdict fail")
        assert night.publication is not None and night.publication.promoted == ()
        assert night.publication.digest not in (None, good[night.outcome.variant.tag])
    assert site.digests() == good                      # every real tag still on the last good image


@pytest.mark.engine
@pytest.mark.registry
def test_registry_down_is_one_clear_line_and_promotes_nothing(site: Site) -> None:
    port = free_port()
    args = [*site.cli_args(), "--registry", f"127.0.0.1:{port}"]
    result = CliRunner().invoke(nightly_command, args)
    assert result.exit_code == 4
    assert f"accel-images: error: registry 127.0.0.1:{port} unreachable (connection refused)" in result.output
    assert "Traceback" not in result.output
    assert site.raw.tags(site.repository) == []
    assert not (site.state / "contexts").exists()      # nothing was even rendered


@pytest.mark.engine
@pytest.mark.registry
def test_retention_keeps_exactly_what_the_policy_says_and_a_dry_run_deletes_nothing(site: Site) -> None:
    assert [night.status for night in nightly(site)] == ["built", "built"]
    today = f"{datetime.now(timezone.utc):%Y%m%d}"
    old = {f"{DEBIAN}-2026110{day}": site.raw.push_config_image(site.repository, f"{DEBIAN}-2026110{day}",
                                                                 {"old": str(day)}) for day in (2, 3, 4, 5)}
    RegistryClient(site.registry).copy_tag(site.repository, DEBIAN, f"{DEBIAN}-20261101")  # what the full tag serves
    before = site.digests()

    dry = CliRunner().invoke(nightly_command, [*site.cli_args(), "--keep-dated", "2", "--prune-dry-run"])
    assert dry.exit_code == 0, dry.output
    assert f"would prune {DEBIAN}-20261104 (older than the 2 newest)" in dry.output
    assert site.digests() == before

    result = CliRunner().invoke(nightly_command, [*site.cli_args(), "--keep-dated", "2"])
    assert result.exit_code == 0, result.output
    assert "0 published, 0 kept, 2 skipped, 0 failed" in result.output
    pruned = {f"{DEBIAN}-20261102", f"{DEBIAN}-20261103", f"{DEBIAN}-20261104"}
    after = site.digests()
    assert set(before) - set(after) == pruned
    assert {tag: after[tag] for tag in after} == {tag: before[tag] for tag in after}   # nothing else moved
    assert {f"{DEBIAN}-{today}", f"{DEBIAN}-20261105", f"{DEBIAN}-20261101", f"{UBUNTU}-{today}"} <= set(after)
    assert after[f"{DEBIAN}-20261105"] == old[f"{DEBIAN}-20261105"]
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    retention = report["meta"]["retention"]
    assert sorted(retention["pruned"]) == sorted(pruned) and retention["dry_run"] is False
    for tag in sorted(pruned):
        assert f"pruned {tag} (older than the 2 newest)" in result.output


# ---- from the registry to a shell, with nothing but the wheel ------------------------------------

@pytest.fixture(scope="module")
def installed_cli(tmp_path_factory) -> Path:
    """accel-images from its wheel, in a fresh virtual environment outside the checkout."""
    root = tmp_path_factory.mktemp("installed")
    checkout = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(checkout)],
                   check=True, capture_output=True, timeout=300)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120)
    [wheel] = (root / "dist").glob("accel_images-*.whl")
    subprocess.run([str(root / "venv" / "bin" / "pip"), "install", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=600)
    return root / "venv" / "bin" / "accel-images"


@pytest.mark.engine
@pytest.mark.registry
def test_an_installed_cli_outside_a_checkout_recommends_and_runs_what_nightly_published(
        site: Site, installed_cli: Path, tmp_path: Path) -> None:
    first = CliRunner().invoke(nightly_command, site.cli_args())
    assert first.exit_code == 0, first.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    host = elsewhere / "host.json"
    host.write_text('{"vendor": "cpu"}')
    where = ["--registry", site.registry, "--image", site.repository]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(installed_cli), *args], cwd=elsewhere, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    listed = cli("catalogue", *where, "--json")
    assert listed.returncode == 0, listed.stderr
    images = {image["tag"]: image for image in json.loads(listed.stdout)["images"]}
    assert sorted(images) == sorted([DEBIAN, UBUNTU])
    assert all(image["offered"] and image["smoke"]["ran_on"] == "cpu" for image in images.values())

    chosen = cli("recommend", *where, "--host-json", str(host))
    assert chosen.returncode == 0, chosen.stderr
    ref = f"{site.registry}/{site.repository}:{UBUNTU}"
    assert chosen.stdout.strip() == f"docker run --rm -it --ipc host {ref}"
    assert f"from: chosen from registry {site.registry}/{site.repository}: 2 image(s) published" in chosen.stderr

    ran = cli("run", *where, "--host-json", str(host), "--", "sh", "-c", "id -u > out.txt && pwd >> out.txt")
    assert ran.returncode == 0, ran.stderr
    assert (elsewhere / "out.txt").read_text().split() == [str(os.getuid()), "/workspace"]
    assert (elsewhere / "out.txt").stat().st_uid == os.getuid()
