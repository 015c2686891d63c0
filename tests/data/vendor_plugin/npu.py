"""A sixth vendor, defined entirely outside the package: proof that a vendor is one module, one
template and one knowledge-base section. "Example NPU" is fictional; its facts are made up for
the test and stand for nothing real."""

from __future__ import annotations

from pathlib import Path

from accel_images.model.devices import DeviceOptions, under
from accel_images.model.hostinfo import Gpu, HostInfo, host_from
from accel_images.vendors.base import VendorBase
from accel_images.vendors.collective import Collective

HERE = Path(__file__).parent


class ExampleNpu(VendorBase):
    def wheel_index(self, kb, stack):
        return f"npu{stack}"

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(vendor=self.name, devices=("/dev/exnpu0",), environment=(("EXNPU_VISIBLE", "all"),))

    def accelerator_present(self, dev_root: Path) -> bool:
        return under(dev_root, "/dev/exnpu0").exists()

    def probe(self, run, root: Path, notes: list[str]) -> HostInfo | None:
        if not under(root, "/dev/exnpu0").exists():
            notes.append("npu: no /dev/exnpu0")
            return None
        notes.append("npu: /dev/exnpu0 present")
        return host_from("npu", [Gpu("Example NPU 1", "exnpu-a")], stack_version="1.0")


COLLECTIVE = Collective("exccl", "npu", library="exccl", module="torch_exnpu.distributed")
"""The made-up collective its devices all-reduce through, registered by its made-up module: declared here,
beside its smoke backend, so the two-node smoke test runs it and the facts claims hold its images to it with
nothing outside this folder."""

GUARD = '''check_vendor() {
    if [ ! -e "$dev/exnpu0" ]; then
        missing "no /dev/exnpu0: run with --device /dev/exnpu0"
    fi
}
'''

VENDOR = ExampleNpu(
    name="npu",
    title="Example NPU",
    stack_name="NPU SDK",
    smoke_backend="npu",
    collective=COLLECTIVE,
    kb_file=HERE / "npu.yaml",
    runner_labels=("self-hosted", "linux", "x64", "example-npu"),
    detect_rank=5,
    template_dir=HERE / "templates",
    guard_check=GUARD,
)
