"""The knowledge base's predictions checked against a built image's facts (accel_images/kb/claims.py), and
the build that fails on a contradiction (accel_images.builder.builder.Builder.check_facts).

The real torch 2.15.0+cu132 wheel's facts (tests/data/facts, the facts script's output for the package
index's wheel) must agree with the shipped knowledge base; a deliberately wrong row must fail the build
in one line that names the row and what the image holds.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import fakeimage
from fakes import FakeEngine
from accel_images.builder.builder import Builder
from accel_images.builder.settings import BuildSettings, image_ref
from accel_images.kb import claims
from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.model.imagefacts import ImageFacts
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import expand, make_variant
from accel_images.state import StateDir

DATA = Path(__file__).resolve().parents[1] / "data"
CUDA_215 = ImageFacts.from_bytes((DATA / "facts" / "torch-2.15.0-cu132-x86_64.json").read_bytes())
CU132_PY311 = ("cuda", "13.2", "2.15", "3.11", "ubuntu24.04", "runtime")
MATRIX = """schema: 1
image: team/pytorch
vendors:
  cuda:
    - torch: ["2.15"]
      stack: ["13.2"]
      python: ["3.11"]
      os: [ubuntu24.04]
      flavor: [runtime]
"""


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb()


def with_cuda_archs(kb: KnowledgeBase, minor: str, cuda: str, archs: tuple[str, ...]) -> KnowledgeBase:
    """The knowledge base with one `archs` row of data/vendors/cuda.yaml changed."""
    section = kb.section("cuda")
    table = {m: dict(row) for m, row in section.facts.archs.items()}
    table[minor][cuda] = archs
    return replace(kb, sections={**kb.sections, "cuda": replace(section, facts=replace(section.facts, archs=table))})


def with_cuda_toolkit(kb: KnowledgeBase, minor: str, cuda: str, toolkit: str) -> KnowledgeBase:
    section = kb.section("cuda")
    table = {m: dict(row) for m, row in section.facts.toolkits.items()}
    table[minor][cuda] = toolkit
    return replace(kb, sections={**kb.sections, "cuda": replace(section, facts=replace(section.facts, toolkits=table))})


def test_the_real_cuda_wheel_holds_what_the_knowledge_base_says(kb: KnowledgeBase) -> None:
    variant = make_variant(kb, *CU132_PY311)
    found = claims.claims(kb, variant, CUDA_215, ("torchaudio", "torchvision"))
    assert {claim.key for claim in found} == {"torch", "python", "backend", "machine", "companion:torchaudio",
                                              "companion:torchvision", "stack", "toolkit", "archs", "ptx",
                                              "collective"}
    assert [claim.line() for claim in found if claim.contradicted] == []


def test_a_wrong_architecture_row_is_named_with_what_the_wheel_holds(kb: KnowledgeBase) -> None:
    wrong = with_cuda_archs(kb, "2.15", "13.2", ("8.0", "8.6", "8.9", "9.0", "10.0", "12.0"))
    variant = make_variant(wrong, *CU132_PY311)
    assert claims.contradiction(wrong, variant, CUDA_215) == (
        "the image's facts contradict the knowledge base: accel_images/data/vendors/cuda.yaml archs.\"2.15\".\"13.2\""
        " says sm_80 sm_86 sm_89 sm_90 sm_100 sm_120; the image has sm_75 sm_80 sm_86 sm_90 sm_100 sm_120")


def test_a_row_that_claims_ptx_the_wheel_lacks_is_named(kb: KnowledgeBase) -> None:
    # RELEASE.md says "12.0+PTX" for CUDA 13.x; the released wheels carry no PTX (pytorch/pytorch#175567)
    wrong = with_cuda_archs(kb, "2.15", "13.2", ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0+PTX"))
    line = claims.contradiction(wrong, make_variant(wrong, *CU132_PY311), CUDA_215) or ""
    assert line.endswith('cuda.yaml archs."2.15"."13.2" says compute_120; the image has none')


ARM64_WHEELS = json.loads((DATA / "wheels" / "torch-wheels.json").read_text())


def test_an_arm64_image_is_held_to_the_arm64_rows_of_the_knowledge_base(kb: KnowledgeBase) -> None:
    """The aarch64 wheel of 2.15.0 (its SASS list as recorded from the package index: tests/data/wheels)
    agrees with `platforms."linux/arm64".archs`; the x86_64 list in an arm64 image is named against that row."""
    variant = make_variant(kb, *CU132_PY311, platform="linux/arm64")
    [listed] = ARM64_WHEELS["torch-2.15.0-cp311-cp311-manylinux_2_28_aarch64.whl"]["arch_list"]
    aarch64 = replace(CUDA_215, archs=tuple(listed.split()), platform={"os": "Linux", "machine": "aarch64"})
    found = claims.claims(kb, variant, aarch64, ("torchaudio", "torchvision"))
    assert "archs" in {claim.key for claim in found}
    assert [claim.line() for claim in found if claim.contradicted] == []
    x86_list = replace(CUDA_215, platform={"os": "Linux", "machine": "aarch64"})
    assert claims.contradiction(kb, variant, x86_list) == (
        "the image's facts contradict the knowledge base: accel_images/data/vendors/cuda.yaml"
        ' platforms."linux/arm64".archs."2.15"."13.2" says sm_80 sm_90 sm_100 sm_110 sm_120;'
        " the image has sm_75 sm_80 sm_86 sm_90 sm_100 sm_120")


def test_the_old_13_0_2_toolkit_row_is_caught_by_the_wheels_cuda_toolkit(kb: KnowledgeBase) -> None:
    """The row this knowledge base held before the wheels were read: torch 2.14.1+cu130 installs
    cuda-toolkit 13.0.3 (its Requires-Dist), so an image built from it contradicts 13.0.2."""
    old = with_cuda_toolkit(kb, "2.14", "13.0", "13.0.2")
    variant = make_variant(old, "cuda", "13.0", "2.14", "3.12", "ubuntu24.04", "runtime")
    facts = ImageFacts.from_document(fakeimage.facts_document(
        torch="2.14.1+cu130", python="3.12.3", backend="cuda", toolkit={"cuda": "13.0"},
        archs=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], distributions={"cuda-toolkit": "13.0.3"}))
    assert claims.contradiction(old, variant, facts) == (
        "the image's facts contradict the knowledge base: accel_images/data/vendors/cuda.yaml"
        ' toolkits."2.14"."13.0" says 13.0.2; the image has 13.0.3')
    assert claims.contradiction(kb, make_variant(kb, "cuda", "13.0", "2.14", "3.12", "ubuntu24.04", "runtime"),
                                facts) is None


def test_a_companion_the_build_installs_must_be_there_at_its_release(kb: KnowledgeBase) -> None:
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    missing = ImageFacts.from_document(fakeimage.facts_document())
    assert claims.contradiction(kb, variant, missing, ("torchvision",)) == (
        "the image's facts contradict the knowledge base: accel_images/data/kb.yaml"
        ' torch."2.13".companions.torchvision says 0.28; the image has nothing')
    assert claims.contradiction(kb, variant, missing, ()) is None   # left out on purpose: not claimed
    other = ImageFacts.from_document(fakeimage.facts_document(companions={"torchvision": "0.27.1+cpu"}))
    assert "says 0.28; the image has 0.27.1+cpu" in (claims.contradiction(kb, variant, other, ("torchvision",)) or "")


def test_every_contradiction_is_counted_on_the_one_line(kb: KnowledgeBase) -> None:
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    facts = ImageFacts.from_document(fakeimage.facts_document(torch="2.14.0+cu130", python="3.12.1", backend="cuda"))
    assert claims.contradiction(kb, variant, facts) == (
        "the image's facts contradict the knowledge base: accel_images/data/kb.yaml torch.\"2.13\".versions says"
        " 2.13.0; the image has 2.14.0 (and 2 more: python, backend)")


def test_gaudi_claims_come_from_its_release_row(kb: KnowledgeBase) -> None:
    variant = make_variant(kb, "gaudi", "1.24.1", "2.11", "3.10", "ubuntu22.04", "devel")
    facts = ImageFacts.from_document(fakeimage.facts_document(
        torch="2.11.0+hpu.synapse.v1.24.1", python="3.10.12", backend="hpu", toolkit={"gaudi": "1.24.0.1007"}))
    assert claims.contradiction(kb, variant, facts) == (
        "the image's facts contradict the knowledge base: accel_images/data/vendors/gaudi.yaml"
        ' releases."1.24.1" says 1.24.1; the image has 1.24.0.1007')


def test_the_build_fails_on_a_wrong_row_and_names_it(kb: KnowledgeBase, tmp_path: Path) -> None:
    """Through the builder, with a fake engine whose image holds the real wheel's facts."""
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    wrong = with_cuda_archs(kb, "2.15", "13.2", ("8.0", "9.0", "10.0", "12.0"))
    expansion = expand(load_matrix(tmp_path / "matrix.yaml"), wrong)
    [variant] = expansion.variants
    real = json.loads((DATA / "facts" / "torch-2.15.0-cu132-x86_64.json").read_text())
    engine = FakeEngine(facts={f"sha256:built-{image_ref(expansion, variant)}": json.dumps(real).encode()})
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke=False)
    [outcome] = Builder(engine, wrong, expansion, settings).run([variant])  # type: ignore[arg-type]
    assert outcome.status == "failed" and outcome.exit_code == 1
    assert outcome.error == ('the image\'s facts contradict the knowledge base: accel_images/data/vendors/cuda.yaml'
                             ' archs."2.15"."13.2" says sm_80 sm_90 sm_100 sm_120;'
                             ' the image has sm_75 sm_80 sm_86 sm_90 sm_100 sm_120')
    assert outcome.facts is not None and outcome.facts.archs == CUDA_215.archs
    [again] = Builder(FakeEngine(facts=engine.facts), kb,  # type: ignore[arg-type]
                      expand(load_matrix(tmp_path / "matrix.yaml"), kb),
                      settings).run([make_variant(kb, *CU132_PY311)])
    assert again.status == "built" and again.facts == CUDA_215


