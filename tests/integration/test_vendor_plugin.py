"""A sixth vendor, defined only by files under tests/data/vendor_plugin/ (a module, a template and
its knowledge-base section), runs through list, render, ci-matrix, bake, report and recommend with
no change to the package. And no module outside accel_images/vendors/ branches on a vendor name."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from accel_images import vendors

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).resolve().parents[1] / "data" / "vendor_plugin"
MATRIX = PLUGIN / "matrix.yaml"
NPU_TAGS = ["2.14.1-npu1.0-py3.12-ubuntu24.04", "2.13.0-npu0.9-py3.12-ubuntu24.04"]


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, vendors.PATH_ENV: str(PLUGIN)}
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


@pytest.fixture
def with_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vendors.PATH_ENV, str(PLUGIN))


def test_list_expands_the_plugin_vendors_groups_and_prunes_by_its_section() -> None:
    rows = json.loads(ok(cli("list", "--matrix", str(MATRIX), "--json")))["variants"]
    npu = [row for row in rows if row["vendor"] == "npu"]
    assert [row["tag"] for row in npu] == NPU_TAGS  # 2.14 x 0.9 and 2.13 x 1.0 pruned
    assert {row["wheel_index"] for row in npu} == {"npu1.0", "npu0.9"}
    explained = ok(cli("list", "--matrix", str(MATRIX), "--explain"))
    assert "torch 2.14 has no NPU SDK 0.9 build; NPU SDK builds: 1.0" in explained


def test_render_uses_the_plugins_template_over_the_shared_base(tmp_path: Path) -> None:
    ok(cli("render", "--matrix", str(MATRIX), "--out", str(tmp_path / "out")))
    context = tmp_path / "out" / "npu" / NPU_TAGS[0]
    dockerfile = (context / "Dockerfile").read_text()
    assert "ENV EXNPU_SDK=1.0" in dockerfile                              # the plugin's own block
    assert "--index-url https://download.pytorch.org/whl/npu1.0" in dockerfile  # the shared base
    assert 'io.accel-images.vendor="npu"' in dockerfile
    guard = (context / "guard.sh").read_text()
    assert "no /dev/exnpu0: run with --device /dev/exnpu0" in guard


def test_ci_matrix_and_bake_take_the_plugins_runner_and_group() -> None:
    entries = json.loads(ok(cli("ci-matrix", "--matrix", str(MATRIX), "--vendor", "npu")))["include"]
    assert {tuple(e["runner"]) for e in entries} == {("self-hosted", "linux", "x64", "example-npu")}
    assert all(e["accelerator"] for e in entries)
    bake = json.loads(ok(cli("bake", "--matrix", str(MATRIX))))
    assert bake["group"]["npu"]["targets"] == [tag.replace(".", "_") for tag in NPU_TAGS]


def test_recommend_judges_a_host_of_the_plugin_vendor(tmp_path: Path) -> None:
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"vendor": "npu", "stack_version": "1.0", "device_count": 1,
                                "gpu_names": ["Example NPU 1"]}))
    answer = json.loads(ok(cli("recommend", "--matrix", str(MATRIX), "--host-json", str(host), "--json")))
    assert answer["image"].endswith(NPU_TAGS[0])
    assert "--device /dev/exnpu0" in answer["docker_run"] and "EXNPU_VISIBLE=all" in answer["docker_run"]


def test_host_detection_asks_the_plugin_in_its_rank(with_plugin: None, tmp_path: Path) -> None:
    from accel_images.host.detect import detect_host

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "exnpu0").write_text("")
    host = detect_host(run=lambda argv: None, root=tmp_path)
    assert (host.vendor, host.gpu_names, host.stack_version) == ("npu", ("Example NPU 1",), "1.0")


def test_reports_name_the_plugin_vendor(with_plugin: None) -> None:
    from accel_images.report.reports import render_html, render_markdown

    record = {"key": f"npu/{NPU_TAGS[0]}", "vendor": "npu", "stack": "1.0", "torch": "2.14.0", "python": "3.12",
              "os": "ubuntu24.04", "flavor": "runtime", "tag": NPU_TAGS[0], "image": f"x:{NPU_TAGS[0]}",
              "status": "built", "error": None, "size": None, "build_s": 1.0, "smoke": None}
    markdown = render_markdown([record], {})
    assert "## Example NPU" in markdown
    assert "NPU SDK 1.0" in render_html([record], {})


def test_the_two_node_smoke_runs_the_collective_the_plugin_declares(with_plugin: None) -> None:
    """Its backend comes from its own module (`collective=` in npu.py), as the built-in vendors' from theirs."""
    from accel_images.smoke import allreduce
    from accel_images.smoke.nodes import NodesPlan, collective_for, torchrun_command

    chosen = collective_for(vendors.get("npu"), accelerator_present=True)
    assert (chosen.backend, chosen.device, chosen.accelerated) == ("exccl", "npu", True)
    assert chosen.why == "the image's npu accelerator"
    plan = NodesPlan(chosen)
    command = torchrun_command(plan, node=0)
    assert command[command.index("--backend") + 1:command.index("--device") + 2] == ["exccl", "--device", "npu"]
    args = allreduce.parse_args(command[command.index(plan.workload) + 1:])
    assert (args.backend, args.device, args.module) == ("exccl", "npu", "torch_exnpu.distributed")
    absent = collective_for(vendors.get("npu"), accelerator_present=False)
    assert (absent.backend, absent.device, absent.accelerated) == ("gloo", "cpu", False)


