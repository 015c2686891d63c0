"""Numbers as people read them in progress lines and tables, and outside text made safe to print."""

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
def inert(text: str) -> str:
    """`text` with every character a terminal acts on shown escaped: `\\x1b`, `\\x07`, `\\x9b`, `\\u202e`.

    Text from outside (a registry's error message, a smoke record's device name, a tag a registry
    lists, a build's log line) may carry escape sequences that set the window title, clear the
    screen, rewrite what was printed before or open a link, and bidirectional overrides that
    show text in another order than it is. Everything that prints text it did not write itself
    passes it through here first (errors.AccelError.one_line, the tables, lines and progress of
    accel_images.cli.options and accel_images.build.progress): the text stays readable and
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
