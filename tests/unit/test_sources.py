"""Where an image to run comes from (accel_images.host.sources): a build this host recorded, a registry the
user configured, nothing else; never a Docker Hub lookup of this project's names. And which digest a
registry's image is named by (the tag's index, or the platform image asked for).

Nothing here talks to an engine or a registry: builds are recorded in a scratch state directory, the
catalogue is handed in, and `pull` meets a recording engine (tests/fakes.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from accel_images.builder import engine
from accel_images.cli import fanout as cli_fanout, session as cli_session
from accel_images.host.sources import config_path
from accel_images.publish.catalogue import Catalogue, Entry, SmokeRecord
from accel_images.smoke.records import built_images, remember_image
from accel_images.state import StateDir
from fakes import PullRecorder
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
CPU_TAG = "2.15.0-cpu-py3.12-ubuntu24.04"
LOCAL = f"accel-images/pytorch:{CPU_TAG}"


@pytest.fixture(autouse=True)
def in_scratch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test in its own directory, whose ./.accel-images is the state directory the commands read."""
    monkeypatch.chdir(tmp_path)


def cli(command: Any, tmp_path: Path, *args: str) -> Any:
    """The command against the checkout's matrix and a CPU host, in the scratch directory."""
    host = tmp_path / "host.json"
    if not host.exists():
        host.write_text(json.dumps({"vendor": "cpu", "machine": "x86_64"}))
    return CliRunner().invoke(command, ["--matrix", str(FROZEN_MATRIX), "--host-json", str(host), *args])


def built(tmp_path: Path, ref: str = LOCAL, state: Path | None = None) -> None:
    """What `accel-images build` records for an image it made (in ./.accel-images unless `state`)."""
    remember_image(StateDir(state or tmp_path / ".accel-images"), ref, "sha256:" + "1" * 64, "fingerprint-1")


def one_line_naming_both_ways(stderr: str, ref: str) -> None:
    [line] = stderr.strip().splitlines()[-1:]
    assert line.startswith(f"accel-images: error: {ref} is not built here")
    assert "accel-images build" in line and "--registry REG" in line and "ACCEL_IMAGES_REGISTRY=REG" in line
    assert f"`registry: REG` in {config_path()}" in line
    assert "Traceback" not in stderr


# ---- nothing pulled by a name this project does not own -------------------------------------------------

def test_run_with_no_build_and_no_registry_stops_in_one_line_naming_both_ways(tmp_path: Path) -> None:
    """Before: `run --print` printed `docker run ... accel-images/pytorch:TAG`, which Docker looks up on Docker Hub."""
    result = cli(cli_session.run_command, tmp_path, "--print", "--", "python", "-V")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    one_line_naming_both_ways(result.stderr, LOCAL)


def test_pull_with_no_build_and_no_registry_pulls_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `pull` asked the engine for `accel-images/pytorch:TAG`, a Docker Hub name."""
    monkeypatch.setattr(engine, "Engine", PullRecorder)
    PullRecorder.pulled = []
    result = cli(cli_fanout.pull_command, tmp_path)
    assert result.exit_code == 2, result.output
    assert PullRecorder.pulled == []
    one_line_naming_both_ways(result.stderr, LOCAL)


def test_devcontainer_with_no_build_and_no_registry_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "devcontainer.json"
    result = cli(cli_session.devcontainer_command, tmp_path, "--out", str(out))
    assert result.exit_code == 2, result.output
    assert not out.exists()
    one_line_naming_both_ways(result.stderr, LOCAL)


def test_an_image_of_this_project_named_without_a_registry_is_never_pulled(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`run accel-images/pytorch:TAG` names a Docker Hub repository this project does not own: run it from the
    local store only. A devcontainer's tools pull what the store lacks, so there it must be a build of this host
    (or already in the engine's store)."""
    result = cli(cli_session.run_command, tmp_path, LOCAL, "--print")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("docker run --rm -i --pull never ") and result.stdout.rstrip().endswith(LOCAL)
    monkeypatch.setattr(cli_session, "in_engine_store", lambda ref: False)   # no engine asked here
    refused = cli(cli_session.devcontainer_command, tmp_path, LOCAL, "--print")
    assert refused.exit_code == 2, refused.output
    one_line_naming_both_ways(refused.stderr, LOCAL)
    built(tmp_path)
    again = cli(cli_session.devcontainer_command, tmp_path, LOCAL, "--print")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["image"] == LOCAL


