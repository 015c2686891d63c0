"""The README's supported-images table is generated from matrix.yaml and must stay true."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from accel_images.cli import main

ROOT = Path(__file__).resolve().parents[2]


def readme_table() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- BEGIN supported-images -->\n(.*?)<!-- END supported-images -->", text, re.S)
    assert match, "README.md lost its supported-images markers"
    return match.group(1)


def test_readme_table_matches_the_matrix(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["list", "--markdown"])
    assert result.exit_code == 0, result.output
    assert readme_table() == result.output, (
        "README.md's supported-images table is stale: paste the output of `accel-images list --markdown`")


def test_readme_table_covers_all_vendors() -> None:
    vendors = {line.split("|")[1].strip() for line in readme_table().splitlines()[2:]}
    assert vendors == {"cpu", "cuda", "rocm", "xpu", "gaudi"}


def test_readme_names_the_test_command_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest -q" in readme
    assert ".venv/bin/python -m pytest -q" in ci
