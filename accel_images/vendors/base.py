"""The one protocol every vendor implements, the values it trades in, and a base with defaults.

A vendor is three things: a module here (this protocol; a package of layer modules where it has
grown: vendors/cuda/, vendors/rocm/, vendors/xpu/, vendors/gaudi/), a Dockerfile template
(`templates/vendors/<name>.Dockerfile.j2`) and its section of the knowledge base
(`data/vendors/<name>.yaml`). Nothing outside `vendors/` names a vendor: matrix loading, compat
answers, variants, rendering, device flags, the in-image guard, smoke judging, CI runner labels,
reports, host detection and `recommend` all ask the vendor. `VendorBase` holds the behaviour most
vendors share (a wheel index per stack version, torch builds listed per torch minor), so a vendor
module states only what is its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from collections.abc import Callable, Mapping, Sequence

from accel_images.model.devices import DeviceOptions, SessionSettings
from accel_images.model import platforms as platform_names
from accel_images.model.knowledge import (Combo, Knowledge, PlatformRow, Resolution, Section, TorchRelease,
                                          Unverified, minor_of, version_matches)
from accel_images.versions import parse, sort_versions
from accel_images.vendors.collective import Collective

if TYPE_CHECKING:
    from accel_images.model.hostinfo import HostInfo, Runner
    from accel_images.model.imagefacts import Claim, ImageFacts
    from accel_images.model.variant import Variant

TEMPLATE_DIR = "vendors"
"""Where, under the templates directory, `<name>.Dockerfile.j2` lives."""


@dataclass(frozen=True)
class Fit:
    """One variant judged against a host: rejections (it cannot work), caveats (it works with a
    reservation specific to this image), whether it was compiled for the GPU's own architecture."""

    variant: Variant
    rejections: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    exact_arch: bool = False
    why: str = ""
    through: str = ""
    """The compatibility layer the image ships that it runs through on this host ('CUDA forward
    compatibility'); '' when it runs on the host's own driver. recommend prefers '' (`_rank`)."""

    @property
    def fits(self) -> bool:
        return not self.rejections


@runtime_checkable
class Vendor(Protocol):
    """Everything the builder knows about one accelerator vendor."""

    name: str                          # 'cuda': the matrix key, tag part and directory name
    title: str                         # 'NVIDIA CUDA': how reports name it
    stack_name: str                    # 'CUDA': what its stack versions are versions of ('' for cpu)
    smoke_backend: str                 # the backend the smoke workload reports on its device
    collective: Collective | None      # what its devices all-reduce through (None: none known, gloo on the CPU)
    accelerator: bool                  # False for the CPU: its images run on any host
    runner_labels: tuple[str, ...]     # the CI runner with this accelerator (empty: a hosted runner)
    detect_rank: int                   # host detection tries lower ranks first
    template: str                      # template name, relative to the templates directory
    template_dir: Path | None          # where the template lives when not in the project's templates/
    kb_file: Path                      # its section of the knowledge base
    guard_check: str                   # the shell function `check_vendor` for the in-image guard

    def load_facts(self, raw: Mapping[str, Any]) -> Any: ...
    def stacks(self, kb: Knowledge, torch: str) -> tuple[str, ...]: ...
    def torch_for_stack(self, kb: Knowledge, stack: str) -> list[str]: ...
    def reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease,
                experimental_python: bool) -> list[str]: ...
    def platform_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]: ...
    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution: ...
    def gpu_archs(self, kb: Knowledge, torch: str, stack: str | None) -> tuple[str, ...]: ...
    def details(self, kb: Knowledge, stack: str | None, row: TorchRelease) -> dict[str, Any]: ...
    def base_upgrades(self, kb: Knowledge, variant: Variant) -> list[str]: ...
    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]: ...
    def archs_of(self, facts: ImageFacts) -> tuple[str, ...] | None: ...
    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]: ...
    def device_options(self, dev_root: Path) -> DeviceOptions: ...
    def host_device_options(self, host: HostInfo, dev_root: Path) -> DeviceOptions: ...
    def session_settings(self) -> SessionSettings: ...
    def accelerator_present(self, dev_root: Path) -> bool: ...
    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None: ...
    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit: ...
    def host_warnings(self, host: HostInfo, fits: list[Fit]) -> list[str]: ...
    def describe_host(self, host: HostInfo) -> list[str]: ...


