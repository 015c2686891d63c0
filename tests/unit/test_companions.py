"""The packages an image installs beside torch (accel_images/render/companions.py) and the knowledge
base's pairings they come from (accel_images/data/kb.yaml `companions`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.render import companions


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb()


def test_torch_2_15_is_paired_with_torchvision_0_29_2_and_torchaudio_2_11_1(kb: KnowledgeBase) -> None:
    # V: both uploaded to the package index with torch 2.15.0 (2026-10-28) as py3-none wheels built on
    # torch's stable ABI; Requires-Dist torch>=2.14.0 and torch>=2.11; both import and run an op beside
    # torch 2.15.0 (nms, roi_align, Spectrogram, resample). The earlier 0.29.0/0.29.1 and 2.11.0 are cpXY
    # wheels built against older torch, hence the exact patch releases.
    assert dict(kb.release("2.15").companions) == {"torchvision": "0.29.2", "torchaudio": "2.11.1"}


def test_an_exact_pairing_is_required_as_that_release(kb: KnowledgeBase) -> None:
    planned = companions.plan(kb.release("2.15").companions, "cu132", "3.12", None)
    assert planned.requirements == ("torchaudio==2.11.1.*", "torchvision==0.29.2.*")
    assert planned.names == ("torchaudio", "torchvision")


def test_a_wheelhouse_holding_the_exact_release_serves_it(tmp_path: Path) -> None:
    (tmp_path / "torchvision-0.29.2+cpu-py3-none-manylinux_2_28_x86_64.whl").touch()
    (tmp_path / "torchvision-0.28.1+cpu-cp312-cp312-manylinux_2_28_x86_64.whl").touch()
    assert companions.in_wheelhouse(tmp_path, "torchvision", "0.29.2", "cpu", "3.12")
    assert companions.in_wheelhouse(tmp_path, "torchvision", "0.28", "cpu", "3.12")
    assert not companions.in_wheelhouse(tmp_path, "torchvision", "0.29.1", "cpu", "3.12")
    assert not companions.in_wheelhouse(tmp_path, "torchvision", "0.28", "cpu", "3.11")
