"""The main job end to end, through the project's own CLI, against a real Docker engine.

CI builds exactly the published CPU variant (Debian 12, Python 3.11, torch 2.13.0) from a local
stand-in for `debian:bookworm-slim` (via --registry-mirror) and a local wheelhouse (via
--pip-find-links): the same mechanism a user behind a firewall uses. These tests fail, never
skip, in CI when the engine is missing (see conftest.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import containers
from conftest import PUBLISHED, PUBLISHED_TAG, offline
from accel_images.builder.builder import Builder, Prepared
from accel_images.builder.engine import Engine
from accel_images.builder.outcome import Outcome
from accel_images.builder.settings import BuildSettings
from accel_images.kb.compat import load_kb
from accel_images.model.imagefacts import ImageFacts
from accel_images.model.reference import Mirror
from accel_images.render.contexts import RenderOptions
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import expand, make_variant
from accel_images.smoke.launcher import facts_of
from accel_images.state import StateDir

ROOT = Path(__file__).resolve().parents[2]
TAG = PUBLISHED_TAG

pytestmark = [pytest.mark.engine, pytest.mark.registry, pytest.mark.slow]


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=1800)


def report(state: Path) -> list[dict]:
    return json.loads((state / "reports" / "build-latest" / "report.json").read_text())["variants"]


def test_published_cpu_variant_builds_and_passes_its_smoke_test(published_build: dict) -> None:
    [record] = published_build["records"]
    assert record["status"] == "built"
    assert record["variant"] == "cpu/2.13.0-cpu-py3.11-debian12"
    assert record["smoke"]["ok"] is True
    assert record["smoke"]["ran_on"] == "cpu"
    names = {check["name"] for check in record["smoke"]["checks"]}
    assert {"matmul_float32", "mlp_training", "torch_version", "python_version", "build"} <= names
    assert all(check["ok"] for check in record["smoke"]["checks"])
    assert record["size"] > 500_000_000  # torch is in there
    assert Path(record["log"]).is_file()


def test_a_build_whose_local_name_another_build_takes_still_tests_its_own_image(
        published_build: dict, registry: str, wheelhouse: Path, base_images, tmp_path: Path, docker_client) -> None:
    """Two builds of one tag on one engine: the other build's image takes the local name between this build's
    commit and its smoke test. This build still smoke-tests the image it built (by ID) and passes, its
    two-node smoke test (--smoke-nodes 2) too; the name stays on the last image built."""
    kb = load_kb()
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    options = RenderOptions(mirrors=(Mirror.parse(f"docker.io={registry}"),), pip_find_links=wheelhouse,
                            without_companions=("torchvision",))
    settings = BuildSettings(options=options, state_dir=StateDir(tmp_path / "state"), smoke_nodes=2)
    image = published_build["image"]
    before = docker_client.images.get(image).id
    moved: list[str] = []

    def status(_variant: object, text: str) -> None:
        if text == "smoke test" and not moved:   # the other build commits its image under the same name now
            docker_client.images.get(base_images.slim).tag(*image.rsplit(":", 1))
            moved.append(docker_client.images.get(image).id)

    engine = Engine.connect()
    try:
        [outcome] = Builder(engine, kb, expand(load_matrix(published_build["matrix"]), kb), settings,
                            status=status).run([variant])
    finally:
        engine.close()
        docker_client.images.get(before).tag(*image.rsplit(":", 1))   # as the suite's other tests expect it
    assert moved and moved[0] != outcome.image_id
    assert outcome.status == "built", outcome.error
    assert outcome.smoke is not None and outcome.smoke.ok, outcome.smoke
    nodes = outcome.smoke.nodes   # across two containers of the image it built, not of the name's
    assert nodes is not None and nodes.ok and nodes.result_ok, nodes
    assert (nodes.nodes, nodes.backend, nodes.device) == (2, "gloo", "cpu") and (nodes.bandwidth_gbps or 0) > 0


def test_unchanged_rebuild_is_skipped(published_build: dict, registry: str, wheelhouse: Path) -> None:
    state = published_build["state"]
    result = cli("build", "--matrix", str(published_build["matrix"]), *PUBLISHED, *offline(registry, wheelhouse),
                 "--state-dir", str(state))
    assert result.returncode == 0, result.stdout + result.stderr
    [record] = report(state)
    assert record["status"] == "skipped"
    assert record["fingerprint"] == published_build["records"][0]["fingerprint"]
    assert "skipped" in result.stderr + result.stdout
    # not tested again, and said so alike in the table and the report: where it passed before
    assert record["smoke"] is None and record["smoke_earlier"] == "on cpu"
    assert "passed earlier on cpu" in result.stdout and "not run" not in result.stdout


def test_smoke_command_reports_the_workload_json(published_build: dict) -> None:
    result = cli("smoke", published_build["image"], "--json", "--state-dir", str(published_build["state"]))
    assert result.returncode == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout)  # the document alone: `| jq` works
    assert result.stderr.strip().endswith("smoke passed on cpu")
    assert payload["ok"] is True
    assert payload["torch"].startswith("2.13.0")
    assert payload["python"].startswith("3.11")


def test_image_has_no_wheelhouse_and_runs_as_non_root(published_build: dict, docker_client) -> None:
    output = containers.output(
        docker_client, published_build["image"], ["sh", "-c", "id -u; ls /tmp/wheels 2>&1 | head -1; cat /opt/accel-images/constraints.txt"],
        environment={"ACCEL_IMAGES_GUARD": "off"})
    uid, wheels, *constraints = output.splitlines()
    assert uid == "1000"
    assert "No such file" in wheels
    assert "torch==2.13.0+cpu" in constraints   # among every other distribution, each pinned
    history = docker_client.api.history(published_build["image"])
    assert not any("/tmp/wheels" in (layer.get("CreatedBy") or "") and layer.get("Size", 0) > 10_000_000
                   for layer in history)


def test_pip_cannot_swap_the_torch_build(published_build: dict, docker_client) -> None:
    """A later `pip install torch==<other>` is refused by the image's constraints file."""
    result = containers.output(
        docker_client, published_build["image"], ["sh", "-c", "pip install --no-index torch==2.12.0 2>&1; echo rc=$?"],
        network_disabled=True, environment={"ACCEL_IMAGES_GUARD": "off"})
    assert "rc=0" not in result


