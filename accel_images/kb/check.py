"""`accel-images kb check`: what the knowledge base lacks or has wrong, against the sources.

The knowledge base is written by hand, so it lags the releases it describes. This module reads
what exists (kbsources: the package index, PyTorch's wheel index pages, the registries' tag
lists) and compares it with the knowledge base, row by row, as `Finding`s:

| kind | what | `kb update` |
|---|---|---|
| new-release | a torch minor release the knowledge base has no row for | writes the row; Python support to fill |
| new-patch | a patch version of a known minor | adds it to the row's versions |
| yanked | a version the row lists that the package index yanked | drops it from the row |
| companion | a row whose torchvision/torchaudio line differs from the index's | sets the row's companions |
| new-variant | a wheel index with builds of a torch minor the vendor section does not list | lists it as unverified |
| variant-gone | a build the vendor section lists that its wheel index no longer has | nothing: for a person |
| base-tag-gone | a base image tag the matrix's images use that its registry no longer has | nothing: for a person |
| new-base-tag | a newer patch of a base image tag in the same repository | nothing: for a person |

Companion packages are paired by upload date, the pairing PyPI itself records: torchvision
0.29.0 was uploaded the day torch 2.14.0 was (2026-09-02), so the 0.29 line goes with torch 2.14
and 0.29.2 (uploaded with torch 2.15.0) is a patch of that line, not a companion of 2.15.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel_images import resources, vendors
from accel_images.credentials import hide_credentials
from accel_images.kb import compat, sources as kbsources
from accel_images.errors import AccelError, InputError
from accel_images.kb.sources import Project, SourceUnreachable, SourceUrls, Wheel
from accel_images.model.knowledge import minor_of, version_matches
from accel_images.versions import parse, sort_versions

PACKAGES = ("torch", "torchvision", "torchaudio")
COMPANIONS = PACKAGES[1:]
WINDOW = 3
"""How many of the newest torch minors the wheel indexes are compared for: older builds are
history (indexes are pruned), and a nightly rebuild never reaches them."""
PYPI_PAGE = "https://pypi.org/project/{package}/{version}/"


@dataclass(frozen=True)
class Finding:
    """One thing the knowledge base lacks or has wrong, with the source that says so."""

    kind: str
    subject: str
    message: str
    source: str
    evidence: str                             # V: read at the source; Vm: through a mirror of it
    file: str = "kb.yaml"                     # the knowledge-base file it concerns
    facts: Mapping[str, Any] = field(default_factory=dict)   # what `kb update` writes
    to_fill: tuple[str, ...] = ()             # what the sources cannot say: a person fills it

    def __post_init__(self) -> None:
        """The source without its login: it is printed, and `kb update` writes it into the knowledge base
        (a mirror given as `--wheel-index-url https://user:token@mirror/whl`)."""
        object.__setattr__(self, "source", hide_credentials(self.source))

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "message": self.message, "source": self.source,
                "evidence": self.evidence, "file": self.file, "facts": dict(self.facts), "to_fill": list(self.to_fill)}


@dataclass(frozen=True)
class Report:
    as_of: str                                # the knowledge base's as_of
    findings: tuple[Finding, ...]
    unreachable: tuple[SourceUnreachable, ...]
    sources: tuple[str, ...]                  # every URL asked

    @property
    def exit_code(self) -> int:
        """4 when a source could not be read, 1 when something is new, 0 when up to date."""
        return SourceUnreachable.exit_code if self.unreachable else 1 if self.findings else 0

    def as_json(self) -> dict[str, Any]:
        return {"as_of": self.as_of, "up_to_date": not self.findings and not self.unreachable,
                "findings": [f.as_json() for f in self.findings],
                "unreachable": [{"source": u.source, "url": u.url, "reason": u.reason} for u in self.unreachable],
                "sources": [hide_credentials(url) for url in self.sources]}


# ---- the knowledge base's files -------------------------------------------------------------

@dataclass(frozen=True)
class KbFiles:
    """A knowledge base on disk: `kb.yaml` and `vendors/<vendor>.yaml` next to it."""

    root: Path = field(default_factory=resources.kb_dir)

    @property
    def kb_yaml(self) -> Path:
        return self.root / compat.DATA_FILE.name

    def vendor_file(self, vendor: vendors.Vendor) -> Path:
        """The vendor's file under this root; a plug-in vendor's own file when the root has none."""
        return compat.vendor_file(self.root, vendor)

    def raw_sections(self) -> dict[str, Mapping[str, Any]]:
        """Each vendor's file as read (the tables its module parses, by their own names)."""
        return {vendor.name: _read(self.vendor_file(vendor)) for vendor in vendors.registry().values()}

    def load(self) -> compat.KnowledgeBase:
        """The knowledge base these files hold; InputError (exit 2) naming the file when one is unreadable."""
        sections = {}
        for vendor in vendors.registry().values():
            path = self.vendor_file(vendor)
            try:
                sections[vendor.name] = compat.parse_section(vendor, _read(path))
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                raise InputError(f"malformed vendor section: {err}", file=str(path)) from None
        try:
            return compat.parse_kb(_read(self.kb_yaml), sections)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise InputError(f"malformed knowledge base: {err}", file=str(self.kb_yaml)) from None


