"""The upstream sources that say what exists, fetched and parsed for `accel-images kb check`.

Three kinds of source, each behind a URL the user can override (a mirror, or recorded responses
served locally in the tests):

- the Python package index's JSON API (`<pypi>/<package>/json`): every release of torch,
  torchvision and torchaudio, its files, their upload times and yank flags. The whole-project
  document is read, never `/<package>/<version>/json`: some index mirrors do not serve the
  per-version endpoint (they answer 404 for versions that exist);
- PyTorch's wheel index pages (`<wheel index>/<index>/torch/`, PEP 503 HTML only: the pages are
  static files, there is no PEP 691 JSON variant), one per cuXYZ / rocmX.Y / xpu / cpu index: which
  torch versions have a build for that index;
- registry tag lists (`/v2/<name>/tags/list`, following `Link: rel="next"` pages and the registry's
  own token challenge), through `registry.RegistryClient`.

Every failure to get an answer (no connection, a status other than 200 or 404, a body that is
not what the source serves, more bytes than `MAX_BYTES`) is `SourceUnreachable`, exit code 4,
naming the source and its URL. A 404 is an answer ("no such page"), so the caller decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urlsplit

import requests

from accel_images import untrusted
from accel_images.credentials import hide_credentials
from accel_images.errors import AccelError, InputError, RegistryError

PYPI_URL = "https://pypi.org/pypi"
WHEEL_INDEX_URL = "https://download.pytorch.org/whl"
TIMEOUT_S = 30.0
MAX_BYTES = 64 * 1024 * 1024
"""The largest answer read. torch's project JSON is under 1 MB and a torch index page a few MB
(recorded 2026-12-03); a source that sends more is broken or hostile, not bigger."""
USER_AGENT = "accel-images-kb-check"
FINAL_VERSION = re.compile(r"^\d+(\.\d+)*\Z")
"""Final releases only: a pre-release (2.15.0rc1), a dev or a post release is never a row."""
WHEEL_NAME = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)-(?P<python>[^-]+)-(?P<abi>[^-]+)"
                        r"-(?P<platform>[^-]+)\.whl\Z")


class SourceUnreachable(AccelError):
    """A source of `kb check` gave no usable answer; the message names it and its URL."""

    exit_code = 4

    def __init__(self, source: str, url: str, reason: str) -> None:
        url, reason = hide_credentials(url), hide_credentials(reason)   # shown and recorded: a mirror's login is not
        super().__init__(f"source {source} unreachable: {reason} ({url})",
                         hint="every source URL can be pointed at a mirror: see `accel-images kb check --help`")
        self.source = source
        self.url = url
        self.reason = reason


@dataclass(frozen=True)
class SourceUrls:
    """Where each source is read; the defaults are the public services."""

    pypi: str = PYPI_URL
    wheel_index: str = WHEEL_INDEX_URL
    registries: Mapping[str, str] = field(default_factory=dict)
    """registry host as image references name it ('docker.io') -> the base URL to ask instead."""

    def pypi_project(self, package: str) -> str:
        return f"{self.pypi.rstrip('/')}/{package}/json"

    def index_page(self, index: str, package: str = "torch") -> str:
        return f"{self.wheel_index.rstrip('/')}/{index}/{package}/"

    def default_for(self, which: str) -> bool:
        """Whether a source is read where its owner publishes it (evidence V) or through a mirror (Vm)."""
        return {"pypi": self.pypi == PYPI_URL, "wheel_index": self.wheel_index == WHEEL_INDEX_URL}.get(
            which, which not in self.registries)


def parse_registry_overrides(values: Iterable[str]) -> dict[str, str]:
    """`docker.io=http://127.0.0.1:5000` (repeatable) -> {'docker.io': 'http://127.0.0.1:5000'}."""
    found: dict[str, str] = {}
    for value in values:
        registry, sep, url = value.partition("=")
        if not sep or not registry or not url.startswith(("http://", "https://")) or not urlsplit(url).netloc:
            raise InputError(f"'{hide_credentials(value)}' is not REGISTRY=http[s]://HOST[:PORT]",
                             field="--registry-url")
        found[registry.strip()] = url.rstrip("/")
    return found


# ---- fetching ---------------------------------------------------------------------------------

Getter = Callable[[str, str], "bytes | None"]
"""(source name, URL) -> the body, None for a 404; raises SourceUnreachable."""


def http_get(source: str, url: str, *, max_bytes: int = MAX_BYTES, timeout_s: float = TIMEOUT_S,
             session: requests.Session | None = None) -> bytes | None:
    """The body of a 200, None for a 404, SourceUnreachable for anything else."""
    try:
        response = (session or requests).get(url, timeout=timeout_s, stream=True,
                                             headers={"User-Agent": USER_AGENT})
    except requests.exceptions.RequestException as err:
        raise SourceUnreachable(source, url, _reason(err)) from None
    with response:
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise SourceUnreachable(source, url, f"answered {response.status_code}")
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise SourceUnreachable(source, url, f"answered {int(declared)} bytes, more than the {max_bytes} read")
        body = bytearray()
        try:
            for chunk in response.iter_content(chunk_size=1 << 16):
                body += chunk
                if len(body) > max_bytes:
                    raise SourceUnreachable(source, url, f"answered more than the {max_bytes} bytes read")
        except requests.exceptions.RequestException as err:
            raise SourceUnreachable(source, url, _reason(err)) from None
    return bytes(body)


def _reason(err: BaseException) -> str:
    text = str(err).lower()
    for needle, reason in (("connection refused", "connection refused"), ("name or service not known", "unknown host"),
                           ("temporary failure in name resolution", "DNS failure"), ("timed out", "timed out"),
                           ("certificate", "TLS certificate not trusted"), ("connection reset", "connection reset"),
                           ("remote end closed", "connection closed early")):
        if needle in text:
            return reason
    return type(err).__name__


# ---- the package index ------------------------------------------------------------------------

@dataclass(frozen=True)
class Release:
    """One final release on the package index, from its files."""

    version: str
    uploaded: str                  # the first file's upload date, YYYY-MM-DD
    yanked: bool                   # every file yanked (PEP 592)
    yanked_reason: str
    requires_python: str
    wheel_tags: tuple[str, ...]    # 'cp312-cp312', 'cp314-cp314t', 'py3-none'
    platforms: tuple[str, ...]

    def wheel_pythons(self) -> tuple[str, ...]:
        """The CPython versions with a wheel of their own ABI ('3.12'; free-threaded builds excluded)."""
        found = {tag.split("-")[0][2:] for tag in self.wheel_tags
                 if re.fullmatch(r"cp(\d)(\d+)-cp\1\2", tag)}
        return tuple(f"{v[0]}.{v[1:]}" for v in sorted(found, key=lambda v: (int(v[0]), int(v[1:]))))

    def glibc_min(self) -> str | None:
        """The glibc the Linux x86_64 wheels need, from their manylinux tag (PEP 600)."""
        floors = [(int(m.group(1)), int(m.group(2))) for p in self.platforms
                  if (m := re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", p))]
        return f"{max(floors)[0]}.{max(floors)[1]}" if floors else None


@dataclass(frozen=True)
class Project:
    name: str
    url: str
    releases: Mapping[str, Release]   # final releases with at least one file


def parse_pypi_project(body: bytes, url: str, package: str) -> Project:
    """The project JSON (`/pypi/<package>/json`) as releases; SourceUnreachable for anything else."""
    source = f"pypi:{package}"
    try:
        data = untrusted.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise SourceUnreachable(source, url, "answered something that is not JSON") from None
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise SourceUnreachable(source, url, "answered JSON without a 'releases' object")
    found: dict[str, Release] = {}
    for version, files in releases.items():
        if not FINAL_VERSION.match(str(version)) or not isinstance(files, list) or not files:
            continue
        found[str(version)] = _release(str(version), [f for f in files if isinstance(f, dict)])
    return Project(package, url, found)


def _release(version: str, files: list[Mapping[str, Any]]) -> Release:
    times = sorted(str(f.get("upload_time_iso_8601") or f.get("upload_time") or "") for f in files)
    times = [t for t in times if t]
    tags: set[str] = set()
    platforms: set[str] = set()
    for entry in files:
        wheel = WHEEL_NAME.match(str(entry.get("filename", "")))
        if wheel:
            tags.add(f"{wheel['python']}-{wheel['abi']}")
            platforms.update(wheel["platform"].split("."))
    yanked = all(bool(f.get("yanked")) for f in files)
    reasons = [str(f.get("yanked_reason")) for f in files if f.get("yanked_reason")]
    requires = sorted({str(f["requires_python"]) for f in files if f.get("requires_python")})
    return Release(version, times[0][:10] if times else "", yanked, reasons[0] if yanked and reasons else "",
                   requires[-1] if requires else "", tuple(sorted(tags)), tuple(sorted(platforms)))


# ---- PyTorch's wheel index ----------------------------------------------------------------------

@dataclass(frozen=True)
class Wheel:
    filename: str
    version: str       # the public version: '2.14.1'
    local: str         # the local label: 'cu126', 'rocm7.2', 'xpu', 'cpu' ('' for none)
    python: str
    abi: str
    platform: str


class _Anchors(HTMLParser):
    """The anchors of a PEP 503 page: (href, text), yanked ones left out. Attributes may come in any order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[str, str]] = []
        self.tags = 0
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags += 1
        if tag == "a":
            found = dict(attrs)
            # PEP 592: a yanked file is not a build anyone should install
            self._href = None if "data-yanked" in found else found.get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.anchors.append((self._href, "".join(self._text).strip()))
            self._href = None


