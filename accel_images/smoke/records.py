"""What the state directory keeps about smoke tests.

`smoke/<image id>.json`: the last smoke result of each image. An unchanged image whose smoke
test already passed on this machine need not run it again; the record is keyed by image ID, so
a rebuilt image (a new ID) is always tested.

`builds/<fingerprint>.json`: the image a build made (its ID and layers) and the files the build
found in it (accel_images.smoke.integrity), keyed by the fingerprint label, which an image derived
from it or copying its labels carries too: such an image must hold the same files to pass its smoke
test, and only the recorded image itself counts as built here (built_here).

`builds/images/<name>.json`: the local name each build gave its image, with the image's ID and
fingerprint (remember_image): how `run`, `pull`, `recommend` and `devcontainer` know an image this
tool built here, the one image they may name without a registry (accel_images.host.sources).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

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
    nodes = result.nodes.nodes if result.nodes is not None and result.nodes.ok else None
    path.write_text(json.dumps({"ok": result.ok, "ran_on": result.ran_on, "cpu_fallback": result.cpu_fallback,
                                "facts": result.facts.compact() if result.facts is not None else None,
                                "nodes": nodes}))


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


@dataclass(frozen=True)
class BuiltImage:
    """An image a build of this state directory made, under its local name."""

    ref: str
    image_id: str
    fingerprint: str


def remember_image(state: StateDir, ref: str, image_id: str, fingerprint: str) -> None:
    """Record that the build of `fingerprint` made `image_id` under the local name `ref`; atomically, as
    remember_build (a half-written record would read as no build)."""
    path = state.built_image(ref)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps({"image": ref, "image_id": image_id, "fingerprint": fingerprint}, sort_keys=True))
    os.replace(partial, path)


def built_images(state: StateDir) -> dict[str, BuiltImage]:
    """Every image recorded as built here, by local name; an unreadable or foreign record counts as none."""
    found: dict[str, BuiltImage] = {}
    try:
        paths = sorted(state.built_images.glob("*.json"))
    except OSError:
        return found
    for path in paths:
        image = _built_image(path)
        if image is not None and state.built_image(image.ref) == path:
            found[image.ref] = image
    return found


def _built_image(path: Path) -> BuiltImage | None:
    """One record of remember_image; None for anything else."""
    try:
        value = untrusted.loads(untrusted.read_limited(path, 64 * 1024))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value.get(k)
                                              for k in ("image", "image_id", "fingerprint")):
        return None
    return BuiltImage(value["image"], value["image_id"], value["fingerprint"])


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
