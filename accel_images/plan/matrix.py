"""matrix.yaml: what to build, parsed into typed values.

The matrix lists, per vendor, groups of axes (stack, torch, python, os, flavor) whose cross
product is expanded into variants by `accel_images.plan.variants`. Every value must be a string of a
strict shape: `cuda: 12.10` read as a float would silently mean 12.1, and a name carrying a
space or `;` would end up inside a Dockerfile, so both are errors naming file, line and field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel_images.plan import yamlpos
from accel_images import untrusted, vendors
from accel_images.errors import InputError
from accel_images.model.platforms import DEFAULT as DEFAULT_PLATFORM
from accel_images.plan.yamlpos import Positioned, Scalar

VERSION_RE = re.compile(r"^\d+(\.\d+){0,3}\Z")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")
IMAGE_RE = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*\Z")
USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\Z")

TOP_KEYS = {"schema", "image", "user", "vendors", "platform"}
GROUP_KEYS = {"stack", "torch", "python", "os", "flavor", "platform", "experimental_python"}
VERSION_AXES = ("stack", "torch", "python")
NAME_AXES = ("os", "flavor")
PLATFORM_RE = re.compile(r"^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?\Z")


@dataclass(frozen=True)
class User:
    name: str = "dev"
    uid: int = 1000
    gid: int = 1000


@dataclass(frozen=True)
class AxisValue:
    """One value of a group's axis as written: where it is, so a later check can point at it."""

    axis: str
    value: str
    line: int
    field: str


@dataclass(frozen=True)
class Group:
    """One block of a vendor's list: the cross product of its axes."""

    vendor: str
    stacks: tuple[str | None, ...]
    torch: tuple[str, ...]
    python: tuple[str, ...]
    os: tuple[str, ...]
    flavors: tuple[str, ...]
    experimental_python: bool
    line: int
    values: tuple[AxisValue, ...] = ()
    """Every axis value with its line and field, for the knowledge-base check of typos."""
    platforms: tuple[str, ...] = (DEFAULT_PLATFORM,)
    """The platforms each combination is built for: one tag, one index of them. A platform the vendor
    or the wheels lack is pruned like any other axis value, never an error."""

    @property
    def explicit(self) -> bool:
        """A group naming exactly one combination is a request, not a search: pruning it is an error."""
        return all(len(axis) == 1 for axis in (self.stacks, self.torch, self.python, self.os, self.flavors))


@dataclass(frozen=True)
class Matrix:
    file: str
    image: str
    user: User
    groups: tuple[Group, ...]


def load_matrix(path: str | Path) -> Matrix:
    """Read and validate a matrix file; every problem is an InputError naming file and line."""
    file = str(path)
    if not file:  # Path("") is the current directory
        raise InputError("the matrix path is empty", field="--matrix")
    try:
        raw = untrusted.read_limited(path, yamlpos.MAX_BYTES)
    except FileNotFoundError:
        raise InputError("matrix file not found", file=file) from None
    except untrusted.FileTooLarge as err:
        raise InputError(f"file is {err.size}; a matrix larger than {yamlpos.MAX_BYTES} bytes is refused",
                         file=file) from None
    except OSError as err:
        raise InputError(f"cannot read matrix: {err.strerror}", file=file) from None
    return parse_matrix(raw, file)


def parse_matrix(raw: bytes, file: str = "matrix.yaml") -> Matrix:
    doc = yamlpos.load(raw, file)
    return _Validator(doc).matrix()


