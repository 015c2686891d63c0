"""The CLI as a package: lazily loaded commands, no import cycles, light start-up.

`accel-images --help`, `list` and `compat` must not import what only other commands need (the
docker SDK, requests, jinja2, rich), and the group's --help must describe each command as the
command itself would, without importing it. Start-up time itself is measured in benchmarks/
(benchmarks/startup_benches.py), never asserted here.
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from accel_images.cli import COMMANDS, main, options

ROOT = Path(__file__).resolve().parents[2]
CLI_DIR = ROOT / "accel_images" / "cli"
SHARED = {"accel_images.cli.options", "accel_images.cli.group"}
RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE")

PROBE = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["accel-images", *sys.argv[1:]]
from accel_images.cli import main
main()
"""
"""Run the CLI, then report every module it imported as the last line on stderr."""


def imported_by(*args: str) -> set[str]:
    env = {key: value for key, value in os.environ.items() if key not in RICH_ENV}
    result = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stderr.splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


# ---- what each light command imports -----------------------------------------------------------

HEAVY = {"docker", "requests", "urllib3", "jinja2", "rich"}


def test_help_imports_no_stage_at_all() -> None:
    modules = imported_by("--help")
    assert not top_level(modules) & (HEAVY | {"yaml"})
    # errors makes outside text inert (formatting.inert): two leaves, no stage
    assert {m for m in modules if m.startswith("accel_images.") and not m.startswith("accel_images.cli")} \
        <= {"accel_images.errors", "accel_images.formatting"}
    assert not {m for m in modules if m.startswith("accel_images.cli.")} - SHARED


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["list", "--markdown"]])
def test_list_imports_neither_docker_nor_requests_nor_rich_into_a_pipe(args: list[str]) -> None:
    modules = imported_by(*args)
    assert not top_level(modules) & HEAVY
    assert not {"accel_images.builder.engine", "accel_images.builder.builder", "accel_images.render.contexts", "accel_images.registry",
                "accel_images.smoke.judge", "importlib.metadata"} & modules


def test_compat_reads_the_knowledge_base_and_nothing_of_the_matrix() -> None:
    modules = imported_by("compat", "torch==2.14", "cuda==13.0")
    assert not top_level(modules) & HEAVY
    assert not {"accel_images.plan.variants", "accel_images.plan.matrix", "accel_images.cli.listing"} & modules


def test_recommend_needs_no_docker(tmp_path: Path) -> None:
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"vendor": "cpu"}))
    modules = imported_by("recommend", "--host-json", str(host))
    assert not top_level(modules) & HEAVY


# ---- the lazy group ----------------------------------------------------------------------------

@pytest.mark.parametrize("lazy", COMMANDS, ids=[command.name for command in COMMANDS])
def test_each_summary_is_what_the_command_itself_would_show(lazy) -> None:
    command = lazy.load()
    assert command.name == lazy.name
    assert not command.hidden and not command.deprecated and not command.short_help
    assert lazy.summary == " ".join(command.help.partition("\n\n")[0].split())
    for limit in range(3, 200):
        assert lazy.stand_in().get_short_help_str(limit) == command.get_short_help_str(limit)


@pytest.mark.parametrize("width", [40, 80, 120, 250])
def test_group_help_is_byte_identical_to_an_eagerly_loaded_group(width: int) -> None:
    eager = click.Group(main.name, commands={lazy.name: lazy.load() for lazy in COMMANDS}, params=main.params,
                        help=main.help, context_settings=main.context_settings)
    lazy_help = CliRunner().invoke(main, ["--help"], prog_name="accel-images", terminal_width=width)
    eager_help = CliRunner().invoke(eager, ["--help"], prog_name="accel-images", terminal_width=width)
    assert lazy_help.exit_code == eager_help.exit_code == 0
    assert lazy_help.output == eager_help.output
    assert all(f"  {lazy.name} " in lazy_help.output for lazy in COMMANDS)


