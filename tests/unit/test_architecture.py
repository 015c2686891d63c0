"""The package's shape: imports run one way, down the floors the package docstring lists.

Every import statement counts, wherever it stands: at the top, inside a function, or under
TYPE_CHECKING (a protocol that names a type from a floor above is still a loop in the design).
docs/architecture.md draws the same floors.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import accel_images

PACKAGE = Path(accel_images.__file__).parent
NAME = "accel_images"

FLOORS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("host",),
    ("publish", "report"),
    ("builder", "supply"),
    ("smoke", "render"),
    ("plan",),
    ("kb",),
    ("vendors",),
    ("model",),
)
"""Top to bottom. A package may import a package on a lower line; packages on one line never
import each other. The modules at the package's top (the shared leaves) are below every line."""

VENDOR_LAYERS: tuple[tuple[str, ...], ...] = (
    ("",),
    ("guard", "host", "image"),
    ("decision", "detect", "knowledge"),
)
"""Inside a vendor that is a package (vendors/<name>/), top to bottom: the package itself (the vendor
class and VENDOR), the layers the class is made of, what they stand on. A module imports modules of
its own vendor on lower lines only, and no module of another vendor."""
VENDOR_MODULE_LINES = 400

ENTRY_POINTS = {"__main__": "cli"}   # `python -m accel_images` is the command
MAX_TOP_LEVEL_MODULES = 12


@dataclass(frozen=True)
class Import:
    source: str      # dotted module that imports
    target: str      # dotted module imported
    line: int


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module an import names: `accel_images.kb.compat.load_kb` -> `accel_images.kb.compat`."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(known: dict[str, Path]) -> list[Import]:
    """Every import of a package module by a package module, wherever the statement stands."""
    found = []
    for source, path in known.items():
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                module = node.module or ""
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, module] if module else base)
                names = [f"{module}.{alias.name}" for alias in node.names]
            for name in names:
                target = _resolve(name, known) if name.startswith(NAME) else None
                if target and target != source:
                    found.append(Import(source, target, node.lineno))
    return found


def floor_of(module: str) -> tuple[int, str]:
    """(floor index, package) of a module; the shared leaves are below every floor."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    top = ENTRY_POINTS.get(top, top)
    for index, line in enumerate(FLOORS):
        if top in line:
            return index, top
    return len(FLOORS), ""


def against_the_floors(found: list[Import]) -> list[str]:
    """Imports that go up, or sideways to another package on the same floor."""
    wrong = []
    for imp in found:
        (src_floor, src_pkg), (dst_floor, dst_pkg) = floor_of(imp.source), floor_of(imp.target)
        if src_pkg == dst_pkg and src_floor < len(FLOORS):
            continue
        if dst_floor < src_floor or (dst_floor == src_floor and src_floor < len(FLOORS)):
            wrong.append(f"{imp.source}:{imp.line} imports {imp.target}")
    return wrong


def cycles(found: list[Import]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        graph.setdefault(imp.source, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


@pytest.fixture(scope="module")
def package_imports() -> list[Import]:
    """The package's imports, read once for the two rules below (a parse of every module)."""
    return imports(modules())


def test_no_import_cycle_anywhere_in_the_package(package_imports):
    assert cycles(package_imports) == []


def test_every_import_runs_down_the_floors(package_imports):
    assert against_the_floors(package_imports) == []


def test_the_checks_find_a_cycle_and_an_import_against_the_floors():
    """The two rules above can fail: an upward import and a loop, written as the code would."""
    found = [Import("accel_images.model.variant", "accel_images.plan.variants", 3),
             Import("accel_images.plan.variants", "accel_images.model.variant", 5),
             Import("accel_images.smoke.judge", "accel_images.render.contexts", 7),
             Import("accel_images.errors", "accel_images.vendors", 9)]
    assert cycles(found) == [["accel_images.model.variant", "accel_images.plan.variants"]]
    assert against_the_floors(found) == ["accel_images.model.variant:3 imports accel_images.plan.variants",
                                         "accel_images.smoke.judge:7 imports accel_images.render.contexts",
                                         "accel_images.errors:9 imports accel_images.vendors"]