def _read(path: Path) -> Any:
    try:
        raw = compat.read_yaml(path)
    except OSError as err:
        raise InputError(f"cannot read the knowledge base: {err.strerror}", file=str(path)) from None
    except Exception as err:  # noqa: BLE001 - yaml's errors carry the position
        mark = getattr(err, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(err, 'problem', err)}", file=str(path),
                         line=mark.line + 1 if mark else None) from None
    if not isinstance(raw, dict):
        raise InputError("not a knowledge-base file (a mapping)", file=str(path))
    return raw


# ---- gathering --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Observed:
    """What the sources answered; a source missing from a mapping could not be read."""

    projects: Mapping[str, Project]
    pages: Mapping[str, tuple[Wheel, ...] | None]          # index -> wheels; None: the page is gone (404)
    tags: Mapping[tuple[str, str], tuple[str, ...]]        # (registry, repository) -> tags
    unreachable: tuple[SourceUnreachable, ...]
    sources: tuple[str, ...]


Getter = Callable[[str, str], "bytes | None"]
TagLister = Callable[[str, str, SourceUrls], tuple[str, ...]]


def gather(indexes: Iterable[str], images: Iterable[str], urls: SourceUrls, get: Getter = kbsources.http_get,
           list_tags: TagLister = kbsources.registry_tags, workers: int = 8) -> Observed:
    """Ask every source at once (threads: the answers are network-bound)."""
    projects: dict[str, Project] = {}
    pages: dict[str, tuple[Wheel, ...] | None] = {}
    tags: dict[tuple[str, str], tuple[str, ...]] = {}
    failed: list[SourceUnreachable] = []
    asked: list[str] = []

    def project(package: str) -> None:
        url = urls.pypi_project(package)
        body = get(f"pypi:{package}", url)
        if body is None:
            raise SourceUnreachable(f"pypi:{package}", url, "answered 404 (no such project)")
        projects[package] = kbsources.parse_pypi_project(body, url, package)

    def page(index: str) -> None:
        url = urls.index_page(index)
        body = get(f"wheel index {index}", url)
        pages[index] = None if body is None else kbsources.parse_wheel_index(body, url)

    def repository(key: tuple[str, str]) -> None:
        tags[key] = list_tags(key[0], key[1], urls)

    repos = sorted({kbsources.split_image(ref)[:2] for ref in images})
    jobs: list[tuple[Callable[[Any], None], Any, str]] = [
        *((project, p, urls.pypi_project(p)) for p in PACKAGES),
        *((page, i, urls.index_page(i)) for i in sorted(set(indexes))),
        *((repository, r, f"{urls.registries.get(r[0], r[0])}/v2/{r[1]}/tags/list") for r in repos)]

    def run(job: tuple[Callable[[Any], None], Any, str]) -> None:
        action, argument, url = job
        asked.append(url)
        try:
            action(argument)
        except SourceUnreachable as err:
            failed.append(err)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run, jobs))
    return Observed(projects, pages, tags, tuple(sorted(failed, key=lambda e: e.url)), tuple(sorted(asked)))


