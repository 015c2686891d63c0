"""The guard's line on the fabric between nodes (accel_images/smoke/guard.sh, check_fabric), over fake hosts.

An image whose facts say it carries the RDMA verbs library says at start whether RDMA devices are visible
and usable: the kernel's devices under /sys/class/infiniband, the /dev/infiniband/uverbsN nodes `docker run`
passes with --device /dev/infiniband, and the locked-memory limit (/proc/self/limits) that --ulimit
memlock=-1 lifts. ACCEL_IMAGES_REQUIRE_RDMA=1 refuses a host where NCCL would fall back to TCP.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from test_guard import GUARD_EXIT, Host, assert_ran, assert_refused, host  # noqa: F401 (fixture)
from test_guard_hosts import H100, RUNTIME_132, facts_file, image_env, nvidia

NETWORK = {"ibverbs": "1.14.44.0", "ucx": "1.13.1", "mpi": "Open MPI 4.1.4",
           "collective": {"name": "nccl", "version": "2.30.7"}}
NO_NETWORK = {"ibverbs": None, "ucx": None, "mpi": None, "collective": {"name": "gloo", "version": None}}
UNLIMITED = "unlimited"
DOCKER_DEFAULT = "8388608"   # 8 MB, the engine's default soft limit of locked memory


@pytest.fixture
def fabric_host(host: Host) -> Host:
    """An H100 host on a driver above the image's toolkit driver, with the image's python on PATH (the guard reads facts.json with it)."""
    (host.bin / "python3").symlink_to(sys.executable)
    nvidia(host, f"610.43.02|9.0|{H100}")
    return host


def limits(host: Host, memlock: str) -> None:
    path = host.dev_root / "proc" / "self" / "limits"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("Limit                     Soft Limit           Hard Limit           Units     \n"
                    "Max open files            1048576              1048576              files     \n"
                    f"Max locked memory         {memlock:<20} {memlock:<20} bytes     \n")


def hcas(host: Host, *names: str) -> None:
    for name in names:
        (host.dev_root / "sys" / "class" / "infiniband" / name).mkdir(parents=True)


def start(host: Host, network: object = NETWORK, **env: str) -> subprocess.CompletedProcess[str]:
    facts = facts_file(host.bin.parent, network=network)
    return host.run("cuda", **image_env(RUNTIME_132) | {"ACCEL_IMAGES_FACTS": str(facts)} | env)


def network_line(stderr: str) -> str:
    [line] = [line for line in stderr.splitlines() if "network" in line]
    return line


def test_a_passed_fabric_is_said_usable_with_its_devices(fabric_host: Host) -> None:
    hcas(fabric_host, "mlx5_0", "mlx5_1")
    fabric_host.device("infiniband/uverbs0")
    fabric_host.device("infiniband/uverbs1")
    limits(fabric_host, UNLIMITED)
    result = start(fabric_host)
    assert_ran(result)
    assert network_line(result.stderr) == ("accel-images: network: RDMA devices mlx5_0 mlx5_1 usable"
                                           " (2 verbs nodes, locked memory unlimited)")


def test_no_fabric_is_one_note_that_the_collectives_go_over_tcp(fabric_host: Host) -> None:
    result = start(fabric_host)
    assert_ran(result)
    line = network_line(result.stderr)
    assert line.startswith("accel-images: note: network: no RDMA device visible (/sys/class/infiniband lists none)")
    assert "nccl between nodes uses TCP sockets" in line


def test_devices_on_the_host_but_not_passed_name_the_device_flag(fabric_host: Host) -> None:
    hcas(fabric_host, "mlx5_0")
    limits(fabric_host, UNLIMITED)
    line = network_line(start(fabric_host).stderr)
    assert "RDMA devices mlx5_0 on the host, but no /dev/infiniband/uverbs* here" in line
    assert "--device /dev/infiniband" in line


def test_a_locked_memory_limit_names_the_ulimit_flag(fabric_host: Host) -> None:
    hcas(fabric_host, "mlx5_0")
    fabric_host.device("infiniband/uverbs0")
    limits(fabric_host, DOCKER_DEFAULT)
    line = network_line(start(fabric_host).stderr)
    assert "locked memory is limited to 8192 KB: run with --ulimit memlock=-1" in line


@pytest.mark.parametrize("setup", ["none", "not-passed", "memlock"])
def test_a_job_that_requires_rdma_is_refused_where_nccl_would_use_tcp(fabric_host: Host, setup: str) -> None:
    if setup != "none":
        hcas(fabric_host, "mlx5_0")
    if setup == "memlock":
        fabric_host.device("infiniband/uverbs0")
    limits(fabric_host, DOCKER_DEFAULT if setup == "memlock" else UNLIMITED)
    assert_refused(start(fabric_host, ACCEL_IMAGES_REQUIRE_RDMA="1"), "ACCEL_IMAGES_REQUIRE_RDMA=1")


def test_a_job_that_requires_rdma_starts_on_a_usable_fabric(fabric_host: Host) -> None:
    hcas(fabric_host, "mlx5_0")
    fabric_host.device("infiniband/uverbs0")
    limits(fabric_host, UNLIMITED)
    result = start(fabric_host, ACCEL_IMAGES_REQUIRE_RDMA="1")
    assert_ran(result)
    assert "usable" in network_line(result.stderr)


def test_an_image_without_the_verbs_library_says_nothing_unless_rdma_is_required(fabric_host: Host) -> None:
    hcas(fabric_host, "mlx5_0")
    result = start(fabric_host, network=NO_NETWORK)
    assert_ran(result)
    assert "network" not in result.stderr
    refused = start(fabric_host, network=NO_NETWORK, ACCEL_IMAGES_REQUIRE_RDMA="1")
    assert refused.returncode == GUARD_EXIT
    assert "this image has no RDMA verbs library" in refused.stderr


def test_facts_written_before_the_network_was_read_say_nothing(fabric_host: Host) -> None:
    facts = facts_file(fabric_host.bin.parent)
    result = fabric_host.run("cuda", **image_env(RUNTIME_132) | {"ACCEL_IMAGES_FACTS": str(facts)})
    assert_ran(result)
    assert "network" not in result.stderr


def test_the_cpu_image_reads_no_facts_for_the_fabric(host: Host, tmp_path: Path) -> None:
    """No python on PATH and a facts file that cannot be read: a CPU start stays silent, no facts read."""
    broken = tmp_path / "facts.json"
    broken.write_text("{")
    result = host.run("cpu", ACCEL_IMAGES_VENDOR="cpu", ACCEL_IMAGES_FACTS=str(broken))
    assert_ran(result)
    assert result.stderr == ""


def test_a_start_on_the_cpu_says_nothing_of_the_fabric_unless_a_job_requires_it(fabric_host: Host) -> None:
    (fabric_host.bin / "nvidia-smi").unlink()
    result = start(fabric_host)
    assert_ran(result)
    assert "network" not in result.stderr and "running on the CPU" in result.stderr
    refused = start(fabric_host, ACCEL_IMAGES_REQUIRE_RDMA="1")
    assert refused.returncode == GUARD_EXIT and refused.stdout == ""
    assert refused.stderr.splitlines()[-1].startswith("accel-images: error: ACCEL_IMAGES_REQUIRE_RDMA=1: no RDMA device")


@pytest.mark.parametrize("memlock", ["8.5", "1e9", "-1", "unknown"])
def test_a_limit_that_is_not_a_byte_count_is_not_divided(fabric_host: Host, memlock: str) -> None:
    """/proc/self/limits says a number of bytes or `unlimited`; anything else is not arithmetic for the shell."""
    hcas(fabric_host, "mlx5_0")
    fabric_host.device("infiniband/uverbs0")
    limits(fabric_host, memlock)
    result = start(fabric_host)
    assert_ran(result)
    assert "usable" in network_line(result.stderr) and "arithmetic" not in result.stderr.lower()
    assert network_line(result.stderr).endswith(f"locked memory {memlock})")   # said as read, not as unlimited
