"""One version rule (accel_images/versions.py), and the smoke workload's own copy of it agreeing.

The workload runs inside images with the standard library and torch only, so it cannot import
accel_images.versions; these tests hold its `release_tuple` and `same_release` to the same rule.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accel_images import versions
from accel_images.errors import InputError
from accel_images.smoke import workload

CORPUS = [
    "7.14", "7.2", "7.2.0", "10.0", "535.104.05", "580.95.05", "575.57.08", "580", "580.0",
    "1.24.0-1007", "1.24.0", "1.24.1", "v1.24.1", "1.15.0-c43dc7b", "1.10", "1.9",
    "2.13.0+cpu", "2.13", "2.13.0", "2.13.0.1", "2.5.0rc1", "2.5.0", "7.2.26015-fc0010cf6a",
    "2026.1", "2026.0", "20250101", "12.10", "12.9", "13.0", " 13.0", "13.0.3-runtime", "0", "0.0",
    "", "unknown", "cpu", "v", ".5", "1.", "v.1",
]


@pytest.mark.parametrize("text", CORPUS)
def test_the_workload_reads_the_same_release(text: str) -> None:
    assert versions.release(text) == workload.release_tuple(text)


def test_equal_under_the_rule_is_the_workloads_same_release_both_ways() -> None:
    known = [text for text in CORPUS if versions.release(text) is not None]
    for a, b in itertools.product(known, repeat=2):
        same = workload.same_release(a, b) and workload.same_release(b, a)
        assert (versions.compare(a, b) == 0) == same, (a, b)


@pytest.mark.parametrize("older, newer", [
    ("7.2", "7.14"), ("7.14", "10.0"), ("1.9", "1.10"), ("575.57.08", "580.95.05"), ("12.9", "12.10"),
    ("1.24.0-1007", "1.24.1"), ("2026.0", "2026.1"), ("2.13.0", "2.13.0.1"), ("7", "7.2"), ("unknown", "0.1"),
])
def test_order(older: str, newer: str) -> None:
    assert versions.key(older) < versions.key(newer)
    assert versions.newest_first(newer) < versions.newest_first(older)
    if versions.release(older) is not None:
        assert versions.compare(older, newer) == -1 and versions.compare(newer, older) == 1


@pytest.mark.parametrize("a, b", [
    ("580", "580.0"), ("2.13", "2.13.0"), ("2.13.0+cpu", "2.13"), ("1.15.0-c43dc7b", "1.15.0"),
    ("v1.24.1", "1.24.1"), ("2.5.0rc1", "2.5.0"), (" 13.0", "13"),
])
def test_what_follows_the_release_and_trailing_zeros_take_no_part(a: str, b: str) -> None:
    assert versions.compare(a, b) == 0
    assert versions.key(a) == versions.key(b) and versions.newest_first(a) == versions.newest_first(b)


def test_a_text_with_no_release() -> None:
    assert versions.release("cpu") is None and versions.key("cpu") == () and versions.key(None) == ()
    with pytest.raises(InputError, match="not a version: 'cpu'"):
        versions.compare("580.95.05", "cpu")


def test_the_projects_own_versions_are_strict() -> None:
    assert versions.parse("7.14") == (7, 14)
    with pytest.raises(ValueError):
        versions.parse("2.13.0+cpu")
    assert versions.sort_versions(["10.0", "7.14", "7.2"]) == ["7.2", "7.14", "10.0"]
    assert versions.sort_versions(["10.0", "7.14", "7.2"], newest_first=True) == ["10.0", "7.14", "7.2"]
    with pytest.raises(ValueError):
        versions.sort_versions(["7.2", "latest"])


_VERSION_TEXT = st.builds(
    lambda blank, v, parts, suffix: blank + v + ".".join(map(str, parts)) + suffix,
    st.sampled_from(["", " ", "\t"]), st.sampled_from(["", "v"]),
    st.lists(st.integers(0, 100_000), min_size=1, max_size=5),
    st.text(alphabet="+-.abcdefrc0123456789_~", max_size=8))


@given(st.one_of(_VERSION_TEXT, st.text(max_size=12)))
def test_any_text_reads_the_same_in_both(text: str) -> None:
    assert versions.release(text) == workload.release_tuple(text)


@given(st.lists(_VERSION_TEXT, min_size=2, max_size=8))
def test_newest_first_is_the_reverse_of_key(texts: list[str]) -> None:
    oldest_first = [versions.key(t) for t in sorted(texts, key=versions.key)]
    newest = [versions.key(t) for t in sorted(texts, key=versions.newest_first)]
    assert newest == oldest_first[::-1]
