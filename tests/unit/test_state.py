"""The state directory: one place spells every path under `.accel-images/`, and the layout stays the
one tests, benchmarks and the README read."""

from __future__ import annotations

import ast
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from accel_images.state import StateDir

PACKAGE = Path(__file__).resolve().parents[2] / "accel_images"
STATE_WORDS = {".accel-images", "contexts", "logs", "reports", "cache", "digests.json", "nightly.lock"}


def test_the_layout(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    moment = datetime(2025, 3, 4, 5, 6, 7, 890_000, tzinfo=timezone.utc)
    assert state.context("cuda", "2.14.0-cuda13.2-py3.12-ubuntu24.04") == \
        tmp_path / "contexts" / "cuda" / "2.14.0-cuda13.2-py3.12-ubuntu24.04"
    assert state.log("cuda", "2.5.1-cuda12.4:x/y", now=moment) == \
        tmp_path / "logs" / "cuda" / "2.5.1-cuda12.4_x_y-20250304T050607.890Z.log"
    assert state.digest_cache == tmp_path / "cache" / "digests.json"
    assert state.smoke_record("sha256:abc") == tmp_path / "smoke" / "sha256_abc.json"
    assert state.smoke_record(None) == tmp_path / "smoke" / "none.json"
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert state.run_reports("build", started) == tmp_path / "reports" / "build-20260102T030405Z"
    assert state.latest_reports("nightly") == tmp_path / "reports" / "nightly-latest"
    assert state.nightly_lock == tmp_path / "nightly.lock"
    assert (state.contexts, state.logs, state.reports) == (tmp_path / "contexts", tmp_path / "logs",
                                                           tmp_path / "reports")


def test_default_is_under_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert StateDir.at() == StateDir(tmp_path / ".accel-images")
    assert StateDir.at("/elsewhere") == StateDir(Path("/elsewhere"))
    assert StateDir.at(Path("rel")).root == Path("rel")


def test_no_other_module_spells_a_state_path() -> None:
    spelled = []
    quoted = re.compile("[\"']({})".format("|".join(re.escape(word) for word in (*STATE_WORDS, "nightly-"))))
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name == "state.py" or not quoted.search(text):   # no string starts with a state word: nothing to parse
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    node.value in STATE_WORDS or node.value.startswith("nightly-")):
                spelled.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert spelled == []
