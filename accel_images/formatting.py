"""Numbers as people read them in progress lines and tables."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?P<binary>i?)B?\s*$", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def human_size(size: int | None) -> str:
    """Bytes in decimal units: '512 B', '12 KB', '1.13 GB'; '-' when unknown."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit in ("B", "KB") else f"{value:.2f} {unit}"
        value /= 1000
    return f"{value:.2f} GB"


def parse_size(text: str) -> int:
    """'20G', '20GB' (decimal, as human_size prints), '20GiB' (binary), '500M', '123' -> bytes; ValueError else."""
    found = _SIZE.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a size (a number with K, M, G or T, e.g. 50G)")
    base = 1024 if found["binary"] else 1000
    return int(float(found["number"]) * base ** _POWERS[found["unit"].upper()])
