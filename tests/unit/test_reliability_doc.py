"""RELIABILITY.md lists every case of the bad-input corpus, and nothing else, as the corpus says.

The "Bad input" table is generated from tests/corpus/cases.yaml; this test fails when the two
differ (a case missing from the document, a row naming a case that does not exist, or a changed
exit code or message). Regenerate the table with `python tests/unit/test_reliability_doc.py`.
Every test a table of the other sections names must exist, so a fault row cannot cite a test that
was renamed or never written.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "RELIABILITY.md"
CASES_FILE = ROOT / "tests" / "corpus" / "cases.yaml"
BEGIN = "<!-- corpus:begin (generated from tests/corpus/cases.yaml) -->"
END = "<!-- corpus:end -->"
SHOWN_PLACES = {"{corpus}": "tests/corpus", "{work}/": "", "{work}": ".", "{generated}/": "/tmp/"}
OTHER_SECTIONS = ("## Engine faults", "## Registry faults", "## Interruption", "## State directory",
                  "## Security", "## The hardware check", "## One tag, many platforms")


def cases() -> list[dict]:
    return yaml.safe_load(CASES_FILE.read_text(encoding="utf-8"))["cases"]


def _cell(text: str) -> str:
    """Table-safe: pipes escaped, code spans that contain backticks fenced with double backticks."""
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{_cell(text)}{pad}{fence}"


def shown(text: str) -> str:
    for placeholder, value in SHOWN_PLACES.items():
        text = text.replace(placeholder, value)
    return text


def corpus_table() -> str:
    rows = ["| case | bad input | command | exit | what the user sees (stderr, one line) |",
            "|---|---|---|---|---|"]
    for case in cases():
        command = " ".join(["accel-images", *(_quote(shown(a)) for a in case["args"])])
        rows.append(f"| `{case['id']}` | {_cell(case['fault'])} | {_code(command)} | {case['exit']} "
                    f"| {_code(shown(case['shows']))} |")
    return "\n".join(rows)


def _quote(arg: str) -> str:
    if arg and re.fullmatch(r"[A-Za-z0-9_./=:,+@%-]+", arg):
        return arg
    return "'" + arg.replace("\n", "\\n").replace("'", "'\\''") + "'"


def documented_section(text: str) -> str:
    assert BEGIN in text and END in text, f"RELIABILITY.md lost its {BEGIN} / {END} markers"
    return text[text.index(BEGIN) + len(BEGIN): text.index(END)].strip()


def regenerate() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, tail = text[: text.index(BEGIN) + len(BEGIN)], text[text.index(END):]
    DOC.write_text(f"{head}\n{corpus_table()}\n{tail}", encoding="utf-8")


# ---- tests -----------------------------------------------------------------------------------

def documented_ids() -> list[str]:
    section = documented_section(DOC.read_text(encoding="utf-8"))
    return re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE)


def test_every_corpus_case_is_documented_and_every_documented_case_exists() -> None:
    ids = [case["id"] for case in cases()]
    documented = documented_ids()
    assert sorted(set(ids) - set(documented)) == [], "cases missing from RELIABILITY.md"
    assert sorted(set(documented) - set(ids)) == [], "RELIABILITY.md names cases the corpus does not have"
    assert len(documented) == len(set(documented)), "a case is documented twice"


def test_the_bad_input_table_is_the_generated_one() -> None:
    assert documented_section(DOC.read_text(encoding="utf-8")) == corpus_table(), (
        "RELIABILITY.md is stale: run `python tests/unit/test_reliability_doc.py`")


def test_the_sections_for_other_faults_are_there() -> None:
    text = DOC.read_text(encoding="utf-8")
    for heading in OTHER_SECTIONS:
        assert re.search(rf"^{re.escape(heading)}\b", text, flags=re.MULTILINE), f"missing section {heading}"


def test_the_exit_codes_documented_are_the_ones_the_errors_carry() -> None:
    from accel_images import errors
    text = DOC.read_text(encoding="utf-8")
    for name in ("InputError", "IncompatibleError", "EngineError", "RegistryError", "BuildFailed", "SmokeFailed"):
        code = getattr(errors, name).exit_code
        assert re.search(rf"^\| `{name}` \| {code} \|", text, flags=re.MULTILINE), f"{name} (exit {code})"


def named_tests(text: str) -> list[tuple[str | None, str]]:
    """(file or None, test) for every test a table row names: `tests/f.py::test_x` or a bare `test_y`."""
    named: list[tuple[str | None, str]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            named += [(path or None, name)
                      for path, name in re.findall(r"`(?:(tests/[\w/]+\.py)::)?(test_\w+)`", line)]
    return named


def test_every_test_the_document_names_exists() -> None:
    """A row that names a test names one that exists: in the file it names, or (a bare name) in some test file."""
    sources = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
               for path in (ROOT / "tests").rglob("test_*.py")}
    named = named_tests(DOC.read_text(encoding="utf-8"))
    assert len(named) > 50

    def defined(name: str, text: str) -> bool:
        return re.search(rf"^(async )?def {name}\(", text, flags=re.MULTILINE) is not None

    missing = [f"{path or ''}::{name}" for path, name in named
               if not (defined(name, sources.get(path, "")) if path else
                       any(defined(name, text) for text in sources.values()))]
    assert missing == [], "RELIABILITY.md names tests that do not exist"


if __name__ == "__main__":
    regenerate()
    sys.exit(0)
