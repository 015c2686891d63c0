"""Intel Gaudi: Intel's pytorch-installer images, whose own torch build is never replaced; the
habana container runtime; container software must match the host driver.

`VENDOR` is the one object the rest of the package asks (vendors/__init__.py registers it). Its
class is put together from one module per concern, each over the one below it:
- knowledge.py: the releases of data/vendors/gaudi.yaml (`GaudiRelease`) and what follows from them
  (which combinations work, how a variant resolves);
- image.py: what an image holds: the guard's environment, the claims its facts.json is checked against;
- host.py: the device flags, session settings, and whether an image fits a host (`fit`), by
- decision.py: the software-match rule the guard and `recommend` share, and
- detect.py: reading the host (hl-smi) and each device's generation;
- guard.py, guard.sh: the shell `check_vendor` the in-image guard gets.

References (each module lists those its own rules follow):
- releases, bundled torch, OS/Python: https://docs.habana.ai/en/latest/Support_Matrix/Support_Matrix.html
- images and `docker run --runtime=habana -e HABANA_VISIBLE_DEVICES=all ... --cap-add=sys_nice
  --ipc=host`: https://docs.habana.ai/en/latest/shared/Pull_Prebuilt_Containers.html
- N-1 compatibility on Gaudi 2 from 1.17 (compat-facts §6.1, §8.19): "Added software backward/forward
  compatibility support for Gaudi 2, allowing users to run 1.16 dockers with Intel Gaudi software version
  1.17.0" (GAUDI_BACKWARD_DOCS); patch releases: `_behind`
"""

from __future__ import annotations

from pathlib import Path

from accel_images.vendors.collective import Collective
from accel_images.vendors.gaudi.decision import GAUDI_BACKWARD_DOCS, N_MINUS_1_SINCE, OLDER_ON_GAUDI2
from accel_images.vendors.gaudi.detect import GAUDI2, GENERATIONS, generation, parse_hl_smi_query, parse_hl_smi_table
from accel_images.vendors.gaudi.guard import GUARD
from accel_images.vendors.gaudi.host import (GAUDI_DOCKER_DOCS, GAUDI_DOCS, GAUDI_K8S_DOCS, HABANA_PCI_VENDOR,
                                             RDMA_MEMLOCK_DOCS, GaudiHost)
from accel_images.vendors.gaudi.image import GaudiImage
from accel_images.vendors.gaudi.knowledge import GaudiKnowledge, GaudiRelease

__all__ = ["COLLECTIVE", "GAUDI2", "GAUDI_BACKWARD_DOCS", "GAUDI_DOCKER_DOCS", "GAUDI_DOCS", "GAUDI_K8S_DOCS",
           "GENERATIONS", "GUARD", "HABANA_PCI_VENDOR", "N_MINUS_1_SINCE", "OLDER_ON_GAUDI2", "RDMA_MEMLOCK_DOCS",
           "VENDOR", "Gaudi", "GaudiRelease", "generation", "parse_hl_smi_query", "parse_hl_smi_table"]


COLLECTIVE = Collective("hccl", "hpu", library="hccl", module="habana_frameworks.torch.distributed.hccl")
"""`hccl`, registered by importing habana_frameworks.torch.distributed.hccl first:
https://docs.habana.ai/en/v1.11.0/PyTorch/PyTorch_Model_Porting/Distributed_Training.html"""


class Gaudi(GaudiHost, GaudiImage, GaudiKnowledge):
    """The Intel Gaudi vendor: its knowledge, image and host layers in one object (see the module docstring)."""


VENDOR = Gaudi(
    name="gaudi",
    title="Intel Gaudi",
    stack_name="Intel Gaudi",
    smoke_backend="hpu",
    collective=COLLECTIVE,
    kb_file=Path(__file__).parent.parent.parent / "data" / "vendors" / "gaudi.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gaudi"),
    detect_rank=40,
    guard_check=GUARD,
    sources=(GAUDI_DOCS,),
)