def test_smoke_fails_on_an_image_whose_torch_does_not_match_its_tag(published_build: dict, docker_client,
                                                                    tmp_path: Path) -> None:
    [record] = published_build["records"]   # FROM its ID: the name is shared with every other run on this engine
    (tmp_path / "Dockerfile").write_text(f"FROM {record['image_id']}\nLABEL io.accel-images.torch=2.12.1\n")
    liar = "accel-images-test/liar:2.12.1"
    docker_client.images.build(path=str(tmp_path), tag=liar, rm=True)
    try:
        result = cli("smoke", liar, "--state-dir", str(published_build["state"]))  # the files are the build's
        assert result.returncode == 1, result.stdout + result.stderr
        said = result.stdout + result.stderr
        assert "2.12.1" in said and "2.13.0" in said
        assert "Traceback" not in said
    finally:
        docker_client.images.remove(liar, force=True)


BROKEN_CHILD = """{% extends "base.Dockerfile.j2" %}
{% block runtime_system %}
{% if v.flavor == "devel" %}
RUN echo "this step fails on purpose" && false
{% endif %}
{{ super() }}
{% endblock %}
"""

TWO_VARIANTS = """schema: 1
image: accel-images-test/pytorch
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime, devel]
"""


def test_a_broken_variant_fails_while_the_good_one_still_builds(published_build: dict, registry: str,
                                                                wheelhouse: Path, tmp_path: Path,
                                                                docker_client) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", templates)
    (templates / "vendors" / "cpu.Dockerfile.j2").write_text(BROKEN_CHILD)
    (tmp_path / "matrix.yaml").write_text(TWO_VARIANTS)
    state = tmp_path / "state"
    try:
        result = cli("build", "--matrix", str(tmp_path / "matrix.yaml"), "--templates", str(templates),
                     *offline(registry, wheelhouse), "--state-dir", str(state), "--jobs", "2", "--force")
        assert result.returncode == 1, result.stdout + result.stderr
        records = {r["flavor"]: r for r in report(state)}
        assert records["runtime"]["status"] == "built" and records["runtime"]["smoke"]["ok"]
        assert records["devel"]["status"] == "failed"
        assert "fails on purpose" in records["devel"]["error"] or "false" in records["devel"]["error"]
        assert Path(records["devel"]["log"]).is_file()
        assert "this step fails on purpose" in Path(records["devel"]["log"]).read_text()
        assert "Traceback" not in result.stderr
    finally:
        for image in docker_client.images.list(name="accel-images-test/pytorch"):
            docker_client.images.remove(image.id, force=True)

