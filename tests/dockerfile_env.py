"""The ACCEL_IMAGES_* environment a rendered image sets, read from its Dockerfile, per platform.

A tag built for several platforms renders one Dockerfile whose shared stage (`image`) sets what every
platform has, and one stage per platform (`FROM image AS image-<arch>`, the last stage picking it by
TARGETARCH) sets that platform's own values: its compiled architectures, the sibling images its
refusals may name, the GPUs it does not serve. An image of one platform holds the shared values and
its own stage's, never another platform's; a single-platform Dockerfile has no such stages.
"""

from __future__ import annotations

import re
from pathlib import Path

from accel_images.model import platforms

ROOT = Path(__file__).resolve().parents[1]
_ENV = re.compile(r'(ACCEL_IMAGES_[A-Z_]+)="([^"]*)"')


def rendered_env(vendor: str, tag: str, platform: str = platforms.DEFAULT) -> dict[str, str]:
    """What the image `tag` of `platform` sets (ACCEL_IMAGES_VENDOR left out: the guard's caller names
    the vendor): the stages every platform shares and its own, not the other platforms'."""
    arch = platforms.architecture(platform)
    stages = re.split(r"\n(?=FROM )", (ROOT / "images" / vendor / tag / "Dockerfile").read_text())
    text = "\n".join(stage for stage in stages if not re.match(rf"FROM \S+ AS image-(?!{arch}\b)", stage))
    env = dict(_ENV.findall(text))
    env.pop("ACCEL_IMAGES_VENDOR", None)
    return env
