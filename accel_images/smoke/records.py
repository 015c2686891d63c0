"""What the state directory keeps about smoke tests.

`smoke/<image id>.json`: the last smoke result of each image. An unchanged image whose smoke
test already passed on this machine need not run it again; the record is keyed by image ID, so
a rebuilt image (a new ID) is always tested.

`builds/<fingerprint>.json`: the image a build made (its ID and layers) and the files the build
found in it (accel_images.smoke.integrity), keyed by the fingerprint label, which an image derived
from it or copying its labels carries too: such an image must hold the same files to pass its smoke
test, and only the recorded image itself counts as built here (built_here).
"""

from __future__ import annotations

import json
import os

from accel_images import untrusted
from accel_images.smoke.integrity import Inventory, Recorded, parse_record
from accel_images.smoke.judge import SmokeResult
from accel_images.state import StateDir


def smoke_passed_before(state: StateDir, image_id: str | None) -> bool:
    """An unchanged image whose smoke already passed here need not run it again."""
    return last_smoke_pass(state, image_id) is not None


def last_smoke_pass(state: StateDir, image_id: str | None) -> dict[str, object] | None:
    """The recorded pass of this image (`ran_on`, `cpu_fallback`), so a skipped image can say where it
    passed; None when there is none."""
    try:
        record = untrusted.loads(state.smoke_record(image_id).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("ok") is True else None  # `[]`, `null`: not a pass


def remember_smoke_pass(state: StateDir, image_id: str | None, result: SmokeResult) -> None:
    path = state.smoke_record(image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ok": result.ok, "ran_on": result.ran_on, "cpu_fallback": result.cpu_fallback,
                                "facts": result.facts.compact() if result.facts is not None else None}))


def remember_build(state: StateDir, fingerprint: str, image_id: str, inventory: Inventory,
                   layers: tuple[str, ...] = ()) -> None:
    """Keep what the build found in the image it just built (its ID, layers and files), for the smoke
    runs of that fingerprint and for the nightly's choice of a local build to publish (built_here).

    Written atomically: a record half-written by a killed run would otherwise read as "no record".
    """
    path = state.build_record(fingerprint)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(inventory.record(image_id, layers), sort_keys=True))
    os.replace(partial, path)


def built_here(state: StateDir, fingerprint: str | None, image_id: str, layers: tuple[str, ...]) -> bool:
    """Whether this state directory recorded building exactly this image: the record of its fingerprint
    names its image ID and its every layer. A copied label, an image derived from the build, or another
    user's build of the same name on a shared engine is not it."""
    recorded = recorded_build(state, fingerprint)
    return recorded is not None and recorded.image_id == image_id and bool(layers) and recorded.layers == layers


def recorded_build(state: StateDir, fingerprint: str | None) -> Recorded | None:
    """What the build of `fingerprint` recorded here, or None (never built here, or an unreadable record)."""
    if not fingerprint:
        return None
    try:
        return parse_record(state.build_record(fingerprint).read_text())
    except OSError:
        return None
