"""The ROCm part of the in-image guard: `check_vendor` and its helpers, the shell in guard.sh.

accel_images/smoke/guard.sh calls `check_vendor`; render puts this text in its place
(render/contexts.py). The shell applies `RocmHost.fit`'s rules (host.py) to what the image's
environment says (image.py `image_env`): every GPU's gfx target has kernels in the image, and the
host's amdgpu kernel driver is one AMD's support matrix supports the image's ROCm on (the window
knowledge.driver_window computes). References, in the shell beside each rule: ROCR-Runtime
libhsakmt/src/topology.c (HSA_OVERRIDE_GFX_VERSION), the kernel's kfd_topology.c and
libhsakmt.h (gfx_target_version), AMD's run_kfdtest.sh (the target's name).
"""

from __future__ import annotations

from pathlib import Path

SOURCE = Path(__file__).with_name("guard.sh")

GUARD = SOURCE.read_text(encoding="utf-8")