def parse_wheel_index(body: bytes, url: str, package: str = "torch") -> tuple[Wheel, ...]:
    """The package's wheels listed on one index page (the anchor text, else the href's file name)."""
    parser = _Anchors()
    try:
        parser.feed(body.decode("utf-8"))
        parser.close()
    except UnicodeDecodeError:
        raise SourceUnreachable(f"wheel index {_index_of(url)}", url, "answered something that is not text") from None
    if parser.tags == 0:
        raise SourceUnreachable(f"wheel index {_index_of(url)}", url, "answered something that is not an HTML page")
    wheels = []
    for href, text in parser.anchors:
        name = text if text.endswith(".whl") else unquote(urlsplit(href).path.rsplit("/", 1)[-1])
        match = WHEEL_NAME.match(name)
        if not match or match["name"].replace("_", "-").lower() != package.replace("_", "-").lower():
            continue
        public, _, local = match["version"].partition("+")
        if FINAL_VERSION.match(public):
            wheels.append(Wheel(name, public, local, match["python"], match["abi"], match["platform"]))
    return tuple(wheels)


def _index_of(url: str) -> str:
    parts = [p for p in urlsplit(url).path.split("/") if p]
    return parts[-2] if len(parts) >= 2 else url


# ---- registries -------------------------------------------------------------------------------