def test_an_image_without_facts_is_a_failed_build(kb: KnowledgeBase, tmp_path: Path) -> None:
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    expansion = expand(load_matrix(tmp_path / "matrix.yaml"), kb)
    [variant] = expansion.variants
    engine = FakeEngine(facts={f"sha256:built-{image_ref(expansion, variant)}": b"{not json"})
    settings = BuildSettings(state_dir=StateDir(tmp_path / "state"), smoke=False)
    [outcome] = Builder(engine, kb, expansion, settings).run([variant])  # type: ignore[arg-type]
    assert outcome.status == "failed"
    assert (outcome.error or "").startswith("the image's /opt/accel-images/facts.json is not schema 1 facts: not JSON")


def test_an_image_of_another_machine_than_its_platform_is_named(kb: KnowledgeBase) -> None:
    """An x86_64 image under an arm64 variant (a base pulled for the wrong architecture) would otherwise be
    held to the arm64 rows alone; its machine is claimed first among the shared rows."""
    variant = make_variant(kb, *CU132_PY311, platform="linux/arm64")
    found = {claim.key: claim for claim in claims.claims(kb, variant, CUDA_215)}
    assert found["machine"].contradicted
    assert found["machine"].line() == ('accel_images/data/kb.yaml platforms."linux/arm64".machines says aarch64;'
                                       " the image has x86_64")
    amd64 = make_variant(kb, *CU132_PY311)
    assert not {claim.key: claim for claim in claims.claims(kb, amd64, CUDA_215)}["machine"].contradicted
    unmeasured = replace(CUDA_215, platform={})
    assert not {claim.key: claim for claim in claims.claims(kb, variant, unmeasured)}["machine"].contradicted


