"""Three nightly runs over the project's own matrix, as the report sees them: the screenshots under
docs/report/ are rendered from these, and tests/unit/test_report_morning.py checks the same pages.

Records have the shape accel_images.publish.nightly.nightly_record writes; every value is derived from
the variant, so the pages are the same on every machine and every day.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from accel_images import resources
from accel_images.kb import compat
from accel_images.plan.matrix import load_matrix
from accel_images.report.reports import compare
from accel_images.model.variant import Variant
from accel_images.plan.variants import expand

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = "registry.example.com/ml"
TODAY = datetime(2026, 12, 3, 2, 0, tzinfo=timezone.utc)
YESTERDAY = TODAY - timedelta(days=1)
NEW_FAILURE = ("step 7/24 (pip install) failed: ERROR: No matching distribution found for torch==2.14.1 "
               "(from the rocm7.14 index: it has 2.14.0+rocm7.14)")
SHARED_CAUSE = ("step 4/24 (apt-get install) failed: apt cannot reach archive.ubuntu.com (connection refused):"
                " give the build a network (--network host) or an apt mirror it reaches"
                " (--apt-mirror archive.ubuntu.com=URL)")


def variants() -> tuple[Variant, ...]:
    """The matrix's linux/amd64 images: the pages (and the screenshots beside them) show one row per
    image, and these runs are about what happens to variants, not about platforms."""
    matrix = resources.default_matrix() if os.environ.get(resources.MATRIX_ENV) else ROOT / "matrix.yaml"
    return tuple(v for v in expand(load_matrix(matrix), compat.load_kb()).variants
                 if v.platform == "linux/amd64")


def digest(tag: str, day: datetime) -> str:
    return "sha256:" + hashlib.sha256(f"{tag}@{day:%Y%m%d}".encode()).hexdigest()


def green(v: Variant, day: datetime, rebuilt: bool) -> dict[str, Any]:
    """A variant that passed: rebuilt (its base moved) or skipped (unchanged)."""
    ref = f"{REGISTRY}/accel-images/pytorch:{v.tag}"
    size = 2_100_000_000 + 700_000_000 * (v.vendor != "cpu") + 6_000_000_000 * (v.flavor == "devel")
    record: dict[str, Any] = {
        "variant": v.key, "vendor": v.vendor, "tag": v.tag, "torch": v.torch, "stack": v.stack,
        "python": v.python, "os": v.os, "flavor": v.flavor, "image": ref, "size": size, "error": None,
        "log": f"/srv/ci/.accel-images/logs/{v.key}-{day:%Y%m%d}T0200Z.log", "registry": REGISTRY.split("/")[0],
        "full_ref": ref, "digest": digest(v.tag, day if rebuilt else YESTERDAY - timedelta(days=3))}
    if rebuilt:
        record.update(status="built", build_s=300.0 + 60 * len(v.tag) % 900, reason=f"base image changed"
                      f" (sha256:{hashlib.sha256(v.base_image.encode()).hexdigest()[:12]} -> sha256:"
                      f"{hashlib.sha256(v.base_image.encode() + b'new').hexdigest()[:12]})",
                      smoke={"ok": True, "ran_on": "cpu", "cpu_fallback": v.vendor != "cpu", "failures": [],
                             "checks": [{"name": "matmul_float32", "ok": True, "ms": 5.1, "detail": ""},
                                        {"name": "mlp_training", "ok": True, "ms": 8.4, "detail": ""}]},
                      pushed_tags=[ref, f"{ref}-{day:%Y%m%d}"], packages=f"attestations/{v.tag}/packages.html")
    else:
        record.update(status="skipped", build_s=None, reason=f"unchanged since {day - timedelta(days=4):%Y-%m-%d}",
                      smoke=None, smoke_earlier=f"in the run of {day - timedelta(days=4):%Y-%m-%d}", pushed_tags=[])
    return record


def failed(v: Variant, day: datetime, cause: str) -> dict[str, Any]:
    record = green(v, day, rebuilt=True)
    record.update(status="failed", error=cause, smoke=None, pushed_tags=[], digest=None, packages=None,
                  reason="template, build context or build args changed")
    return record


def run(day: datetime, failing: Callable[[Variant], str | None]) -> list[dict[str, Any]]:
    """One night: CPU and CUDA rebuilt (their bases moved), the rest unchanged, `failing` says who failed."""
    records = []
    for v in variants():
        cause = failing(v)
        records.append(failed(v, day, cause) if cause else green(v, day, rebuilt=v.vendor in ("cpu", "cuda")))
    return records


def meta(day: datetime) -> dict[str, Any]:
    return {"kind": "nightly", "started": day, "finished": day + timedelta(minutes=94), "host": "ci-runner-7",
            "registry": f"{REGISTRY}/accel-images/pytorch", "command": f"accel-images nightly --registry {REGISTRY}"}


def previous(records: list[dict[str, Any]], day: datetime) -> dict[str, Any]:
    """The previous night's report.json, as read_previous would return it."""
    return {"meta": {"started": day.isoformat(timespec="seconds")}, "variants": records}


def all_green() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    before = run(YESTERDAY, lambda v: None)
    now = run(TODAY, lambda v: None)
    return now, {**meta(TODAY), "changes": compare(now, previous(before, YESTERDAY))}


def one_new_failure() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    target = next(v for v in variants() if v.vendor == "rocm" and v.flavor == "runtime")
    before = run(YESTERDAY, lambda v: None)
    now = run(TODAY, lambda v: NEW_FAILURE if v == target else None)
    return now, {**meta(TODAY), "changes": compare(now, previous(before, YESTERDAY))}


def shared_cause(count: int = 36) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`count` variants failing for one cause (the Ubuntu archive out of reach), still failing since yesterday."""
    chosen = {v for v in variants() if v.os.startswith("ubuntu")}
    chosen = set(sorted(chosen, key=lambda v: v.key)[:count])
    assert len(chosen) == count, f"the matrix has {len(chosen)} Ubuntu variants, fewer than {count}"
    before = run(YESTERDAY, lambda v: SHARED_CAUSE if v in chosen else None)
    older = run(YESTERDAY - timedelta(days=1), lambda v: None)
    yesterday = {**previous(before, YESTERDAY),
                 "changes": compare(before, previous(older, YESTERDAY - timedelta(days=1))).record()}
    now = run(TODAY, lambda v: SHARED_CAUSE if v in chosen else None)
    return now, {**meta(TODAY), "changes": compare(now, yesterday)}


SCENARIOS = {"all-green": all_green, "one-new-failure": one_new_failure, "36-fail-one-cause": shared_cause}