class _Validator:
    def __init__(self, doc: Positioned) -> None:
        self.doc = doc
        self.written: list[AxisValue] = []
        self.default_platforms: tuple[str, ...] = (DEFAULT_PLATFORM,)
        self.top_values: tuple[AxisValue, ...] = ()

    def fail(self, path: tuple[Any, ...], message: str) -> InputError:
        return InputError(message, file=self.doc.file, line=self.doc.line(path),
                          field=yamlpos.dotted(path) or None)

    def matrix(self) -> Matrix:
        top = self.doc.data
        if not isinstance(top, dict):
            raise self.fail((), "the matrix must be a mapping with keys: " + ", ".join(sorted(TOP_KEYS)))
        self.no_unknown(top, (), TOP_KEYS)
        schema = self.scalar(top, ("schema",), int, required=True)
        if schema != 1:
            raise self.fail(("schema",), f"unsupported schema {schema} (this builder reads schema 1)")
        image = self.scalar(top, ("image",), str, required=True)
        if not IMAGE_RE.match(image):
            raise self.fail(("image",), f"'{_show(image)}' is not a repository name like accel-images/pytorch")
        self.written = []
        self.default_platforms = self.axis(top, ("platform",), PLATFORM_RE, "a platform like linux/arm64") \
            or (DEFAULT_PLATFORM,)
        self.top_values = tuple(self.written)
        return Matrix(self.doc.file, image, self.user(top.get("user")), self.groups(top))

    def user(self, raw: Any) -> User:
        if raw is None:
            return User()
        if not isinstance(raw, dict):
            raise self.fail(("user",), "must be a mapping with name, uid, gid")
        self.no_unknown(raw, ("user",), {"name", "uid", "gid"})
        name = self.scalar(raw, ("user", "name"), str, default="dev", base=("user",))
        if not USER_RE.match(name):
            raise self.fail(("user", "name"), f"'{_show(name)}' is not a valid user name")
        uid = self.scalar(raw, ("user", "uid"), int, default=1000, base=("user",))
        gid = self.scalar(raw, ("user", "gid"), int, default=1000, base=("user",))
        for key, value in (("uid", uid), ("gid", gid)):
            if not 1 <= value <= 65534:
                raise self.fail(("user", key), f"{value} is outside 1-65534 (0 would be root)")
        return User(name, uid, gid)

    def groups(self, top: dict[str, Any]) -> tuple[Group, ...]:
        declared = top.get("vendors")
        if not isinstance(declared, dict) or not declared:
            raise self.fail(("vendors",), "must map at least one vendor (" + ", ".join(vendors.names()) + ") to groups")
        groups: list[Group] = []
        for vendor, blocks in declared.items():
            if vendor not in vendors.names():
                raise self.fail(("vendors", vendor),
                                f"unknown vendor '{_show(vendor)}' (known: {', '.join(vendors.names())})")
            if not isinstance(blocks, list) or not blocks:
                raise self.fail(("vendors", vendor), "must be a non-empty list of groups")
            for i, block in enumerate(blocks):
                groups.append(self.group(vendor, block, ("vendors", vendor, i)))
        return tuple(groups)

    def group(self, vendor: str, block: Any, path: tuple[Any, ...]) -> Group:
        if not isinstance(block, dict):
            raise self.fail(path, "each group must be a mapping of axes (stack, torch, python, os, flavor)")
        self.no_unknown(block, path, GROUP_KEYS)
        self.written = []
        axes = {axis: self.axis(block, path + (axis,), VERSION_RE, "a version like 2.14")
                for axis in VERSION_AXES}
        axes.update({axis: self.axis(block, path + (axis,), NAME_RE, "a lower-case name like ubuntu24.04")
                     for axis in NAME_AXES})
        stacks: tuple[str | None, ...] = axes["stack"]
        stackless = not vendors.get(vendor).stack_name
        if stackless:
            if stacks:
                raise self.fail(path + ("stack",), f"{vendor} images have no stack version; remove it")
            stacks = (None,)
        for axis in ("stack", "torch", "python", "os", "flavor"):
            if axis == "stack" and stackless:
                continue
            if not axes[axis]:
                raise self.fail(path + (axis,) if axis in block else path, f"'{axis}' is required")
        platforms = self.axis(block, path + ("platform",), PLATFORM_RE, "a platform like linux/arm64") \
            or self.default_platforms
        values = tuple(self.written) if "platform" in block else (*self.written, *self.top_values)
        experimental = self.scalar(block, path + ("experimental_python",), bool, default=False, base=path)
        return Group(vendor, stacks, axes["torch"], axes["python"], axes["os"], axes["flavor"],
                     experimental, self.doc.line(path) or 0, values, platforms)

    def axis(self, block: dict[str, Any], path: tuple[Any, ...], shape: re.Pattern[str],
             what: str) -> tuple[str, ...]:
        raw = block.get(path[-1])
        if raw is None:
            return ()
        items = raw if isinstance(raw, list) else [raw]
        paths = [path + (i,) for i in range(len(items))] if isinstance(raw, list) else [path]
        values: list[str] = []
        for item, item_path in zip(items, paths, strict=True):
            value = self.string(item, item_path, what)
            if not shape.match(value):
                raise self.fail(item_path, f"'{_show(value)}' is not {what}")
            if value in values:
                raise self.fail(item_path, f"'{value}' is listed twice")
            values.append(value)
            self.written.append(AxisValue(path[-1], value, self.doc.line(item_path) or 0,
                                          yamlpos.dotted(item_path)))
        if not values:
            raise self.fail(path, "must list at least one value")
        return tuple(values)

    def string(self, item: Any, path: tuple[Any, ...], what: str) -> str:
        if isinstance(item, Scalar) and item.yaml_type == "str":
            return str(item.value)
        if isinstance(item, Scalar) and item.yaml_type in ("float", "int"):
            why = ", since 12.10 would read as 12.1" if item.yaml_type == "float" else ""
            raise self.fail(path, f"{_raw_hint(item)} is a YAML number, not a string: quote it "
                                  f"(\"{_raw_hint(item)}\"){why}")
        raise self.fail(path, f"expected {what} as a quoted string")

    def scalar(self, raw: dict[str, Any], path: tuple[Any, ...], kind: type, *, required: bool = False,
               default: Any = None, base: tuple[Any, ...] = ()) -> Any:
        item = raw.get(path[-1])
        if item is None:
            if required:
                raise self.fail(base or path[:-1], f"'{path[-1]}' is required")
            return default
        names = {int: "int", str: "str", bool: "bool"}
        if not isinstance(item, Scalar) or item.yaml_type != names[kind]:
            raise self.fail(path, f"must be {'an' if kind is int else 'a'} {kind.__name__}")
        return item.value

    def no_unknown(self, raw: dict[str, Any], path: tuple[Any, ...], allowed: set[str]) -> None:
        for key in raw:
            if key not in allowed:
                raise self.fail(path + (key,), f"unknown field '{_show(key)}' (allowed: {', '.join(sorted(allowed))})")


def _show(value: Any) -> str:
    """A value safe to print on one line: control characters escaped, long values cut."""
    text = repr(str(value))[1:-1]
    return text if len(text) <= 60 else text[:57] + "..."


def _raw_hint(item: Scalar) -> str:
    return _show(item.text or item.value)
