"""The last smoke result of each image, kept in the state directory (`smoke/<image id>.json`).

An unchanged image whose smoke test already passed on this machine need not run it again; the
record is keyed by image ID, so a rebuilt image (a new ID) is always tested.
"""

from __future__ import annotations

import json

from accel_images.smoke.judge import SmokeResult
from accel_images.state import StateDir


def smoke_passed_before(state: StateDir, image_id: str | None) -> bool:
    """An unchanged image whose smoke already passed here need not run it again."""
    return last_smoke_pass(state, image_id) is not None


def last_smoke_pass(state: StateDir, image_id: str | None) -> dict[str, object] | None:
    """The recorded pass of this image (`ran_on`, `cpu_fallback`), so a skipped image can say where it
    passed; None when there is none."""
    try:
        record = json.loads(state.smoke_record(image_id).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("ok") is True else None  # `[]`, `null`: not a pass


def remember_smoke_pass(state: StateDir, image_id: str | None, result: SmokeResult) -> None:
    path = state.smoke_record(image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ok": result.ok, "ran_on": result.ran_on, "cpu_fallback": result.cpu_fallback}))
