"""The Intel Gaudi part of the in-image guard: `check_vendor` and its helpers, the shell in guard.sh.

accel_images/smoke/guard.sh calls `check_vendor`; render puts this text in its place
(render/contexts.py). guard.sh is the shell as written, with one mark filled in here from the
Python side, so the guard and `recommend` give one reason: @OLDER_ON_GAUDI2@ (decision.py's
message). The shell's `admits` and `behind_host` are host.py `fit`'s and decision.py `_behind`'s
rule; references, in the shell beside each rule: docs.habana.ai Release Notes v1.17, the System
Management Interface guide (hl-smi -Q), HabanaAI/habana-container-runtime (devPrefixes),
opendatahub-io/opendatahub-tests#2301 (HABANA_LOGS), Apptainer's bind paths, NVIDIA/enroot and
NVIDIA/pyxis (read-only roots).
"""

from __future__ import annotations

from pathlib import Path

from accel_images.vendors.gaudi.decision import OLDER_ON_GAUDI2

SOURCE = Path(__file__).with_name("guard.sh")


def guard_check(source: str) -> str:
    """The shell `check_vendor` for the guard: `source` (guard.sh's text) with its mark filled in."""
    return source.replace("@OLDER_ON_GAUDI2@", OLDER_ON_GAUDI2)


GUARD = guard_check(SOURCE.read_text(encoding="utf-8"))
