"""The unit tests read a frozen matrix and knowledge base (tests/frozen.py), not the live ones: the
frozen copy is complete and loads, the seam (accel_images.resources) points a unit test at it, the
`live_data` marker points one back at the live files, and a new release in a knowledge base elsewhere
changes nothing the frozen copy answers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel_images import resources, vendors
from accel_images.kb import compat
from accel_images.kb.check import KbFiles
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import expand
from frozen import FROZEN, MATRIX

NEW_RELEASE = """  "2.99":
    released: "2099-01-01"
    versions: ["2.99.0"]
    python: ['3.12']
    companions: {torchvision: "0.99", torchaudio: "2.99"}
    source: https://example.invalid/
"""


def test_the_frozen_copy_is_a_whole_knowledge_base_and_matrix() -> None:
    assert (FROZEN / "kb.yaml").is_file() and MATRIX.is_file()
    for vendor in vendors.registry().values():
        if vendor.kb_file.is_relative_to(resources.KB_DIR):   # the package's own vendors: each frozen too
            assert (FROZEN / "vendors" / vendor.kb_file.name).is_file(), vendor.name
    expansion = expand(load_matrix(MATRIX), compat.load_kb())
    assert expansion.variants


def test_a_unit_test_reads_the_frozen_copy() -> None:
    assert resources.kb_dir() == FROZEN
    assert resources.default_matrix() == MATRIX
    assert KbFiles().root == FROZEN
    cuda = vendors.registry()["cuda"]
    assert compat.vendor_file(resources.kb_dir(), cuda) == FROZEN / "vendors" / "cuda.yaml"


@pytest.mark.live_data
def test_a_live_data_test_reads_the_live_files() -> None:
    assert resources.kb_dir() == resources.KB_DIR == compat.DATA_FILE.parent
    assert resources.default_matrix().resolve() == (Path.cwd() / "matrix.yaml").resolve()
    assert KbFiles().root == compat.DATA_FILE.parent


def test_a_new_release_in_another_knowledge_base_leaves_the_frozen_one_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What adding a torch release to the live files does: the knowledge base ACCEL_IMAGES_KB_DIR names
    knows it; the frozen copy, what the unit tests read, does not."""
    shutil.copytree(FROZEN, tmp_path / "kb")
    kb_yaml = tmp_path / "kb" / "kb.yaml"
    kb_yaml.write_text(kb_yaml.read_text(encoding="utf-8").replace("\ntorch:\n", "\ntorch:\n" + NEW_RELEASE, 1),
                       encoding="utf-8")
    assert "2.99" not in compat.load_kb().torch
    monkeypatch.setenv(resources.KB_DIR_ENV, str(tmp_path / "kb"))
    assert "2.99" in compat.load_kb().torch
    monkeypatch.undo()
    assert "2.99" not in compat.load_kb().torch
