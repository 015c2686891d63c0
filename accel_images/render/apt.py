"""Apt repositories beyond the base OS's, without add-apt-repository, and apt mirrors.

`add-apt-repository` asks Launchpad's API and keyserver, which an apt mirror does not serve, so an
image that uses it cannot be built behind a mirror or air-gapped. Instead each repository's
signing key ships with the package (data/apt-keys/, each checked against its fingerprint in the
knowledge base) and the renderer writes a deb822 `.sources` file into the build context; both are
copied into the image. `--apt-mirror HOST=URL` rewrites a repository's host, and the same mapping
rewrites the base image's own sources (deb.debian.org, archive.ubuntu.com) before `apt-get update`.

A mirror URL's credentials (`http://user:token@mirror/debian`) never reach a rendered file, a RUN
line or a layer: the sources name the mirror without them, and apt reads them from a login file of
its own (apt_auth.conf(5): `/etc/apt/auth.conf.d/*.conf`, netrc-like `machine`/`login`/`password`
entries) that each apt step writes from a predefined build arg at its start and deletes before it
ends, so the layer the step leaves never holds it (accel_images.render.contexts, APT_CREDENTIALS_ARG).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from accel_images.credentials import hide_credentials
from accel_images.errors import InputError

KEYS_DIR = Path(__file__).parent.parent / "data" / "apt-keys"
CONTEXT_DIR = "apt"
KEYRINGS = "/etc/apt/keyrings"
SOURCES_D = "/etc/apt/sources.list.d"
HOST_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?\Z")
MIRROR_URL_RE = re.compile(r"^(https?|file)://[A-Za-z0-9._~:/@%+-]+\Z")
AUTH_CONF = "/etc/apt/auth.conf.d/90accel-images-mirrors.conf"
"""apt's login file for the mirrors, present only while an apt step runs (apt_auth.conf(5))."""


@dataclass(frozen=True)
class AptMirror:
    """`ppa.launchpadcontent.net=https://mirror.example.com/launchpad`: that host's paths, served there.

    `prefix` never holds credentials; `login` is the URL's `user:password`, kept out of every repr."""

    host: str
    prefix: str
    login: tuple[str, str] | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, text: str) -> AptMirror:
        host, sep, prefix = text.partition("=")
        host, prefix = host.strip().lower(), prefix.strip().rstrip("/")
        if not (sep and HOST_RE.match(host) and MIRROR_URL_RE.match(prefix)):
            raise InputError(f"'{hide_credentials(text)}' is not HOST=URL "
                             "(e.g. archive.ubuntu.com=http://mirror.example.com/ubuntu)",
                             field="--apt-mirror")
        parts = urlsplit(prefix)
        if "@" not in parts.netloc:
            return cls(host, prefix)
        userinfo, _, where = parts.netloc.rpartition("@")
        user, colon, password = (unquote(part) for part in userinfo.partition(":"))
        if not (user and colon and password):
            raise InputError(f"'{hide_credentials(text)}': the mirror's credentials must be user:password "
                             "(give user:password)", field="--apt-mirror")
        if any(char.isspace() or not char.isprintable() for char in user + password):
            raise InputError(f"'{hide_credentials(text)}': apt's login file cannot hold credentials with spaces "
                             "or control characters (no spaces)", field="--apt-mirror")
        return cls(host, urlunsplit((parts.scheme, where, parts.path, "", "")), (user, password))

    def auth_entry(self) -> str:
        """This mirror's apt_auth.conf(5) entry; '' without credentials. The machine names the scheme:
        without it an entry matches https only, and a mirror may be plain http."""
        if self.login is None:
            return ""
        return f"machine {self.prefix} login {self.login[0]} password {self.login[1]}"


def auth_conf(mirrors: Iterable[AptMirror]) -> str:
    """apt's login file for the mirrors that have credentials, one line ('' when none has): the value of
    the build arg apt steps write it from (entries are whitespace-separated tokens to apt)."""
    return " ".join(entry for entry in (mirror.auth_entry() for mirror in mirrors) if entry)