def with_collective(facts: ImageFacts, name: str | None) -> ImageFacts:
    """The facts with `network` measured, its collective library `name`."""
    return replace(facts, network={"ibverbs": None, "ucx": None, "mpi": None,
                                   "collective": {"name": name, "version": None}})


def test_the_images_collective_library_is_held_to_the_one_its_vendor_declares(kb: KnowledgeBase) -> None:
    """The row is the vendor's own module (`Vendor.collective`), not a table of vendors beside it."""
    variant = make_variant(kb, *CU132_PY311)
    assert claims.contradiction(kb, variant, with_collective(CUDA_215, "nccl")) is None
    assert claims.contradiction(kb, variant, with_collective(CUDA_215, "rccl")) == (
        "the image's facts contradict the knowledge base: accel_images/vendors/cuda/__init__.py"
        " VENDOR.collective.library says nccl; the image has rccl")
    assert claims.contradiction(kb, variant, CUDA_215) is None            # facts from before `network`: not measured
    assert claims.contradiction(kb, variant, with_collective(CUDA_215, None)) is None


# ---- the devel base's CUDA forward-compatibility library ---------------------------------------------
# cuda.yaml families."13.2".compat_branches promises forward compatibility for older driver branches,
# which needs the cuda-compat package the nvidia/cuda base installs only "if available" (its base
# Dockerfile); the image's facts say whether it is there (facts.json cuda_compat).
CU132_DEVEL = ("cuda", "13.2", "2.15", "3.11", "ubuntu24.04", "devel")


def test_a_devel_base_without_the_compat_library_the_knowledge_base_promises_fails_the_build(
        kb: KnowledgeBase) -> None:
    variant = make_variant(kb, *CU132_DEVEL)
    assert claims.contradiction(kb, variant, replace(CUDA_215, cuda_compat="")) == (
        "the image's facts contradict the knowledge base: accel_images/data/vendors/cuda.yaml"
        ' families."13.2".compat_branches says 595; the image has nothing')
    assert claims.contradiction(kb, variant, replace(CUDA_215, cuda_compat="590.48.01")) == (
        "the image's facts contradict the knowledge base: accel_images/data/vendors/cuda.yaml"
        ' families."13.2".compat_branches says 595; the image has 590.48.01')
    assert claims.contradiction(kb, variant, replace(CUDA_215, cuda_compat="595.58.03")) is None
    assert claims.contradiction(kb, variant, CUDA_215) is None   # facts from before the field: not measured


def test_a_runtime_image_promises_no_compat_library(kb: KnowledgeBase) -> None:
    variant = make_variant(kb, *CU132_PY311)
    assert "compat" not in {claim.key for claim in claims.claims(kb, variant, replace(CUDA_215, cuda_compat=""))}
