"""The compatibility knowledge base: which PyTorch builds exist for which stacks.

The facts live in data files, each row with its source: `data/kb.yaml` holds what every vendor
shares (PyTorch releases, their Pythons, the base operating systems) and each vendor's own
section (`data/vendors/<vendor>.yaml`, or the file a plug-in vendor names) holds what only it
knows. This module answers questions about them: does this combination exist, and if not, why
not and what would work instead. The vendor-specific rules are the vendor's (accel_images/vendors/);
versions are compared as tuples, never as floats (ROCm goes 7.2 -> 7.14 -> 10.0).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping

import yaml

from accel_images import resources, vendors
from accel_images.errors import IncompatibleError, InputError, UnknownToKnowledgeBase
from accel_images.model.knowledge import (Combo, Knowledge, OsInfo, PlatformInfo, PlatformRow, Rules, Section,
                                          TorchRelease, Unverified)
from accel_images.model.platforms import DEFAULT as DEFAULT_PLATFORM

DATA_FILE = Path(__file__).parent.parent / "data" / "kb.yaml"
UNVERIFIED_FIELDS = {"python": "Python support", "glibc_min": "the glibc floor"}
"""How an answer names a release-row field that is still to be filled."""
VERSION_RE = re.compile(r"^\d+(\.\d+){0,3}\Z")
TORCH_RE = re.compile(r"^\d+(\.\d+){0,3}(\+[a-z0-9]+(\.[a-z0-9]+)*)?\Z")  # 2.4.1+cu124

__all__ = ["DATA_FILE", "KnowledgeBase", "Verdict", "load_kb", "parse_query"]


@dataclass(frozen=True)
class Verdict:
    """The answer to "does this combination work?": reasons empty means yes."""

    query: Mapping[str, str]
    reasons: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    unknown: bool = False    # the reasons say what the knowledge base does not know, not what fails

    @property
    def ok(self) -> bool:
        return not self.reasons

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else UnknownToKnowledgeBase.exit_code if self.unknown else IncompatibleError.exit_code


@dataclass(frozen=True)
class KnowledgeBase(Knowledge):
    """The knowledge base's tables with the answers that ask a vendor: which stacks a torch has,
    whether a whole combination works, what `accel-images compat` prints."""

    # ---- vendors ------------------------------------------------------------------------

    def stacks(self, vendor: str, torch: str) -> tuple[str, ...]:
        """Stack versions with a build of this torch ('13.0', '7.2', '2026.1', '1.24.1')."""
        return vendors.get(vendor).stacks(self, torch)

    def torch_for_stack(self, vendor: str, stack: str) -> list[str]:
        """Every torch minor with a build for this stack version (oldest first)."""
        return vendors.get(vendor).torch_for_stack(self, stack)

    def gpu_archs(self, vendor: str, torch: str, stack: str | None) -> tuple[str, ...]:
        """GPU targets compiled into the wheel, where the sources state them."""
        return vendors.get(vendor).gpu_archs(self, torch, stack) if stack else ()

    # ---- whole combinations -------------------------------------------------------------

    def why_not(self, vendor: str, stack: str | None, torch: str, python: str | None = None,
                os: str | None = None, flavor: str | None = None,
                experimental_python: bool = False) -> list[str]:
        """Every reason the combination cannot work on any platform; empty when it can (on one at least:
        `why_not_on` asks about each)."""
        if vendor not in self.sections:
            return [f"unknown vendor '{vendor}' (known: {', '.join(self.sections)})"]
        try:
            row = self.release(torch)
        except IncompatibleError as err:
            return [err.message]
        open_questions = self.unverified(row, python, os)
        if open_questions:
            return open_questions
        combo = Combo(vendor, stack, torch, python, os, flavor)
        return vendors.get(vendor).reasons(self, combo, row, experimental_python)

    def why_not_on(self, platform: str, vendor: str, stack: str | None, torch: str, python: str | None = None,
                   os: str | None = None, flavor: str | None = None) -> list[str]:
        """Why a combination that works (why_not says nothing) has no image for `platform`: the vendor
        publishes none ("ROCm images are amd64 only"), its wheels or the base lack that platform."""
        if platform not in self.platforms:
            return [f"unknown platform '{platform}' (known: {', '.join(self.platforms)})"]
        combo = Combo(vendor, stack, torch, python, os, flavor, platform)
        return vendors.get(vendor).platform_reasons(self, combo, self.release(torch))

    def unverified(self, row: TorchRelease, python: str | None, os: str | None = None) -> list[str]:
        """What the release row leaves for a person to fill and this question depends on: a
        combination with a Python is unverified, not incompatible, while the row's Pythons are
        open (`kb update` writes a new release's row so, never a guess)."""
        asked = {"python": python, "glibc_min": os}
        return [Unverified(f"{UNVERIFIED_FIELDS.get(name, name)} of torch {row.minor} is unverified in the knowledge"
                           f" base of {self.as_of} (to fill: torch {row.minor} {name} in {DATA_FILE.name})")
                for name in row.unverified if asked.get(name, "") is not None]

    # ---- compat queries -------------------------------------------------------------------

    def check(self, query: Mapping[str, str], experimental_python: bool = False) -> Verdict:
        """Answer `accel-images compat key==value ...` (torch is required for a full check)."""
        vendor, stack = vendor_of(query)
        torch = query.get("torch")
        python = query.get("python")
        if torch is None:
            return self._torch_listing(query, vendor, stack, python)
        try:
            row = self.release(torch)
        except IncompatibleError as err:
            return Verdict(query, (err.message,), unknown=isinstance(err, UnknownToKnowledgeBase))
        if vendor is None:
            return self._stack_listing(query, row, torch, python, experimental_python)
        reasons = self.why_not(vendor, stack, torch, python, experimental_python=experimental_python)
        if reasons:
            return Verdict(query, tuple(reasons), {"alternatives": self._alternatives(vendor, row, torch)},
                           unknown=any(isinstance(reason, Unverified) for reason in reasons))
        details = {"torch": self.resolve_torch(torch), "python": list(row.python), "source": row.source,
                   **vendors.get(vendor).details(self, stack, row)}
        return Verdict(query, (), details)

    def _alternatives(self, vendor: str, row: TorchRelease, torch: str) -> dict[str, Any]:
        return {"stacks": list(self.stacks(vendor, torch)), "python": list(row.python), "torch_with_stack": []}

    def _stack_listing(self, query: Mapping[str, str], row: TorchRelease, torch: str, python: str | None,
                       experimental: bool) -> Verdict:
        open_questions = self.unverified(row, python or "")   # the listing shows the row's Pythons
        if open_questions:
            return Verdict(query, tuple(open_questions), unknown=True)
        if python and not self.python_ok(row.minor, python, experimental):
            combo = Combo("", None, row.minor, python)
            return Verdict(query, tuple(_python_range_reason(combo, row, experimental)))
        # the torch asked for, not its minor: Gaudi 1.18.0 bundles 2.4.0, so it has no build of 2.4.1
        builds = {v.name: list(v.stacks(self, torch)) if v.stack_name else [v.name]
                  for v in vendors.registry().values()}
        return Verdict(query, (), {"torch": self.resolve_torch(torch), "python": list(row.python),
                                   "builds": builds, "source": row.source})

    def _torch_listing(self, query: Mapping[str, str], vendor: str | None, stack: str | None,
                       python: str | None) -> Verdict:
        if vendor is None or stack is None:
            minors = [m for m in self.torch_minors() if not python or python in self.torch[m].python]
            if not minors:
                return Verdict(query, (f"no torch release supports Python {python}",))
            return Verdict(query, (), {"torch": minors})
        minors = self.torch_for_stack(vendor, stack)
        if python:
            minors = [m for m in minors if python in self.release(m).python]
        if not minors:
            name = vendors.get(vendor).stack_name
            return Verdict(query, (f"no torch release has a {name} {stack} build"
                                   + (f" for Python {python}" if python else ""),))
        return Verdict(query, (), {"torch": minors})


def _python_range_reason(combo: Combo, row: TorchRelease, experimental: bool) -> list[str]:
    python = combo.python or ""
    hint = " (experimental: pass --experimental-python)" if python in row.python_experimental else ""
    return [f"torch {row.minor} supports Python {row.python[0]}-{row.python[-1]}, not {python}{hint}"]


def stack_keys() -> tuple[str, ...]:
    """The vendors a compat query names with a version (`cuda==13.0`): those with a stack."""
    return tuple(v.name for v in vendors.registry().values() if v.stack_name)


def vendor_of(query: Mapping[str, str]) -> tuple[str | None, str | None]:
    stacks = [k for k in stack_keys() if k in query]
    if len(stacks) > 1:
        raise InputError(f"ask about one stack at a time, not {' and '.join(stacks)}", field=stacks[1])
    if stacks:
        return stacks[0], query[stacks[0]]
    plain = [v.name for v in vendors.registry().values() if not v.stack_name and v.name in query]
    if plain:
        return plain[0], None
    return None, None


# ---- loading ------------------------------------------------------------------------------

def _strs(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _torch_row(minor: str, raw: Mapping[str, Any]) -> TorchRelease:
    return TorchRelease(
        minor=minor,
        versions=_strs(raw["versions"]),
        python=_strs(raw["python"]),
        python_experimental=_strs(raw.get("python_experimental", ())),
        glibc_min=raw.get("glibc_min"),
        source=raw["source"],
        companions={str(k): str(v) for k, v in (raw.get("companions") or {}).items()},
        unverified=_strs(raw.get("unverified") or ()),
    )


def parse_section(vendor: vendors.Vendor, raw: Mapping[str, Any]) -> Section:
    """A vendor's knowledge-base file: the generic keys here, its own tables through the vendor."""
    rules = raw["rules"]
    return Section(
        vendor=vendor.name,
        rules=Rules(_strs(rules["flavors"]), _strs(rules["os"]), rules.get("index"), rules.get("os_note"),
                    rules.get("flavor_note"), _strs(rules.get("platforms") or (DEFAULT_PLATFORM,)),
                    rules.get("platform_note")),
        builds={str(minor): _strs(stacks) for minor, stacks in (raw.get("builds") or {}).items()},
        notes={str(minor): str(note) for minor, note in (raw.get("notes") or {}).items()},
        unverified=_by_minor(raw.get("unverified")),
        source=str(raw.get("source", "")),
        facts=vendor.load_facts(raw),
        platforms={str(name): _platform_row(str(name), row or {})
                   for name, row in (raw.get("platforms") or {}).items()},
    )


def _by_minor(raw: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """`{"2.15": ["13.0"]}`, or `"*"` for every stack."""
    return {str(minor): ("*",) if stacks == "*" else _strs(stacks) for minor, stacks in (raw or {}).items()}


def _platform_row(name: str, raw: Mapping[str, Any]) -> PlatformRow:
    """A vendor's `platforms.<name>`: `builds` (torch minor -> stacks) or, for a vendor without stacks,
    `torch` (the minors with a build); neither means the default platform's builds."""
    builds: dict[str, tuple[str, ...]] | None = None
    if "builds" in raw:
        builds = _by_minor(raw["builds"])
    elif "torch" in raw:
        builds = {str(minor): ("*",) for minor in raw["torch"] or ()}
    unverified = raw.get("unverified") or {}
    if isinstance(unverified, list):  # a vendor without stacks lists minors
        unverified = {str(minor): "*" for minor in unverified}
    return PlatformRow(name, builds, _by_minor(unverified), str(raw.get("note", "")), str(raw.get("source", "")))


def parse_kb(raw: Mapping[str, Any], sections: Mapping[str, Section]) -> KnowledgeBase:
    return KnowledgeBase(
        torch={m: _torch_row(m, row) for m, row in raw["torch"].items()},
        os={n: OsInfo(n, o["image"], o["python"], o["glibc"], o["family"], _strs(o.get("extra_python", ())),
                      _strs(o.get("platforms") or (DEFAULT_PLATFORM,)))
            for n, o in raw["os"].items()},
        sections=sections,
        sources=raw["sources"],
        as_of=str(raw.get("as_of", "")),
        apt_repositories=dict(raw.get("apt_repositories") or {}),
        platforms={str(name): PlatformInfo(str(name), _strs(row["machines"]), str(row.get("source", "")))
                   for name, row in (raw.get("platforms") or {DEFAULT_PLATFORM: {"machines": ["x86_64"]}}).items()},
    )


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it: the same data, read several times faster
(every `list` and `compat` reads the whole knowledge base)."""


def read_yaml(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


def vendor_file(root: Path, vendor: vendors.Vendor) -> Path:
    """The vendor's section under the knowledge base at `root`; a plug-in vendor's own file when `root`
    has none."""
    local = root / "vendors" / vendor.kb_file.name
    return local if local.is_file() else vendor.kb_file


def load_kb(path: Path | None = None) -> KnowledgeBase:
    """The knowledge base shipped with the package (or the one $ACCEL_IMAGES_KB_DIR names,
    resources.kb_dir), with every registered vendor's section; `path`: another kb.yaml."""
    root = resources.kb_dir()
    registered = tuple(vendors.registry().values())
    return _load(path or root / DATA_FILE.name, registered, tuple(vendor_file(root, v) for v in registered))


@functools.lru_cache(maxsize=8)
def _load(path: Path, registered: tuple[vendors.Vendor, ...], files: tuple[Path, ...]) -> KnowledgeBase:
    sections = {vendor.name: parse_section(vendor, read_yaml(file))
                for vendor, file in zip(registered, files, strict=True)}
    return parse_kb(read_yaml(path), sections)


def parse_query(terms: Iterable[str]) -> dict[str, str]:
    """`torch==2.4.1 cuda==12.4` -> {'torch': '2.4.1', 'cuda': '12.4'}; bad terms are InputError."""
    allowed = ("torch", "python", *stack_keys())
    plain = tuple(v.name for v in vendors.registry().values() if not v.stack_name)
    query: dict[str, str] = {}
    for term in terms:
        key, sep, value = term.partition("==")
        key = key.strip().lower()
        if not sep:
            if key in plain:
                query[key] = ""
                continue
            raise InputError(f"'{term}' is not KEY==VERSION (keys: {', '.join(allowed)})", field=key or term)
        if key not in allowed:
            raise InputError(f"unknown key '{key}' (keys: {', '.join(allowed)})", field=key)
        if not (TORCH_RE if key == "torch" else VERSION_RE).match(value):
            raise InputError(f"'{value}' is not a version like 2.14 or 13.0", field=key)
        if key in query:
            raise InputError(f"{key} given twice", field=key)
        query[key] = value
    if not query:
        raise InputError("nothing to check: give at least one KEY==VERSION (e.g. torch==2.14 cuda==13.0)")
    return query


__all__ += ["parse_kb", "parse_section", "stack_keys", "vendor_file", "vendor_of"]
