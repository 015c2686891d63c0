"""YAML loading that remembers where every value came from.

PyYAML forgets line numbers once it builds Python objects and silently keeps the last of two
duplicate keys. Error messages must name `file:line: field`, so this module composes the node
tree itself, refuses duplicates, and returns the plain data plus a map from each value's path
(`("vendors", "cuda", 0, "stack", 1)`) to its 1-based line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from accel_images.errors import InputError

MAX_BYTES = 1 << 20       # a matrix is a few KB; a megabyte is already absurd
MAX_NODES = 50_000        # bounds alias expansion ("billion laughs") as well as plain size
MAX_DEPTH = 32            # PyYAML composes recursively: `[[[[...` would exhaust the Python stack
COLLECTION_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}
SCALAR_TYPES = {"str", "int", "float", "bool", "null", "timestamp"}  # what plain YAML resolves to

Path_ = tuple[Any, ...]


@dataclass(frozen=True)
class Scalar:
    """A scalar as written: its value, and the YAML type it resolved to (str, int, float...)."""

    value: Any
    yaml_type: str
    text: str = ""


@dataclass(frozen=True)
class Positioned:
    data: Any
    lines: dict[Path_, int]
    file: str

    def line(self, path: Path_) -> int | None:
        """Line of the value at `path`, or of its nearest ancestor that has one."""
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path)


def decode(raw: bytes, file: str) -> str:
    if len(raw) > MAX_BYTES:
        raise InputError(f"file is {len(raw)} bytes; a matrix larger than {MAX_BYTES} bytes is refused", file=file)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte 0x{raw[err.start]:02x})", file=file, line=line) from None


def load(raw: bytes, file: str) -> Positioned:
    """Parse one YAML document into plain data with line numbers; InputError on anything bad."""
    text = decode(raw, file)
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError("NUL byte in file", file=file, line=line)
    try:
        _check_depth(text, file)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = ", ".join(part for part in (err.context, err.problem) if part) or "invalid YAML"
        raise InputError(f"invalid YAML: {problem}", file=file, line=mark.line + 1 if mark else None) from None
    except yaml.reader.ReaderError as err:  # a control character: it has a position, not a mark
        line = text[: err.position].count("\n") + 1
        raise InputError(f"invalid YAML: control character U+{err.character:04X} is not allowed", file=file,
                         line=line) from None
    except yaml.YAMLError as err:
        raise InputError(f"invalid YAML: {str(err).splitlines()[0]}", file=file) from None
    if node is None:
        raise InputError("the file is empty", file=file, line=1)
    walker = _Walker(file)
    data = walker.walk(node, ())
    return Positioned(data, walker.lines, file)


def _check_depth(text: str, file: str) -> None:
    """Refuse deep nesting before composing; the event parser itself is iterative."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark  # always set by the parser; None only in the type
                raise InputError(f"nested more than {MAX_DEPTH} levels deep; refused", file=file,
                                 line=mark.line + 1 if mark is not None else None)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Walker:
    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[Path_, int] = {}
        self.count = 0
        self.constructor = SafeConstructor()

    def walk(self, node: Node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise InputError(f"more than {MAX_NODES} values (or aliases expanding to them); refused",
                             file=self.file, line=node.start_mark.line + 1, field=_dotted(path[:1]) or None)
        if len(path) > MAX_DEPTH:  # aliases can stack nesting the parser saw as shallow
            raise InputError(f"nested more than {MAX_DEPTH} levels deep (through aliases); refused",
                             file=self.file, line=node.start_mark.line + 1)
        self.lines.setdefault(path, node.start_mark.line + 1)
        if not isinstance(node, ScalarNode) and node.tag not in COLLECTION_TAGS:
            raise InputError(f"YAML tag {node.tag} is not allowed here", file=self.file,
                             line=node.start_mark.line + 1, field=_dotted(path) or None)
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.walk(item, path + (i,)) for i, item in enumerate(node.value)]
        return self._scalar(cast(ScalarNode, node), path)  # a node is a mapping, a sequence or a scalar

    def _mapping(self, node: MappingNode, path: Path_) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                raise InputError("keys must be plain names (no complex keys or merges)", file=self.file, line=line,
                                 field=_dotted(path) or None)
            key = key_node.value
            if key in result:
                first = self.lines.get(path + (key,))
                raise InputError(f"duplicate key '{key}' (first at line {first})", file=self.file,
                                 line=line, field=_dotted(path + (key,)))
            self.lines[path + (key,)] = line
            result[key] = self.walk(value_node, path + (key,))
        return result

    def _scalar(self, node: ScalarNode, path: Path_) -> Scalar:
        yaml_type = node.tag.rsplit(":", 1)[-1]
        if not node.tag.startswith("tag:yaml.org,2002:") or yaml_type not in SCALAR_TYPES:
            raise InputError(f"YAML tag {node.tag} is not allowed here", file=self.file,
                             line=node.start_mark.line + 1, field=_dotted(path) or None)
        try:
            value = self.constructor.construct_object(node, deep=True)
        # PyYAML hands an explicitly tagged scalar (`!!int x`, `!!timestamp nope`, `2001-02-30`)
        # to the type's own parser, which fails with whatever that parser raises (`!!bool maybe`: KeyError).
        except (yaml.YAMLError, ValueError, TypeError, AttributeError, LookupError, ArithmeticError):
            raise InputError(f"bad value: {node.value[:60]!r} is not a valid {yaml_type}", file=self.file,
                             line=node.start_mark.line + 1, field=_dotted(path) or None) from None
        return Scalar(value, yaml_type, node.value)


def _dotted(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


dotted = _dotted
