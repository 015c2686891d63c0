"""The compatibility knowledge base: which PyTorch builds exist for which stacks.

All facts come from `accel_images/data/compat.yaml`, each row with its source. This module only
answers questions about them: does this combination exist, and if not, why not and what would
work instead. Versions are compared as tuples, never as floats (ROCm goes 7.2 -> 7.14 -> 10.0).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from accel_images.errors import IncompatibleError, InputError

DATA_FILE = Path(__file__).with_name("data") / "compat.yaml"
VENDORS = ("cpu", "cuda", "rocm", "xpu", "gaudi")
STACK_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "oneAPI", "gaudi": "Intel Gaudi"}
VERSION_RE = re.compile(r"^\d+(\.\d+){0,3}\Z")
TORCH_RE = re.compile(r"^\d+(\.\d+){0,3}(\+[a-z0-9]+(\.[a-z0-9]+)*)?\Z")  # 2.4.1+cu124


def vkey(version: str) -> tuple[int, ...]:
    """Sort key for dotted versions: '7.14' > '7.2', '10.0' > '7.14'."""
    return tuple(int(part) for part in version.split("."))


def sort_versions(versions: Iterable[str], newest_first: bool = False) -> list[str]:
    return sorted(versions, key=vkey, reverse=newest_first)


def version_matches(requested: str, available: str) -> bool:
    """'6.2' asks for any 6.2 release, so it matches '6.2.4'; '6.2.4' matches only itself."""
    return available == requested or available.startswith(requested + ".")


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


@dataclass(frozen=True)
class TorchRelease:
    minor: str
    versions: tuple[str, ...]
    python: tuple[str, ...]
    python_experimental: tuple[str, ...]
    stacks: Mapping[str, tuple[str, ...]]
    cuda_toolkits: Mapping[str, str]
    cuda_archs: Mapping[str, tuple[str, ...]]
    glibc_min: str | None
    source: str
    xpu_note: str | None = None

    @property
    def latest(self) -> str:
        return self.versions[-1]


@dataclass(frozen=True)
class VendorRules:
    name: str
    flavors: tuple[str, ...]
    os: tuple[str, ...]
    index: str | None = None
    os_note: str | None = None
    flavor_note: str | None = None


@dataclass(frozen=True)
class OsInfo:
    name: str
    image: str
    python: str
    glibc: str
    family: str
    extra_python: tuple[str, ...] = ()

    def pythons(self) -> tuple[str, ...]:
        return (self.python, *self.extra_python)


@dataclass(frozen=True)
class GaudiRelease:
    version: str
    torch: str
    os_python: Mapping[str, str]
    image_tag: str = "latest"


@dataclass(frozen=True)
class Verdict:
    """The answer to "does this combination work?": reasons empty means yes."""

    query: Mapping[str, str]
    reasons: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class KnowledgeBase:
    torch: Mapping[str, TorchRelease]
    cuda: Mapping[str, Mapping[str, Any]]
    cuda_drivers: Mapping[str, str]
    rocm_archs: Mapping[str, tuple[str, ...]]
    rocm_devel_images: Mapping[str, Mapping[str, str]]
    xpu_runtime_packages: tuple[str, ...]
    xpu_runtime_ppa: str
    gaudi: Mapping[str, GaudiRelease]
    os: Mapping[str, OsInfo]
    vendors: Mapping[str, VendorRules]
    sources: Mapping[str, str]

    # ---- torch -------------------------------------------------------------------------

    def torch_minors(self) -> list[str]:
        return sort_versions(self.torch)

    def release(self, torch: str) -> TorchRelease:
        """The release row for '2.14', '2.14.0' or '2.14.0+cu130'."""
        public = torch.split("+", 1)[0]
        row = self.torch.get(minor_of(public))
        if row is None:
            known = ", ".join(self.torch_minors())
            raise IncompatibleError(f"torch {public} is unknown to the knowledge base (known: {known})")
        if public != row.minor and public not in row.versions:
            raise IncompatibleError(
                f"torch {public} was never released (torch {row.minor} releases: {', '.join(row.versions)})")
        return row

    def resolve_torch(self, torch: str) -> str:
        """'2.12' -> '2.12.1' (newest patch); a full version is checked and kept."""
        row = self.release(torch)
        return row.latest if torch == row.minor else torch

    def stacks(self, vendor: str, torch: str) -> tuple[str, ...]:
        """Stack versions with a build of this torch ('13.0', '7.2', '2026.1', '1.24.1')."""
        if vendor == "gaudi":
            public = torch.split("+", 1)[0]
            by_minor = public == minor_of(public)
            return tuple(v for v, g in self.gaudi.items()
                         if g.torch == public or (by_minor and minor_of(g.torch) == public))
        return self.release(torch).stacks.get(vendor, ())

    def torch_for_stack(self, vendor: str, stack: str) -> list[str]:
        """Every torch minor with a build for this stack version (oldest first)."""
        if vendor == "gaudi":
            return [g.torch for v, g in self.gaudi.items() if version_matches(stack, v)]
        return [m for m in self.torch_minors()
                if any(version_matches(stack, s) for s in self.torch[m].stacks.get(vendor, ()))]

    def python_ok(self, torch: str, python: str, experimental: bool = False) -> bool:
        row = self.release(torch)
        return python in row.python or (experimental and python in row.python_experimental)

    # ---- drivers and architectures ------------------------------------------------------

    def cuda_toolkit(self, torch: str, cuda: str) -> str:
        """The exact toolkit inside torch's cuXY wheel (RELEASE.md), else the family's GA."""
        row = self.release(torch)
        return row.cuda_toolkits.get(cuda) or f"{cuda}.0"

    def cuda_driver_min(self, toolkit: str) -> str | None:
        return self.cuda_drivers.get(toolkit)

    def cuda_mvc_floor(self, cuda: str) -> str:
        return self.cuda[cuda]["mvc_floor"]

    def gpu_archs(self, vendor: str, torch: str, stack: str | None) -> tuple[str, ...]:
        """GPU targets compiled into the wheel, where the sources state them."""
        if vendor == "cuda" and stack:
            return self.release(torch).cuda_archs.get(stack, ())
        if vendor == "rocm" and stack:
            extra = self.rocm_archs["since_7_0"] if vkey(stack) >= (7, 0) else ()
            return tuple(self.rocm_archs["all"]) + tuple(extra)
        return ()

    # ---- whole combinations -------------------------------------------------------------

    def why_not(self, vendor: str, stack: str | None, torch: str, python: str | None = None,
                os: str | None = None, flavor: str | None = None,
                experimental_python: bool = False) -> list[str]:
        """Every reason the combination cannot work; empty when it can."""
        try:
            row = self.release(torch)
        except IncompatibleError as err:
            return [err.message]
        reasons: list[str] = []
        reasons += self._stack_reasons(vendor, stack, torch, row)
        if python:
            reasons += self._python_reasons(vendor, stack, torch, row, python, experimental_python)
        if os:
            reasons += self._os_reasons(vendor, stack, torch, row, python, os)
        if flavor:
            reasons += self._flavor_reasons(vendor, stack, os, flavor)
        return reasons

    def _stack_reasons(self, vendor: str, stack: str | None, torch: str, row: TorchRelease) -> list[str]:
        if vendor not in self.vendors:
            return [f"unknown vendor '{vendor}' (known: {', '.join(VENDORS)})"]
        if vendor == "cpu" or stack is None:
            return []
        name = STACK_NAMES[vendor]
        if vendor == "gaudi":
            return self._gaudi_reasons(stack, torch)
        builds = row.stacks.get(vendor, ())
        if any(version_matches(stack, b) for b in builds):
            return []
        if not builds:
            note = f" ({row.xpu_note})" if vendor == "xpu" and row.xpu_note else ""
            return [f"torch {row.minor} has no {name} build{note}"]
        others = ", ".join(self.torch_for_stack(vendor, stack)) or "none"
        return [f"torch {row.minor} has no {name} {stack} build; {name} builds: {', '.join(builds)}"
                f" (torch with {name} {stack}: {others})"]

    def _gaudi_reasons(self, stack: str, torch: str) -> list[str]:
        matches = [v for v in self.gaudi if version_matches(stack, v)]
        if not matches:
            return [f"Intel Gaudi {stack} is unknown (known: {', '.join(self.gaudi)})"]
        bundled = {self.gaudi[v].torch for v in matches}
        wanted = torch.split("+")[0]
        if any(b == wanted or minor_of(b) == wanted for b in bundled):
            return []
        fits = ", ".join(self.stacks("gaudi", torch)) or "none"
        return [f"Intel Gaudi {stack} bundles torch {', '.join(sorted(bundled))}, not {wanted}"
                f" (Gaudi releases with torch {wanted}: {fits})"]

    def _python_reasons(self, vendor: str, stack: str | None, torch: str, row: TorchRelease,
                        python: str, experimental: bool) -> list[str]:
        if vendor == "gaudi":
            return []  # fixed by the Gaudi image's OS; checked with the OS
        if python in row.python or (experimental and python in row.python_experimental):
            return []
        hint = " (experimental: pass --experimental-python)" if python in row.python_experimental else ""
        return [f"torch {row.minor} supports Python {row.python[0]}-{row.python[-1]}, not {python}{hint}"]

    def _os_reasons(self, vendor: str, stack: str | None, torch: str, row: TorchRelease,
                    python: str | None, os: str) -> list[str]:
        info = self.os.get(os)
        if info is None:
            return [f"unknown OS '{os}' (known: {', '.join(self.os)})"]
        rules = self.vendors.get(vendor)
        if rules and os not in rules.os:
            note = f": {rules.os_note}" if rules.os_note else ""
            return [f"{vendor} images are built on {', '.join(rules.os)}, not {os}{note}"]
        if row.glibc_min and vkey(info.glibc) < vkey(row.glibc_min):
            return [f"torch {row.minor} wheels need glibc >= {row.glibc_min}; {os} has {info.glibc}"]
        if vendor == "gaudi":
            return self._gaudi_os_reasons(stack, python, os)
        reasons = []
        if python and python not in info.pythons():
            reasons.append(f"{os} provides Python {', '.join(sort_versions(info.pythons()))}, not {python}")
        if vendor == "cuda" and stack and stack in self.cuda and os not in self.cuda[stack]["base_os"]:
            reasons.append(f"nvidia/cuda has no CUDA {stack} image for {os}"
                           f" (CUDA {stack} bases: {', '.join(self.cuda[stack]['base_os'])})")
        return reasons

    def _gaudi_os_reasons(self, stack: str | None, python: str | None, os: str) -> list[str]:
        if stack is None:
            return []
        release = self.gaudi.get(stack)
        if release is None:
            return []
        if os not in release.os_python:
            return [f"Intel Gaudi {stack} has no image for {os} (it has: {', '.join(release.os_python)})"]
        fixed = release.os_python[os]
        if python and python != fixed:
            return [f"Intel Gaudi {stack} on {os} ships Python {fixed}, not {python}"]
        return []

    def _flavor_reasons(self, vendor: str, stack: str | None, os: str | None, flavor: str) -> list[str]:
        rules = self.vendors.get(vendor)
        if rules is None:
            return []
        if flavor not in rules.flavors:
            note = f": {rules.flavor_note}" if rules.flavor_note else ""
            return [f"{vendor} images come in {', '.join(rules.flavors)}, not {flavor}{note}"]
        if vendor == "rocm" and flavor == "devel" and stack and os:
            images = self.rocm_devel_images.get(stack, {})
            if os not in images:
                where = ", ".join(k for k in images if k.startswith(("ubuntu", "debian"))) or "none"
                return [f"no rocm/dev-ubuntu image for ROCm {stack} on {os} (available: {where})"]
        return []

    # ---- compat queries -------------------------------------------------------------------

    def check(self, query: Mapping[str, str], experimental_python: bool = False) -> Verdict:
        """Answer `accel-images compat key==value ...` (torch is required for a full check)."""
        vendor, stack = _vendor_of(query)
        torch = query.get("torch")
        python = query.get("python")
        if torch is None:
            return self._torch_listing(query, vendor, stack, python)
        try:
            row = self.release(torch)
        except IncompatibleError as err:
            return Verdict(query, (err.message,))
        if vendor is None:
            return self._stack_listing(query, row, torch, python, experimental_python)
        reasons = self.why_not(vendor, stack, torch, python, experimental_python=experimental_python)
        if vendor == "gaudi" and python and not reasons:
            reasons = self._gaudi_python_reasons(stack, python)
        details = self._details(vendor, stack, row, torch) if not reasons else {
            "alternatives": self._alternatives(vendor, row, torch, python)}
        return Verdict(query, tuple(reasons), details)

    def _gaudi_python_reasons(self, stack: str, python: str) -> list[str]:
        pythons = {p for v, g in self.gaudi.items() if version_matches(stack, v) for p in g.os_python.values()}
        if python in pythons:
            return []
        return [f"Intel Gaudi {stack} images ship Python {', '.join(sort_versions(pythons))}, not {python}"]

    def _alternatives(self, vendor: str, row: TorchRelease, torch: str, python: str | None) -> dict[str, Any]:
        return {"stacks": list(self.stacks(vendor, torch)) if vendor != "cpu" else [],
                "python": list(row.python),
                "torch_with_stack": []}

    def _details(self, vendor: str, stack: str | None, row: TorchRelease, torch: str) -> dict[str, Any]:
        details: dict[str, Any] = {"torch": self.resolve_torch(torch), "python": list(row.python),
                                   "source": row.source}
        if vendor == "cuda" and stack:
            exact = next(s for s in row.stacks["cuda"] if version_matches(stack, s))
            toolkit = self.cuda_toolkit(row.minor, exact)
            details.update(cuda=exact, wheel_index=f"cu{exact.replace('.', '')}", toolkit=toolkit,
                           driver_min=self.cuda_driver_min(toolkit), mvc_floor=self.cuda_mvc_floor(exact),
                           gpu_archs=list(self.gpu_archs("cuda", row.minor, exact)))
        elif vendor == "rocm" and stack:
            exact = next(s for s in row.stacks["rocm"] if version_matches(stack, s))
            details.update(rocm=exact, wheel_index=f"rocm{exact}",
                           gpu_archs=list(self.gpu_archs("rocm", row.minor, exact)))
        elif vendor == "xpu":
            details.update(oneapi=list(row.stacks.get("xpu", ())), wheel_index="xpu")
        elif vendor == "gaudi" and stack:
            details.update(gaudi=[v for v in self.gaudi if version_matches(stack, v)])
        elif vendor == "cpu":
            details.update(wheel_index="cpu")
        return details

    def _stack_listing(self, query: Mapping[str, str], row: TorchRelease, torch: str, python: str | None,
                       experimental: bool) -> Verdict:
        if python and not self.python_ok(row.minor, python, experimental):
            return Verdict(query, tuple(self._python_reasons("cpu", None, row.minor, row, python, experimental)))
        # the torch asked for, not its minor: Gaudi 1.18.0 bundles 2.4.0, so it has no build of 2.4.1
        builds = {v: list(self.stacks(v, torch)) for v in VENDORS if v != "cpu"}
        builds["cpu"] = ["cpu"]
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
            return Verdict(query, (f"no torch release has a {STACK_NAMES[vendor]} {stack} build"
                                   + (f" for Python {python}" if python else ""),))
        return Verdict(query, (), {"torch": minors})


def _vendor_of(query: Mapping[str, str]) -> tuple[str | None, str | None]:
    stacks = [k for k in ("cuda", "rocm", "xpu", "gaudi") if k in query]
    if len(stacks) > 1:
        raise InputError(f"ask about one stack at a time, not {' and '.join(stacks)}", field=stacks[1])
    if stacks:
        return stacks[0], query[stacks[0]]
    if query.get("cpu") is not None or query.get("vendor") == "cpu":
        return "cpu", None
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
        stacks={"cuda": _strs(raw.get("cuda", ())), "rocm": _strs(raw.get("rocm", ())),
                "xpu": _strs(raw.get("xpu", ()))},
        cuda_toolkits={str(k): str(v) for k, v in raw.get("cuda_toolkits", {}).items()},
        cuda_archs={str(k): _strs(v) for k, v in raw.get("cuda_archs", {}).items()},
        glibc_min=raw.get("glibc_min"),
        source=raw["source"],
        xpu_note=raw.get("xpu_note"),
    )


def parse_kb(raw: Mapping[str, Any]) -> KnowledgeBase:
    return KnowledgeBase(
        torch={m: _torch_row(m, row) for m, row in raw["torch"].items()},
        cuda=raw["cuda"],
        cuda_drivers=raw["cuda_drivers"],
        rocm_archs={k: _strs(v) for k, v in raw["rocm_archs"].items()},
        rocm_devel_images=raw["rocm_devel_images"],
        xpu_runtime_packages=_strs(raw["xpu_runtime_packages"]),
        xpu_runtime_ppa=raw["xpu_runtime_ppa"],
        gaudi={v: GaudiRelease(v, g["torch"], dict(g["os"]), g.get("image_tag", "latest"))
               for v, g in raw["gaudi"].items()},
        os={n: OsInfo(n, o["image"], o["python"], o["glibc"], o["family"], _strs(o.get("extra_python", ())))
            for n, o in raw["os"].items()},
        vendors={n: VendorRules(n, _strs(v["flavors"]), _strs(v["os"]), v.get("index"), v.get("os_note"),
                                v.get("flavor_note"))
                 for n, v in raw["vendors"].items()},
        sources=raw["sources"],
    )


@functools.lru_cache(maxsize=4)
def load_kb(path: Path = DATA_FILE) -> KnowledgeBase:
    """The knowledge base shipped with the package (cached: it is read-only)."""
    with open(path, encoding="utf-8") as handle:
        return parse_kb(yaml.safe_load(handle))


def parse_query(terms: Iterable[str]) -> dict[str, str]:
    """`torch==2.4.1 cuda==12.4` -> {'torch': '2.4.1', 'cuda': '12.4'}; bad terms are InputError."""
    allowed = ("torch", "python", "cuda", "rocm", "xpu", "gaudi")
    query: dict[str, str] = {}
    for term in terms:
        key, sep, value = term.partition("==")
        key = key.strip().lower()
        if not sep:
            if key == "cpu":
                query["cpu"] = ""
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
