"""The state directory (`.accel-images/` in the working directory, or `--state-dir`): every path below it.

Everything a run keeps between runs or leaves for a person to read lives here, and each path is
spelled in this module only:

    contexts/<vendor>/<tag>/            the build context of each variant (Dockerfile, smoke workload, wheels)
    logs/<vendor>/<tag>-<UTC time>.log  one log per build attempt, so a retry never hides the failure before it
    cache/digests.json                  file digests kept between runs (a no-op rebuild hashes nothing)
    smoke/<image id>.json               the last smoke result of an image, so an unchanged image is not re-tested
    reports/build-<UTC time>/           the reports of each `build`, never overwritten by the next
    reports/nightly-<UTC time>/         the reports of each `nightly` (two on one day apart)
    reports/build-latest, nightly-latest  links to the newest run's reports
    nightly.lock                        held by the running `nightly`

The pin lock file (`accel-images.lock`, see accel_images.pin) is not state: it belongs to the
project next to matrix.yaml and is meant to be committed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

DEFAULT_STATE_DIR = Path(".accel-images")
"""Relative to the working directory."""

_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class StateDir:
    """One state directory; its methods name the paths below it (nothing is created)."""

    root: Path

    @classmethod
    def at(cls, override: Path | str | None = None) -> StateDir:
        """The override when given, else `.accel-images/` in the working directory."""
        return cls(Path(override) if override is not None else Path.cwd() / DEFAULT_STATE_DIR)

    def context(self, vendor: str, tag: str) -> Path:
        """`contexts/<vendor>/<tag>/`: what the engine builds from."""
        return self.root / "contexts" / vendor / tag

    @property
    def contexts(self) -> Path:
        return self.root / "contexts"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log(self, vendor: str, tag: str, *, now: datetime | None = None) -> Path:
        """`logs/<vendor>/<tag>-<UTC timestamp>.log`, names made file-safe.

        The timestamp (to the millisecond) keeps every attempt's log.
        """
        moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        stamp = moment.strftime("%Y%m%dT%H%M%S") + f".{moment.microsecond // 1000:03d}Z"
        name = f"{_UNSAFE_IN_NAME.sub('_', tag)}-{stamp}.log"
        return self.logs / _UNSAFE_IN_NAME.sub("_", vendor) / name

    @property
    def digest_cache(self) -> Path:
        """`cache/digests.json` (accel_images.fingerprint)."""
        return self.root / "cache" / "digests.json"

    def smoke_record(self, image_id: str | None) -> Path:
        """`smoke/<image id>.json`, the ID's colon made file-safe."""
        return self.root / "smoke" / f"{(image_id or 'none').replace(':', '_')}.json"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

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
        return self.root / "nightly.lock"