# ---- comparing -------------------------------------------------------------------------------

def check(files: KbFiles, urls: SourceUrls, images: Iterable[str] = (), get: Getter = kbsources.http_get,
          list_tags: TagLister = kbsources.registry_tags) -> Report:
    """Read every source and compare: the report `kb check` prints and `kb update` applies."""
    kb = files.load()
    images = tuple(images)
    observed = gather(index_names(kb), images, urls, get, list_tags)
    return compare(kb, observed, urls, images, files.raw_sections())


def compare(kb: compat.KnowledgeBase, observed: Observed, urls: SourceUrls, images: Iterable[str] = (),
            raw_sections: Mapping[str, Mapping[str, Any]] | None = None) -> Report:
    evidence = {"pypi": "V" if urls.default_for("pypi") else "Vm",
                "wheel_index": "V" if urls.default_for("wheel_index") else "Vm"}
    findings: list[Finding] = []
    new_minors: list[str] = []
    torch = observed.projects.get("torch")
    if torch is not None:
        pairing = companion_lines(torch, observed.projects)
        release_findings = releases(kb, torch, observed.projects, pairing, evidence["pypi"])
        findings += release_findings
        new_minors = [f.facts["minor"] for f in release_findings if f.kind == "new-release"]
        findings += companion_findings(kb, pairing, evidence["pypi"])
    findings += variants(kb, observed.pages, new_minors, urls, evidence["wheel_index"], raw_sections or {})
    findings += base_tags(images, observed.tags, urls)
    return Report(kb.as_of, tuple(findings), observed.unreachable, observed.sources)


def _lines(project: Project) -> dict[str, list[str]]:
    """minor -> its final, unyanked versions, oldest first."""
    found: dict[str, list[str]] = {}
    for version in sort_versions(project.releases):
        if not project.releases[version].yanked:
            found.setdefault(minor_of(version), []).append(version)
    return found


def companion_lines(torch: Project, projects: Mapping[str, Project]) -> dict[str, dict[str, str]]:
    """torch minor -> {companion: its release line}, for lines whose first release was uploaded the
    day the torch minor's first release was."""
    torch_first = {minor: torch.releases[versions[0]].uploaded for minor, versions in _lines(torch).items()}
    pairing: dict[str, dict[str, str]] = {}
    for package in COMPANIONS:
        project = projects.get(package)
        if project is None:
            continue
        for line, versions in _lines(project).items():
            day = project.releases[versions[0]].uploaded
            for minor, torch_day in torch_first.items():
                if day and day == torch_day:
                    pairing.setdefault(minor, {})[package] = line
    return pairing


def _companions_text(minor: str, version: str, torch: Project, projects: Mapping[str, Project],
                     pairing: Mapping[str, Mapping[str, str]]) -> tuple[str, dict[str, str]]:
    """What a new torch version's companions are: the releases of its paired lines uploaded with it."""
    day = torch.releases[version].uploaded
    versions: dict[str, str] = {}
    parts = []
    for package in COMPANIONS:
        project = projects.get(package)
        line = pairing.get(minor, {}).get(package)
        if project is None:
            continue
        same_day = [v for v in _lines(project).get(line or "", []) if project.releases[v].uploaded == day]
        if same_day:
            versions[package] = same_day[-1]
            parts.append(f"{package} {same_day[-1]}")
        else:
            newest = max(project.releases, key=parse, default="")
            parts.append(f"no {package} release uploaded with it (newest: {newest or 'none'})")
    return "; ".join(parts), versions


