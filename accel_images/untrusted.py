"""Reading what comes from outside with bounds: files of a bounded size, JSON of a bounded depth.

A path the user names may be anything the kernel can open: `--matrix /dev/zero` never ends, and a
whole read before the size check runs out of memory. So a file is read up to its limit plus one
byte, which is enough to tell that it is too large.

JSON from a registry, a label, a state file or a previous report may be nested arbitrarily deep,
and Python's parser (like every recursive walk over the result) raises RecursionError at about a
thousand levels, an exception no caller expects. Its nesting is counted before it is parsed: the
documents accel-images reads are a few levels deep, so anything deeper than MAX_JSON_DEPTH is
refused as malformed, with a ValueError like any other bad JSON.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path
from typing import Any

MAX_JSON_DEPTH = 64
"""Manifests, configs, SBOMs, provenance statements and reports nest fewer than ten levels."""

_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class JSONTooDeep(ValueError):
    """JSON nested deeper than the limit: refused before the parser recurses into it."""


class FileTooLarge(OSError):
    """A file larger than its reader accepts. An OSError, so a reader's `cannot read FILE: {strerror}`
    says it; `size` is '5242880 bytes', or 'more than N bytes' for a device or pipe that never ends."""

    def __init__(self, path: Path | str, size: int, limit: int) -> None:
        self.size = f"{size} bytes" if size > limit else f"more than {limit} bytes"
        super().__init__(errno.EFBIG, f"{self.size}, more than the {limit} accepted" if size > limit
                         else f"more than the {limit} bytes accepted", str(path))


def read_limited(path: Path | str, limit: int) -> bytes:
    """A file's bytes, reading at most `limit` + 1 of them: FileTooLarge when there are more.

    `/dev/zero`, a FIFO or a huge file costs a bounded read, never all the memory there is.
    """
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
        size = os.fstat(handle.fileno()).st_size
    if len(data) > limit:
        raise FileTooLarge(path, size, limit)
    return data


def json_depth(text: str) -> int:
    """How deep arrays and objects nest in `text` (brackets inside strings do not count)."""
    depth = deepest = 0
    for token in _STRING_OR_BRACKET.finditer(text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark in "]}":
            depth -= 1
    return deepest


def loads(data: str | bytes | bytearray, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads, refusing (JSONTooDeep, a ValueError) a document nested deeper than `max_depth`.

    Bytes must be UTF-8, as every JSON this tool reads is (RFC 8259 section 8.1).
    """
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    depth = json_depth(text)
    if depth > max_depth:
        raise JSONTooDeep(f"JSON nested {depth} levels deep (more than {max_depth})")
    try:
        return json.loads(text)
    except RecursionError:  # a recursion limit set far lower than the default
        raise JSONTooDeep(f"JSON nested too deep for this interpreter (more than {max_depth} allowed)") from None