# ---- the facts the image's build asked of its own torch, and what follows from them ---------------------
# On this module's real build (no build of their own): facts.json says what the variant promises, the
# report carries it, the constraints pin every installed distribution, pip refuses a same-named higher
# version from another index (the torchtriton class of incident), the environment is 2775 and nothing in
# it world-writable, and a deliberately wrong knowledge-base row fails against the real image's facts.

EVIL_INDEX = """
import json, subprocess, sys, tempfile, zipfile
from importlib import metadata
index = tempfile.mkdtemp()
with zipfile.ZipFile(f"{index}/filelock-99.0-py3-none-any.whl", "w") as wheel:
    wheel.writestr("filelock/__init__.py", "TAKEN_OVER = True\\n")
    wheel.writestr("filelock-99.0.dist-info/METADATA", "Metadata-Version: 2.1\\nName: filelock\\nVersion: 99.0\\n")
    wheel.writestr("filelock-99.0.dist-info/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
    wheel.writestr("filelock-99.0.dist-info/RECORD", "")
pip = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", index]
before = metadata.version("filelock")
upgrade = subprocess.run([*pip, "--upgrade", "filelock"], capture_output=True, text=True)
asked = subprocess.run([*pip, "filelock==99.0"], capture_output=True, text=True)
print(json.dumps({"before": before, "after": metadata.version("filelock"), "upgrade_rc": upgrade.returncode,
                  "asked_rc": asked.returncode, "asked": asked.stdout + asked.stderr}))
"""


def built_id(published_build: dict) -> str:
    """The image this module built, by ID: the tag is shared with every other run on the engine."""
    [record] = published_build["records"]
    return str(record["image_id"])


@pytest.fixture(scope="module")
def facts(published_build: dict) -> ImageFacts:
    engine = Engine.connect()
    try:
        return facts_of(engine, built_id(published_build))
    finally:
        engine.close()


@pytest.fixture
def in_image(published_build: dict, docker_client):
    def run_in(command: list[str]) -> str:
        return containers.output(docker_client, built_id(published_build), command, network_disabled=True,
                                 stderr=True)
    return run_in


def test_the_image_holds_facts_its_own_torch_gave_and_they_are_the_variants(facts: ImageFacts) -> None:
    assert (facts.torch, facts.public, facts.local) == ("2.13.0+cpu", "2.13.0", "cpu")
    assert facts.backend == "cpu" and facts.archs == () and facts.ptx == ()
    assert set(facts.toolkit.values()) == {None}
    assert facts.python.startswith("3.11.")
    assert "torchvision" not in facts.companions and "numpy" in facts.companions   # left out on purpose
    assert facts.platform == {"os": "linux", "machine": "x86_64"}
    assert facts.distributions["torch"] == "2.13.0+cpu"


