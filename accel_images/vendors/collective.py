"""The collective library a vendor's devices all-reduce through: a value each vendor declares.

Its own module, apart from the vendor protocol (accel_images/vendors/base.py), because the N-node smoke test
and the facts claims read it without the rest of a vendor, and a sixth vendor imports it to declare its own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Collective:
    """The collective library a vendor's devices all-reduce through, as torch.distributed and the image name it.

    Data on the vendor (`Vendor.collective`, beside `smoke_backend`) so that the N-node smoke test
    (accel_images/smoke/nodes.py) and the facts claims (accel_images/kb/claims.py) ask the vendor and a new
    vendor declares its own in its own module. torch.distributed's backends:
    https://docs.pytorch.org/docs/stable/distributed.html#backends
    """

    backend: str
    """torch.distributed's name for it (`init_process_group(backend=...)`): 'nccl', 'xccl', 'hccl', 'gloo'."""
    device: str
    """The torch device type its tensors live on: 'cuda', 'xpu', 'hpu', 'cpu'."""
    library: str
    """The library the image's facts name (facts.json `network.collective.name`, accel_images/smoke/facts.py
    COLLECTIVES); not always the backend's name: ROCm's RCCL answers to 'nccl'."""
    module: str = ""
    """The module that registers the backend with torch.distributed when torch does not ship it (Gaudi's
    habana_frameworks.torch.distributed.hccl); the in-image all-reduce (accel_images/smoke/allreduce.py
    `--import`) imports it first. '': torch ships the backend."""

    @property
    def accelerated(self) -> bool:
        """Whether it computes on an accelerator, not on the CPU (gloo)."""
        return self.device != GLOO.device


GLOO = Collective("gloo", "cpu", library="gloo")
"""gloo between CPU processes: what every image can run, the CPU vendor's own, and the fallback wherever the
vendor's accelerator is absent or the vendor declares no collective."""
