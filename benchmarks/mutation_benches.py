"""Mutation score of the unit suite over the trust-critical modules: the share of small, deliberate bugs
(mutants) the unit tests catch.

For each module below, every place one of the operators applies is a mutation site: a comparison turned
into its neighbour (`<` into `<=`, `==` into `!=`, `in` into `not in`), `and` into `or`, a `not` dropped,
`return True` into `return False`, an `if` test negated (not `if TYPE_CHECKING:`, whose negation changes
nothing at run time). A spread of sites (the same ones every run) is
mutated one at a time in a copy of the checkout, and the unit tests that guard that module run against it
(`pytest -x`): a failing run kills the mutant, a green one lets it survive. The survivors are listed with
their line, so each one is either a missing test or an equivalent mutant a person can judge.

A runner of its own rather than mutmut: the copy keeps the checkout untouched whatever happens to the run,
and each module is held to the tests that name it, which keeps a full run within minutes.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import PYTHON, ROOT, BenchResult

TARGET_SHARE = 0.90
PER_MODULE, QUICK_PER_MODULE = 4, 1
TARGETS: dict[str, tuple[str, ...]] = {
    "accel_images/supply/trust.py": ("tests/unit/test_supply.py", "tests/unit/test_catalogue.py",
                                     "tests/unit/test_index_nightly.py", "tests/unit/test_trust_edges.py"),
    "accel_images/publish/tested.py": ("tests/unit/test_nightly.py", "tests/unit/test_index_nightly.py",
                                       "tests/unit/test_publish.py"),
    "accel_images/publish/promote.py": ("tests/unit/test_publish.py", "tests/unit/test_index_nightly.py",
                                        "tests/unit/test_trust_edges.py"),
    "accel_images/publish/retention.py": ("tests/unit/test_retention.py", "tests/unit/test_trust_edges.py"),
    "accel_images/credentials.py": ("tests/unit/test_security_unit.py", "tests/unit/test_registry.py",
                                    "tests/unit/test_trust_edges.py"),
    "accel_images/formatting.py": ("tests/unit/test_outside_text.py", "tests/unit/test_table_widths.py",
                                   "tests/unit/test_security_unit.py"),
    "accel_images/vendors/cuda/decision.py": ("tests/unit/test_guard_agrees.py", "tests/unit/test_recommend.py",
                                              "tests/unit/vendors/test_cuda.py", "tests/unit/test_guard_hosts.py",
                                              "tests/unit/test_trust_edges.py"),
    "accel_images/vendors/rocm/host.py": ("tests/unit/test_guard_hosts.py", "tests/unit/test_recommend.py"),
    "accel_images/vendors/gaudi/decision.py": ("tests/unit/test_guard_hosts.py", "tests/unit/test_recommend.py",
                                               "tests/unit/test_trust_edges.py"),
}
"""Module -> the unit tests that guard it."""
COPIED = ("accel_images", "tests", "templates", "images", "matrix.yaml", "pyproject.toml", "README.md",
          "RELIABILITY.md", "Makefile", "docs", "benchmarks", ".github")
FLIPPED = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
           ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


@dataclass(frozen=True)
class Mutant:
    path: str
    line: int
    what: str
    source: str     # the whole mutated module


class _Sites(ast.NodeTransformer):
    """Walks a module; applies the mutation at site number `target` (counting every site met), or none."""

    def __init__(self, target: int = -1) -> None:
        self.count = 0
        self.target = target
        self.done: tuple[int, str] | None = None

    def _here(self, node: ast.AST, what: str) -> bool:
        hit = self.count == self.target
        self.count += 1
        if hit:
            self.done = (getattr(node, "lineno", 0), what)
        return hit

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        op = type(node.ops[0])
        if op in FLIPPED and self._here(node, f"{op.__name__} -> {FLIPPED[op].__name__}"):
            node.ops[0] = FLIPPED[op]()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if self._here(node, "and <-> or"):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._here(node, "not dropped"):
            return node.operand
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, bool) \
                and self._here(node, f"return {node.value.value} -> {not node.value.value}"):
            node.value = ast.Constant(not node.value.value)
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return node   # imports for the type checker alone: negating them changes nothing at run time
        if self._here(node, "if test negated"):
            node.test = ast.UnaryOp(ast.Not(), node.test)
        return node


def mutants(path: str, limit: int) -> Iterator[Mutant]:
    """Up to `limit` mutants of the module, at sites spread evenly over it (the same every run)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    counter = _Sites()
    counter.visit(ast.parse(text))
    total = counter.count
    chosen = sorted({round(i * (total - 1) / max(limit - 1, 1)) for i in range(min(limit, total))}) if total else []
    for site in chosen:
        mutator = _Sites(site)
        tree = mutator.visit(ast.parse(text))
        if mutator.done is not None:
            yield Mutant(path, mutator.done[0], mutator.done[1], ast.unparse(ast.fix_missing_locations(tree)))


def killed(copy: Path, mutant: Mutant, tests: tuple[str, ...]) -> bool:
    """Whether the tests fail against the mutant (a timeout counts as caught: the mutant hangs them)."""
    target = copy / mutant.path
    original = target.read_text(encoding="utf-8")
    target.write_text(mutant.source, encoding="utf-8")
    try:
        done = subprocess.run([PYTHON, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *tests],
                              cwd=copy, capture_output=True, text=True, timeout=600, check=False)
        return done.returncode != 0
    except subprocess.TimeoutExpired:
        return True
    finally:
        target.write_text(original, encoding="utf-8")


def checkout_copy(where: Path) -> Path:
    copy = where / "checkout"
    copy.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__", "out"))
        elif source.exists():
            shutil.copy2(source, copy / name)
    return copy


def bench_mutation(quick: bool) -> BenchResult:
    result = BenchResult("mutation")
    limit = QUICK_PER_MODULE if quick else PER_MODULE
    survivors: list[str] = []
    caught = total = 0
    lines = ["| module | mutants | killed | share |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="accel-mutation-") as scratch:
        copy = checkout_copy(Path(scratch))
        clean = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "4",
                                *sorted({t for tests in TARGETS.values() for t in tests})],
                               cwd=copy, capture_output=True, text=True, timeout=1800, check=False)
        if clean.returncode != 0:
            raise RuntimeError("the unmutated copy's tests fail: " + clean.stdout[-2000:])
        for path, tests in TARGETS.items():
            found = list(mutants(path, limit))
            dead = [m for m in found if killed(copy, m, tests)]
            survivors += [f"`{m.path}:{m.line}` {m.what}" for m in found if m not in dead]
            caught, total = caught + len(dead), total + len(found)
            lines.append(f"| `{path}` | {len(found)} | {len(dead)} | {len(dead) / len(found):.0%} |")
    share = caught / total if total else 0.0
    result.commands.append(f"python -m benchmarks.run --only mutation ({limit} mutants per module, "
                           "each against the module's unit tests)")
    result.notes.append(f"Mutation score: {caught} of {total} mutants killed, {share:.0%} (target "
                        f"{TARGET_SHARE:.0%}{': met' if share >= TARGET_SHARE else ': not met'}).")
    result.notes.append("Per module:\n\n" + "\n".join(lines) + "\n")
    result.notes.append("Survivors (a missing test, or a mutant that changes nothing observable): "
                        + ("; ".join(survivors) if survivors else "none") + ".")
    return result


MUTATION_BENCHES = {"mutation": bench_mutation}
