"""Credentials in a package index URL (`--pip-index-url https://user:token@host/simple`).

They must reach pip and nothing else: the renderer keeps them out of every Dockerfile it writes
and hands them to the build in a way the engine records nowhere (accel_images.render.contexts,
`CREDENTIALS_ARG`); whatever is shown or stored (a command line in a report, a rejected
`--pip-index-url`, `--registry`, `--registry-mirror` or `--apt-mirror` echoed in its error) masks
them here.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_USERINFO = re.compile(r"""(?:(?<=://)|(?<==)|(?<![^\s'"(]))[^/@\s'"=]+@""")
"""A URL's `user:password@`, also where no scheme comes first: a registry (`user:token@ghcr.io`), a mirror
mapping's value (`docker.io=user:token@mirror`). Never inside a path (`/simple/a@b`)."""


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


def hide_credentials(text: str) -> str:
    """`https://user:password@host/...` -> `https://***@host/...` (and `user:token@host` -> `***@host`), for
    anything shown or stored: a command line in a report, a rejected value echoed in an error."""
    return _USERINFO.sub("***@", text)
