"""The tag scheme: full tags, dated and candidate tags, floating aliases."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest

from accel_images.model import tags
from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import Expansion, expand, make_variant
from accel_images.model.variant import Variant
from frozen import MATRIX as FROZEN_MATRIX

REPO = Path(__file__).resolve().parents[2]
MATRICES = Path(__file__).resolve().parents[1] / "matrices"
DAY = dt.date(2026, 10, 7)


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb()


@pytest.fixture(scope="module")
def published(kb: KnowledgeBase) -> Expansion:
    return expand(load_matrix(FROZEN_MATRIX), kb)


@pytest.fixture(scope="module")
def small(kb: KnowledgeBase) -> Expansion:
    return expand(load_matrix(MATRICES / "small.yaml"), kb)


@pytest.mark.parametrize("combo, tag", [
    (("cuda", "13.2", "2.14", "3.12", "ubuntu24.04", "runtime"), "2.14.1-cuda13.2-py3.12-ubuntu24.04"),
    (("cuda", "13.2", "2.14", "3.12", "ubuntu24.04", "devel"), "2.14.1-cuda13.2-py3.12-ubuntu24.04-devel"),
    (("cuda", "12.4", "2.5", "3.11", "ubuntu22.04", "runtime"), "2.5.1-cuda12.4-py3.11-ubuntu22.04"),
    (("cpu", None, "2.13", "3.11", "debian12", "runtime"), "2.13.0-cpu-py3.11-debian12"),
    (("rocm", "7.14", "2.14", "3.12", "ubuntu24.04", "devel"), "2.14.1-rocm7.14-py3.12-ubuntu24.04-devel"),
    (("rocm", "6.2", "2.6", "3.12", "ubuntu24.04", "runtime"), "2.6.0-rocm6.2.4-py3.12-ubuntu24.04"),
    (("xpu", "2026.1", "2.14", "3.12", "ubuntu24.04", "runtime"), "2.14.1-xpu2026.1-py3.12-ubuntu24.04"),
    (("gaudi", "1.24.1", "2.11", "3.10", "ubuntu22.04", "devel"), "2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel"),
])
def test_full_tag(kb: KnowledgeBase, combo: tuple, tag: str) -> None:
    variant = make_variant(kb, *combo)
    assert tags.full_tag(variant) == variant.tag == tag
    assert variant.key == f"{combo[0]}/{tag}"
    assert tags.TAG_RE.match(tag)


def test_runtime_has_no_suffix_and_devel_has_one(published: Expansion) -> None:
    for v in published.variants:
        assert v.tag.endswith("-devel") == (v.flavor == "devel"), v.tag
        assert not v.tag.endswith("-runtime")


def test_dated_and_candidate_tags(kb: KnowledgeBase) -> None:
    v = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    assert tags.dated_tag(v, DAY) == "2.13.0-cpu-py3.11-debian12-20261007"
    assert tags.candidate_tag(v, "run42") == "2.13.0-cpu-py3.11-debian12-candidate-run42"


def test_alias_groups_of_one_variant(kb: KnowledgeBase) -> None:
    devel = make_variant(kb, "cuda", "13.0", "2.14", "3.12", "ubuntu24.04", "devel")
    assert tags.alias_groups(devel) == ("2.14-cuda13.0-devel", "2.14-cuda-devel", "latest-cuda-devel")
    cpu = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    assert tags.alias_groups(cpu) == ("2.13-cpu", "latest-cpu")


@pytest.mark.parametrize("alias, tag", [
    ("2.14-cuda", "2.14.1-cuda13.2-py3.12-ubuntu24.04"),
    ("2.14-cuda-devel", "2.14.1-cuda13.2-py3.12-ubuntu24.04-devel"),
    ("2.14-cuda12.6", "2.14.1-cuda12.6-py3.12-ubuntu24.04"),
    ("2.13-cuda", "2.13.0-cuda13.2-py3.12-ubuntu24.04"),
    ("latest-cuda", "2.15.0-cuda13.2-py3.12-ubuntu24.04"),
    ("latest-rocm", "2.14.1-rocm7.14-py3.12-ubuntu24.04"),
    ("latest-rocm-devel", "2.14.1-rocm7.14-py3.12-ubuntu24.04-devel"),
    ("2.13-rocm", "2.13.0-rocm7.2-py3.12-ubuntu24.04"),
    ("2.13-rocm7.2-devel", "2.13.0-rocm7.2-py3.12-ubuntu24.04-devel"),
    ("latest-xpu", "2.14.1-xpu2026.1-py3.12-ubuntu24.04"),
    ("latest-gaudi-devel", "2.11.0-gaudi1.24.1-py3.12-ubuntu24.04-devel"),
    ("2.10-gaudi-devel", "2.10.0-gaudi1.24.0-py3.12-ubuntu24.04-devel"),
    ("latest-cpu", "2.15.0-cpu-py3.12-ubuntu24.04"),
    ("latest-cpu-devel", "2.15.0-cpu-py3.12-ubuntu24.04-devel"),
    ("2.13-cpu", "2.13.0-cpu-py3.12-ubuntu24.04"),
])
def test_aliases_of_the_published_matrix(published: Expansion, alias: str, tag: str) -> None:
    assert tags.aliases(published.variants)[alias].tag == tag


def test_aliases_exist_only_for_flavors_that_exist(published: Expansion) -> None:
    names = set(tags.aliases(published.variants))
    assert "latest-xpu-devel" in names   # on deep-learning-essentials
    assert "latest-rocm-devel" in names
    assert "latest-gaudi" not in names
    assert {f"latest-{v}" for v in ("cpu", "cuda", "rocm", "xpu")} <= names


def test_aliases_do_not_depend_on_input_order(published: Expansion) -> None:
    expected = {alias: v.tag for alias, v in tags.aliases(published.variants).items()}
    shuffled = list(published.variants)
    random.Random(7).shuffle(shuffled)
    assert {alias: v.tag for alias, v in tags.aliases(shuffled).items()} == expected


def test_every_alias_winner_is_the_newest_of_its_group(published: Expansion) -> None:
    for alias, winner in tags.aliases(published.variants).items():
        rivals = [v for v in published.variants if alias in tags.alias_groups(v)]
        assert min(rivals, key=Variant.sort_key) == winner, alias


def test_aliases_of_and_all_tags(published: Expansion) -> None:
    variants = published.variants
    newest = next(v for v in variants if v.tag == "2.14.1-rocm7.14-py3.12-ubuntu24.04")
    assert tags.aliases_of(newest, variants) == ("2.14-rocm", "2.14-rocm7.14", "latest-rocm")
    assert tags.all_tags(newest, variants, DAY) == (
        "2.14.1-rocm7.14-py3.12-ubuntu24.04", "2.14.1-rocm7.14-py3.12-ubuntu24.04-20261007",
        "2.14-rocm", "2.14-rocm7.14", "latest-rocm")
    older = next(v for v in variants if v.tag == "2.13.0-rocm7.2-py3.11-ubuntu22.04")
    assert tags.aliases_of(older, variants) == ()


@pytest.mark.parametrize("which", ["published", "small"])
def test_tag_re_accepts_every_tag(request: pytest.FixtureRequest, which: str) -> None:
    expansion: Expansion = request.getfixturevalue(which)
    every = [t for v in expansion.variants
             for t in (v.tag, tags.dated_tag(v, DAY), tags.candidate_tag(v, "1234567890-1"))]
    every += list(tags.aliases(expansion.variants))
    for tag in every:
        assert tags.TAG_RE.match(tag), tag


@pytest.mark.parametrize("bad", ["", "-leading-dash", ".dot", "has space", "a:b", "a/b", "x" * 129, "é",
                                 "trailing-newline\n"])
def test_tag_re_rejects(bad: str) -> None:
    assert not tags.TAG_RE.match(bad)