def test_recommend_without_a_registry_prints_the_build_and_a_line_that_never_pulls(tmp_path: Path) -> None:
    """recommend still answers (it pulls nothing); every form it prints names the local build, never pulled."""
    result = cli(cli_fanout.recommend_command, tmp_path)
    assert result.exit_code == 0, result.output
    comment, line = result.stdout.strip().splitlines()
    assert comment.startswith("# not built here, and no registry is configured: build it here with `accel-images build")
    assert line == f"docker run --rm -it --pull never --ipc host {LOCAL}"
    for engine_name, never in (("podman", "--pull never"), ("compose", "pull_policy: never"),
                               ("kubernetes", "imagePullPolicy: Never"), ("apptainer", f"docker-daemon://{LOCAL}"),
                               ("enroot", f"--container-image=./accel-images+pytorch+{CPU_TAG}.sqsh")):
        rendered = cli(cli_fanout.recommend_command, tmp_path, "--engine", engine_name)
        assert rendered.exit_code == 0 and never in rendered.stdout, (engine_name, rendered.output)
        assert f"docker://{LOCAL}" not in rendered.stdout


# ---- 1. an image this host built ---------------------------------------------------------------------------

def test_run_takes_the_image_this_host_built(tmp_path: Path) -> None:
    """Before: `run` chose from the matrix and ignored the build; now the build, by its local name, never pulled."""
    older = "accel-images/pytorch:2.13.0-cpu-py3.12-ubuntu24.04"
    built(tmp_path, older)
    result = cli(cli_session.run_command, tmp_path, "--print", "--workspace", str(tmp_path), "--", "python", "-V")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("docker run --rm -i --pull never --ipc host")
    assert result.stdout.endswith(f" {older} python -V\n")
    assert "from: chosen from the images built here" in result.stderr


def test_state_dir_names_where_the_builds_are_recorded(tmp_path: Path) -> None:
    built(tmp_path, state=tmp_path / "elsewhere")
    assert cli(cli_session.run_command, tmp_path, "--print").exit_code == 2
    result = cli(cli_session.run_command, tmp_path, "--print", "--state-dir", str(tmp_path / "elsewhere"))
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith(LOCAL)


def test_a_build_comes_before_a_configured_registry_and_pull_has_nothing_to_fetch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "Engine", PullRecorder)
    PullRecorder.pulled = []
    built(tmp_path)
    result = cli(cli_fanout.pull_command, tmp_path, "--registry", "ghcr.io/acme")
    assert result.exit_code == 0, result.output
    assert PullRecorder.pulled == []
    assert f"{LOCAL} is a build of this host: nothing to pull" in result.stderr
    assert result.stdout.strip() == f"docker run --rm -it --pull never --ipc host {LOCAL}"