def test_the_facts_of_a_plugin_image_are_held_to_the_collective_it_declares(with_plugin: None) -> None:
    from accel_images.kb import claims
    from accel_images.kb.compat import load_kb
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.plan.variants import make_variant

    kb = load_kb()
    variant = make_variant(kb, "npu", "1.0", "2.14", "3.12", "ubuntu24.04", "runtime")
    facts = ImageFacts.from_bytes((ROOT / "tests" / "data" / "facts" / "torch-2.15.0-cu132-x86_64.json").read_bytes())
    network = {"ibverbs": None, "ucx": None, "mpi": None, "collective": {"name": "nccl", "version": None}}
    [claim] = [claim for claim in claims.claims(kb, variant, replace(facts, network=network))
               if claim.key == "collective"]
    assert claim.contradicted
    assert claim.line() == "tests/data/vendor_plugin/npu.py VENDOR.collective.library says exccl; the image has nccl"
    right = {**network, "collective": {"name": "exccl", "version": None}}
    assert not any(claim.contradicted for claim in claims.claims(kb, variant, replace(facts, network=right))
                   if claim.key == "collective")


def test_the_package_names_only_its_builtin_vendors_by_default() -> None:
    assert vendors.names() == vendors.BUILTIN


# ---- nothing outside vendors/ branches on a vendor's name --------------------------------------

PACKAGE = ROOT / "accel_images"
IN_IMAGE = {PACKAGE / "smoke" / "workload.py", PACKAGE / "smoke" / "facts.py", PACKAGE / "smoke" / "allreduce.py"}
"""Run inside images with only torch: they cannot ask a module."""


def _compared_or_keyed_names(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants used in comparisons, as dict keys or in match cases: where code branches."""
    found = []
    for node in ast.walk(tree):
        candidates: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            candidates = [node.left, *node.comparators]
            for operand in node.comparators:
                if isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
                    candidates += operand.elts
        elif isinstance(node, ast.Dict):
            candidates = [key for key in node.keys if key is not None]
        found += [(c.lineno, c.value) for c in candidates if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return found


def test_no_module_outside_vendors_branches_on_a_vendor_name() -> None:
    names = set(vendors.BUILTIN) | {"hpu"}
    offenders = []
    for module in sorted(PACKAGE.rglob("*.py")):
        if "vendors" in module.relative_to(PACKAGE).parts or module in IN_IMAGE:
            continue
        tree = ast.parse(module.read_text(), str(module))
        offenders += [f"{module.relative_to(ROOT)}:{line}: {value!r}"
                      for line, value in _compared_or_keyed_names(tree) if value in names]
    assert offenders == []


def installed_plugin(site: Path) -> Path:
    """What `pip install` of a distribution declaring the npu vendor as an entry point leaves on sys.path."""
    info = site / "accel_images_npu-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: accel-images-npu\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{vendors.ENTRY_POINT_GROUP}]\nnpu = npu:VENDOR\n")
    return site


def test_an_installed_distribution_adds_its_vendor_through_the_entry_point(tmp_path: Path) -> None:
    site = installed_plugin(tmp_path / "site")
    env = {key: value for key, value in os.environ.items() if key != vendors.PATH_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(PLUGIN), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "accel_images", "list", "--matrix", str(MATRIX), "--json"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    rows = json.loads(ok(result))["variants"]
    assert [row["tag"] for row in rows if row["vendor"] == "npu"] == NPU_TAGS


def test_entry_points_are_read_only_where_a_distribution_may_declare_them(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """importlib.metadata costs a fifth of `list`'s start-up: the cheap look must never miss a plug-in."""
    assert vendors._may_declare_entry_points() is False  # this checkout's venv declares none
    monkeypatch.syspath_prepend(str(installed_plugin(tmp_path / "site")))
    assert vendors._may_declare_entry_points() is True
    monkeypatch.setattr(sys, "path", [str(tmp_path / "plugins.zip")])
    (tmp_path / "plugins.zip").write_bytes(b"")
    assert vendors._may_declare_entry_points() is True  # a zip: importlib.metadata decides
