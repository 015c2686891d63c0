"""The bad-input corpus, end to end through the real CLI.

Each case of tests/corpus/cases.yaml runs `python -m accel_images ARGS` in a scratch copy of the
repository's matrix.yaml and images/, and must fail the way the table says: its exit code,
nothing on stdout, exactly one stderr line `accel-images: error: ...` matching the case's
regex, no traceback, and not one byte written anywhere under the scratch directory (a render
that fails must leave images/ and any --out directory as they were).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parents[1] / "corpus"
PREFIX = "accel-images: error: "
LARGE_BYTES = 5 * 1024 * 1024
WIDE_VALUES = 200_000


def load_cases() -> list[dict[str, Any]]:
    return yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))["cases"]


CASES = load_cases()


def substitute(text: str, places: dict[str, Path]) -> str:
    """Replace the table's placeholders; nothing else in braces is touched (`{index}` stays)."""
    for name, path in places.items():
        text = text.replace("{" + name + "}", str(path))
    return text


def generate(kind: str, directory: Path) -> None:
    """Inputs too large to keep in the repository."""
    if kind == "large":
        head = b"schema: 1\nimage: accel-images/pytorch\n# padding\n"
        (directory / "large.yaml").write_bytes(head + b"#" * (LARGE_BYTES - len(head) - 1) + b"\n")
    elif kind == "wide":
        items = ",".join(["x"] * WIDE_VALUES)
        (directory / "wide.yaml").write_text(f"schema: 1\nimage: accel-images/pytorch\nvendors: [{items}]\n")
    else:
        raise AssertionError(f"unknown generator {kind!r} in cases.yaml")


def snapshot(root: Path) -> dict[str, Any]:
    """Every path under root with its bytes (files), or None (directories), and its mtime."""
    state: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        content = path.read_bytes() if path.is_file() else None
        state[str(path.relative_to(root))] = (content, path.stat().st_mtime_ns)
    return state


MEMORY_LIMIT_BYTES = 2 << 30
LIMITED_CLI = (f"import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT_BYTES},"
               f" {MEMORY_LIMIT_BYTES})); sys.argv[0] = 'accel-images'; runpy.run_module('accel_images',"
               " run_name='__main__', alter_sys=True)")
"""`python -m accel_images ARGS` in an address space of 2 GiB: a command that reads an endless file
(`/dev/zero`) whole fails with a MemoryError, instead of taking the machine's memory with it. Set
in the child itself (not a preexec_fn, which can deadlock a child forked from a thread pool)."""


@dataclass(frozen=True)
class Outcome:
    result: subprocess.CompletedProcess[str]
    wrote: list[str]  # paths under the working directory that appeared, vanished or changed