def test_the_build_report_carries_the_facts_and_the_left_out_companion(published_build: dict,
                                                                      facts: ImageFacts) -> None:
    [record] = published_build["records"]
    assert record["facts"] == facts.compact()
    assert record["without_companions"] == ["torchvision"]
    assert "torchvision 0.28 left out (--without-companion torchvision)" in record["notes"]
    summary = (published_build["state"] / "reports" / "build-latest" / "summary.md").read_text()
    assert "without torchvision (--without-companion)" in summary and "torch 2.13.0+cpu" in summary


def test_the_constraints_pin_every_installed_distribution(in_image, facts: ImageFacts) -> None:
    said = in_image(["sh", "-c", "cat /opt/accel-images/constraints.txt; echo ---;"
                               " pip list --format=freeze --disable-pip-version-check"])
    constraints, installed = said.split("---\n")
    pinned = dict(line.split("==", 1) for line in constraints.split())
    listed = {name.lower().replace("_", "-"): version for name, version in
              (line.split("==", 1) for line in installed.split() if "==" in line)}
    assert pinned == listed == dict(facts.distributions)
    assert {"torch", "numpy", "filelock", "pip", "setuptools"} <= set(pinned)


def test_the_images_pip_is_the_newest_its_source_held_and_pinned(in_image, facts: ImageFacts,
                                                                    wheelhouse: Path) -> None:
    """Not the pip `python -m venv` seeds from the OS (Debian 12's 23.0.1): the build upgrades it from where
    the image's other packages came from, and the constraints pin that pip."""
    from packaging.version import Version
    newest = max((Version(wheel.name.split("-")[1]) for wheel in wheelhouse.glob("pip-*.whl")), default=None)
    assert newest is not None, f"no pip wheel in {wheelhouse} (.ci/setup-host.sh fills it)"
    said = in_image(["pip", "--version", "--disable-pip-version-check"])
    assert said.startswith(f"pip {newest} from /opt/venv/"), said
    assert dict(facts.distributions)["pip"] == str(newest) and Version(str(newest)) > Version("23.0.1")


def test_a_same_named_higher_version_from_another_index_does_not_win(in_image) -> None:
    """pip has no priority between indexes (pip's install docs); the constraints keep what the build
    installed: an upgrade finds it satisfied, asking for the other version is refused."""
    report = json.loads(in_image(["python", "-c", EVIL_INDEX]).strip().splitlines()[-1])
    assert report["before"] == report["after"] == "4.3.2"
    assert report["upgrade_rc"] == 0
    assert report["asked_rc"] == 1 and "(constraint) filelock==4.3.2" in report["asked"], report["asked"]


def test_the_environment_is_group_writable_with_setgid_directories_and_nothing_world_writable(in_image) -> None:
    said = in_image(["sh", "-c", "stat -c '%a %G' /opt/venv; find /opt/venv -type d ! -perm 2775 | head -3;"
                               " find /opt/venv ! -type l -perm -o+w | head -3; echo end"])
    assert said.splitlines() == ["2775 users", "end"], said


def test_a_wrong_knowledge_base_row_fails_against_the_real_images_facts(published_build: dict, tmp_path: Path) -> None:
    """The torch row claims 2.13.1; the image's own torch says 2.13.0: the build fails naming the row."""
    kb = load_kb()
    wrong = replace(kb, torch={**kb.torch, "2.13": replace(kb.torch["2.13"], versions=("2.13.1",))})
    variant = make_variant(wrong, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    engine = Engine.connect()
    try:
        info = engine.inspect_image(built_id(published_build))
        assert info is not None
        builder = Builder(engine, wrong, expand(load_matrix(ROOT / "matrix.yaml"), wrong),
                          BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke=False))
        prepared = Prepared(variant, published_build["image"], tmp_path, {}, "sha256:x", "base@sha256:y")
        checked = builder.check_facts(prepared, Outcome(variant, "built", published_build["image"], info.id))
    finally:
        engine.close()
    assert checked.status == "failed"
    assert checked.error == ("the image's facts contradict the knowledge base: accel_images/data/kb.yaml"
                             ' torch."2.13".versions says 2.13.1; the image has 2.13.0')