def split_image(ref: str) -> tuple[str, str, str]:
    """`nvidia/cuda:13.2.1-devel-ubuntu24.04` -> ('docker.io', 'nvidia/cuda', '13.2.1-devel-ubuntu24.04')."""
    from accel_images.model.reference import split_reference
    registry, path = split_reference(ref.split("@", 1)[0])
    name, _, tag = path.rpartition(":") if ":" in path.rsplit("/", 1)[-1] else (path, "", "latest")
    return registry, name, tag


def registry_tags(registry: str, repository: str, urls: SourceUrls) -> tuple[str, ...]:
    """Every tag of `registry`/`repository` (all pages); () when the repository does not exist."""
    from accel_images.registry import RegistryClient
    override = urls.registries.get(registry)
    if override:
        scheme, _, host = override.partition("://")
        client = RegistryClient(host, scheme=scheme, credentials=lambda _host: None)
        where = f"{override}/v2/{repository}/tags/list"
    else:
        client = RegistryClient(registry, credentials=lambda _host: None)
        where = f"{client.base_url}/v2/{repository}/tags/list"
    try:
        return tuple(client.tags(repository))
    except RegistryError as err:
        reason = err.message
        for prefix in (f"registry {client.host} unreachable ", f"registry {client.host} "):
            reason = reason.removeprefix(prefix)
        raise SourceUnreachable(f"registry {registry}", where,
                                re.sub(r"^\((.*?)\) while ", r"\1 while ", reason)) from None


__all__ = ["MAX_BYTES", "PYPI_URL", "WHEEL_INDEX_URL", "Getter", "Project", "Release", "SourceUnreachable",
           "SourceUrls", "Wheel", "http_get", "parse_pypi_project", "parse_registry_overrides", "parse_wheel_index",
           "registry_tags", "split_image"]
