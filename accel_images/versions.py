"""Versions, compared by one rule everywhere in the package.

The rule: a version compares by its *release*, the dotted non-negative integers it starts with
(after optional blanks and a `v`), number by number, as integers, never as floats or strings
(ROCm 7.2 < 7.14 < 10.0, driver 1.10 > 1.9), a missing trailing part counting as zero
(2.13 == 2.13.0, driver 580 == 580.0). Whatever follows the release takes no part: a local label
(`2.13.0+cpu`), a build or packaging suffix (`1.24.0-1007`, `1.15.0-c43dc7b`, `7.2.26015-fc0010`),
a pre-release tag (`2.5.0rc1`). Floats would put 1.10 before 1.9, strings 7.14 before 7.2, and
packaging.version refuses suffixes such as `-c43dc7b` that vendor tools print.

- `release`: the release of any text, None when it starts with none (host tools, image output).
- `parse`: the release of a version this project writes (knowledge base, matrix), which must be
  nothing but dotted numbers; ValueError otherwise. Its parts are for arithmetic (`[:2]`, `[0]`);
  compare whole versions with `key`, `compare` or `newest_first`, which apply the zero rule.
- `key` / `newest_first`: sort keys, oldest or newest first; text that is not a version sorts as
  the oldest. `compare` (`compare_driver` for what a host tool reported): -1, 0 or 1.
  `sort_versions`: the project's own versions, sorted.

The smoke workload (accel_images/smoke/workload.py) runs inside images with the standard library
and torch only, so it keeps its own `release_tuple`; tests/unit/test_versions.py holds the two to one rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from accel_images.errors import InputError

_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")


def release(text: str | None) -> tuple[int, ...] | None:
    """The leading release: '7.2.26015-fc0010cf6a' -> (7, 2, 26015), 'v1.24.1' -> (1, 24, 1); None without one."""
    match = _RELEASE.match(text or "")
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def parse(version: str) -> tuple[int, ...]:
    """'7.14' -> (7, 14); raises ValueError for anything but dotted numbers."""
    return tuple(int(part) for part in version.split("."))


def key(version: str | None) -> tuple[int, ...]:
    """The sort key under the rule: the release without trailing zeros; () (the oldest) when there is none.

    Equal keys are equal versions: key('2.13') == key('2.13.0+cpu') == (2, 13).
    """
    return _without_trailing_zeros(release(version) or ())


def newest_first(version: str | None) -> tuple[int, ...]:
    """A sort key that orders versions newest first, for use inside a larger ascending key.

    Negating key()'s parts reverses the order where two versions differ in a part; the closing 1
    reverses it where one is a prefix of the other (7.2 before 7, which negation alone would not).
    """
    return tuple(-part for part in key(version)) + (1,)


def compare(a: str, b: str, *, what: str = "version") -> int:
    """-1, 0 or 1 as version `a` is older than, equal to or newer than `b` ('580.95.05' > '575.57.08').

    Raises InputError naming the text that is no version at all (and `what` it should have been).
    """
    for text in (a, b):
        if release(text) is None:
            raise InputError(f"not a {what}: {text!r}", hint="expected dotted numbers such as 580.95.05")
    left, right = key(a), key(b)
    return (left > right) - (left < right)


def compare_driver(a: str, b: str) -> int:
    """compare() for driver and firmware versions a host tool reported; an error says it is about a driver."""
    return compare(a, b, what="driver version")


def sort_versions(versions: Iterable[str], newest_first: bool = False) -> list[str]:
    """The project's own versions (each dotted numbers only, else ValueError), oldest first by default."""
    return sorted(versions, key=lambda version: _without_trailing_zeros(parse(version)), reverse=newest_first)


def _without_trailing_zeros(parts: tuple[int, ...]) -> tuple[int, ...]:
    end = len(parts)
    while end and parts[end - 1] == 0:
        end -= 1
    return parts[:end]