def releases(kb: compat.KnowledgeBase, torch: Project, projects: Mapping[str, Project],
             pairing: Mapping[str, Mapping[str, str]], evidence: str) -> list[Finding]:
    findings: list[Finding] = []
    oldest = kb.torch_minors()[0]
    for minor, versions in sorted(_lines(torch).items(), key=lambda item: parse(item[0])):
        if parse(minor) < parse(oldest):
            continue
        row = kb.torch.get(minor)
        if row is None:
            findings.append(_new_release(minor, versions, torch, projects, pairing, evidence))
            continue
        for version in versions:
            if version in row.versions:
                continue
            release = torch.releases[version]
            text, companions = _companions_text(minor, version, torch, projects, pairing)
            findings.append(Finding(
                "new-patch", f"torch {version}",
                f"torch {version} (uploaded {release.uploaded}) is not in the torch {minor} row; {text}",
                PYPI_PAGE.format(package="torch", version=version), evidence,
                facts={"minor": minor, "version": version, "uploaded": release.uploaded, "companions": companions}))
    for version, release in sorted(torch.releases.items(), key=lambda item: parse(item[0])):
        row = kb.torch.get(minor_of(version))
        if release.yanked and row is not None and version in row.versions:
            findings.append(Finding(
                "yanked", f"torch {version}",
                f"torch {version} is yanked on the package index"
                + (f" ({release.yanked_reason})" if release.yanked_reason else ""),
                PYPI_PAGE.format(package="torch", version=version), evidence,
                facts={"minor": row.minor, "version": version, "reason": release.yanked_reason}))
    return findings


def _new_release(minor: str, versions: list[str], torch: Project, projects: Mapping[str, Project],
                 pairing: Mapping[str, Mapping[str, str]], evidence: str) -> Finding:
    first = torch.releases[versions[0]]
    newest = torch.releases[versions[-1]]
    text, _ = _companions_text(minor, versions[0], torch, projects, pairing)
    companions = dict(pairing.get(minor, {}))
    pythons = newest.wheel_pythons()
    glibc = newest.glibc_min()
    to_fill = ("python",) + (() if glibc else ("glibc_min",))
    wheels = f"wheels for Python {', '.join(pythons)}" if pythons else "no CPython wheels"
    return Finding(
        "new-release", f"torch {minor}",
        f"torch {minor} ({', '.join(versions)}; {versions[0]} uploaded {first.uploaded};"
        f" requires Python {newest.requires_python or 'unstated'}; {wheels}) has no row; {text}",
        PYPI_PAGE.format(package="torch", version=versions[0]), evidence,
        facts={"minor": minor, "versions": versions, "released": first.uploaded,
               "requires_python": newest.requires_python, "wheel_pythons": list(pythons),
               "glibc_min": glibc, "companions": companions},
        to_fill=to_fill)


def companion_findings(kb: compat.KnowledgeBase, pairing: Mapping[str, Mapping[str, str]],
                       evidence: str) -> list[Finding]:
    """Rows whose companions differ from the index's pairing (only where the knowledge base has
    the field: one without companions has nothing to get wrong)."""
    if not any(getattr(row, "companions", None) for row in kb.torch.values()):
        return []
    findings = []
    for minor, row in kb.torch.items():
        known = dict(getattr(row, "companions", {}) or {})
        for package, line in sorted(pairing.get(minor, {}).items()):
            if known.get(package) != line:
                findings.append(Finding(
                    "companion", f"torch {minor} {package}",
                    f"torch {minor} pairs with {package} {line} on the package index"
                    f" (the row says {known.get(package) or 'nothing'})",
                    PYPI_PAGE.format(package=package, version=f"{line}.0"), evidence,
                    facts={"minor": minor, "package": package, "line": line}))
    return findings


# ---- wheel indexes -----------------------------------------------------------------------------

