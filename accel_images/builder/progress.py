"""Progress people can follow: a live per-image table on a terminal, a plain streamed log otherwise.

What a status says, the builder decides (`rendering`, `building: <log line>`, `pulling X`, the
outcome); how it is shown is decided here. Raw log lines (`---> Running in 6b547f328d80`) are not
progress: the live view shows the step being run (`step 9/24 (pip install)`), which changes only
when the build moves on, with the time spent on the image so far; the tag is never cut. Without a
terminal (CI, a pipe) nothing is redrawn: each phase and each step is one line, as `docker build
--progress plain` prints, so a log never goes silent for a minute. `-q` keeps only the outcomes,
`-v` adds every log line.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from typing import IO

from rich.console import Console
from rich.live import Live

from accel_images.builder.failure import step_label
from accel_images.formatting import FittedTable, TableColumn, in_users_terms, inert
from accel_images.model.variant import Variant

QUIET, NORMAL, VERBOSE = -1, 0, 1
LOG_PREFIX = "building: "
LIVE_COLUMNS = (TableColumn("variant"), TableColumn("time", keep=1, justify="right"), TableColumn("status", keep=2))
FINAL_PREFIXES = ("FAILED", "built", "unchanged", "published", "rebuilt", "skipped", "interrupted")


def shown_status(text: str) -> tuple[str, bool]:
    """(what to show, whether it is a raw log line) for one status text; hints in the user's terms, inert on
    a terminal, as a status may quote a registry, a build log or a label (formatting.inert)."""
    if not text.startswith(LOG_PREFIX):
        return inert(in_users_terms(text)), False
    line = text[len(LOG_PREFIX):]
    step = step_label(line)
    return (inert(f"building {step}"), False) if step else (inert(line), True)


def is_final(text: str) -> bool:
    return text.startswith(FINAL_PREFIXES)


class PlainProgress:
    """One line per phase and per build step; raw log lines only with -v (they are in the log file)."""

    def __init__(self, stream: IO[str] | None = None, verbosity: int = NORMAL) -> None:
        self.stream = stream or sys.stderr
        self.verbosity = verbosity
        self.lock = threading.Lock()
        self.started: dict[Variant, float] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, variant: Variant, text: str) -> None:
        shown, raw = shown_status(text)
        if raw and self.verbosity < VERBOSE:
            return
        if self.verbosity <= QUIET and not is_final(shown):
            return
        with self.lock:
            start = self.started.setdefault(variant, time.monotonic())
            elapsed = f"{time.monotonic() - start:5.0f}s"
            print(f"[{variant.key}] {elapsed} {'| ' if raw else ''}{shown}", file=self.stream, flush=True)


class LiveProgress:
    """A table redrawn in place: one row per image with its phase or step and the time spent on it."""

    def __init__(self, variants: Iterable[Variant], console: Console | None = None, verbosity: int = NORMAL) -> None:
        self.rows = {v: "waiting" for v in variants}
        self.started: dict[Variant, float] = {}
        self.ended: dict[Variant, float] = {}
        self.verbosity = verbosity
        self.console = console or Console(stderr=True, markup=False, emoji=False)
        self.lock = threading.Lock()
        self.live = Live(get_renderable=self._table, console=self.console, refresh_per_second=2, transient=False)

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:  # Ctrl-C or a crash: nothing unfinished is still "building"
            with self.lock:
                for variant, text in self.rows.items():
                    if not is_final(text):
                        self.rows[variant] = "interrupted" if text != "waiting" else "not started"
                        self.ended.setdefault(variant, time.monotonic())
        self.live.refresh()
        self.live.__exit__(None, None, None)

    def __call__(self, variant: Variant, text: str) -> None:
        shown, raw = shown_status(text)
        if raw:
            if self.verbosity >= VERBOSE:
                self.live.console.print(f"[{variant.key}] {shown}", markup=False, highlight=False)
            return
        with self.lock:
            now = time.monotonic()
            self.started.setdefault(variant, now)
            self.rows[variant] = shown
            if is_final(shown):
                self.ended[variant] = now

    def _elapsed(self, variant: Variant) -> str:
        start = self.started.get(variant)
        if start is None:
            return ""
        seconds = self.ended.get(variant, time.monotonic()) - start
        return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"

    def _table(self) -> FittedTable:
        """The variant whole, then the time and the status, cut to the page (formatting.fit_widths)."""
        table = FittedTable(LIVE_COLUMNS)
        with self.lock:
            rows = list(self.rows.items())
        for variant, text in rows:
            style = "red" if text.startswith("FAILED") else ("green" if is_final(text) and "interrupted" not in text
                                                             else "")
            table.add_row(variant.key, self._elapsed(variant), text, style=style)  # FittedTable: Text, never markup
        return table


def progress_for(variants: Iterable[Variant], verbosity: int = NORMAL,
                 stream: IO[str] | None = None) -> PlainProgress | LiveProgress:
    """The live table on a terminal (unless -v asked for every line), the streamed log otherwise."""
    variants = list(variants)
    stream = stream or sys.stderr
    if stream.isatty() and verbosity < VERBOSE:
        return LiveProgress(variants, verbosity=verbosity)
    return PlainProgress(stream, verbosity)
