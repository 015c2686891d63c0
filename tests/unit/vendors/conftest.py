"""Exact-text tests per vendor, in the style of hpccm's building-block tests: each test renders one
variant and asserts the Dockerfile lines that follow a vendor reference, cited beside the assertion."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable

import pytest

from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.plan.matrix import load_matrix
from accel_images.render.contexts import Renderer, RenderOptions
from accel_images.plan.variants import Expansion, expand, make_variant
from accel_images.model.variant import Variant
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def kb() -> KnowledgeBase:
    return load_kb()


@pytest.fixture(scope="session")
def expansion(kb: KnowledgeBase) -> Expansion:
    return expand(load_matrix(FROZEN_MATRIX), kb)


@pytest.fixture(scope="session")
def variant(kb: KnowledgeBase) -> Callable[..., Variant]:
    def make(vendor: str, stack: str | None, torch: str, python: str, os: str, flavor: str) -> Variant:
        return make_variant(kb, vendor, stack, torch, python, os, flavor)
    return make


@pytest.fixture(scope="session")
def dockerfile(kb: KnowledgeBase, expansion: Expansion, variant: Callable[..., Variant]) -> Callable[..., str]:
    """The Dockerfile of one variant, rendered against the whole matrix with upstream sources."""
    renderer = Renderer(kb)

    def render(*combo: str | None, options: RenderOptions = RenderOptions()) -> str:
        return renderer.dockerfile(variant(*combo), expansion, options)
    return render