@dataclass(frozen=True)
class VendorBase:
    """Defaults for a vendor whose torch comes from a wheel index per stack version.

    Subclasses set the descriptive fields and override what differs; every default here is
    what at least two vendors do.
    """

    name: str
    title: str
    stack_name: str
    smoke_backend: str
    kb_file: Path
    collective: Collective | None = None
    """The vendor's collective (the N-node smoke test's backend, the facts' collective library); None where it
    has none known: the N-node smoke test then runs gloo on the CPU and says why."""
    runner_labels: tuple[str, ...] = ()
    accelerator: bool = True
    detect_rank: int = 100
    template_dir: Path | None = None
    guard_check: str = ""
    sources: tuple[str, ...] = field(default=(), compare=False)

    @property
    def template(self) -> str:
        return f"{TEMPLATE_DIR}/{self.name}.Dockerfile.j2"

    # ---- knowledge base ------------------------------------------------------------------

    def load_facts(self, raw: Mapping[str, Any]) -> Any:
        """The vendor's own tables from its knowledge-base file; none by default."""
        return None

    def section(self, kb: Knowledge) -> Section:
        return kb.section(self.name)

    def stacks(self, kb: Knowledge, torch: str) -> tuple[str, ...]:
        """Stack versions with a build of this torch ('13.0', '7.2', '2026.1')."""
        return self.section(kb).builds.get(minor_of(torch), ())

    def torch_for_stack(self, kb: Knowledge, stack: str) -> list[str]:
        """Every torch minor with a build for this stack version (oldest first)."""
        return [minor for minor in kb.torch_minors()
                if any(version_matches(stack, build) for build in self.stacks(kb, minor))]

    def exact_stack(self, kb: Knowledge, stack: str | None, torch: str) -> str | None:
        """'6.2' in the matrix means the 6.2.x build this torch has ('6.2.4')."""
        if stack is None:
            return None
        return next((build for build in self.stacks(kb, torch) if version_matches(stack, build)), stack)

    def reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease,
                experimental_python: bool) -> list[str]:
        """Every reason the combination cannot work; empty when it can."""
        reasons = self.stack_reasons(kb, combo, row)
        if combo.python:
            reasons += self.python_reasons(kb, combo, row, experimental_python)
        if combo.os:
            reasons += self.os_reasons(kb, combo, row)
        if combo.flavor:
            reasons += self.flavor_reasons(kb, combo)
        return reasons

    def stack_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        if combo.stack is None:
            return []
        name = self.stack_name
        builds = self.stacks(kb, row.minor)
        if any(version_matches(combo.stack, build) for build in builds):
            return []
        open_question = self.section(kb).unverified.get(row.minor, ())
        if "*" in open_question or any(version_matches(combo.stack, s) for s in open_question):
            confirmed = f" (confirmed: {', '.join(builds)})" if builds else ""
            return [Unverified(f"whether torch {row.minor} has a {name} {combo.stack} build is unverified in the"
                               f" knowledge base of {kb.as_of}{confirmed}")]
        if not builds:
            note = self.section(kb).notes.get(row.minor)
            return [f"torch {row.minor} has no {name} build" + (f" ({note})" if note else "")]
        others = ", ".join(self.torch_for_stack(kb, combo.stack)) or "none"
        return [f"torch {row.minor} has no {name} {combo.stack} build; {name} builds: {', '.join(builds)}"
                f" (torch with {name} {combo.stack}: {others})"]

    def python_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease,
                       experimental: bool) -> list[str]:
        python = combo.python or ""
        if python in row.python or (experimental and python in row.python_experimental):
            return []
        hint = " (experimental: pass --experimental-python)" if python in row.python_experimental else ""
        return [f"torch {row.minor} supports Python {row.python[0]}-{row.python[-1]}, not {python}{hint}"]

    def os_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        """The OS must be known, one this vendor builds on, new enough for the wheels; then its
        Python and what the vendor adds (`os_extra_reasons`)."""
        reasons = self.os_base_reasons(kb, combo, row)
        if reasons:
            return reasons
        info = kb.os[combo.os or ""]
        if combo.python and combo.python not in info.pythons():
            reasons.append(f"{combo.os} provides Python {', '.join(sort_versions(info.pythons()))}, not {combo.python}")
        return reasons + self.os_extra_reasons(kb, combo)

    def os_base_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        os_name = combo.os or ""
        info = kb.os.get(os_name)
        if info is None:
            return [f"unknown OS '{os_name}' (known: {', '.join(kb.os)})"]
        rules = self.section(kb).rules
        if os_name not in rules.os:
            note = f": {rules.os_note}" if rules.os_note else ""
            return [f"{self.name} images are built on {', '.join(rules.os)}, not {os_name}{note}"]
        if row.glibc_min and parse(info.glibc) < parse(row.glibc_min):
            return [f"torch {row.minor} wheels need glibc >= {row.glibc_min}; {os_name} has {info.glibc}"]
        return []

    def os_extra_reasons(self, kb: Knowledge, combo: Combo) -> list[str]:
        """What this vendor's bases add to the OS rules; nothing by default."""
        return []

    def flavor_reasons(self, kb: Knowledge, combo: Combo) -> list[str]:
        rules = self.section(kb).rules
        if combo.flavor not in rules.flavors:
            note = f": {rules.flavor_note}" if rules.flavor_note else ""
            return [f"{self.name} images come in {', '.join(rules.flavors)}, not {combo.flavor}{note}"]
        return []

    # ---- platforms ------------------------------------------------------------------------

    def platform_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        """Why a combination that works has no image for `combo.platform`: the vendor publishes nothing
        for it (its rules' `platforms`), the OS's base image lacks it, or the wheels for this torch and
        stack do not exist there (its section's `platforms`). Empty when the image can be built."""
        platform = combo.platform or platform_names.DEFAULT
        rules = self.section(kb).rules
        if platform not in rules.platforms:
            note = f": {rules.platform_note}" if rules.platform_note else ""
            return [f"{self.title} images are {platform_names.short(rules.platforms)} only{note}"]
        info = kb.os.get(combo.os or "")
        if info is not None and platform not in info.platforms:
            return [f"{info.image} ({combo.os}) has no {platform} image (it has {', '.join(info.platforms)})"]
        found = self.section(kb).platforms.get(platform)
        if found is None or found.builds is None:
            return []
        return self.platform_build_reasons(kb, combo, row, found)

    def platform_build_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease, found: PlatformRow) -> list[str]:
        """Whether the knowledge base lists this torch (and stack) among the platform's builds."""
        builds = (found.builds or {}).get(row.minor)
        if builds is not None and (combo.stack is None or "*" in builds
                                   or any(version_matches(combo.stack, build) for build in builds)):
            return []
        what = f"{self.stack_name} {combo.stack}" if combo.stack else self.title
        open_question = found.unverified.get(row.minor, ())
        if "*" in open_question or (combo.stack and any(version_matches(combo.stack, s) for s in open_question)):
            confirmed = f" (confirmed: {', '.join(builds)})" if builds and combo.stack else ""
            return [Unverified(f"whether torch {row.minor} has a {what} build for {found.platform} is unverified"
                               f" in the knowledge base of {kb.as_of}{confirmed}")]
        others = f"; its {found.platform} builds: {', '.join(builds)}" if builds and combo.stack else ""
        note = f" ({found.note})" if found.note else ""
        return [f"torch {row.minor} has no {what} build for {found.platform}{others}{note}"]

    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution:
        """The wheel index of the torch and stack asked for, on the OS's plain base image."""
        torch = kb.resolve_torch(combo.torch)
        stack = self.exact_stack(kb, combo.stack, torch)
        return Resolution(torch=torch, stack=stack, base_image=kb.os[combo.os or ""].image,
                          wheel_index=self.wheel_index(kb, stack), gpu_archs=self.gpu_archs(kb, torch, stack))

    def wheel_index(self, kb: Knowledge, stack: str | None) -> str | None:
        """The download.pytorch.org index name; the rules' fixed one by default."""
        return self.section(kb).rules.index

    def gpu_archs(self, kb: Knowledge, torch: str, stack: str | None) -> tuple[str, ...]:
        """GPU targets compiled into the wheel, where the sources state them."""
        return ()

    def details(self, kb: Knowledge, stack: str | None, row: TorchRelease) -> dict[str, Any]:
        """Extra fields of a compatible `compat` answer."""
        exact = self.exact_stack(kb, stack, row.latest) if stack else None
        details: dict[str, Any] = {}
        if exact:
            details[self.name] = exact
        index = self.wheel_index(kb, exact)
        if index:
            details["wheel_index"] = index
        archs = self.gpu_archs(kb, row.latest, exact)
        if archs or self.accelerator:  # null: the sources the knowledge base cites do not state them
            details["gpu_archs"] = list(archs) or None
        return details

    def base_upgrades(self, kb: Knowledge, variant: Variant) -> list[str]:
        """Newer base images to suggest when this variant's base tag has gone; none by default."""
        return []

    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]:
        """Environment the image sets for its guard and its runtime; `variants` is the whole
        matrix, so a refusal can name the sibling image that would work. None by default."""
        return {}

    # ---- facts: what a built image holds (accel_images/smoke/facts.py) ----------------------

    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """What this vendor's section predicts about the image beside the shared claims (torch, Python,
        backend, companions: accel_images.kb.claims), each with its row; a claim keyed like a shared
        one replaces it. None by default."""
        return []

    def archs_of(self, facts: ImageFacts) -> tuple[str, ...] | None:
        """The image's compiled GPU targets in the knowledge base's notation (what `gpu_archs` and
        `fit` use); None where the facts say nothing this vendor reads. The facts' own names by default."""
        return facts.archs if facts.archs else None

    # ---- hardware -------------------------------------------------------------------------

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(vendor=self.name)

    def host_device_options(self, host: HostInfo, dev_root: Path) -> DeviceOptions:
        """The options for the node `host` describes, which may not be this machine (recommend's
        --host-json): what only the description can say overrides what `dev_root` shows. The device
        options as this machine has them by default: nothing in them depends on the node."""
        return self.device_options(dev_root)

    def session_settings(self) -> SessionSettings:
        """What the vendor recommends for an interactive development container (`accel-images run`,
        devcontainer.json) beyond its device options; nothing by default."""
        return SessionSettings()

    def accelerator_present(self, dev_root: Path) -> bool:
        return False

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        return None

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        return Fit(variant, exact_arch=True, why=f"{self.title} {variant.stack or ''}".strip())

    def host_warnings(self, host: HostInfo, fits: list[Fit]) -> list[str]:
        return []

    def describe_host(self, host: HostInfo) -> list[str]:
        """Parts of the one-line host description beyond driver, devices and architectures."""
        return []


