"""Each vendor's collective library as torch.distributed names it: what the N-node smoke test runs on.

Keyed by the vendor's smoke backend (Vendor.smoke_backend: the device its single-node workload reports), the
torch.distributed backend and the torch device type of its all-reduce
(https://docs.pytorch.org/docs/stable/distributed.html#backends). Here, inside vendors/, because it names
vendors: the smoke stage asks `collective(smoke_backend)` and branches on no vendor itself.
"""

from __future__ import annotations

from collections.abc import Mapping

CPU = ("gloo", "cpu")
"""gloo between CPU processes: what every image can run, and the fallback where the accelerator is absent."""
COLLECTIVES: Mapping[str, tuple[str, str]] = {
    "cpu": CPU,
    "cuda": ("nccl", "cuda"),
    "rocm": ("nccl", "cuda"),   # RCCL is `nccl` in a HIP build of torch, its GPUs `cuda` devices
    "xpu": ("xccl", "xpu"),     # torch >= 2.8; oneCCL underneath
    "hpu": ("hccl", "hpu"),     # registered by habana_frameworks.torch.distributed.hccl (allreduce.PLUGIN_MODULES)
}


def collective(smoke_backend: str) -> tuple[str, str] | None:
    """(backend, device type) of the vendor's collective; None where none is known for this smoke backend."""
    return COLLECTIVES.get(smoke_backend)


def accelerated(smoke_backend: str) -> bool:
    """Whether the vendor's collective runs on an accelerator (not gloo on the CPU)."""
    return COLLECTIVES.get(smoke_backend, CPU) != CPU
