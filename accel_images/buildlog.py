"""Where build logs live, and reading their last lines.

A failed build names its log file and quotes its tail; keeping the full log on disk lets a
user read the rest without rerunning a build that took twenty minutes.
"""

from __future__ import annotations

import re
from collections import deque
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_STATE_DIR = Path(".accel-images")
"""Relative to the working directory; every run's logs and reports go below it."""

_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def state_dir(override: Path | str | None = None) -> Path:
    """The state directory: the override when given, else `.accel-images/` here."""
    return Path(override) if override is not None else Path.cwd() / DEFAULT_STATE_DIR


def log_path(vendor: str, tag: str, *, root: Path | str | None = None,
             now: datetime | None = None) -> Path:
    """`<state dir>/logs/<vendor>/<tag>-<UTC timestamp>.log`; the directory is not created.

    The timestamp keeps every attempt's log, so a retry never hides the failure before it.
    """
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    stamp = moment.strftime("%Y%m%dT%H%M%S") + f".{moment.microsecond // 1000:03d}Z"
    name = f"{_UNSAFE_IN_NAME.sub('_', tag)}-{stamp}.log"
    return state_dir(root) / "logs" / _UNSAFE_IN_NAME.sub("_", vendor) / name


def tail(path: Path | str, n: int = 20) -> list[str]:
    """The last `n` lines of a text file, without line ends; [] when it does not exist."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            return [line.rstrip("\r\n") for line in deque(lines, maxlen=n)]
    except FileNotFoundError:
        return []
