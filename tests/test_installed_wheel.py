"""A plain (non-editable) install, used outside the checkout, as `pipx install` and the nightly
workflow's first step use it: the wheel must carry the matrix, templates and knowledge base, and
render exactly the checked-in images/."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def run(*command: str | Path, cwd: Path) -> str:
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CLI of a fresh venv holding the project's wheel (built from this checkout) and nothing else of it."""
    where = tmp_path_factory.mktemp("installed")
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", where / "dist", ROOT, cwd=where)
    wheel = next((where / "dist").glob("accel_images-*.whl"))
    run(sys.executable, "-m", "venv", where / "venv", cwd=where)
    run(where / "venv" / "bin" / "pip", "install", "-q", wheel, cwd=where)
    return where / "venv" / "bin" / "accel-images"


def differences(left: Path, right: Path) -> list[str]:
    compared = filecmp.dircmp(left, right)
    found = [f"{left}/{n}" for n in compared.left_only + compared.right_only + compared.diff_files + compared.funny_files]
    return found + [d for sub in compared.common_dirs for d in differences(left / sub, right / sub)]


def test_it_is_not_the_checkouts_code(installed: Path, tmp_path: Path) -> None:
    python = installed.parent / "python"
    location = run(python, "-c", "import accel_images; print(accel_images.__file__)", cwd=tmp_path).strip()
    assert not location.startswith(str(ROOT)), location


def test_list_outside_the_checkout_is_json(installed: Path, tmp_path: Path) -> None:
    variants = json.loads(run(installed, "list", "--json", cwd=tmp_path))["variants"]
    assert len(variants) == len(json.loads(run(Path(sys.executable).parent / "accel-images", "list", "--json",
                                               cwd=ROOT))["variants"])


def test_render_outside_the_checkout_is_the_checked_in_tree(installed: Path, tmp_path: Path) -> None:
    run(installed, "render", "--out", tmp_path / "images", cwd=tmp_path)
    assert differences(tmp_path / "images", ROOT / "images") == []
