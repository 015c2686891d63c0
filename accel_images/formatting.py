"""Numbers and tables as people read them in progress lines, tables and reports, and outside text
made safe to print (inert).

A table here is named by its first column (a variant `cpu/2.13.0-cpu-py3.11-debian12`, a tag): that
name is never cut, at any width. On a terminal too narrow for every column, the others give way:
free text is cut to one line with `…` (a failure's full cause is printed below every run table and
kept in the report), and if that is not enough the least needed columns are left out, which the
table then says under itself; no cell wraps over several lines. Into a file or a pipe nothing is
cut: the other columns wrap instead, so `grep` finds what the report holds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

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


def inert(text: str) -> str:
    """`text` with every character a terminal acts on shown escaped: `\\x1b`, `\\x07`, `\\x9b`, `\\u202e`.

    Text from outside (a registry's error message, a smoke record's device name, a tag a registry
    lists, a build's log line) may carry escape sequences that set the window title, clear the
    screen, rewrite what was printed before or open a link, and bidirectional overrides that
    show text in another order than it is. Everything that prints text it did not write itself
    passes it through here first (errors.AccelError.one_line, the tables, lines and progress of
    accel_images.cli.options and accel_images.builder.progress): the text stays readable and
    greppable, and nothing in it acts. Printable characters of any script stay as they are.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def inert_json(document: str) -> str:
    """A JSON text with every character a terminal acts on written as a `\\uXXXX` escape: the same
    document to any JSON reader (nothing lost), inert on a terminal (`--json` prints report.json).

    JSON escapes the C0 controls itself; with `ensure_ascii=False`, which keeps every script readable,
    it leaves C1 controls, DEL and bidirectional overrides raw. Outside a string a JSON text holds only
    structural whitespace, so every character replaced here is inside a string, where the escape is valid.
    """
    if all(char.isprintable() or char == "\n" for char in document):
        return document
    return "".join(char if char.isprintable() or char == "\n" else _json_escape(char) for char in document)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


# ---- tables that keep their first column ------------------------------------------------------

CELL_PADDING = 2
"""One space either side of every cell (rich's default padding, box=None)."""
SHRINK_FLOOR = 10
"""A column cut to fit is never narrower than its header or this many characters."""


@dataclass(frozen=True)
class TableColumn:
    """One column of a fitted table; `keep` ranks what stays on a narrow page (higher stays longer)."""

    header: str
    keep: int = 0
    justify: str = "left"


def fit_widths(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int,
               keep: Sequence[int] | None = None, measure: Callable[[str], int] = len) -> list[int | None]:
    """The width of each column (None: left out) for a table of `width` characters at most.

    Column 0 is the row's name and keeps its whole width; only a page narrower than the name itself
    folds it (over lines, nothing lost). The others give way in the order of their `keep`, lowest
    first and rightmost first among equals: while their floors (SHRINK_FLOOR, or the header) fit, they
    are cut, each down to its floor before the next is touched; when even the floors do not fit, the
    first in that order is left out and the rest tried again.
    """
    ranks = list(keep or [0] * len(headers))
    natural = [max([measure(headers[i]), *(measure(row[i]) for row in rows)]) for i in range(len(headers))]
    floors = [min(natural[i], max(measure(headers[i]), SHRINK_FLOOR)) for i in range(len(headers))]
    shown = list(range(len(headers)))
    while True:
        widths = _shrunk(natural, floors, sorted(shown[1:], key=lambda i: (ranks[i], -i)), width)
        if widths is not None:
            return [widths.get(i) for i in range(len(headers))]
        if len(shown) == 1:
            return [min(natural[0], max(1, width - CELL_PADDING))] + [None] * (len(headers) - 1)
        drop = min(shown[1:], key=lambda i: (ranks[i], -i))
        shown.remove(drop)


def _shrunk(natural: list[int], floors: list[int], order: list[int], width: int) -> dict[int, int] | None:
    """Widths of column 0 and the columns in `order` once those are cut, in that order, to fit;
    None when their floors do not fit."""
    widths = {0: natural[0], **{i: natural[i] for i in order}}
    excess = sum(widths.values()) + CELL_PADDING * len(widths) - width
    if excess > sum(widths[i] - floors[i] for i in order):
        return None
    for i in order:
        cut = min(excess, widths[i] - floors[i])
        widths[i] -= max(cut, 0)
        excess -= max(cut, 0)
    return widths


@dataclass
class FittedTable:
    """A rich renderable: a borderless table laid out for the width it is printed at (fit_widths).

    Cells are plain text, never markup: an error quoting `[/PATH]` prints as written. Lines carry no
    trailing padding (rstrip_lines), so a table in a file or a pipe reads as written.
    """

    columns: Sequence[TableColumn]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    row_styles: list[str] = field(default_factory=list)

    def add_row(self, *cells: str, style: str = "") -> None:
        """A row of plain text; outside text in it is made inert first (nothing in a cell acts on a terminal)."""
        self.rows.append(tuple(inert(cell) for cell in cells))
        self.row_styles.append(style)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """On a terminal, laid out by fit_widths: one line per row. Into a file or a pipe, nothing is cut
        (a reader greps it): the name keeps its width and the other columns wrap."""
        from rich.cells import cell_len
        from rich.table import Table
        from rich.text import Text
        headers = [column.header for column in self.columns]
        rows = [tuple(in_users_terms(cell) for cell in row) for row in self.rows]
        table = Table(box=None, header_style="bold", show_edge=False)
        if console.is_terminal:
            widths = fit_widths(headers, rows, options.max_width, [c.keep for c in self.columns], cell_len)
        else:
            name = max(cell_len(row[0]) for row in [tuple(headers), *rows])
            widths = [min(name, max(1, options.max_width - CELL_PADDING)), *([0] * (len(headers) - 1))]
        shown = [i for i, w in enumerate(widths) if w is not None]
        for i in shown:
            column = self.columns[i]
            if not console.is_terminal and i > 0:
                table.add_column(column.header, overflow="fold", justify=column.justify)  # type: ignore[arg-type]
                continue
            folds = i == 0 and (widths[0] or 0) < max(cell_len(row[0]) for row in [tuple(headers), *rows])
            table.add_column(column.header, width=widths[i], no_wrap=not folds,
                             overflow="fold" if folds else "ellipsis", justify=column.justify)  # type: ignore[arg-type]
        for row, style in zip(rows, self.row_styles, strict=True):
            table.add_row(*(Text(row[i]) for i in shown), style=style)
        left_out = [headers[i] for i, w in enumerate(widths) if w is None]
        if left_out:
            table.caption = Text(f"(too narrow for: {', '.join(left_out)}; a wider terminal shows them)")
            table.caption_justify = "left"
        yield table


def rstrip_lines(text: str) -> str:
    """Every line without trailing spaces: what a table printed into a file or a pipe should be."""
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def table_text(renderable: Any, width: int) -> str:
    """A renderable as plain text at `width` columns, lines without trailing spaces (tests, files)."""
    import io

    from rich.console import Console
    console = Console(width=width, file=io.StringIO(), color_system=None, highlight=False)
    console.print(renderable)
    return rstrip_lines(console.file.getvalue())  # type: ignore[attr-defined]


# ---- hints in the language the user is typing ---------------------------------------------------

VIA_MAKE_ENV = "ACCEL_IMAGES_VIA_MAKE"
"""Set to 1 by the Makefile for the commands its targets run: hints then name make's variables."""
MAKE_VARIABLES = {"--vendor": "VENDOR", "--torch": "TORCH", "--python": "PYTHON", "--os": "OS", "--flavor": "FLAVOR",
                  "--jobs": "JOBS", "--registry-mirror": "REGISTRY_MIRROR", "--pip-index-url": "TORCH_INDEX_URL",
                  "--pip-extra-index-url": "EXTRA_INDEX_URL",
                  "--pip-find-links": "WHEELHOUSE", "--apt-mirror": "APT_MIRROR", "--registry": "REGISTRY",
                  "--without-companion": "WITHOUT_COMPANION"}
"""The CLI option each Makefile variable passes (the Makefile's FILTERS and SOURCES; a test holds them
in step). Options without a variable (--network, --stack) stay as they are."""
_NOT_A_VALUE = {"and", "or", "to", "with", "is", "are", "the", "for", "which", "from", "in", "of", "points", "as",
                "uses", "gives", "keeps", "when", "where", "that", "it", "a", "an", "only", "instead", "too"}
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)(?:(=)(\S+)|( )([^\s,;()]+))?")


def in_users_terms(text: str) -> str:
    """`text` as the user should read it: under make (VIA_MAKE_ENV), `--os debian12` is `OS=debian12`,
    `--registry-mirror docker.io=HOST` is `REGISTRY_MIRROR=docker.io=HOST`, and a bare option its
    variable with `…` (`WHEELHOUSE=…`); unchanged otherwise."""
    if os.environ.get(VIA_MAKE_ENV) != "1":
        return text
    return _OPTION.sub(_as_variable, text)


def _as_variable(found: re.Match[str]) -> str:
    option, equals, value, space, word = found.groups()
    variable = MAKE_VARIABLES.get(option)
    if variable is None:
        return found.group(0)
    if not (equals or space) and found.string[found.end():found.end() + 1] == ":":
        return variable  # an error's field: `WHEELHOUSE: ...`
    if equals:
        return f"{variable}={value}"
    if space and word.lower() not in _NOT_A_VALUE and not word.startswith("-"):
        return f"{variable}={word}"
    return f"{variable}=…" + (f" {word}" if space else "")
