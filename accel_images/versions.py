"""Dotted versions, compared as integer tuples: never as floats or strings (ROCm 7.2 < 7.14 < 10.0)."""

from __future__ import annotations

import re
from typing import Iterable

from accel_images.errors import InputError


def parse(version: str) -> tuple[int, ...]:
    """'7.14' -> (7, 14); raises ValueError for anything but dotted numbers."""
    return tuple(int(part) for part in version.split("."))


def sort_versions(versions: Iterable[str], newest_first: bool = False) -> list[str]:
    return sorted(versions, key=parse, reverse=newest_first)


def safe_parse(version: str) -> tuple[int, ...]:
    """parse(), with (0,) for what is not a version: sorts unknowns first instead of failing."""
    try:
        return parse(version)
    except ValueError:
        return (0,)


def compare_driver(a: str, b: str) -> int:
    """-1, 0 or 1 as driver version ``a`` is older than, equal to or newer than ``b``.

    Number by number ('580.95.05' > '575.57.08', '1.10' > '1.9'); missing parts count as zero
    ('580' == '580.0'); a build suffix is ignored ('1.15.0-c43dc7b' == '1.15.0'). Floats would put
    '1.10' before '1.9', and packaging.version rejects suffixes such as '-c43dc7b'.
    """
    left, right = _leading_numbers(a), _leading_numbers(b)
    width = max(len(left), len(right))
    left, right = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
    return (left > right) - (left < right)


def _leading_numbers(version: str) -> tuple[int, ...]:
    match = re.match(r"\s*(\d+(?:\.\d+)*)", version)
    if match is None:
        raise InputError(f"not a driver version: {version!r}", hint="expected dotted numbers such as 580.95.05")
    return tuple(int(part) for part in match.group(1).split("."))
