"""Matrix values the knowledge base does not know are errors; values it knows and rules out are pruned.

The typo corpus (tests/corpus/cases.yaml, `typo-*` and `mirror-*`) proves the error side through
the real CLI; these tests prove the other side: a value the knowledge base knows stays a prune,
with its reason, and the run succeeds.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from accel_images.kb import compat
from accel_images.cli import main
from accel_images.plan.known import known_values, unknown_value
from accel_images.builder.mirror_check import base_registries
from frozen import MATRIX as FROZEN_MATRIX

KNOWN_BUT_RULED_OUT = """\
schema: 1
image: accel-images/pytorch
vendors:
  cuda:
    - stack: ["13.0", "12.4"]
      torch: ["2.14"]
      python: ["3.12", "3.9"]
      os: [ubuntu24.04, debian12]
      flavor: [runtime]
  gaudi:
    - stack: ["1.24.1"]
      torch: ["2.11"]
      python: ["3.12"]
      os: [ubuntu24.04]
      flavor: [devel, runtime]
"""


def test_values_the_knowledge_base_rules_out_are_pruned_with_their_reason(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(KNOWN_BUT_RULED_OUT)
    result = CliRunner().invoke(main, ["list", "--explain", "--json", "--matrix", str(matrix)])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    reasons = " | ".join("; ".join(p["reasons"]) for p in listing["pruned"])
    assert "torch 2.14 has no CUDA 12.4 build" in reasons
    assert "not 3.9" in reasons
    assert "debian12 provides Python 3.11, not 3.12" in reasons
    assert "gaudi images come in devel, not runtime" in reasons
    kept = [(v["vendor"], v["stack"], v["python"], v["os"], v["flavor"]) for v in listing["variants"]]
    assert kept == [("cuda", "13.0", "3.12", "ubuntu24.04", "runtime"), ("gaudi", "1.24.1", "3.12", "ubuntu24.04", "devel")]


def test_a_stack_given_by_its_minor_is_known() -> None:
    """`rocm: 6.2` means the 6.2.x build; `cuda: 12` any 12.x build."""
    kb = compat.load_kb()
    assert unknown_value(kb, "rocm", "stack", "6.2") is None
    assert unknown_value(kb, "rocm", "stack", "6.2.4") is None
    assert unknown_value(kb, "cuda", "stack", "12") is None
    assert unknown_value(kb, "cuda", "stack", "12.66") is not None


def test_every_value_of_the_repository_matrix_is_known() -> None:
    kb = compat.load_kb()
    for vendor in kb.sections:
        known = known_values(kb, vendor)
        assert known.os and known.flavors and known.python and known.torch


def test_a_flavor_any_vendor_builds_is_known_to_every_vendor() -> None:
    """`runtime` for gaudi is a fact (gaudi images are devel only), so a prune, not a typo."""
    kb = compat.load_kb()
    assert unknown_value(kb, "gaudi", "flavor", "runtime") is None
    assert unknown_value(kb, "gaudi", "flavor", "devle") is not None


def test_base_registries_of_the_repository_matrix() -> None:
    from accel_images.plan.matrix import load_matrix
    from accel_images.plan.variants import expand
    expansion = expand(load_matrix(FROZEN_MATRIX), compat.load_kb())
    assert base_registries(expansion.variants) == ("docker.io", "vault.habana.ai")


def test_a_mirror_for_a_registry_of_another_vendor_is_accepted(tmp_path: Path) -> None:
    """One mirror list for every `--vendor` of a CI job: the whole matrix counts, not the filter."""
    result = CliRunner().invoke(main, ["render", "--vendor", "cpu", "--torch", "2.14", "--os", "debian12",
                                       "--registry-mirror", "vault.habana.ai=mirror.example.com/habana",
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
