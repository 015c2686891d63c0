"""The packages an image installs beside torch (accel_images/render/companions.py) and the knowledge
base's pairings they come from (accel_images/data/kb.yaml `companions`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_images.errors import InputError
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


def test_a_companion_the_user_leaves_out_is_not_installed_and_said(kb: KnowledgeBase) -> None:
    planned = companions.plan(kb.release("2.15").companions, "cu132", "3.12", None, without=("torchaudio",))
    assert planned.requirements == ("torchvision==0.29.2.*",)
    assert planned.left_out == ("torchaudio",)
    assert planned.notes == ("torchaudio 2.11.1 left out (--without-companion torchaudio)",)


def test_a_wheelhouse_that_lacks_a_companion_is_an_error_unless_it_is_left_out(kb: KnowledgeBase,
                                                                            tmp_path: Path) -> None:
    pairings = kb.release("2.13").companions
    with pytest.raises(InputError) as raised:
        companions.plan(pairings, "cpu", "3.11", tmp_path)
    assert raised.value.one_line() == (f"{tmp_path}: --pip-find-links: the wheelhouse has no +cpu build of torchvision"
                                       " 0.28 for Python 3.11; add one, or leave torchvision out with"
                                       " --without-companion torchvision")
    left = companions.plan(pairings, "cpu", "3.11", tmp_path, without=("torchvision",))
    assert (left.requirements, left.left_out) == ((), ("torchvision",))


def test_the_vendors_own_torch_build_brings_its_own_companions(kb: KnowledgeBase) -> None:
    """Gaudi: no wheel index, nothing installed beside torch, nothing left out."""
    assert companions.plan(kb.release("2.11").companions, None, "3.10", None, without=("torchvision",)) == \
        companions.CompanionPlan()


def test_what_without_companion_accepts_is_every_companion_of_any_release(kb: KnowledgeBase) -> None:
    assert companions.known_names(row.companions for row in kb.torch.values()) == ("torchaudio", "torchvision")
