"""The real arm64 torch, outside every default run (marker `network`: `pytest -m network` runs it).

The first test needs only what this project's CI host has (the package index, the engine with
QEMU's aarch64 binfmt and `.ci/setup-host.sh`'s arm64 Debian 12 stand-in): it fills an aarch64
wheelhouse on the x86_64 host with the arguments `accel-images kb wheel-tags` prints, installs
torch 2.15.0's whole closure from it for Debian 12's CPython 3.11 on aarch64 (`pip install
--target`, on the host: the same install under emulation takes about 20 minutes here), and in
Debian 12 on linux/arm64 imports it and reads back what the knowledge base says of that build
(its CUDA, its SASS list: no sm_75/sm_86, sm_110) and multiplies two matrices.

The second builds the published arm64 CUDA runtime image through the project's own CLI. It needs
what a networked host has: `ubuntu:24.04` for linux/arm64 from Docker Hub and PyTorch's cu132
wheel index. A host without them fails it at the base image's pull, naming the platform.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accel_images.kb import compat

ROOT = Path(__file__).resolve().parents[2]
ARM64_DEBIAN = "local/debian-arm64:bookworm"
"""`.ci/setup-host.sh`'s Debian 12 (python3, python3-venv) for linux/arm64."""
TORCH = "2.15.0"
PROBE = """
import json, platform, torch
a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
print(json.dumps({"machine": platform.machine(), "version": torch.__version__, "cuda": torch.version.cuda,
                  "arch_flags": torch._C._cuda_getArchFlags(), "matmul": (a @ a.T).tolist()}))
"""
"""What torch says of itself with no GPU: `_cuda_getArchFlags` is the list it was compiled for
(`torch.cuda.get_arch_list()` answers [] without a device)."""
AARCH64_CPUINFO = "".join(
    f"processor\t: {n}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp"
    " asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
    "CPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n" for n in range(2))
"""An aarch64 /proc/cpuinfo (two Neoverse N1 cores, the format of arch/arm64/kernel/cpuinfo.c) laid
over the container's. Debian 12's qemu-user (7.2) passes the x86_64 host's /proc/cpuinfo through,
and `import torch` then dies with SIGSEGV in its cpuinfo library's aarch64 initialisation (measured
here; the same crash site as pytorch/pytorch#188255, O); with this file laid over it the import
succeeds. Later QEMU releases emulate /proc/cpuinfo for aarch64 (linux-user target_proc.h, O)."""

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.network]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=7200)


@pytest.fixture(scope="module")
def aarch64_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch 2.15.0's aarch64 closure for CPython 3.11 (Debian 12's) installed into a directory for
    PYTHONPATH. The wheelhouse (29 files, 3.2 GB) is kept where ACCEL_TEST_ARM64_WHEELHOUSE points,
    so a second run downloads nothing."""
    kept = os.environ.get("ACCEL_TEST_ARM64_WHEELHOUSE")
    wheelhouse = Path(kept) if kept else tmp_path_factory.mktemp("aarch64-wheels")
    site = tmp_path_factory.mktemp("aarch64-site")
    tags = cli("kb", "wheel-tags", "--platform", "linux/arm64", "--os", "debian12")
    assert tags.returncode == 0, tags.stderr
    common = ["--quiet", "--only-binary=:all:", "--python-version", "3.11", *tags.stdout.split()]
    for step in (["download", *common, "--dest", str(wheelhouse)],
                 ["install", *common, "--no-index", "--find-links", str(wheelhouse), "--target", str(site)]):
        done = subprocess.run([sys.executable, "-m", "pip", *step, f"torch=={TORCH}"], capture_output=True,
                              text=True, timeout=3600)
        assert done.returncode == 0, done.stdout + done.stderr
    (site / "cpuinfo").write_text(AARCH64_CPUINFO)
    return site


def test_the_aarch64_closure_runs_on_debian12_arm64_and_is_the_build_the_knowledge_base_names(
        aarch64_site: Path, docker_client) -> None:
    ran = subprocess.run(["docker", "run", "--rm", "--platform", "linux/arm64", "--network", "none",
                          "--ulimit", "core=0", "-v", f"{aarch64_site / 'cpuinfo'}:/proc/cpuinfo:ro",
                          "-v", f"{aarch64_site}:/site:ro", "-e", "PYTHONPATH=/site", ARM64_DEBIAN,
                          "python3", "-c", PROBE], capture_output=True, text=True, timeout=1800)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    archs = compat.load_kb().facts("cuda").archs_on("linux/arm64", "2.15", "13.2")
    assert seen["machine"] == "aarch64"
    assert seen["version"] == f"{TORCH}+cu132" and seen["cuda"] == "13.2"
    assert seen["arch_flags"].split() == [f"sm_{arch.replace('.', '')}" for arch in archs]
    assert seen["matmul"] == [[5.0, 14.0], [14.0, 50.0]]


def test_the_published_arm64_cuda_runtime_image_builds_and_passes_its_smoke_test(tmp_path: Path, docker_client) -> None:
    """Needs Docker Hub and PyTorch's cu132 index (see the module's docstring); the build runs the
    smoke test under emulation, where no GPU is: it passes on the CPU, as every CUDA image's does there."""
    tag = f"{TORCH}-cuda13.2-py3.12-ubuntu24.04"
    done = cli("build", "--vendor", "cuda", "--torch", "2.15", "--stack", "13.2", "--os", "ubuntu24.04",
               "--flavor", "runtime", "--platform", "linux/arm64", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [record] = json.loads((tmp_path / "reports" / "build-latest" / "report.json").read_text())["variants"]
    assert record["status"] == "built" and record["platform"] == "linux/arm64" and record["smoke"]["ok"]
    labels = docker_client.images.get(f"accel-images/pytorch:{tag}-arm64").labels
    assert labels["io.accel-images.gpu-archs"] == "8.0,9.0,10.0,11.0,12.0"
