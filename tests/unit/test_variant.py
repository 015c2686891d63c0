"""Expansion: matrix groups -> variants, pruned with reasons, deduplicated, filtered."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_images import vendors
from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.errors import IncompatibleError, InputError
from accel_images.plan.matrix import load_matrix, parse_matrix
from accel_images.plan.variants import Expansion, expand, make_variant, select, select_or_explain
from accel_images.model.variant import Variant
from accel_images.smoke.judge import Expectation
from frozen import MATRIX as FROZEN_MATRIX

REPO = Path(__file__).resolve().parents[2]
MATRICES = Path(__file__).resolve().parents[1] / "matrices"
VENDORS = set(vendors.BUILTIN)

SMALL_TAGS = [
    "2.14.1-cpu-py3.11-ubuntu24.04",
    "2.14.1-cpu-py3.11-ubuntu24.04-devel",
    "2.14.1-cpu-py3.11-debian12",
    "2.14.1-cpu-py3.11-debian12-devel",
    "2.13.0-cpu-py3.11-debian12",
    "2.14.1-cuda13.2-py3.12-ubuntu24.04",
    "2.14.1-cuda13.2-py3.12-ubuntu24.04-devel",
    "2.14.1-cuda12.6-py3.12-ubuntu24.04",
    "2.14.1-cuda12.6-py3.12-ubuntu24.04-devel",
    "2.14.1-rocm7.14-py3.12-ubuntu24.04",
    "2.13.0-rocm7.2-py3.12-ubuntu24.04",
    "2.14.1-xpu2026.1-py3.12-ubuntu24.04",
    "2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel",
]


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb()


@pytest.fixture(scope="module")
def small(kb: KnowledgeBase) -> Expansion:
    return expand(load_matrix(MATRICES / "small.yaml"), kb)


@pytest.fixture(scope="module")
def published(kb: KnowledgeBase) -> Expansion:
    return expand(load_matrix(FROZEN_MATRIX), kb)


def one(variants: tuple[Variant, ...], tag: str, platform: str = "linux/amd64") -> Variant:
    (found,) = [v for v in variants if v.tag == tag and v.platform == platform]
    return found


# -- the published matrix ----------------------------------------------------------------

def test_published_matrix_covers_every_vendor(published: Expansion) -> None:
    assert len(published.variants) >= 20
    assert {v.vendor for v in published.variants} == VENDORS


def test_published_matrix_has_the_debian_cpu_variant(published: Expansion) -> None:
    variant = one(published.variants, "2.13.0-cpu-py3.11-debian12")
    assert (variant.vendor, variant.torch, variant.python, variant.os, variant.flavor) == (
        "cpu", "2.13.0", "3.11", "debian12", "runtime")
    assert variant.base_image == "debian:bookworm-slim"
    assert variant.system_python and variant.wheel_index == "cpu"


def test_published_matrix_tags_are_unique(published: Expansion) -> None:
    """One variant per tag and platform; every platform variant of a tag knows them all (its index)."""
    keys = [(v.tag, v.platform) for v in published.variants]
    assert len(keys) == len(set(keys))
    for variant in published.variants:
        assert variant.platforms == tuple(v.platform for v in published.variants if v.tag == variant.tag)


# -- expansion, pruning, dedup ---------------------------------------------------------------

def test_small_matrix_expands_to_exactly_these_variants_in_order(small: Expansion) -> None:
    assert [v.tag for v in small.variants] == SMALL_TAGS
    assert small.image == "example/pytorch"
    assert small.user.name == "builder"


def test_pruned_combinations_carry_reasons_and_group_lines(small: Expansion) -> None:
    pruned = {(p.vendor, p.stack, p.torch): p for p in small.pruned}
    assert set(pruned) == {("rocm", "7.14", "2.13"), ("rocm", "7.2", "2.14"), ("gaudi", "1.23.0", "2.11")}
    rocm = pruned[("rocm", "7.14", "2.13")]
    assert rocm.line == 24
    assert rocm.reasons == ("torch 2.13 has no ROCm 7.14 build; ROCm builds: 7.2 (torch with ROCm 7.14: 2.14)",)
    assert rocm.describe().startswith("rocm 7.14 torch 2.13 py3.12 ubuntu24.04 runtime: torch 2.13 has no ROCm 7.14")
    assert "bundles torch 2.9.0" in pruned[("gaudi", "1.23.0", "2.11")].reasons[0]


def test_published_matrix_prunes_rocm_7_14_for_torch_2_13(published: Expansion) -> None:
    assert any(p.vendor == "rocm" and p.stack == "7.14" and p.torch == "2.13" for p in published.pruned)
    assert not any(v.vendor == "rocm" and v.stack == "7.14" and v.torch.startswith("2.13")
                   for v in published.variants)


def test_duplicate_combinations_expand_once_keeping_the_first_group(small: Expansion) -> None:
    assert one(small.variants, "2.14.1-cpu-py3.11-debian12").line == 8
    assert one(small.variants, "2.14.1-cpu-py3.11-debian12-devel").line == 13


def test_explicit_impossible_group_is_rejected(kb: KnowledgeBase) -> None:
    matrix = load_matrix(MATRICES.parent / "corpus" / "matrices" / "explicit-impossible-second-group.yaml")
    with pytest.raises(InputError) as caught:
        expand(matrix, kb)
    assert caught.value.line == 11
    assert "torch 2.13 has no ROCm 7.14 build" in caught.value.message


def test_explicit_possible_group_is_kept(kb: KnowledgeBase) -> None:
    expansion = expand(load_matrix(MATRICES / "cpu-debian.yaml"), kb)
    assert [v.tag for v in expansion.variants] == ["2.13.0-cpu-py3.11-debian12"]
    assert expansion.pruned == ()


def test_group_whose_every_combination_is_pruned_expands_to_nothing(kb: KnowledgeBase) -> None:
    raw = (b'schema: 1\nimage: a/b\nvendors:\n  cuda:\n    - stack: ["13.2"]\n      torch: ["2.11", "2.10"]\n'
           b'      python: ["3.12"]\n      os: [ubuntu24.04]\n      flavor: [runtime]\n')
    expansion = expand(parse_matrix(raw), kb)
    assert expansion.variants == ()
    assert len(expansion.pruned) == 2


def test_experimental_python_is_kept_only_with_the_flag(kb: KnowledgeBase) -> None:
    group = ('schema: 1\nimage: a/b\nvendors:\n  cuda:\n    - stack: ["13.2"]\n      torch: ["2.14"]\n'
             '      python: ["3.12", "3.15"]\n      os: [ubuntu24.04]\n      flavor: [runtime]\n')
    plain = expand(parse_matrix(group.encode()), kb)
    assert [p.python for p in plain.pruned] == ["3.15"]
    assert "experimental" in plain.pruned[0].reasons[0]
    flagged = expand(parse_matrix((group + "      experimental_python: true\n").encode()), kb)
    # the flag lifts the torch rule; ubuntu24.04 still has no Python 3.15 package
    assert [r for p in flagged.pruned for r in p.reasons] == ["ubuntu24.04 provides Python 3.11, 3.12, 3.13, not 3.15"]


# -- derived facts ------------------------------------------------------------------------------

def test_cuda_variant_facts(kb: KnowledgeBase) -> None:
    v = make_variant(kb, "cuda", "13.2", "2.14", "3.12", "ubuntu24.04", "devel")
    assert v.torch == "2.14.1"
    assert v.wheel_index == "cu132"
    assert v.toolkit == "13.2.1"
    assert v.min_driver == "595.58.03"
    assert v.mvc_driver == "580"
    assert v.base_image == "nvidia/cuda:13.2.1-devel-ubuntu24.04"
    assert v.gpu_archs[0] == "7.5"


def test_cuda_12_6_variant_driver_and_bases(kb: KnowledgeBase) -> None:
    """Runtime on plain Ubuntu like PyTorch's own runtime image (docker.Makefile BASE_RUNTIME=ubuntu);
    devel on nvidia/cuda devel for nvcc (BASE_DEVEL=nvidia/cuda:...-devel)."""
    v = make_variant(kb, "cuda", "12.6", "2.13", "3.12", "ubuntu24.04", "runtime")
    assert (v.min_driver, v.mvc_driver, v.base_image) == ("560.35.05", "525.60.13", "ubuntu:24.04")
    devel = make_variant(kb, "cuda", "12.6", "2.13", "3.12", "ubuntu24.04", "devel")
    assert devel.base_image == "nvidia/cuda:12.6.3-devel-ubuntu24.04"


def test_rocm_variant_bases(kb: KnowledgeBase) -> None:
    runtime = make_variant(kb, "rocm", "7.14", "2.14", "3.12", "ubuntu24.04", "runtime")
    devel = make_variant(kb, "rocm", "7.14", "2.14", "3.12", "ubuntu24.04", "devel")
    assert runtime.base_image == "ubuntu:24.04"
    assert devel.base_image == "rocm/dev-ubuntu-24.04:7.14.0-full"
    assert runtime.wheel_index == "rocm7.14"
    assert "gfx950" in runtime.gpu_archs


def test_rocm_minor_resolves_to_the_patch_build(kb: KnowledgeBase) -> None:
    v = make_variant(kb, "rocm", "6.2", "2.6", "3.12", "ubuntu24.04", "runtime")
    assert v.stack == "6.2.4" and v.wheel_index == "rocm6.2.4"


def test_gaudi_variant_uses_the_bundled_torch(kb: KnowledgeBase) -> None:
    v = make_variant(kb, "gaudi", "1.24.1", "2.11", "3.10", "ubuntu22.04", "devel")
    assert v.torch == "2.11.0"
    assert v.base_image == ("vault.habana.ai/gaudi-docker/1.24.1/ubuntu22.04/habanalabs/"
                            "pytorch-installer-2.11.0:1.24.1-482")
    assert v.wheel_index is None
    older = make_variant(kb, "gaudi", "1.24.0", "2.10", "3.10", "ubuntu22.04", "devel")
    assert older.base_image.endswith("pytorch-installer-2.10.0:1.24.0-1007")


def test_python_from_deadsnakes_is_not_system_python(kb: KnowledgeBase) -> None:
    assert not make_variant(kb, "xpu", "2026.1", "2.14", "3.11", "ubuntu24.04", "runtime").system_python
    assert make_variant(kb, "xpu", "2026.1", "2.14", "3.12", "ubuntu24.04", "runtime").system_python


def test_labels(kb: KnowledgeBase) -> None:
    labels = make_variant(kb, "cuda", "13.0", "2.14", "3.12", "ubuntu24.04", "runtime").labels()
    assert labels["io.accel-images.vendor"] == "cuda"
    assert labels["io.accel-images.stack"] == "13.0"
    assert labels["io.accel-images.min-driver"] == "580.126.20"   # toolkit 13.0.3: the wheel pins cuda-toolkit==13.0.3
    assert labels["io.accel-images.gpu-archs"] == "7.5,8.0,8.6,9.0,10.0,12.0"  # no PTX: pytorch/pytorch#175567
    assert labels["io.accel-images.tag"] == "2.14.1-cuda13.0-py3.12-ubuntu24.04"
    assert all(key.startswith("io.accel-images.") for key in labels)


def test_variant_is_frozen(kb: KnowledgeBase) -> None:
    v = make_variant(kb, "cpu", None, "2.14", "3.11", "debian12", "runtime")
    with pytest.raises(AttributeError):
        v.torch = "2.13.0"  # type: ignore[misc]


def test_expectation_matches_the_variant(kb: KnowledgeBase) -> None:
    v = make_variant(kb, "rocm", "7.2", "2.13", "3.12", "ubuntu24.04", "runtime")
    e = Expectation.of(v)
    assert (e.vendor, e.torch, e.stack, e.python) == ("rocm", "2.13.0", "7.2", "3.12")


# -- filters -----------------------------------------------------------------------------------

@pytest.mark.parametrize("filters, count", [
    ({"vendor": "cpu"}, 5),
    ({"torch": "2.13"}, 2),
    ({"torch": "2.13.0"}, 2),
    ({"vendor": "cuda", "stack": "13"}, 2),
    ({"vendor": "cuda", "flavor": "devel"}, 2),
    ({"python": "3.10"}, 1),
    ({"os": "debian12", "flavor": "runtime"}, 2),
    ({"vendor": "cpu", "torch": None}, 5),
    ({"torch": "2.1"}, 0),
])
def test_select(small: Expansion, filters: dict[str, str | None], count: int) -> None:
    chosen = select(small.variants, filters)
    assert len(chosen) == count
    for key, wanted in filters.items():
        if wanted is not None:
            assert all(getattr(v, key) == wanted or getattr(v, key).startswith(wanted + ".") for v in chosen)


def test_filter_matching_nothing_names_the_filter(small: Expansion) -> None:
    with pytest.raises(InputError) as caught:
        select_or_explain(small, {"vendor": "rocm", "torch": "2.12"})
    assert caught.value.field == "--torch"
    assert "--vendor rocm --torch 2.12" in caught.value.message
    assert "2.13.0, 2.14.1" in caught.value.message


def test_filter_matching_unknown_vendor_lists_the_vendors(small: Expansion) -> None:
    with pytest.raises(InputError) as caught:
        select_or_explain(small, {"vendor": "tpu"})
    assert caught.value.field == "--vendor"
    assert "cpu, cuda, gaudi, rocm, xpu" in caught.value.message


def test_filter_matching_only_pruned_combinations_gives_the_reason(small: Expansion) -> None:
    with pytest.raises(IncompatibleError) as caught:
        select_or_explain(small, {"vendor": "rocm", "stack": "7.14", "torch": "2.13"})
    assert caught.value.exit_code == 1
    assert "torch 2.13 has no ROCm 7.14 build" in caught.value.message


def test_filter_with_a_full_torch_version_finds_pruned_minor(small: Expansion) -> None:
    with pytest.raises(IncompatibleError, match=r"Intel Gaudi 1\.23\.0 bundles torch 2\.9\.0"):
        select_or_explain(small, {"vendor": "gaudi", "stack": "1.23.0", "torch": "2.11.0"})


def test_filters_that_match_return_variants(small: Expansion) -> None:
    chosen = select_or_explain(small, {"vendor": "rocm", "torch": "2.14"})
    assert [v.tag for v in chosen] == ["2.14.1-rocm7.14-py3.12-ubuntu24.04"]
