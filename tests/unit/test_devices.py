"""The per-vendor device options table, against fake /dev and /sys trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from docker.types import DeviceRequest

from accel_images.vendors import BUILTIN as VENDORS, accelerator_present, device_options
from accel_images.model.devices import DeviceOptions, host_group_ids
from accel_images.errors import InputError


def touch(root: Path, absolute: str, gid: int | None = None, text: str = "") -> Path:
    path = root / absolute.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if gid is not None:
        os.chown(path, -1, gid)
    return path


@pytest.fixture
def two_gids() -> tuple[int, int]:
    """Two non-root group ids the test may chown files to (as root any id works)."""
    if os.geteuid() == 0:
        return 44, 109
    groups = sorted(gid for gid in os.getgroups() if gid != 0)
    if len(groups) < 2:
        pytest.skip("needs root or membership in two non-root groups to set file groups")
    return groups[0], groups[1]


def test_cpu_has_no_options():
    options = device_options("cpu")
    assert options.sdk_kwargs() == {}
    assert options.cli_flags() == []


def test_cuda_requests_all_gpus(tmp_path):
    options = device_options("cuda", tmp_path)
    assert options.cli_flags() == ["--gpus", "all"]
    kwargs = options.sdk_kwargs()
    assert list(kwargs) == ["device_requests"]
    (request,) = kwargs["device_requests"]
    assert isinstance(request, DeviceRequest)
    assert request["Count"] == -1
    assert request["Capabilities"] == [["gpu"]]


def test_rocm_devices_groups_ipc_and_seccomp(tmp_path, two_gids):
    video, render = two_gids
    touch(tmp_path, "/dev/kfd", gid=render)
    touch(tmp_path, "/dev/dri/card0", gid=video)
    touch(tmp_path, "/dev/dri/renderD128", gid=render)
    (tmp_path / "dev/dri/by-path").mkdir()
    options = device_options("rocm", tmp_path)
    assert options.group_add == (str(video), str(render))
    assert options.sdk_kwargs() == {
        "devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"],
        "group_add": [str(video), str(render)],
        "ipc_mode": "host",
        "security_opt": ["seccomp=unconfined"],
    }
    assert options.cli_flags() == [
        "--device", "/dev/kfd", "--device", "/dev/dri",
        "--group-add", str(video), "--group-add", str(render),
        "--ipc", "host", "--security-opt", "seccomp=unconfined",
    ]


def test_xpu_render_node_group(tmp_path, two_gids):
    _, render = two_gids
    touch(tmp_path, "/dev/dri/renderD128", gid=render)
    options = device_options("xpu", tmp_path)
    assert options.sdk_kwargs() == {"devices": ["/dev/dri:/dev/dri:rwm"], "group_add": [str(render)]}
    assert options.cli_flags() == ["--device", "/dev/dri", "--group-add", str(render)]


def test_root_group_and_missing_files_add_no_group(tmp_path):
    touch(tmp_path, "/dev/kfd", gid=0 if os.geteuid() == 0 else None)
    if os.stat(tmp_path / "dev/kfd").st_gid != 0:
        pytest.skip("cannot create a root-group file without root")
    assert device_options("rocm", tmp_path).group_add == ()
    assert host_group_ids(("/dev/nothing",), tmp_path) == ()


def test_gaudi_runtime_environment_capability_ipc(tmp_path):
    options = device_options("gaudi", tmp_path)
    assert options.sdk_kwargs() == {
        "runtime": "habana",
        "environment": {"HABANA_VISIBLE_DEVICES": "all",
                        "OMPI_MCA_btl_vader_single_copy_mechanism": "none"},
        "cap_add": ["SYS_NICE"],
        "ipc_mode": "host",
    }
    assert options.cli_flags() == [
        "--runtime", "habana",
        "-e", "HABANA_VISIBLE_DEVICES=all",
        "-e", "OMPI_MCA_btl_vader_single_copy_mechanism=none",
        "--cap-add", "SYS_NICE", "--ipc", "host",
    ]


@pytest.mark.parametrize("vendor", [v for v in VENDORS if v != "cpu"])
def test_every_accelerator_row_cites_an_https_source(vendor):
    options = device_options(vendor)
    assert options.sources and all(source.startswith("https://") for source in options.sources)


def test_options_are_frozen_values():
    options = device_options("gaudi")
    assert isinstance(options, DeviceOptions)
    assert hash(options) == hash(device_options("gaudi"))
    with pytest.raises(AttributeError):
        options.runtime = "runc"  # type: ignore[misc]


def test_unknown_vendor_is_an_input_error():
    with pytest.raises(InputError, match="unknown vendor 'tpu'"):
        device_options("tpu")
    with pytest.raises(InputError):
        accelerator_present("tpu")


def test_nothing_present_on_an_empty_host(tmp_path):
    assert not any(accelerator_present(vendor, tmp_path) for vendor in VENDORS)


@pytest.mark.parametrize("node", ["/dev/nvidiactl", "/dev/nvidia0"])
def test_cuda_present(tmp_path, node):
    touch(tmp_path, node)
    assert accelerator_present("cuda", tmp_path)
    assert not accelerator_present("rocm", tmp_path)


def test_rocm_present_needs_kfd(tmp_path):
    touch(tmp_path, "/dev/dri/renderD128")
    assert not accelerator_present("rocm", tmp_path)
    touch(tmp_path, "/dev/kfd")
    assert accelerator_present("rocm", tmp_path)


def test_xpu_present_needs_an_intel_render_node(tmp_path):
    touch(tmp_path, "/dev/dri/card0")
    assert not accelerator_present("xpu", tmp_path)
    touch(tmp_path, "/dev/dri/renderD128")
    assert accelerator_present("xpu", tmp_path)  # no sysfs to say otherwise
    touch(tmp_path, "/sys/class/drm/renderD128/device/vendor", text="0x1002\n")  # AMD
    assert not accelerator_present("xpu", tmp_path)
    touch(tmp_path, "/sys/class/drm/renderD128/device/vendor", text="0x8086\n")
    assert accelerator_present("xpu", tmp_path)


def test_gaudi_present_by_hl_node(tmp_path):
    touch(tmp_path, "/dev/hl_controlD0")
    assert not accelerator_present("gaudi", tmp_path)
    touch(tmp_path, "/dev/hl0")
    assert accelerator_present("gaudi", tmp_path)


def test_gaudi_present_by_accel_node_of_habana_pci_vendor(tmp_path):
    touch(tmp_path, "/dev/accel/accel0")
    touch(tmp_path, "/sys/class/accel/accel0/device/vendor", text="0x8086\n")  # an Intel NPU
    assert not accelerator_present("gaudi", tmp_path)
    touch(tmp_path, "/sys/class/accel/accel0/device/vendor", text="0x1da3\n")
    assert accelerator_present("gaudi", tmp_path)
