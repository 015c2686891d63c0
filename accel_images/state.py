"""The state directory (`.accel-images/` in the working directory, or `--state-dir`): every path below it.

Everything a run keeps between runs or leaves for a person to read lives here, and each path is
spelled in this module only:

    contexts/<vendor>/<tag>/            the build context of each variant (Dockerfile, smoke workload, wheels)
    logs/<vendor>/<tag>-<UTC time>.log  one log per build attempt, so a retry never hides the failure before it
    cache/digests.json                  file digests kept between runs (a no-op rebuild hashes nothing)
    cache/wheels/<index>/               wheels fetched on the host, a directory per index (unless --cache-dir)
    smoke/<image id>.json               the last smoke result of an image, so an unchanged image is not re-tested
    builds/<fingerprint>.json           the interpreter's and torch's files the build found in the image it built
    builds/images/<image name>.json     which image a build made under which local name (what `run` may start)
    verified/<digest>.json              when a nightly rebuild last found a published image identical
    reports/build-<UTC time>/           the reports of each `build`, never overwritten by the next
    reports/nightly-<UTC time>/         the reports of each `nightly` (two on one day apart)
    reports/build-latest, nightly-latest  links to the newest run's reports
    nightly.lock                        held by the running `nightly`

The pin lock file (`accel-images.lock`, see accel_images.builder.pin) is not state: it belongs to the
project next to matrix.yaml and is meant to be committed.

Nothing below the root may be a symbolic link, except the tool's own `reports/<kind>-latest`
links, which it only ever replaces, never writes through. The tool deletes what it did not write inside a
context directory and writes wheels, logs and records below the root; through a link it would
do that to a directory elsewhere. Every path a method names is checked (`StateLinkError`), and
the commands check the whole tree before they write anything (`StateDir.refuse_links`). The
root itself may be a link: that is where the user chose to keep the state.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from accel_images.errors import InputError

DEFAULT_STATE_DIR = Path(".accel-images")
"""Relative to the working directory."""

_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class StateLinkError(InputError):
    """A symbolic link below the state directory's root: refused, never followed (exit 2)."""


def refuse_link_below(root: Path, path: Path) -> Path:
    """`path`, once no existing component of it below `root` (itself included) is a symbolic link.

    Components that do not exist yet are fine: the tool creates them as plain directories.
    """
    try:
        relative = path.relative_to(root)
    except ValueError:
        return path  # not below the root: not state (e.g. --report-dir)
    current = root
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise link_error(root, current)
        if not current.exists():
            break
    return path


def link_error(root: Path, link: Path) -> StateLinkError:
    try:
        points_to = f" (to {os.readlink(link)})"
    except OSError:
        points_to = ""
    return StateLinkError(f"a symbolic link{points_to} inside the state directory {root}; accel-images never "
                          "follows links out of its state directory", file=str(link),
                          hint="remove the link, or point --state-dir at the real directory")