def test_the_build_records_the_local_name_it_made(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    remember_image(state, LOCAL, "sha256:" + "2" * 64, "fp")
    (state.built_images / "junk.json").write_text("[]")                  # not a record: ignored
    (state.built_images / "other.json").write_text(json.dumps(          # a record under another file's name
        {"image": "x/y:z", "image_id": "sha256:3", "fingerprint": "f"}))
    assert list(built_images(state)) == [LOCAL]
    assert built_images(state)[LOCAL].image_id == "sha256:" + "2" * 64


# ---- 2. a registry the user configured ----------------------------------------------------------------------

def test_the_configuration_file_names_the_registry(tmp_path: Path) -> None:
    """Before: only --registry and ACCEL_IMAGES_REGISTRY did."""
    config_path().parent.mkdir(parents=True, exist_ok=True)
    config_path().write_text("registry: ghcr.io/team\n")
    result = cli(cli_session.run_command, tmp_path, "--from-matrix", "--print")
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith(f" ghcr.io/team/accel-images/pytorch:{CPU_TAG}")
    assert "--pull" not in result.stdout


@pytest.mark.parametrize("content, message", [
    ("registy: ghcr.io/team\n", "unknown setting(s): registy (keys: registry)"),
    ("registry: [a]\n", "registry is ['a'], not text"),
    ("registry: ghcr.io/team\n  x: [\n", "not YAML: "),
])
def test_a_configuration_file_that_is_not_one_is_one_line(tmp_path: Path, content: str, message: str) -> None:
    config_path().parent.mkdir(parents=True, exist_ok=True)
    config_path().write_text(content)
    result = cli(cli_session.run_command, tmp_path, "--from-matrix", "--print")
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"accel-images: error: {config_path()}: {message}")


def test_the_option_and_the_variable_come_before_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_path().parent.mkdir(parents=True, exist_ok=True)
    config_path().write_text("registry: ghcr.io/file\n")
    monkeypatch.setenv("ACCEL_IMAGES_REGISTRY", "ghcr.io/variable")
    by_variable = cli(cli_session.run_command, tmp_path, "--from-matrix", "--print")
    assert "ghcr.io/variable/accel-images" in by_variable.stdout
    by_option = cli(cli_session.run_command, tmp_path, "--from-matrix", "--print", "--registry", "ghcr.io/option")
    assert "ghcr.io/option/accel-images" in by_option.stdout


# ---- the nightly workflow publishes under the repository owner's namespace ----------------------------------

def test_the_nightly_publishes_under_the_repository_owner_by_default(tmp_path: Path) -> None:
    """Before: the workflow failed without the REGISTRY variable, and README's registry was a placeholder."""
    import subprocess
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    plan = workflow["jobs"]["plan"]
    [step] = [s for s in plan["steps"] if s.get("id") == "registry"]
    assert step["env"]["OWNER"] == "${{ github.repository_owner }}"
    assert plan["outputs"]["registry"] == "${{ steps.registry.outputs.registry }}"
    assert workflow["jobs"]["build"]["env"]["REGISTRY"] == "${{ needs.plan.outputs.registry }}"

    def published_under(registry: str) -> str:
        output = tmp_path / "output"
        output.write_text("")
        subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], check=True, capture_output=True,
                       env={"PATH": "/usr/bin:/bin", "REGISTRY": registry, "OWNER": "Acme-Labs",
                            "GITHUB_OUTPUT": str(output)})
        return output.read_text().strip()

    assert published_under("") == "registry=ghcr.io/acme-labs"
    assert published_under("registry.example.com") == "registry=registry.example.com/acme-labs"
    assert published_under("ghcr.io/team") == "registry=ghcr.io/team"


# ---- the digest a rendered form names (issue 37, B6) --------------------------------------------------------

INDEX = "sha256:" + "a" * 64
AMD64 = "sha256:" + "b" * 64
ARM64 = "sha256:" + "c" * 64
LABELS = {"io.accel-images.vendor": "cpu", "io.accel-images.torch": "2.15.0", "io.accel-images.python": "3.12",
          "io.accel-images.os": "ubuntu24.04", "io.accel-images.flavor": "runtime"}