def _indexed(kb: compat.KnowledgeBase) -> list[tuple[vendors.Vendor, str | None, str]]:
    """(vendor, stack, index) for every build the vendor sections list, and the fixed indexes."""
    found: list[tuple[vendors.Vendor, str | None, str]] = []
    for vendor in vendors.registry().values():
        section = kb.section(vendor.name)
        wheel_index = getattr(vendor, "wheel_index", None)   # VendorBase's; a plug-in may have none
        if section.rules.index:
            found.append((vendor, None, section.rules.index))
            continue
        if not vendor.stack_name or not callable(wheel_index):
            continue
        stacks = {s for builds in section.builds.values() for s in builds}
        stacks |= {s for pending in section.unverified.values() for s in pending if s != "*"}
        for stack in sort_versions(stacks):
            index = wheel_index(kb, stack)
            if isinstance(index, str) and index:
                found.append((vendor, stack, index))
    return found


def index_names(kb: compat.KnowledgeBase) -> list[str]:
    """The wheel index pages to read: those of the builds of the newest minors, and the fixed ones."""
    recent = set(kb.torch_minors()[-WINDOW:])
    names = set()
    for vendor, stack, index in _indexed(kb):
        section = kb.section(vendor.name)
        if stack is None or any(stack in section.builds.get(m, ()) or stack in section.unverified.get(m, ())
                                for m in recent):
            names.add(index)
    return sorted(names)


