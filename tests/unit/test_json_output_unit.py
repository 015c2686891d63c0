"""`--json` on every command: one JSON document on stdout and nothing else, so `| jq` works.

Each command runs as a separate process, as a pipe would run it, and its whole standard output
goes through json.loads. A command with a `--json` option missing from these tests fails the last
test, so a new one cannot slip by.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_json_output.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from accel_images.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, check=False)


def only_json(result: subprocess.CompletedProcess[str]) -> object:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # raises on anything before or after the document


@pytest.fixture
def cpu_host(tmp_path: Path) -> str:
    path = tmp_path / "host.json"
    path.write_text('{"vendor": "cpu"}')
    return str(path)


COVERED = {"compat", "list", "recommend", "run", "catalogue", "smoke", "pull", "verify",
           "build", "nightly"}  # build and nightly: tests/test_cli_streams.py, with the engine and registry faked


def test_compat_list_recommend_run(cpu_host: str, tmp_path: Path) -> None:
    assert only_json(cli("compat", "torch==2.14", "cuda==13.0", "--json"))
    assert only_json(cli("list", "--vendor", "cpu", "--json"))
    assert only_json(cli("recommend", "--host-json", cpu_host, "--json"))["image"]  # type: ignore[index]
    assert only_json(cli("run", "--host-json", cpu_host, "--registry", "ghcr.io/acme", "--from-matrix", "--json", "--",
                         "true"))["argv"]  # type: ignore[index]


def test_every_command_with_a_json_option_is_covered_here() -> None:
    with_json = {lazy.name for lazy in COMMANDS
                 if any(isinstance(p, click.Option) and "--json" in p.opts for p in lazy.load().params)}
    assert with_json == COVERED