ProbeFunction = Callable[["Runner", Path, list[str]], "HostInfo | None"]


ALTERNATIVES_ENV = "ACCEL_IMAGES_ALTERNATIVES"
"""The images a refusal may name, with the facts the guard decides them by (see `alternatives`)."""


def alternatives(variant: Variant, variants: Sequence[Variant],
                 facts: Callable[[Variant], tuple[str, ...]]) -> str:
    """`TAG|FACT|...` entries, space-separated, for the guard to try in order on the host it refuses.

    A refusal names only an image that the same decision admits on the same host, so the guard
    runs its own check on each entry's facts and names the first that passes (no hint that sends
    the user to an image which refuses them too). The candidates are this image's siblings (same
    vendor, Python and OS), the same flavor and torch first, then the newest; of the siblings
    with the same facts only the first is kept (the decision depends on nothing else), and none
    with this image's own facts (it would refuse as this one does). After the siblings come the vendor's
    images of other Pythons and OSes on the same platform, the same Python first: where no sibling serves
    the host (the CUDA images on Debian have no CUDA 12.x sibling for a pre-R580 driver), the refusal
    names the nearest image that does, not none.
    """
    own = facts(variant)
    candidates = [v for v in variants if v.vendor == variant.vendor and v.tag != variant.tag
                  and v.platform == variant.platform]
    candidates.sort(key=lambda v: ((v.python, v.os) != (variant.python, variant.os), v.python != variant.python,
                                   v.flavor != variant.flavor, v.torch_minor != variant.torch_minor, v.sort_key()))
    siblings = candidates
    seen = {own}
    entries = []
    for sibling in siblings:
        key = facts(sibling)
        if key in seen:
            continue
        seen.add(key)
        entries.append("|".join((sibling.tag, *key)))
    return " ".join(entries)