@dataclass(frozen=True)
class Repository:
    """One apt repository the knowledge base names: where, for which OS releases, signed by what."""

    name: str
    uri: str
    suites: Mapping[str, str]     # os name -> suite ('ubuntu24.04' -> 'noble')
    components: str
    key: str                      # file under data/apt-keys/
    fingerprint: str
    source: str

    @classmethod
    def from_kb(cls, name: str, raw: Mapping[str, Any]) -> Repository:
        return cls(name, str(raw["uri"]), {str(k): str(v) for k, v in raw["suites"].items()},
                   str(raw.get("components", "main")), str(raw["key"]), str(raw["fingerprint"]), str(raw["source"]))

    def key_bytes(self) -> bytes:
        return (KEYS_DIR / self.key).read_bytes()

    def sources(self, os_name: str, mirrors: Iterable[AptMirror]) -> bytes:
        """The deb822 entry, with the mirror's URL where one serves this host."""
        suite = self.suites.get(os_name)
        if suite is None:
            raise InputError(f"apt repository {self.name} has no suite for {os_name}", field="os")
        return (f"Types: deb\nURIs: {mirrored_uri(self.uri, mirrors)}\nSuites: {suite}\n"
                f"Components: {self.components}\nSigned-By: {KEYRINGS}/{self.key}\n").encode()


def mirrored_uri(uri: str, mirrors: Iterable[AptMirror]) -> str:
    parts = urlsplit(uri)
    for mirror in mirrors:
        if (parts.hostname or "") == mirror.host:
            return mirror.prefix + parts.path
    return uri


def rewrite_command(mirrors: Iterable[AptMirror]) -> str:
    """A shell command pointing the base image's own apt sources at the mirrors ('' without any)."""
    expressions = [f"-e 's#https\\?://{re.escape(m.host)}#{m.prefix}#g'" for m in mirrors]
    if not expressions:
        return ""
    files = "/etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list"
    return f"for f in {files}; do if [ -f \"$f\" ]; then sed -i {' '.join(expressions)} \"$f\"; fi; done"


class Collector:
    """What one render's templates asked for: repositories, and the files the context then carries."""

    def __init__(self, repositories: Mapping[str, Repository], os_name: str, mirrors: tuple[AptMirror, ...],
                 login_arg: str = "") -> None:
        self.repositories = repositories
        self.os_name = os_name
        self.mirrors = mirrors
        self.login_arg = login_arg
        """The predefined build arg that carries auth_conf(mirrors) to the build (accel_images.render.contexts)."""
        self.files: dict[str, bytes] = {}

    def use(self, name: str) -> dict[str, str]:
        """Called by a template: the context paths of the repository's key and sources file."""
        repository = self.repositories[name]
        key, sources = f"{CONTEXT_DIR}/{repository.key}", f"{CONTEXT_DIR}/{name}.sources"
        self.files[key] = repository.key_bytes()
        self.files[sources] = repository.sources(self.os_name, self.mirrors)
        return {"key": key, "key_target": f"{KEYRINGS}/{repository.key}",
                "sources": sources, "sources_target": f"{SOURCES_D}/{name}.sources"}

    def rewrite(self) -> str:
        return rewrite_command(self.mirrors)

    def login(self) -> str:
        """A shell command writing apt's login file from the build arg ('' when no mirror has credentials);
        `logout()` removes it again before the step ends, so no layer holds it."""
        if not auth_conf(self.mirrors):
            return ""
        return (f"mkdir -p {posixpath.dirname(AUTH_CONF)} && printf '%s\\n' \"${{{self.login_arg}}}\" > {AUTH_CONF}"
                f" && chmod 0600 {AUTH_CONF}")

    def logout(self) -> str:
        return f"rm -f {AUTH_CONF}" if auth_conf(self.mirrors) else ""
