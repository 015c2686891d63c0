"""Progress people can follow: a live per-image table on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import threading
from typing import Iterable

from rich.console import Console
from rich.live import Live
from rich.table import Table

from accel_images.variant import Variant


class PlainProgress:
    """One line per phase change; build output lines are left to the log file."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.lock = threading.Lock()

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, variant: Variant, text: str) -> None:
        if text.startswith("building: "):
            return
        with self.lock:
            print(f"[{variant.key}] {text}", file=self.stream, flush=True)


class LiveProgress:
    """A table redrawn in place: one row per image with its current phase or last log line."""

    def __init__(self, variants: Iterable[Variant], console: Console | None = None) -> None:
        self.rows = {v: "waiting" for v in variants}
        self.console = console or Console(stderr=True)
        self.live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
        self.lock = threading.Lock()

    def __enter__(self) -> "LiveProgress":
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.update(self._table())
        self.live.__exit__(None, None, None)

    def __call__(self, variant: Variant, text: str) -> None:
        with self.lock:
            self.rows[variant] = text
            self.live.update(self._table())

    def _table(self) -> Table:
        table = Table(box=None, show_header=True, header_style="bold")
        table.add_column("image")
        table.add_column("status", overflow="ellipsis", no_wrap=True)
        for variant, text in self.rows.items():
            style = "red" if text.startswith("FAILED") else ("green" if "skipped" in text or "built" in text else "")
            table.add_row(variant.key, text, style=style)
        return table


def progress_for(variants: Iterable[Variant]) -> PlainProgress | LiveProgress:
    variants = list(variants)
    return LiveProgress(variants) if sys.stderr.isatty() else PlainProgress()