def run_case(case: dict[str, Any], template: Path, scratch: Path, generated: Path) -> Outcome:
    """One case in its own copy of matrix.yaml and images/, so a stray write is its own."""
    work = scratch / case["id"]
    shutil.copytree(template, work, copy_function=shutil.copy2)
    places = {"corpus": CORPUS, "work": work, "generated": generated}
    before = snapshot(work)
    result = subprocess.run([sys.executable, "-c", LIMITED_CLI, *(substitute(a, places) for a in case["args"])],
                            cwd=work, capture_output=True, text=True, timeout=300, errors="replace")
    after = snapshot(work)
    wrote = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    return Outcome(result, wrote)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case, run concurrently: each is a separate process, most of its time spent importing."""
    template = tmp_path_factory.mktemp("template")
    shutil.copy2(ROOT / "matrix.yaml", template / "matrix.yaml")
    shutil.copytree(ROOT / "images", template / "images")
    generated = tmp_path_factory.mktemp("generated")
    for kind in sorted({case["generate"] for case in CASES if "generate" in case}):
        generate(kind, generated)
    scratch = tmp_path_factory.mktemp("work")
    with ThreadPoolExecutor(max_workers=max(4, 2 * (os.cpu_count() or 1))) as pool:
        futures = {case["id"]: pool.submit(run_case, case, template, scratch, generated) for case in CASES}
        return {case_id: future.result() for case_id, future in futures.items()}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input_fails_with_one_line_and_writes_nothing(case: dict[str, Any], outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[case["id"]]
    result = outcome.result
    assert "Traceback" not in result.stderr + result.stdout
    assert result.returncode == case["exit"], result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(PREFIX)
    assert re.search(case["error"], lines[0]), f"{lines[0]!r} does not match {case['error']!r}"
    assert outcome.wrote == [], "a failing command wrote under its working directory"


# ---- the table itself ------------------------------------------------------------------------

REQUIRED = {"id", "fault", "args", "exit", "error", "shows"}


def test_every_case_is_complete_and_unique() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    for case in CASES:
        assert set(case) >= REQUIRED, f"{case.get('id')}: missing {REQUIRED - set(case)}"
        assert set(case) <= REQUIRED | {"generate"}, f"{case['id']}: unknown fields"
        assert all(isinstance(arg, str) for arg in case["args"]), f"{case['id']}: args must be strings"
        re.compile(case["error"])


def test_each_example_line_matches_its_own_regex() -> None:
    """`shows` is what RELIABILITY.md prints; it must say what the test checks."""
    places = {"corpus": CORPUS, "work": Path("/work"), "generated": Path("/generated")}
    for case in CASES:
        shown = substitute(case["shows"], places)
        assert shown.startswith(PREFIX) and "\n" not in shown, case["id"]
        assert re.search(case["error"], shown), f"{case['id']}: {shown!r} does not match {case['error']!r}"


def test_every_corpus_file_is_used_and_every_named_file_exists() -> None:
    named = {Path(substitute(arg, {"corpus": CORPUS})) for case in CASES for arg in case["args"]
             if arg.startswith("{corpus}/")}
    for path in named:
        assert path.exists(), f"cases.yaml names {path}, which is missing"
    files = {p for p in CORPUS.rglob("*") if p.is_file() and p.name != "cases.yaml"}
    unused = sorted(str(p.relative_to(CORPUS)) for p in files
                    if not any(p == n or n in p.parents for n in named))
    assert not unused, f"corpus files no case uses: {unused}"


def test_the_corpus_covers_the_faults_it_must() -> None:
    """A floor, so the corpus cannot quietly shrink."""
    assert len(CASES) >= 30
    ids = {case["id"] for case in CASES}
    must = {"broken-yaml", "tabs", "duplicate-key", "float-version", "int-version", "unknown-vendor",
            "unknown-group-field", "empty-file", "empty-vendors", "filter-matches-nothing", "filter-names-pruned",
            "template-undefined-variable", "template-syntax-error", "newline-value", "space-value",
            "semicolon-value", "command-substitution-image", "backtick-value", "large-file", "alias-bomb",
            "non-utf8", "nul-byte", "missing-file", "directory-as-matrix", "compat-single-equals",
            "compat-bad-version", "compat-unknown-key", "mirror-no-equals", "root-uid", "uid-zero",
            "endless-matrix", "endless-verify-key", "endless-sign-key", "endless-host-json", "endless-base-lock",
            "endless-keep-pinned", "missing-keep-pinned", "public-key-as-sign-key", "encrypted-verify-key",
            "uppercase-repository", "space-in-tag"}
    assert must <= ids, f"missing: {sorted(must - ids)}"


def test_raw_byte_inputs_really_hold_the_bad_bytes() -> None:
    """Editors and formatters like to 'fix' these files."""
    assert b"\xe9" in (CORPUS / "matrices" / "non-utf8.yaml").read_bytes()
    assert b"\x00" in (CORPUS / "matrices" / "nul-byte.yaml").read_bytes()
    assert b"\x07" in (CORPUS / "matrices" / "control-character.yaml").read_bytes()
    assert b"\t" in (CORPUS / "matrices" / "tabs.yaml").read_bytes()
    assert (CORPUS / "matrices" / "empty.yaml").read_bytes() == b""
