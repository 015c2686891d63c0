"""CPU: torch from PyTorch's cpu wheel index on a plain OS base; runs on any host.

The Linux wheel on PyPI is a CUDA build, so the cpu index is always named
(https://pytorch.org/get-started/previous-versions/: `--index-url .../whl/cpu`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from accel_images.vendors.base import Fit, VendorBase
from accel_images.vendors.collective import GLOO

if TYPE_CHECKING:
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.hostinfo import HostInfo
    from accel_images.model.variant import Variant


class Cpu(VendorBase):
    """No accelerator: nothing to detect, no device options, fits every host."""

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        return Fit(variant, why="CPU image: runs on any host", exact_arch=True)


VENDOR = Cpu(
    name="cpu",
    title="CPU",
    stack_name="",
    smoke_backend="cpu",
    collective=GLOO,
    kb_file=Path(__file__).parent.parent / "data" / "vendors" / "cpu.yaml",
    accelerator=False,
    detect_rank=1000,
)
