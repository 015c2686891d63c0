"""`make device-check` (accel_images/host/devicecheck.py) against fake vendor tools: detection, every
rendered guard of the host's vendor beside `recommend`, the smoke workload with a given Python, one
JSON record. On a GPU machine the same command runs against the real tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from accel_images.host import devicecheck
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
FAKE_NVIDIA_SMI = """#!/bin/sh
# nvidia-smi's answers for one GPU: the CSV queries by field, -q's brand, the table's header.
case "$1" in
    --query-gpu=*)
        out=""
        for field in $(echo "${1#--query-gpu=}" | tr ',' ' '); do
            case "$field" in
                driver_version) value="@DRIVER@" ;;
                compute_cap) value="@CC@" ;;
                name) value="@NAME@" ;;
                *) echo "Field \\"$field\\" is not a valid field to query."; exit 2 ;;
            esac
            out="${out:+$out, }$value"
        done
        echo "$out" ;;
    -q) printf 'GPU 00000000:01:00.0\\n    Product Name : @NAME@\\n    Product Brand : NVIDIA\\n' ;;
    "") echo "| NVIDIA-SMI @DRIVER@     Driver Version: @DRIVER@     CUDA Version: 13.3     |" ;;
    *) exit 2 ;;
esac
"""
SMOKE_OK = {"schema": 1, "ok": True, "torch": "2.15.0+cu132", "backend": "cuda", "device_name": "NVIDIA H100",
            "device_count": 1, "checks": [{"name": "matmul", "ok": True}]}


def fake_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: str, cc: str, name: str) -> Path:
    """A host root with NVIDIA's device nodes and an nvidia-smi first on PATH; returns the root."""
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    for node in ("dev/nvidiactl", "dev/nvidia0"):
        (root / node).parent.mkdir(parents=True, exist_ok=True)
        (root / node).write_text("")
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI.replace("@DRIVER@", driver).replace("@CC@", cc).replace("@NAME@", name))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return root


def fake_machine(tmp_path: Path, machine: str) -> None:
    """`uname -m` on the fake host's PATH (fake_host put its bin directory first) says `machine`."""
    uname = tmp_path / "bin" / "uname"
    uname.write_text(f"#!/bin/sh\necho {machine}\n")
    uname.chmod(0o755)


def guards_by_tag(record: dict) -> dict[str, dict]:
    return {c["name"].removeprefix("guard "): c for c in record["checks"] if c["name"].startswith("guard ")}


def fake_python(tmp_path: Path, report: dict[str, object], status: int = 0) -> str:
    """A 'python' that answers as the smoke workload does: its JSON report as the last line."""
    script = tmp_path / "python-with-torch"
    script.write_text(f"#!/bin/sh\necho progress\necho '{json.dumps(report)}'\nexit {status}\n")
    script.chmod(0o755)
    return str(script)


def run(tmp_path: Path, root: Path, python: str) -> tuple[int, dict]:
    out = tmp_path / "device-check.json"
    code = devicecheck.main(["--python", python, "--images", str(ROOT / "images"), "--matrix",
                             str(FROZEN_MATRIX), "--out", str(out), "--root", str(root)])
    return code, json.loads(out.read_text())


def test_an_h100_on_a_current_driver_passes_every_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_host(tmp_path, monkeypatch, "610.43.02", "9.0", "NVIDIA H100 80GB HBM3")
    code, record = run(tmp_path, root, fake_python(tmp_path, SMOKE_OK))
    assert code == 0 and record["ok"] and record["schema"] == 1
    assert record["host"]["vendor"] == "cuda" and record["host"]["driver_version"] == "610.43.02"
    guards = [c for c in record["checks"] if c["name"].startswith("guard ")]
    assert len(guards) == len(list((ROOT / "images" / "cuda").iterdir()))
    assert all(c["starts"] and c["recommend"] for c in guards)
    assert record["checks"][-1]["name"] == "smoke" and "torch 2.15.0+cu132 on cuda" in record["checks"][-1]["detail"]