def test_imports_under_type_checking_and_inside_functions_count(tmp_path):
    package = tmp_path / NAME
    (package / "model").mkdir(parents=True)
    (package / "plan").mkdir()
    (package / "__init__.py").write_text("")
    (package / "model" / "__init__.py").write_text("")
    (package / "plan" / "__init__.py").write_text("")
    (package / "plan" / "x.py").write_text("")
    (package / "model" / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from accel_images.plan.x import A\n"
        "def f():\n    from ..plan import x\n")
    found = imports(modules(package))
    assert sorted((i.source, i.target, i.line) for i in found) == [
        ("accel_images.model.y", "accel_images.plan.x", 3), ("accel_images.model.y", "accel_images.plan.x", 5)]


def test_every_package_on_a_floor_exists_and_says_what_it_owns():
    for line in FLOORS:
        for package in line:
            init = PACKAGE / package / "__init__.py"
            docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert docstring and len(docstring.split()) >= 12, f"{package}/__init__.py says too little"


def test_no_package_outside_the_floors_and_few_modules_at_the_top():
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages == {name for line in FLOORS for name in line}
    top_level = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top_level) <= MAX_TOP_LEVEL_MODULES, top_level


def test_the_package_docstring_lists_the_floors_in_order():
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))) or ""
    lines = [line.split()[:len(floor)] for line in doc.splitlines() for floor in FLOORS
             if line.split()[:len(floor)] == list(floor)]
    assert lines == [list(floor) for floor in FLOORS]


def vendor_layer(module: str) -> tuple[str, int] | None:
    """(vendor, line in VENDOR_LAYERS) of a module of a vendor package; None for any other module."""
    parts = module.split(".")
    if parts[:2] != [NAME, "vendors"] or len(parts) < 3 or not (PACKAGE / "vendors" / parts[2]).is_dir():
        return None
    layer = ".".join(parts[3:])
    return parts[2], next(index for index, line in enumerate(VENDOR_LAYERS) if layer in line)


def against_the_vendor_layers(found: list[Import]) -> list[str]:
    """Imports inside a vendor package that go up or sideways, or into another vendor."""
    wrong = []
    for imp in found:
        source, target = vendor_layer(imp.source), vendor_layer(imp.target)
        if source is None or target is None:
            continue
        if source[0] != target[0] or target[1] <= source[1]:
            wrong.append(f"{imp.source}:{imp.line} imports {imp.target}")
    return wrong


def test_a_vendor_package_s_layers_import_down_and_stay_small(package_imports):
    """vendors/<name>/ holds one module per concern (issue 40): each names a line of VENDOR_LAYERS
    (an unknown one stops next() here), imports run down them, and none grows to VENDOR_MODULE_LINES."""
    assert against_the_vendor_layers(package_imports) == []
    packages = [path for path in (PACKAGE / "vendors").iterdir() if (path / "__init__.py").is_file()]
    assert packages
    for path in (module for package in packages for module in package.glob("*.py")):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        assert vendor_layer(name) is not None
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines < VENDOR_MODULE_LINES, f"{path.relative_to(PACKAGE)}: {lines} lines"


def test_the_vendor_layer_check_finds_an_upward_and_a_cross_vendor_import():
    found = [Import("accel_images.vendors.cuda.knowledge", "accel_images.vendors.cuda.host", 3),
             Import("accel_images.vendors.cuda.host", "accel_images.vendors.cuda.image", 4),
             Import("accel_images.vendors.rocm.host", "accel_images.vendors.cuda.decision", 5),
             Import("accel_images.vendors.cuda.host", "accel_images.vendors.cuda.knowledge", 6)]
    assert against_the_vendor_layers(found) == [
        "accel_images.vendors.cuda.knowledge:3 imports accel_images.vendors.cuda.host",
        "accel_images.vendors.cuda.host:4 imports accel_images.vendors.cuda.image",
        "accel_images.vendors.rocm.host:5 imports accel_images.vendors.cuda.decision"]
