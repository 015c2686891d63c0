"""Numbers as people read them in progress lines and tables."""

from __future__ import annotations


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
