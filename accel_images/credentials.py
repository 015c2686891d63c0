"""Credentials in a package index URL (`--pip-index-url https://user:token@host/simple`).

They must reach pip and nothing else: the renderer keeps them out of every Dockerfile it writes
and hands them to the build in a way the engine records nowhere (accel_images.render.contexts,
`CREDENTIALS_ARG`); whatever is shown or stored (a command line in a report, a rejected
`--pip-index-url`, `--registry`, `--registry-mirror` or `--apt-mirror` echoed in its error, a build
log line) masks them here.

Masking errs on the side of hiding: a password may hold anything a shell passes (`==` at the end of a
token, `@`, `'`, a `/` nobody percent-encoded), so the userinfo is everything up to the *last* `@`
that can end it, not a run of the characters a well-formed URL allows.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***@"

_SCHEME_RUN = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)"
                         r"(?P<run>(?:(?![A-Za-z][A-Za-z0-9+.-]*://)\S)*)")
"""A URL's scheme and what follows it up to the next whitespace (or the next URL run into it)."""
_BARE_RUN = re.compile(r"""(?<![^\s'"(])(?!\S*://)(?P<key>[\w.-]+=)?(?P<run>[^\s'"(=@]\S*)""")
"""A word with no scheme in it, where `user:token@host` may stand: a registry (`user:token@ghcr.io`), a
mirror mapping's value (`docker.io=user:token@mirror`, the `KEY=` apart)."""
_DIGEST_AFTER = ("sha256:", "sha512:")
_HOST_ENDS = "/?#"


def index_credentials(url: str | None) -> str | None:
    """The `user:password` of an index URL, or None."""
    if not url:
        return None
    userinfo, at, _ = urlsplit(url).netloc.rpartition("@")
    return userinfo if at and userinfo else None


def without_credentials(url: str) -> str:
    """The URL with its `user:password@` left out: what may be shown or recorded of an index."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def shown_userinfo(url: str) -> str | None:
    """What masking takes for the URL's userinfo (hide_credentials), or None when it sees none.

    It differs from index_credentials (what pip and urllib read) only where the password holds a
    '/', '?' or '#' that nobody percent-encoded: a URL that puts the password where its host belongs.
    """
    found = _SCHEME_RUN.match(url)
    if found is None:
        return None
    end = userinfo_end(found["run"])
    return found["run"][:end] if end >= 0 else None


def userinfo_end(run: str) -> int:
    """The index of the `@` that ends the userinfo in `run` (what follows `scheme://`), or -1 for none.

    The last `@` wins (a password may hold one), unless a '/', '?' or '#' comes before it with no ':'
    in front of that: then the `@` is in the path (`https://host/simple/a@b`). With a ':' before it
    (`https://user:pa/ss@host`, also `https://host:8080/a@b`) it is taken as a password's, so hidden.
    """
    for at in reversed([index for index, char in enumerate(run) if char == "@"]):
        if run.startswith(_DIGEST_AFTER, at + 1):
            continue
        head = run[:at]
        cut = min((head.index(char) for char in _HOST_ENDS if char in head), default=-1)
        if cut < 0 or ":" in head[:cut]:
            return at
    return -1


def hide_credentials(text: str) -> str:
    """`https://user:password@host/...` -> `https://***@host/...` (and `user:token@host` -> `***@host`), for
    anything shown or stored: a command line in a report, a rejected value echoed in an error, a log line."""
    return _BARE_RUN.sub(_masked_bare, _SCHEME_RUN.sub(_masked_url, text))


def _masked_url(found: re.Match[str]) -> str:
    """One URL's run with its userinfo masked."""
    run = found["run"]
    end = userinfo_end(run)
    return found["scheme"] + (MASK + run[end + 1:] if end >= 0 else run)


def _masked_bare(found: re.Match[str]) -> str:
    """A scheme-less word with its `user:token@` masked. A `KEY=` in front stays when it names something
    (a host: `docker.io=`) or the rest is `user:password`; else the `=` may be a token's own, and goes too."""
    run = found["run"]
    end = userinfo_end(run)
    if end < 0:
        return found[0]
    key = found["key"] or ""
    if key and "." not in key and ":" not in run[:end]:
        key = ""
    return key + MASK + run[end + 1:]
