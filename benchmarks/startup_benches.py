"""CLI start-up: `accel-images --help`, `list` and `compat`, side by side with the CLI before it was a package.

The baseline is the project at BASELINE_REV (the flat accel_images/cli.py that imported every
stage), extracted with `git archive` into a temporary directory; both run in the same invocation,
alternating, through the same interpreter and console script, each from its own tree (PYTHONPATH
and working directory), so each reads its own matrix and knowledge base.

Two settings: with the bytecode cache (what every run after the first gets from an installed or
editable package; the first run writes it), and without it (PYTHONDONTWRITEBYTECODE=1 on a tree
that has none, as this project's sessions run: every module of the package is compiled again on
each start; the dependencies' caches from `pip install` are used in both).
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.harness import PYTHON, ROOT, BenchResult, Row, alternating, run_checked, shown, time_once

BASELINE_REV = os.environ.get("ACCEL_BENCH_CLI_BASELINE", "acf9c81")
"""The last commit with the flat CLI (the issue's "today"); the variable compares against another."""
COMMANDS: tuple[tuple[str, ...], ...] = (("--help",), ("list",), ("compat", "torch==2.14", "cuda==13.0"))
TARGET_S = 0.12
FULL_RUNS, QUICK_RUNS = 21, 3
TREE_FILES = ("accel_images", "matrix.yaml", "templates", "pyproject.toml")
"""What a tree needs to run the CLI from source (resources.py checks pyproject.toml)."""


def cli_command(args: Sequence[str]) -> list[str]:
    """The console script users run (the same file for both trees), else `python -m accel_images`."""
    script = Path(PYTHON).with_name("accel-images")
    return [str(script), *args] if script.is_file() else [PYTHON, "-m", "accel_images", *args]


def tree_env(tree: Path, cached: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "FORCE_COLOR",
                                                                          "TTY_COMPATIBLE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(tree)
    if not cached:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def runner(tree: Path, args: Sequence[str], cached: bool) -> Callable[[], object]:
    command, env = cli_command(args), tree_env(tree, cached)
    return lambda: run_checked(command, cwd=tree, env=env, timeout_s=120)


def shown_run(tree: Path, args: Sequence[str], cached: bool) -> str:
    """The command as a shell line, run in `tree`."""
    where = "." if tree == ROOT else f"<{tree.name}>"
    prefix = "" if cached else "PYTHONDONTWRITEBYTECODE=1 "
    return f"(cd {where} && {prefix}PYTHONPATH=. {shown(cli_command(args))})"


def extract(rev: str, into: Path) -> Path:
    """The tree of `rev` (git archive: no worktree registered in the shared repository)."""
    archive = into.with_suffix(".tar")
    run_checked(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev, *TREE_FILES])
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)
    return into


def copy_of_ours(into: Path) -> Path:
    """The working tree's package and data, without any bytecode cache."""
    for name in TREE_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__", "_bundled"))
        else:
            into.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def bench_startup(quick: bool) -> BenchResult:
    result = BenchResult("startup")
    runs = QUICK_RUNS if quick else FULL_RUNS
    with tempfile.TemporaryDirectory(prefix="accel-bench-startup-") as scratch:
        work = Path(scratch)
        try:
            baselines = {cached: extract(BASELINE_REV, work / f"baseline-{'cached' if cached else 'cold'}")
                         for cached in (True, False)}
        except (RuntimeError, OSError) as error:
            result.notes.append(f"No baseline: cannot extract {BASELINE_REV} ({str(error).splitlines()[0]}).")
            baselines = {}
        ours = {True: ROOT, False: copy_of_ours(work / "ours-cold")}
        for cached in (True, False):
            for args in COMMANDS:
                result.rows.append(measure(result, args, ours[cached], baselines.get(cached), cached, runs))
    result.notes += notes()
    return result


def measure(result: BenchResult, args: Sequence[str], ours: Path, baseline: Path | None, cached: bool,
            runs: int) -> Row:
    """One command in one setting: ours and the baseline alternately, after a warm-up run of each."""
    actions = [("accel-images (package)", ours)] + ([(f"{BASELINE_REV} (flat cli.py)", baseline)] if baseline else [])
    timed = []
    for label, tree in actions:
        action = runner(tree, args, cached)
        time_once(action)  # warm-up: the file cache, and the bytecode cache where it may be written
        timed.append((label, action))
        result.commands.append(shown_run(tree, args, cached))
    series = alternating(timed, runs)
    measured, base = series[0], (series[1] if len(series) > 1 else None)
    what = f"`accel-images {' '.join(args)}` start-up, {'bytecode cached' if cached else 'no bytecode cache'}"
    return Row("startup", what, measured, base, measured.median / base.median if base else None,
               f"of {BASELINE_REV}'s", f"<= {TARGET_S:g} s" if cached else "report only",
               measured.median <= TARGET_S if cached else None)


def notes() -> list[str]:
    return [
        f"Start-up is the whole process: interpreter, imports, reading the matrix and knowledge base, printing "
        f"(stdout is a pipe). Baseline: {BASELINE_REV} extracted with `git archive`; ratio = ours / baseline "
        f"(below 1 is faster).",
        "The package loads a command's module only when it runs (accel_images/cli/group.py); `list` and `compat` "
        "import neither the docker SDK, requests, jinja2 nor rich (a plain table where rich would print the same "
        "bytes); the knowledge base is read with libyaml; importlib.metadata is imported only when a distribution "
        "on sys.path may declare a vendor plug-in.",
        "What remains: the interpreter (~11 ms), click (~25 ms), PyYAML (~10 ms, most of it compiling its reader's "
        "regular expressions) and the package's own modules (dataclasses and regular expressions built at import), "
        "plus reading matrix.yaml with PyYAML's pure-Python parser (its error messages and what it refuses are "
        "part of the matrix's contract; libyaml accepts inputs it refuses).",
    ]


STARTUP_BENCHES = {"startup": bench_startup}
