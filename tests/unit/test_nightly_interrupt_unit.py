"""Ctrl-C and SIGTERM during `accel-images nightly`, and rebuilds for age that skip the layer cache.

The nightly runs as a subprocess (`python -m accel_images nightly`) against the shared engine and the
local registry, in a `test-<uuid>` namespace of its own (the `site` fixture of test_nightly.py),
on the tiny fixture template made slow where the signal is meant to land: a sleeping build step,
a sleeping smoke stub, or a manifest PUT held by a proxy in front of the registry. Afterwards the
registry is read over its HTTP API directly: a stopped run must leave every real tag where the
last good run put it (or absent when there was none), no candidate tag, no smoke container, a
partial report, and a lock the next nightly can take.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_nightly_interrupt.py.
"""

from __future__ import annotations

from pathlib import Path


from accel_images.builder.builder import Prepared
from accel_images.builder.fingerprint import FINGERPRINT_LABEL
from accel_images.publish.nightly import aged_only
from accel_images.registry import RemoteImage
from test_nightly import DEBIAN


# ---- --max-age: a rebuild for age fetches afresh ---------------------------------------------------

def test_only_an_unchanged_fingerprint_makes_a_rebuild_one_for_age() -> None:
    prepared = Prepared(variant=None, ref="x", context_dir=Path("."), args={},
                        fingerprint="sha256:same", base_digest="base@sha256:b")
    same = RemoteImage("team/img", DEBIAN, "sha256:d", {FINGERPRINT_LABEL: "sha256:same"}, None)
    other = RemoteImage("team/img", DEBIAN, "sha256:d", {FINGERPRINT_LABEL: "sha256:other"}, None)
    assert aged_only(same, prepared) is True
    assert aged_only(other, prepared) is False
    assert aged_only(None, prepared) is False