def variants(kb: compat.KnowledgeBase, pages: Mapping[str, tuple[Wheel, ...] | None], new_minors: Iterable[str],
             urls: SourceUrls, evidence: str, raw_sections: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    minors = sort_versions({*kb.torch_minors()[-WINDOW:], *new_minors})
    findings = []
    for vendor, stack, index in _indexed(kb):
        if index not in pages:
            continue   # not read (unreachable, or outside the window)
        wheels = pages[index]
        on_page: dict[str, Wheel] = {}
        for wheel in sorted(wheels or (), key=lambda w: ("manylinux" not in w.platform, w.filename)):
            if wheel.local == index:
                on_page.setdefault(minor_of(wheel.version), wheel)   # a Linux wheel names the build
        section = kb.section(vendor.name)
        url = urls.index_page(index)
        for minor in minors:
            listed = section.builds.get(minor, ())
            pending = section.unverified.get(minor, ())
            has = stack in listed if stack else bool(listed)
            if not vendor.stack_name:
                has = minor in kb.torch   # no stack (cpu): every release has a build, nothing to list
            if minor in on_page and not has and vendor.stack_name and "*" not in pending \
                    and (stack is None or stack not in pending):
                name = vendor.stack_name or vendor.name
                what = f"{name} {stack}" if stack else f"{name} (index {index})"
                to_fill = vendor_facts_to_fill(vendor, minor, stack, raw_sections.get(vendor.name, {}), kb)
                findings.append(Finding(
                    "new-variant", f"torch {minor} {vendor.name} {stack or f'(index {index})'}",
                    f"{on_page[minor].filename} is on the {index} index: a torch {minor} {what} build the"
                    f" {vendor.name} section does not list"
                    + (f" (to fill: {', '.join(to_fill)})" if to_fill else " (to confirm)"),
                    url, evidence, file=f"vendors/{vendor.kb_file.name}",
                    facts={"vendor": vendor.name, "minor": minor, "stack": stack, "index": index,
                           "wheel": on_page[minor].filename},
                    to_fill=to_fill))
            elif has and minor not in on_page and minor in kb.torch:
                reason = "the page is gone (404)" if wheels is None else f"no torch {minor} wheel on it"
                what = " ".join(part for part in (vendor.stack_name, stack) if part) or vendor.name
                findings.append(Finding(
                    "variant-gone", f"torch {minor} {vendor.name} {stack or f'(index {index})'}",
                    f"the knowledge base has a torch {minor} {what} build; the {index} index has none ({reason})",
                    url, evidence, file=f"vendors/{vendor.kb_file.name}",
                    facts={"vendor": vendor.name, "minor": minor, "stack": stack, "index": index}))
    return findings


GENERIC_KEYS = frozenset({"vendor", "source", "sources", "rules", "builds", "unverified", "notes", "notes_source"})
"""Keys every vendor section has (compat.parse_section): not tables of per-build facts."""


def vendor_facts_to_fill(vendor: vendors.Vendor, minor: str, stack: str | None, raw: Mapping[str, Any],
                         kb: compat.KnowledgeBase) -> tuple[str, ...]:
    """What a wheel index cannot say about a new build: the stack version behind a fixed index
    (which oneAPI is `xpu`?), and every row the vendor's own tables keep per torch minor or per
    stack version that this build lacks (cuda: `toolkits`, `archs`; a new stack: its `families`
    or `devel_images` row). Read from the section itself, so a vendor's tables name themselves."""
    if stack is None:
        return (f"{vendor.stack_name} version",) if vendor.stack_name else ()
    section = kb.section(vendor.name)
    stacks = {s for builds in section.builds.values() for s in builds}
    missing = []
    for key, table in raw.items():
        if key in GENERIC_KEYS or not isinstance(table, Mapping) or not table:
            continue
        keys = {str(k) for k in table}
        if keys & set(kb.torch) and minor not in keys:
            missing.append(f"{key}[{minor}]")
        elif keys & stacks and stack not in keys:
            missing.append(f"{key}[{stack}]")
    return tuple(missing)


# ---- base images --------------------------------------------------------------------------------

_VERSION = re.compile(r"\d+(?:\.\d+){2,}")


def base_tags(images: Iterable[str], tags: Mapping[tuple[str, str], tuple[str, ...]],
              urls: SourceUrls) -> list[Finding]:
    findings = []
    for ref in sorted(set(images)):
        registry, repository, tag = kbsources.split_image(ref)
        known = tags.get((registry, repository))
        if known is None:
            continue
        source = f"{urls.registries.get(registry) or registry}/v2/{repository}/tags/list"
        grade = "V" if urls.default_for(registry) else "Vm"
        if tag not in known:
            findings.append(Finding("base-tag-gone", ref, f"{ref}: the registry has no tag {tag} any more", source,
                                    grade, file="matrix.yaml", facts={"image": ref}))
            continue
        newer = newer_patch_tags(tag, known)
        if newer:
            findings.append(Finding("new-base-tag", ref, f"{ref}: newer patch tags: {', '.join(newer)}", source,
                                    grade, file="matrix.yaml", facts={"image": ref, "newer": newer}))
    return findings


def newer_patch_tags(tag: str, tags: Iterable[str]) -> list[str]:
    """Tags like `tag` with a later patch of its X.Y.Z version: 13.2.1-devel-ubuntu24.04 ->
    13.2.2-devel-ubuntu24.04 (a tag without an X.Y.Z has none)."""
    match = _VERSION.search(tag)
    if not match:
        return []
    prefix, suffix, version = tag[:match.start()], tag[match.end():], match.group(0)
    head = version.rsplit(".", 1)[0]
    found = []
    for other in tags:
        if other.startswith(prefix) and other.endswith(suffix) and len(other) > len(prefix) + len(suffix):
            middle = other[len(prefix):len(other) - len(suffix)]
            if _VERSION.fullmatch(middle) and version_matches(head, middle) \
                    and middle.count(".") == version.count(".") and parse(middle) > parse(version):
                found.append(other)
    return sorted(found, key=lambda t: parse(_VERSION.search(t).group(0)))  # type: ignore[union-attr]


def describe(report: Report) -> list[str]:
    """The report as lines: one per finding, then the sources that could not be read."""
    if not report.findings and not report.unreachable:
        return [f"up to date: the knowledge base of {report.as_of} has everything its"
                f" {len(report.sources)} sources list"]
    lines = [f"{f.kind}: {f.subject}: {f.message} [{f.evidence}: {f.source}]" for f in report.findings]
    # Each unreachable source without the hint: it is the same for all of them (every URL can point at a
    # mirror), and the command's last line, the error, says it once.
    lines += [f"unreachable: {u.message}" for u in report.unreachable]
    return lines


__all__ = ["AccelError", "Finding", "KbFiles", "Observed", "Report", "check", "compare", "describe", "gather",
           "index_names", "newer_patch_tags"]
