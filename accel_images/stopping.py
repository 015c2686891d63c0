"""A process-wide stop request, so worker threads end at the next safe point after Ctrl-C.

Python delivers Ctrl-C and SIGTERM to the main thread only; builds running in worker threads
(`--jobs N`) would otherwise carry on to their smoke test and promotion. The main thread
requests a stop, and every stage calls `checkpoint()` at the boundaries where stopping is safe
(before a build, a smoke test, a push, each promoted tag).
"""

from __future__ import annotations

import threading

_STOP = threading.Event()


class Stopped(KeyboardInterrupt):
    """Raised in a worker when the run was stopped; takes the same cleanup path as Ctrl-C."""


def request_stop() -> None:
    _STOP.set()


def stop_requested() -> bool:
    return _STOP.is_set()


def checkpoint() -> None:
    """Raise Stopped when a stop was requested."""
    if _STOP.is_set():
        raise Stopped()


def reset() -> None:
    """Forget an earlier stop (tests, or a library caller starting a new run)."""
    _STOP.clear()
