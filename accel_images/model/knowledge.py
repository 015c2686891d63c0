"""The knowledge base's values: release rows, OS rows, vendor sections, combinations, resolutions.

These are the types the vendor modules and the knowledge base's answers (accel_images.kb) trade
in. They sit on a floor below both, so a vendor module can name them while the knowledge base looks
vendors up: the data never imports the code that interprets it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

from accel_images.errors import IncompatibleError, UnknownToKnowledgeBase
from accel_images.model.platforms import DEFAULT as DEFAULT_PLATFORM
from accel_images.versions import parse, sort_versions


@dataclass(frozen=True)
class Rules:
    """What a vendor's images can be built on (its knowledge-base `rules:`), and why not the rest."""

    flavors: tuple[str, ...]
    os: tuple[str, ...]
    index: str | None = None
    os_note: str | None = None
    flavor_note: str | None = None
    platforms: tuple[str, ...] = (DEFAULT_PLATFORM,)
    platform_note: str | None = None
    """Why the vendor publishes for these platforms only ("ROCm publishes no arm64 build")."""


@dataclass(frozen=True)
class PlatformRow:
    """What a vendor's section says of one platform beyond its rules: which of its builds exist there.

    `builds` maps a torch minor to the stack versions with a wheel for this platform (`('*',)`: every
    stack, and the only entry a vendor without stacks has); None means "the same builds as the
    default platform". `unverified` names what the sources did not confirm either way.
    """

    platform: str
    builds: Mapping[str, tuple[str, ...]] | None = None
    unverified: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    note: str = ""
    source: str = ""


@dataclass(frozen=True)
class Section:
    """A vendor's section of the knowledge base: the generic part, plus what only it reads (`facts`)."""

    vendor: str
    rules: Rules
    builds: Mapping[str, tuple[str, ...]]   # torch minor -> stack versions with a wheel
    notes: Mapping[str, str]                # torch minor -> why it has no build
    source: str
    unverified: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # torch minor -> stacks, or ('*',)
    facts: Any = None                       # the vendor's own tables, parsed by its load_facts
    platforms: Mapping[str, PlatformRow] = field(default_factory=dict)  # per platform, where it differs


@dataclass(frozen=True)
class Combo:
    """One combination of the matrix axes, before the knowledge base has judged it."""

    vendor: str
    stack: str | None
    torch: str
    python: str | None = None
    os: str | None = None
    flavor: str | None = None
    platform: str | None = None


@dataclass(frozen=True)
class Resolution:
    """What the knowledge base adds to an allowed combination: the facts a Variant carries."""

    torch: str
    stack: str | None
    base_image: str
    wheel_index: str | None = None
    toolkit: str | None = None
    min_driver: str | None = None     # the toolkit's own driver: recommended
    mvc_driver: str | None = None     # the floor under minor-version compatibility: required
    gpu_archs: tuple[str, ...] = ()
    package_index: bool = False       # torch is the package index's default wheel, installed from there



class Unverified(str):
    """A reason that says what the knowledge base does not know (yet), not what cannot work."""


def version_matches(requested: str, available: str) -> bool:
    """'6.2' asks for any 6.2 release, so it matches '6.2.4'; '6.2.4' matches only itself."""
    return available == requested or available.startswith(requested + ".")


def minor_of(version: str) -> str:
    return ".".join(version.split("+", 1)[0].split(".")[:2])



@dataclass(frozen=True)
class TorchRelease:
    minor: str
    versions: tuple[str, ...]
    python: tuple[str, ...]
    python_experimental: tuple[str, ...]
    glibc_min: str | None
    source: str
    companions: Mapping[str, str] = field(default_factory=dict)   # package -> line ('0.29') or release ('0.29.2')
    unverified: tuple[str, ...] = ()   # fields a person has yet to fill ('python'): `kb update` never guesses them

    @property
    def latest(self) -> str:
        return self.versions[-1]


@dataclass(frozen=True)
class OsInfo:
    name: str
    image: str
    python: str
    glibc: str
    family: str
    extra_python: tuple[str, ...] = ()
    platforms: tuple[str, ...] = (DEFAULT_PLATFORM,)
    """The platforms its plain base image is published for."""

    def pythons(self) -> tuple[str, ...]:
        return (self.python, *self.extra_python)


@dataclass(frozen=True)
class PlatformInfo:
    """A platform the knowledge base knows: what `uname -m` says on such a host, and the source."""

    name: str
    machines: tuple[str, ...]
    source: str = ""


@dataclass(frozen=True)
class Knowledge:
    """The knowledge base's tables as one value (torch releases, base OSes, each vendor's section)
    and the questions about them that need no vendor. Vendor modules read it; the answers that ask
    a vendor are accel_images.kb.compat.KnowledgeBase, a subclass, so this floor never imports one."""

    torch: Mapping[str, TorchRelease]
    os: Mapping[str, OsInfo]
    sections: Mapping[str, Section]
    sources: Mapping[str, str]
    as_of: str = ""
    apt_repositories: Mapping[str, Any] = field(default_factory=dict)
    platforms: Mapping[str, PlatformInfo] = field(default_factory=dict)

    # ---- platforms ----------------------------------------------------------------------

    def platform_of_machine(self, machine: str | None) -> str | None:
        """`aarch64` -> `linux/arm64`: the platform of a host whose `uname -m` says `machine`; None
        when the machine is not given or not one the knowledge base knows."""
        return next((info.name for info in self.platforms.values() if machine and machine in info.machines), None)

    # ---- torch -------------------------------------------------------------------------

    def torch_minors(self) -> list[str]:
        return sort_versions(self.torch)

    def release(self, torch: str) -> TorchRelease:
        """The release row for '2.14', '2.14.0' or '2.14.0+cu130'."""
        public = torch.split("+", 1)[0]
        row = self.torch.get(minor_of(public))
        if row is None:
            known = self.torch_minors()
            raise UnknownToKnowledgeBase(f"torch {public} is unknown to the knowledge base of {self.as_of}"
                                         f" (it knows {known[0]}-{known[-1]})",
                                         hint="`accel-images kb check` lists what it lacks")
        if public != row.minor and public not in row.versions:
            if parse(public) > parse(row.latest) and row.minor == self.torch_minors()[-1]:
                raise UnknownToKnowledgeBase(f"torch {public} is unknown to the knowledge base of {self.as_of}"
                                             f" (newest torch {row.minor} release it knows: {row.latest})",
                                             hint="`accel-images kb check` lists what it lacks")
            raise IncompatibleError(
                f"torch {public} was never released (torch {row.minor} releases: {', '.join(row.versions)})")
        return row

    def resolve_torch(self, torch: str) -> str:
        """'2.12' -> '2.12.1' (newest patch); a full version is checked and kept."""
        row = self.release(torch)
        return row.latest if torch == row.minor else torch

    def python_ok(self, torch: str, python: str, experimental: bool = False) -> bool:
        row = self.release(torch)
        return python in row.python or (experimental and python in row.python_experimental)

    # ---- vendors ------------------------------------------------------------------------

    def section(self, vendor: str) -> Section:
        try:
            return self.sections[vendor]
        except KeyError:
            raise IncompatibleError(f"unknown vendor '{vendor}' (known: {', '.join(self.sections)})") from None

    def facts(self, vendor: str) -> Any:
        """The vendor's own tables (CudaFacts, RocmFacts, ...), as its module parsed them."""
        return self.section(vendor).facts
