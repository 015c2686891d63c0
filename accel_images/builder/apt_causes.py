"""Why apt failed, by its real cause: a repository out of reach, a 404, a signature, a missing package.

`apt-get update` only warns when a repository cannot be reached ("W: Failed to fetch ... Could not
connect to ...") and exits 0; the `apt-get install` after it then stops with "E: Unable to locate
package python3-venv", which names a package when the cause is the mirror. So the fetch failures of
the step are read first, and a missing package is said only when apt fetched what it was asked to
(accel_images.builder.failure falls through to its patterns).

Recorded with apt 2.6.1 (Debian 12, debian:bookworm-slim) against a closed port, an HTTP server
without the files and a keyring removed; the lines are tests/unit/test_apt_causes.py's fixtures:

    Err:1 http://127.0.0.1:9/debian/debian bookworm InRelease
      Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)
    W: Failed to fetch http://127.0.0.1:9/debian/debian/dists/bookworm/InRelease  Could not connect to ...
    Err:4 http://127.0.0.1:18931/debian/debian bookworm Release
      404  File not found [IP: 127.0.0.1 18931]
    E: The repository 'http://127.0.0.1:18931/debian/debian bookworm Release' does not have a Release file.
    W: GPG error: http://deb.debian.org/debian bookworm InRelease: The following signatures couldn't be
       verified because the public key is not available: NO_PUBKEY 6ED0E7B82643E131 ...
    E: The repository 'http://deb.debian.org/debian bookworm InRelease' is not signed.

`--apt-mirror HOST=URL` keeps the path after HOST: with `deb.debian.org=http://mirror/debian`, Debian's
`http://deb.debian.org/debian/dists/...` is fetched as `http://mirror/debian/debian/dists/...`. A
failure through a mirror names the mapping that pointed there, and a 404 says which part was kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from accel_images.render.apt import AptMirror

_ERR = re.compile(r"^Err:\d+ (?P<url>\S+) (?P<suite>\S+) (?P<file>\S+)")
_FETCH = re.compile(r"Failed to fetch (?P<url>\S+)\s+(?P<why>.+)$")
_NO_RELEASE = re.compile(r"The repository '(?P<url>\S+) (?P<suite>\S+) \S+' does not have a Release file")
_UNSIGNED = re.compile(r"GPG error: (?P<url>\S+) (?P<suite>\S+) \S+: ")
_KEY = re.compile(r"(?:NO_PUBKEY|EXPKEYSIG|KEYEXPIRED) \w+")
_NOT_SIGNED = re.compile(r"The repository '(?P<url>\S+) (?P<suite>\S+) \S+' is not signed")
_UNREACHABLE = (("connection refused", "connection refused"), ("timed out", "timed out"),
                ("could not resolve", "unknown host"), ("temporary failure resolving", "unknown host"),
                ("no route to host", "no route to host"), ("network is unreachable", "network unreachable"),
                ("could not connect", "cannot connect"), ("unable to connect", "cannot connect"))


def apt_cause(lines: Sequence[str], mirrors: Sequence[AptMirror] = ()) -> str | None:
    """The cause of a failed apt step when a repository failed it; None when apt fetched everything."""
    reasons = _fetch_reasons(lines)
    for url, why in reasons:
        if "404" in why:
            return _not_found(url, mirrors)
    for url, why in reasons:
        short = next((said for needle, said in _UNREACHABLE if needle in why.lower()), None)
        if short is not None:
            return _unreachable(url, short, mirrors)
    for line in lines:
        found = _UNSIGNED.search(line) or _NOT_SIGNED.search(line)
        if found:
            key = _KEY.search(line)
            why = key.group(0) if key else "no key it trusts signed it"
            return f"apt cannot verify the signature of {found['url']} {found['suite']} ({why})"
    for line in lines:
        found = _NO_RELEASE.search(line)
        if found:
            return _not_found(found["url"], mirrors)
    return None


def _fetch_reasons(lines: Sequence[str]) -> list[tuple[str, str]]:
    """(URL, apt's reason) of every failed fetch: `Failed to fetch URL  WHY` and `Err:N URL ...` + its next line."""
    found: list[tuple[str, str]] = []
    for index, line in enumerate(lines):
        fetch = _FETCH.search(line)
        if fetch:
            found.append((fetch["url"], fetch["why"]))
            continue
        err = _ERR.match(line.strip())
        if err and index + 1 < len(lines) and lines[index + 1].startswith(" "):
            found.append((err["url"], lines[index + 1].strip()))
    return found


def mapping_of(url: str, mirrors: Sequence[AptMirror]) -> AptMirror | None:
    """The --apt-mirror whose URL `url` was fetched under, if any (the longest prefix)."""
    matching = [m for m in mirrors if url == m.prefix or url.startswith(m.prefix.rstrip("/") + "/")]
    return max(matching, key=lambda m: len(m.prefix)) if matching else None


def _unreachable(url: str, why: str, mirrors: Sequence[AptMirror]) -> str:
    parts = urlsplit(url)
    where = parts.netloc or url
    mirror = mapping_of(url, mirrors)
    if mirror is not None:
        return (f"apt cannot reach the mirror {where} ({why}): --apt-mirror {mirror.host}={mirror.prefix} points"
                " there; start that mirror or correct the mapping")
    return (f"apt cannot reach {where} ({why}): give the build a network (--network host) or an apt mirror it"
            f" reaches (--apt-mirror {parts.hostname or where}=URL)")


def _not_found(url: str, mirrors: Sequence[AptMirror]) -> str:
    """A 404, and through a mirror which part of the URL the mapping kept."""
    repository = url.split("/dists/", 1)[0]
    mirror = mapping_of(url, mirrors)
    if mirror is None:
        return f"apt got 404 Not Found from {repository}: no such repository there (a release moved to an archive?)"
    kept = repository[len(mirror.prefix.rstrip("/")):]
    said = (f"apt mirror 404 for {repository}: --apt-mirror keeps the path after the host"
            f" ({mirror.host}{kept} became {repository})")
    doubled = _doubled_segment(mirror.prefix, kept)
    if doubled:
        said += f"; did you mean {mirror.host}={mirror.prefix[: -len(doubled) - 1]}?"
    return said


def _doubled_segment(prefix: str, kept: str) -> str | None:
    """'debian' when the mirror URL ends in the path segment the kept path starts with (…/debian/debian)."""
    last = urlsplit(prefix).path.rstrip("/").rsplit("/", 1)[-1]
    first = kept.lstrip("/").split("/", 1)[0]
    return last if last and last == first else None