def test_refusals_that_recommend_shares_are_no_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_host(tmp_path, monkeypatch, "610.43.02", "7.0", "Tesla V100-SXM2-32GB")  # Volta: no CUDA 13 kernels
    code, record = run(tmp_path, root, fake_python(tmp_path, SMOKE_OK))
    refused = [c for c in record["checks"] if c["name"].startswith("guard ") and not c["starts"]]
    assert refused and all(c["ok"] and not c["recommend"] and c["exit"] == 78 for c in refused)
    assert any("older than every architecture" in c["said"][0] for c in refused)
    assert code == 0


def test_a_smoke_workload_without_torch_fails_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_host(tmp_path, monkeypatch, "610.43.02", "9.0", "NVIDIA H100 80GB HBM3")
    code, record = run(tmp_path, root, sys.executable)  # this venv's Python has no torch
    smoke = record["checks"][-1]
    assert code == 1 and not record["ok"] and smoke["name"] == "smoke" and not smoke["ok"]
    assert smoke["report"]["ok"] is False


def test_a_host_without_an_accelerator_fails_detection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    (tmp_path / "root").mkdir()
    code, record = run(tmp_path, tmp_path / "root", fake_python(tmp_path, SMOKE_OK))
    assert code == 1 and [c["name"] for c in record["checks"]] == ["detect"]


def test_outside_the_repository_it_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert devicecheck.main([]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_make_device_check_runs_the_module(tmp_path: Path) -> None:
    from test_makefile import dry_run

    commands = dry_run(tmp_path, "device-check", "TORCH_PYTHON=/opt/torch/bin/python")
    assert commands == ["python3 -m accel_images.host.devicecheck --python /opt/torch/bin/python --out device-check.json"]


MULTI = "2.14.1-cuda13.0-py3.12-ubuntu24.04"
"""A tag of two platforms: the amd64 image is compiled for 7.5 .. 12.0, the arm64 one (its own stage of the
Dockerfile) for 8.0 .. 12.0."""
AMD64_ONLY = "2.14.1-cuda12.6-py3.12-ubuntu24.04"


def test_an_x86_64_host_is_judged_by_each_tags_amd64_image_and_its_facts(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A T4 (7.5) on x86_64: the amd64 image of a two-platform tag runs there, though its arm64 image (whose
    stage comes last in the Dockerfile) has no 7.x kernels; the guard reads that image's facts from a file
    that exists."""
    root = fake_host(tmp_path, monkeypatch, "610.43.02", "7.5", "Tesla T4")
    fake_machine(tmp_path, "x86_64")
    code, record = run(tmp_path, root, fake_python(tmp_path, SMOKE_OK))
    multi = guards_by_tag(record)[MULTI]
    assert multi["platform"] == "linux/amd64" and multi["starts"] and multi["recommend"] and multi["ok"], multi
    assert multi["facts"]["archs"][0] == "sm_75" and multi["facts"]["platform"]["machine"] == "x86_64"
    said = [line for c in guards_by_tag(record).values() for line in c["said"]]
    assert not [line for line in said if "cannot read" in line or "deciding from the image's environment" in line]
    assert code == 0


def test_an_aarch64_host_runs_only_the_arm64_images_and_admits_no_amd64_only_tag(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """On aarch64 an amd64-only tag is not "admitted" (its image cannot run there) and its guard is not run; a
    two-platform tag is judged as its arm64 image, whose facts have no 7.5: the T4's refusal is shared."""
    root = fake_host(tmp_path, monkeypatch, "610.43.02", "7.5", "Tesla T4")
    fake_machine(tmp_path, "aarch64")
    code, record = run(tmp_path, root, fake_python(tmp_path, SMOKE_OK))
    guards = guards_by_tag(record)
    only = guards[AMD64_ONLY]
    assert only["ok"] and only["skipped"] and not only["recommend"] and not only["starts"], only
    assert only["detail"] == "no linux/arm64 image of this tag (it is built for linux/amd64): not run here," \
                             " and recommend offers it to none of this host's kind"
    multi = guards[MULTI]
    assert multi["platform"] == "linux/arm64" and not multi["starts"] and not multi["recommend"] and multi["ok"]
    assert multi["facts"]["archs"][0] == "sm_80" and multi["facts"]["platform"]["machine"] == "aarch64"
    assert code == 0
