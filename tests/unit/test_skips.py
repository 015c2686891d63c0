"""tests/skips.py: under CI=true a skip fails, unless the test is on the allow-list; elsewhere it skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
PROBE = """
import pytest

def test_needs_a_tool():
    pytest.skip("the tool is not installed")

@pytest.mark.skipif(True, reason="never here")
def test_marked():
    pass

@pytest.mark.xfail(reason="known")
def test_known_failure():
    assert False
"""


def run_probe(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {key: value for key, value in os.environ.items() if key != "CI"} | ({"CI": ci} if ci else {})
    env["PYTHONPATH"] = str(TESTS)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "skips", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("ci, summary", [(None, ("2 skipped", "1 xfailed")), ("false", ("2 skipped", "1 xfailed")),
                                         ("true", ("1 failed", "1 error", "1 xfailed"))])
def test_a_skip_fails_under_ci_only(tmp_path: Path, ci: str | None, summary: tuple[str, ...]) -> None:
    """A skip in the test (a failure) or in its setup, as a skipif marker is (an error); an xfail stays one."""
    result = run_probe(tmp_path, ci)
    last = result.stdout.strip().splitlines()[-1]
    assert all(part in last for part in summary), result.stdout
    assert ("skipped" in last) is (ci != "true"), result.stdout
    if ci == "true":
        assert "skipped under CI=true" in result.stdout and "the tool is not installed" in result.stdout


def test_the_allowed_skips_name_real_tests_with_reasons() -> None:
    from skips import SKIPS_ALLOWED_UNDER_CI
    for node, reason in SKIPS_ALLOWED_UNDER_CI.items():
        path, _, name = node.partition("::")
        assert f"def {name}(" in (TESTS.parent / path).read_text(), node
        assert len(reason) > 40, node
