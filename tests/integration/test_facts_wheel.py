"""The facts script against the real CUDA wheel: torch 2.15.0 from the package index, no GPU.

Marked `network`: it needs torch 2.15.0 and its CUDA wheels (about 2.9 GB, 5.3 GB installed), so CI's
run and `make test` leave it out; run it with

    .venv/bin/python -m pytest -m network tests/integration/test_facts_wheel.py

ACCEL_TEST_TORCH_VENV names a virtual environment that already holds torch==2.15.0 (and, for the
companion check, torchvision 0.29.2 and torchaudio 2.11.1); without it the test makes one in a temporary
directory and installs torch==2.15.0 there from the package index.

Recorded run (2026-12-05, this project's facts.py on the package index's torch-2.15.0-cp311-cp311-
manylinux_2_28_x86_64.whl, with torchvision 0.29.2 and torchaudio 2.11.1 beside it, no GPU):
    archs ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], ptx [], toolkit cuda 13.2,
    cudnn 9.26.0, nccl 2.30.7, cuda-toolkit 13.2.2; the script alone 8.7 s (most of it importing torch),
    this test 107 s with the venv given (2 cores shared with other builds). That output is
    tests/data/facts/torch-2.15.0-cu132-x86_64.json, which the unit tests and the knowledge base's
    check (tests/unit/test_claims.py) read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accel_images.kb import claims
from accel_images.kb.compat import load_kb
from accel_images.model.imagefacts import ImageFacts
from accel_images.plan.variants import make_variant
from accel_images.smoke import facts as script

pytestmark = [pytest.mark.network]
RECORDED = Path(__file__).resolve().parents[1] / "data" / "facts" / "torch-2.15.0-cu132-x86_64.json"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("ACCEL_TEST_TORCH_VENV")
    if given:
        return Path(given)
    made = tmp_path_factory.mktemp("venv215")
    subprocess.run([sys.executable, "-m", "venv", str(made)], check=True, timeout=300)
    subprocess.run([str(made / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", "torch==2.15.0"],
                   check=True, timeout=3600)
    return made


def test_the_real_wheel_reports_its_architectures_without_a_gpu(venv: Path, tmp_path: Path) -> None:
    out, pins = tmp_path / "facts.json", tmp_path / "constraints.txt"
    run = subprocess.run([str(venv / "bin" / "python"), "-I", "-B", script.__file__, "--out", str(out),
                          "--constraints", str(pins)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    facts = ImageFacts.from_bytes(out.read_bytes())   # schema 1, checked against facts.schema.json
    assert facts.torch == "2.15.0+cu132" and facts.backend == "cuda"
    assert facts.archs == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120") and facts.ptx == ()
    assert (facts.toolkit["cuda"], facts.toolkit["cudnn"], facts.toolkit["nccl"]) == ("13.2", "9.26.0", "2.30.7")
    assert facts.distributions["cuda-toolkit"] == "13.2.2"
    assert pins.read_text().splitlines() == [f"{name}=={version}" for name, version in facts.distributions.items()]
    recorded = json.loads(RECORDED.read_text())
    assert (facts.archs, facts.toolkit, facts.distributions["torch"]) == (
        tuple(recorded["archs"]), recorded["toolkit"], recorded["distributions"]["torch"])
    kb = load_kb()
    python = ".".join(facts.python.split(".")[:2])
    variant = make_variant(kb, "cuda", "13.2", "2.15", python, "ubuntu24.04", "runtime")
    installed = tuple(name for name in ("torchaudio", "torchvision") if name in facts.companions)
    assert claims.contradiction(kb, variant, facts, installed) is None
