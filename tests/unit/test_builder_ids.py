"""A build tests the image it built, by the ID the engine gave it, not by the local name.

On one engine shared by two builds of one tag, the second build moves the local name between the first
build's commit and its smoke test: by name, the first build then tested a foreign image and failed ("no build
record of this image"). Facts, attest and push already went by ID (builder.check_facts, publish.promote); the
smoke test now does too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes import FakeEngine
from test_nightly import DEBIAN, write_matrix
from accel_images.builder import builder as builder_module
from accel_images.builder.builder import Builder
from accel_images.builder.settings import BuildSettings, image_ref
from accel_images.kb.compat import load_kb
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import expand
from accel_images.smoke.judge import SmokeResult
from accel_images.state import StateDir


def test_the_smoke_test_runs_the_image_by_the_id_its_build_produced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = load_kb()
    expansion = expand(load_matrix(write_matrix(tmp_path, "team/pytorch")), kb)
    variant = next(v for v in expansion.variants if v.tag == DEBIAN)
    ref = image_ref(expansion, variant)
    engine = FakeEngine()
    smoked: list[str] = []

    def smoke(engine: object, image: str, *args: object, **kwargs: object) -> SmokeResult:
        smoked.append(image)
        return SmokeResult(True, "cpu", False, (), ())

    monkeypatch.setattr(builder_module, "smoke_image", smoke)
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"))
    [outcome] = Builder(engine, kb, expansion, settings).run([variant])  # type: ignore[arg-type]
    assert outcome.status == "built", outcome.error
    assert smoked == [f"sha256:built-{ref}"] == [outcome.image_id]
    assert outcome.image == ref   # reports still name the image by its tag
