"""The CUDA part of the in-image guard: `check_vendor` and its helpers, the shell in guard.sh.

accel_images/smoke/guard.sh calls `check_vendor`; render puts this text in its place
(render/contexts.py). guard.sh is the shell as written, with four marks filled in here from the
Python side, so the guard and `recommend` share one wording and one table: @COMPAT_LOADED@ and
@WAYS_OUT@ (decision.py's messages), @CONSUMER@ (decision.CONSUMER_BRANDS) and @JETSON_CASES@
(detect.JETSON_GPU_CC). The shell's rule is `decision.decide`'s; its references:
- the driver under /usr/local/nvidia on GKE: GoogleCloudPlatform/container-engine-accelerators
  cmd/nvidia_gpu/nvidia_gpu.go (-container-path /usr/local/nvidia)
- the compat libcuda the container toolkit loads: NVIDIA/nvidia-container-toolkit
  cmd/nvidia-cdi-hook/cudacompat/cudacompat.go (#1426, fixed by #1784)
"""

from __future__ import annotations

from pathlib import Path

from accel_images.vendors.cuda.decision import COMPAT_LOADED, CONSUMER_BRANDS, WAYS_OUT
from accel_images.vendors.cuda.detect import JETSON_GPU_CC

SOURCE = Path(__file__).with_name("guard.sh")


def guard_check(source: str) -> str:
    """The shell `check_vendor` for the guard: `source` (guard.sh's text) with its marks filled in."""
    text = source.replace("@COMPAT_LOADED@", COMPAT_LOADED).replace("@WAYS_OUT@", WAYS_OUT.replace('"', '\\"'))
    return text.replace("@CONSUMER@", "|".join(brand.lower() for brand in CONSUMER_BRANDS)).replace(
        "@JETSON_CASES@", "\n            ".join(f'{model}) capabilities="$capabilities {cc}" ;;'
                                              for model, cc in JETSON_GPU_CC.items()))


GUARD = guard_check(SOURCE.read_text(encoding="utf-8"))
