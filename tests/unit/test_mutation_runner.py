"""The mutation runner (benchmarks/mutation_benches.py) makes real mutants, one change each, and leaves the
checkout alone: the score in benchmarks/RESULTS.md is only as good as these."""

from __future__ import annotations

import ast
from pathlib import Path

from benchmarks.mutation_benches import TARGETS, mutants

ROOT = Path(__file__).resolve().parents[2]


def test_each_mutant_is_one_change_that_still_parses_and_the_checkout_is_untouched() -> None:
    path = "accel_images/vendors/cuda/decision.py"   # it has an `if TYPE_CHECKING:` block
    before = (ROOT / path).read_text()
    found = list(mutants(path, 6))
    assert len(found) == 6
    original = ast.dump(ast.parse(before))
    for mutant in found:
        assert ast.dump(ast.parse(mutant.source)) != original, mutant
        assert "TYPE_CHECKING" not in mutant.what
    assert len({(m.line, m.what) for m in found}) == 6 and (ROOT / path).read_text() == before


def test_every_target_and_its_tests_exist() -> None:
    for path, tests in TARGETS.items():
        assert (ROOT / path).is_file(), path
        assert tests and all((ROOT / test).is_file() for test in tests), path