@dataclass(frozen=True)
class StateDir:
    """One state directory; its methods name the paths below it (nothing is created).

    Each refuses (StateLinkError) a path that would pass through a symbolic link below the root.
    """

    root: Path

    @classmethod
    def at(cls, override: Path | str | None = None) -> StateDir:
        """The override when given, else `.accel-images/` in the working directory."""
        return cls(Path(override) if override is not None else Path.cwd() / DEFAULT_STATE_DIR)

    def context(self, vendor: str, tag: str) -> Path:
        """`contexts/<vendor>/<tag>/`: what the engine builds from."""
        return self._checked(self.root / "contexts" / vendor / tag)

    @property
    def contexts(self) -> Path:
        return self._checked(self.root / "contexts")

    @property
    def logs(self) -> Path:
        return self._checked(self.root / "logs")

    def log(self, vendor: str, tag: str, *, now: datetime | None = None) -> Path:
        """`logs/<vendor>/<tag>-<UTC timestamp>.log`, names made file-safe.

        The timestamp (to the millisecond) keeps every attempt's log.
        """
        moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        stamp = moment.strftime("%Y%m%dT%H%M%S") + f".{moment.microsecond // 1000:03d}Z"
        name = f"{_UNSAFE_IN_NAME.sub('_', tag)}-{stamp}.log"
        return self._checked(self.logs / _UNSAFE_IN_NAME.sub("_", vendor) / name)

    @property
    def digest_cache(self) -> Path:
        """`cache/digests.json` (accel_images.builder.fingerprint)."""
        return self._checked(self.root / "cache" / "digests.json")

    @property
    def wheel_cache(self) -> Path:
        """`cache/wheels/` (accel_images.builder.wheels): where runs keep the wheels they fetched, unless
        --cache-dir."""
        return self._checked(self.root / "cache" / "wheels")

    def smoke_record(self, image_id: str | None) -> Path:
        """`smoke/<image id>.json`, the ID's colon made file-safe."""
        return self._checked(self.root / "smoke" / f"{(image_id or 'none').replace(':', '_')}.json")

    def build_record(self, fingerprint: str) -> Path:
        """`builds/<fingerprint>.json` (accel_images.smoke.integrity), the name made file-safe."""
        return self._checked(self.root / "builds" / f"{_UNSAFE_IN_NAME.sub('_', fingerprint)}.json")

    def built_image(self, ref: str) -> Path:
        """`builds/images/<name>.json`: the image a build made under the local name `ref` (the name made
        file-safe; the record holds the name itself, so two names made alike are still told apart)."""
        return self._checked(self.root / "builds" / "images" / f"{_UNSAFE_IN_NAME.sub('_', ref)}.json")

    @property
    def built_images(self) -> Path:
        return self._checked(self.root / "builds" / "images")

    def verified(self, digest: str) -> Path:
        """`verified/<digest>.json` (accel_images.publish.nightly), the digest's colon made file-safe."""
        return self.root / "verified" / f"{_UNSAFE_IN_NAME.sub('_', digest)}.json"

    @property
    def reports(self) -> Path:
        return self._checked(self.root / "reports")

    def run_reports(self, kind: str, started: datetime) -> Path:
        """`reports/<kind>-<YYYYMMDDTHHMMSSZ>/`: one directory per run, so a later run (a no-op
        rebuild, a second nightly that day) never replaces the report a person still has to read."""
        stamp = started.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = self.reports / f"{kind}-{stamp}"
        n = 2
        while path.exists():
            path, n = self.reports / f"{kind}-{stamp}-{n}", n + 1
        return path

    def latest_reports(self, kind: str) -> Path:
        """`reports/<kind>-latest`: a link to the newest run's directory, a stable address to bookmark."""
        return self.reports / f"{kind}-latest"

    def link_latest(self, kind: str, target: Path) -> Path:
        """Point `<kind>-latest` at `target` (a sibling), replacing the old link atomically."""
        link = self.latest_reports(kind)
        temporary = link.with_name(f".{link.name}.tmp")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(target.name if target.parent == link.parent else target.resolve())
        temporary.replace(link)
        return link

    @property
    def nightly_lock(self) -> Path:
        """`nightly.lock`: one nightly at a time per state directory (accel_images.lock)."""
        return self._checked(self.root / "nightly.lock")

    def check(self) -> None:
        """Refuse, with one line (InputError, exit 2), a state directory a run could not use.

        Called by the commands before they talk to Docker or write anything: a symbolic link
        below the root (`refuse_links`), a file where a directory of the layout belongs (or a
        directory where the lock or the digest cache belongs), a root that cannot be created
        or written (a read-only mount). Without this they would fail half-way with an OSError.
        """
        self.refuse_links()
        for directory in (self.contexts, self.logs, self.reports, self.root / "cache", self.root / "smoke",
                          self.root / "builds"):
            if directory.exists() and not directory.is_dir():
                raise InputError("is a file where the state directory keeps a directory", file=str(directory),
                                 hint="remove it, or choose another --state-dir")
        for file in (self.nightly_lock, self.digest_cache):
            if file.exists() and not file.is_file():
                raise InputError("is not a plain file", file=str(file), hint="remove it, or choose another --state-dir")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.root, prefix=".write-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            raise InputError(f"the state directory cannot be written: {err.strerror}", file=str(self.root),
                             hint="make it writable, or choose another --state-dir") from None

    def refuse_links(self) -> None:
        """Raise StateLinkError for the first symbolic link anywhere below the root.

        The commands call this before they write anything, so a planted link stops the run
        with one line instead of failing a variant half-way. Links are not followed, so the
        walk stays inside the state directory.
        """
        if not self.root.is_dir():
            return
        for directory, dirs, files in os.walk(self.root, followlinks=False):
            for name in sorted(dirs + files):
                entry = Path(directory) / name
                if entry.is_symlink() and not self._latest_link(entry):
                    raise link_error(self.root, entry)

    def _latest_link(self, entry: Path) -> bool:
        """`reports/<kind>-latest` (or its temporary): the one link the tool makes itself (link_latest)."""
        name = entry.name.removeprefix(".").removesuffix(".tmp")
        return entry.parent == self.root / "reports" and name.endswith("-latest")

    def _checked(self, path: Path) -> Path:
        return refuse_link_below(self.root, path)
