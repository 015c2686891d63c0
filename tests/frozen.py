"""The unit tests read a frozen matrix and knowledge base (tests/data/frozen: a copy of matrix.yaml,
accel_images/data/kb.yaml and accel_images/data/vendors/*.yaml as they stood), so adding a torch
release to the live files touches data, not tests. A unit test whose point is the live data (the
repository's images/ tree, its README and docs tables, the knowledge base against recorded vendor
evidence) is marked `live_data` and reads the live files.

The seam is accel_images.resources: ACCEL_IMAGES_MATRIX (the matrix where no `--matrix` is given) and
ACCEL_IMAGES_KB_DIR (the knowledge base). This plugin (tests/conftest.py's pytest_plugins) sets them
around each unit test's setup, call and teardown, and around the collection (import) of each unit
test module, for a module that expands the matrix at import time. A unit test that names a matrix
file itself names MATRIX. Outside tests/unit nothing changes.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from accel_images import resources

FROZEN = Path(__file__).resolve().parent / "data" / "frozen"
MATRIX = FROZEN / "matrix.yaml"
UNIT_TESTS = Path(__file__).resolve().parent / "unit"
LIVE_MARKER = "live_data"


@contextmanager
def data(frozen: bool) -> Iterator[None]:
    """The frozen copy when `frozen`, else the live files, as resources finds them; restored after."""
    names = (resources.MATRIX_ENV, resources.KB_DIR_ENV)
    saved = {name: os.environ.get(name) for name in names}
    for name in names:
        os.environ.pop(name, None)
    if frozen:
        os.environ[resources.MATRIX_ENV] = str(MATRIX)
        os.environ[resources.KB_DIR_ENV] = str(FROZEN)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def in_unit(path: Path) -> bool:
    return path.resolve().is_relative_to(UNIT_TESTS)


def frozen_for(item: pytest.Item) -> bool:
    """A unit test not marked `live_data`."""
    return in_unit(item.path) and item.get_closest_marker(LIVE_MARKER) is None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, object, object]:
    with data(frozen=in_unit(collector.path)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with data(frozen=frozen_for(item)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with data(frozen=frozen_for(item)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    with data(frozen=frozen_for(item)):
        return (yield)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{LIVE_MARKER}: a unit test that reads the live matrix.yaml and knowledge "
                                       "base, not the frozen copy (tests/frozen.py)")