def test_unknown_command_still_suggests_the_close_one() -> None:
    result = subprocess.run([sys.executable, "-m", "accel_images", "lst"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == ("accel-images: error: No such command 'lst'. Did you mean 'list'?"
                                     " (see 'python -m accel_images --help')")


def command_objects(module: str) -> set[str]:
    """The module's top-level commands: a group's own subcommands (`kb check`) come with the group."""
    namespace = __import__(module, fromlist=["_"])
    found = {name: value for name, value in vars(namespace).items() if isinstance(value, click.Command)}
    nested = {id(sub) for value in found.values() if isinstance(value, click.Group) for sub in value.commands.values()}
    return {f"{module}:{name}" for name, value in found.items() if id(value) not in nested}


def test_every_command_a_module_defines_is_registered_and_nothing_else() -> None:
    defined: set[str] = set()
    for path in sorted(CLI_DIR.glob("*.py")):
        if path.stem != "__init__":
            defined |= command_objects(f"accel_images.cli.{path.stem}")
    assert defined == {lazy.target for lazy in COMMANDS}
    assert len({lazy.name for lazy in COMMANDS}) == len(COMMANDS)


# ---- no import cycles --------------------------------------------------------------------------

def cli_imports(path: Path) -> set[str]:
    """The accel_images.cli modules a file imports, at any level of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {name for name in names if name == "accel_images.cli" or name in SHARED
                  or (name.startswith("accel_images.cli.") and (CLI_DIR / f"{name.rsplit('.', 1)[1]}.py").is_file())}
    return found


def test_command_modules_import_only_the_shared_options() -> None:
    for path in sorted(CLI_DIR.glob("*.py")):
        imports = cli_imports(path)
        if path.stem == "__init__":
            assert imports <= SHARED, path
        elif f"accel_images.cli.{path.stem}" in SHARED:
            assert not imports, path
        else:
            assert imports <= {"accel_images.cli.options"}, path


def test_the_old_flat_modules_are_gone() -> None:
    assert not (ROOT / "accel_images" / "cli.py").exists()
    assert not list((ROOT / "accel_images").glob("cli_*.py"))


# ---- plain tables: the same bytes rich would write -----------------------------------------------

def rich_output(renderable: object) -> str:
    """What out() writes into a pipe or a file: the same console settings, a non-terminal file."""
    from rich.console import Console
    buffer = io.StringIO()
    Console(file=buffer, highlight=False, width=options.PIPE_WIDTH).print(renderable)
    return buffer.getvalue()


TEXT = st.one_of(
    st.text(st.sampled_from("ab Z09-./_:@#()[]\\\t\u00e9*~"), max_size=20),
    st.text(st.sampled_from("abZ09-./_ :"), max_size=30),
    st.sampled_from(["", " ", "-", "ubuntu:24.04", ":smile:", "a::b", "x: y: z", "[bold]x[/]", "2.14.0-cpu",
                     "nvcr.io/nvidia/cuda:13.0.2-runtime-ubuntu24.04", "  pruned (matrix line 3): x: y"]),
    st.text(st.sampled_from("abc "), min_size=60, max_size=130))


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.lists(TEXT, min_size=n, max_size=n),
                                                       st.lists(st.lists(TEXT, min_size=n, max_size=n), max_size=5))))
def test_a_plain_table_is_what_rich_prints(table: tuple[list[str], list[list[str]]]) -> None:
    columns, rows = table
    with mock.patch.dict(os.environ):
        for key in RICH_ENV:
            os.environ.pop(key, None)
        lines = options.plain_table(columns, rows)
        if lines is not None:
            assert "".join(f"{line}\n" for line in lines) == rich_output(options.table(columns, rows))


@settings(max_examples=400, deadline=None)
@given(st.one_of(TEXT, st.text(st.sampled_from("ab :"), min_size=200, max_size=300)))
def test_a_plain_line_is_what_rich_prints(text: str) -> None:
    with mock.patch.dict(os.environ):
        for key in RICH_ENV:
            os.environ.pop(key, None)
        if options.plain_line(text):
            assert f"{text}\n" == rich_output(text)


def test_the_list_table_is_plain() -> None:
    """What `list` prints for the repository's matrix takes the plain path (else rich is imported)."""
    from accel_images.cli.listing import COLUMNS, variant_row
    from accel_images.plan.variants import by_tag
    _, variants = options.chosen_variants(str(ROOT / "matrix.yaml"), {})
    assert options.plain_table(COLUMNS, [variant_row(group) for group in by_tag(variants)]) is not None


@pytest.mark.parametrize("variable", RICH_ENV)
def test_a_variable_that_makes_rich_act_as_a_terminal_keeps_rich(variable: str, monkeypatch) -> None:
    monkeypatch.setenv(variable, "1")
    assert not options.plain_output()