def published(monkeypatch: pytest.MonkeyPatch, arm64_ok: bool = True) -> None:
    """The registry's catalogue: one tag, an index of an amd64 and an arm64 image, both smoke-tested."""
    from accel_images import registry
    from accel_images.publish import catalogue
    platforms = ("linux/amd64", "linux/arm64")
    entries = tuple(Entry(CPU_TAG, digest, LABELS, smoke=SmokeRecord(ok=ok, ran_on="cpu", platform=platform),
                          platform=platform, index=INDEX, platforms=platforms)
                    for digest, platform, ok in ((AMD64, "linux/amd64", True), (ARM64, "linux/arm64", arm64_ok)))
    monkeypatch.setattr(catalogue, "read_catalogue", lambda client, repository: Catalogue(
        "ghcr.io", repository, entries))
    monkeypatch.setattr(registry.RegistryClient, "for_destination", classmethod(lambda cls, destination: None))


def pod_image(result: Any) -> str:
    assert result.exit_code == 0, result.output
    pod = yaml.safe_load(result.stdout)
    return str(pod["spec"]["containers"][0]["image"])


def test_a_pod_written_on_any_machine_names_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the digest of the machine running the command (amd64 here), so an arm64 node pulled amd64."""
    published(monkeypatch)
    # as detected on this machine (x86_64): no platform was asked for
    monkeypatch.setattr("accel_images.host.detect.detect_host",
                        lambda: __import__("accel_images.model.hostinfo", fromlist=["HostInfo"]).HostInfo(
                            vendor="cpu", machine="x86_64"))
    result = CliRunner().invoke(cli_fanout.recommend_command, ["--matrix", str(FROZEN_MATRIX), "--registry",
                                                               "ghcr.io/acme", "--engine", "kubernetes"])
    assert pod_image(result) == f"ghcr.io/acme/accel-images/pytorch@{INDEX}"
    apptainer = CliRunner().invoke(cli_fanout.recommend_command, ["--matrix", str(FROZEN_MATRIX), "--registry",
                                                                  "ghcr.io/acme", "--engine", "apptainer"])
    assert f"docker://ghcr.io/acme/accel-images/pytorch@{INDEX}" in apptainer.stdout


def test_a_described_host_gets_the_image_of_its_own_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    published(monkeypatch)
    (tmp_path / "host.json").write_text(json.dumps({"vendor": "cpu", "machine": "aarch64"}))
    assert pod_image(cli(cli_fanout.recommend_command, tmp_path, "--registry", "ghcr.io/acme", "--engine",
                         "kubernetes")) == f"ghcr.io/acme/accel-images/pytorch@{ARM64}"


def test_naming_an_index_with_an_unoffered_platform_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    published(monkeypatch, arm64_ok=False)
    monkeypatch.setattr("accel_images.host.detect.detect_host",
                        lambda: __import__("accel_images.model.hostinfo", fromlist=["HostInfo"]).HostInfo(
                            vendor="cpu", machine="x86_64"))
    result = CliRunner().invoke(cli_fanout.recommend_command, ["--matrix", str(FROZEN_MATRIX), "--registry",
                                                               "ghcr.io/acme", "--engine", "kubernetes"])
    assert pod_image(result) == f"ghcr.io/acme/accel-images/pytorch@{INDEX}"
    assert (f"warning: {CPU_TAG} is named by its index {INDEX[:19]}, whose linux/arm64 image is not offered"
            " (its smoke test failed on cpu): a linux/arm64 node would run it") in result.stderr


def test_catalogue_lists_the_configured_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `catalogue` needed --registry or the variable; the configuration file was not read."""
    published(monkeypatch)
    config_path().parent.mkdir(parents=True, exist_ok=True)
    config_path().write_text("registry: ghcr.io/acme\n")
    result = CliRunner().invoke(cli_session.catalogue_command, ["--matrix", str(FROZEN_MATRIX), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["repository"] == "acme/accel-images/pytorch"
    config_path().unlink()
    missing = CliRunner().invoke(cli_session.catalogue_command, ["--matrix", str(FROZEN_MATRIX)])
    assert missing.exit_code == 2
    assert missing.stderr.strip() == ("accel-images: error: --registry: no registry to list (pass --registry REG, set"
                                      f" ACCEL_IMAGES_REGISTRY=REG, or write `registry: REG` in {config_path()})")
