"""A process-wide stop request, so worker threads end at the next safe point after Ctrl-C.

Python delivers Ctrl-C and SIGTERM to the main thread only; builds running in worker threads
(`--jobs N`) would otherwise carry on to their smoke test and promotion. The main thread
requests a stop, and every stage calls `checkpoint()` at the boundaries where stopping is safe
(before a build, a smoke test, a push, each promoted tag).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TypeVar
from collections.abc import Callable

T = TypeVar("T")
_STOP = threading.Event()
IN_FLIGHT_WAIT_S = 120.0
"""How long a stop waits for a registry call already sent: longer than a registry's answer takes."""

log = logging.getLogger(__name__)

WAITING = "accel-images: stopping once the registry request in flight has ended (at most {:g} s)"
"""Said on standard error when a stop has to wait: the person who pressed Ctrl-C sees why nothing ends yet."""


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


def finish_in_flight(action: Callable[[], T], max_wait_s: float = IN_FLIGHT_WAIT_S) -> T:
    """`action()`, which a Ctrl-C or SIGTERM does not cut short: the interrupt waits for it to end.

    A registry call given up on this side may still land on the registry's side: a manifest
    PUT the daemon sent, whose answer we stopped waiting for, moves the tag seconds later.
    Putting tags back before it lands would be undone by it. So the call runs in a thread of
    its own; an interrupt in the main thread requests a stop and waits until the call has
    ended (or `max_wait_s` passed, then it is logged), and only then goes on up. Worker
    threads never see the interrupt, so they call `action` directly.
    """
    if threading.current_thread() is not threading.main_thread():
        return action()
    outcome: dict[str, object] = {}
    ended = threading.Event()  # not Thread.join: an interrupted join can leave is_alive() wrong

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as error:  # noqa: BLE001 - handed to the caller below, whatever it is
            outcome["error"] = error
        finally:
            ended.set()

    interrupt: KeyboardInterrupt | None = None
    deadline = float("inf")
    try:
        threading.Thread(target=run, name="in-flight", daemon=True).start()
    except KeyboardInterrupt as error:   # the call already began: Thread.start waits for the thread to run
        interrupt, deadline = error, _wait_for(ended, max_wait_s)
    while not ended.is_set() and time.monotonic() < deadline:
        try:
            ended.wait(timeout=0.2)
        except KeyboardInterrupt as error:
            if interrupt is None:
                interrupt, deadline = error, _wait_for(ended, max_wait_s)
    if interrupt is not None:
        if not ended.is_set():
            log.warning("a registry call was still in flight %.0f s after the stop", max_wait_s)
        raise interrupt
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _wait_for(ended: threading.Event, max_wait_s: float) -> float:
    """Request the stop, say (once) that it waits for the call in flight, and return when to stop waiting."""
    if not ended.is_set():   # asked before the stop is requested: a call that waits for the stop cannot end first
        print(WAITING.format(max_wait_s), file=sys.stderr, flush=True)
    request_stop()
    return time.monotonic() + max_wait_s
