"""Reading the last lines of a build log.

A failed build names its log file and quotes its tail; keeping the full log on disk lets a
user read the rest without rerunning a build that took twenty minutes. Where logs live is
accel_images.state.StateDir.log.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path


def tail(path: Path | str, n: int = 20) -> list[str]:
    """The last `n` lines of a text file, without line ends; [] when it does not exist."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            return [line.rstrip("\r\n") for line in deque(lines, maxlen=n)]
    except FileNotFoundError:
        return []
