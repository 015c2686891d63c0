"""The decision table: every rendered GPU image against a corpus of hosts, three ways.

For each image under images/<vendor>/ and each host of that vendor in the corpus below (NVIDIA driver
branches, GPU brands and compute capabilities; AMD gfx targets; Intel GPUs by PCI id; Gaudi driver
releases and generations):

- the image's rendered guard (its images/<vendor>/<tag>/guard.sh, run in dash with the environment
  its Dockerfile sets and fake vendor tools on PATH, ACCEL_IMAGES_DEV_ROOT over a fake /dev and /sys)
  either starts the command or exits 78;
- `recommend`'s judgement of the same variant on the same host (recommend.judge: the vendor's fit,
  what `accel-images recommend --host-json` runs) must agree;
- an image a refusal names ("use X instead", "or use X") must start on that host itself, and a
  refusal that names none must come from a host that no sibling image (same Python and OS) starts on.

Hosts without an `info` are described by detection itself (accel_images.host.detect over the host's
tree, as `host describe` would describe that node): Intel laptop graphics that only sysfs names, render
nodes of another vendor, amdgpu kernel drivers of each era.

No Docker: each guard is a shell script, so the table runs in the unit suite.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from accel_images.host.detect import detect_host
from accel_images.host.recommend import judge
from accel_images.kb.compat import load_kb
from accel_images.model.hostinfo import HostInfo
from accel_images.model.variant import Variant
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import expand
from accel_images.vendors.gaudi import generation
from dockerfile_env import rendered_env
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
SHELL = shutil.which("dash") or shutil.which("sh") or "sh"
GUARD_EXIT = 78
TOOLS = ("sort", "head", "cut", "tr", "id", "stat", "cat", "printf", "true", "dirname", "mkdir")
NAMED = re.compile(r"(?:or use|; use) (\S+?)(?: instead|\s|$| \(set)")

# ---- the corpus -------------------------------------------------------------------------------

CUDA_DRIVERS = {"470.256.02": "11.4", "535.247.01": "12.2", "550.163.01": "12.4", "560.35.05": "12.6",
                "570.172.08": "12.8", "575.64.05": "12.9", "580.95.05": "13.0", "590.48.01": "13.1",
                "610.43.02": "13.3"}
"""Driver -> the newest CUDA it reports (NVIDIA's driver/toolkit table): the branches nvidia/cuda's
forward-compatibility clauses name, the ones they skip (560, 575, 590 for some), the 13.x floor (580)."""
NVIDIA_GPUS = [  # (name, Product Brand, compute capability): https://developer.nvidia.com/cuda-gpus
    ("Tesla V100-SXM2-32GB", "Tesla", "7.0"), ("NVIDIA TITAN V", "TITAN", "7.0"), ("Tesla T4", "NVIDIA", "7.5"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA", "8.0"), ("NVIDIA GeForce RTX 3090", "GeForce", "8.6"),
    ("NVIDIA RTX A6000", "NVIDIA RTX", "8.6"), ("NVIDIA GeForce RTX 4090", "GeForce", "8.9"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA", "9.0"), ("NVIDIA B200", "NVIDIA", "10.0"),
    ("NVIDIA GeForce RTX 5090", "GeForce", "12.0"), ("NVIDIA GB10", "NVIDIA", "12.1"),
]
JETSONS = [  # (driver, compute_cap as nvidia-smi answers it): JetPack 6's nvidia-smi (driver 540.4.0) names the
    # GPU "Orin (nvgpu)" and leaves most fields N/A (tests/data/host/nvidia-smi-orin-*.txt); whether its
    # compute_cap query answers 8.7 or [N/A] is not on record, so both are here.
    ("540.4.0", "8.7"), ("540.4.0", "[N/A]"), ("[N/A]", "[N/A]"),
]
GFX_TARGETS = {  # gfx_target_version (kernel kfd_device.c) -> target
    90000: "gfx900", 90006: "gfx906", 90008: "gfx908", 90010: "gfx90a", 90402: "gfx942", 90500: "gfx950",
    100100: "gfx1010", 100300: "gfx1030", 100301: "gfx1031", 110000: "gfx1100", 110003: "gfx1103",
    110501: "gfx1151", 120001: "gfx1201",
}
INTEL_GPUS = [  # (name as xpu-smi gives it, PCI device id)
    ("Intel(R) Arc(TM) A770 Graphics", "0x56a0"), ("Intel(R) Arc(TM) B580 Graphics", "0xe20b"),
    ("Intel(R) Data Center GPU Max 1550", "0x0bd5"), ("Intel(R) Data Center GPU Max 1100", "0x0bda"),
]
GAUDI = [(release, model) for release in ("1.23.0", "1.24.0", "1.24.1", "1.25.0") for model in ("HL-225", "HL-325L")]
SYSFS_ONLY_GPUS = {  # (PCI vendor:device, slot) of render nodes with neither xpu-smi nor sycl-ls on the host:
    # kernel pciids.h (INTEL_MTL_IDS, INTEL_ARL_IDS, INTEL_LNL_IDS, INTEL_DG2_IDS, INTEL_PVC_IDS, INTEL_ADLP_IDS),
    # AMD's and NVIDIA's vendor ids (include/linux/pci_ids.h). Processor graphics sit at 00:02.0, and sysfs
    # gives no name at all, so no "Arc" to find in one.
    "Meteor Lake": (("0x8086:0x7d55", "00:02.0"),), "Arrow Lake-H": (("0x8086:0x7d51", "00:02.0"),),
    "Lunar Lake": (("0x8086:0x64a0", "00:02.0"),), "Alder Lake-P UHD graphics": (("0x8086:0x46a6", "00:02.0"),),
    "Arc A770, sysfs only": (("0x8086:0x56a0", "03:00.0"),), "Max 1550, sysfs only": (("0x8086:0x0bd5", "3a:00.0"),),
    "MI300X render nodes only": (("0x1002:0x74a1", "05:00.0"), ("0x1002:0x74a1", "06:00.0")),
    "RTX A6000 render node only": (("0x10de:0x2230", "01:00.0"),),
    "Arc A770 beside an MI300X": (("0x1002:0x74a1", "05:00.0"), ("0x8086:0x56a0", "03:00.0")),
}
AMDGPU_DRIVERS = ("6.8.5", "6.10.5", "6.12.12", "6.16.13")
"""amdgpu kernel module versions of AMD GPU Driver 6.2.3, 6.3, 6.4.4 and 30.30 (the DKMS package's, read from
/sys/module/amdgpu/version; AMD's user and kernel-space support matrix decides which ROCm each serves)."""
MALFORMED_OVERRIDES = ("gfx1030", "10.3.0.1")
"""HSA_OVERRIDE_GFX_VERSION values ROCr cannot read: one warning, and the GPU's own target decides."""


@dataclass(frozen=True)
class Host:
    """One host of the corpus: how `recommend` sees it and what its tools and files say."""

    label: str
    info: HostInfo | None                                   # None: as detection describes the host's tree
    tools: dict[str, str] = field(default_factory=dict)     # name -> shell script body
    files: dict[str, str] = field(default_factory=dict)     # path under the host root -> content
    platform: str | None = None                             # the only platform whose images start here
    env: dict[str, str] = field(default_factory=dict)       # what the container's environment adds

    def described(self, root: Path) -> HostInfo:
        """What recommend is given for this host: its info, or what detection reads from its tree (no tools)."""
        if self.info is not None:
            return self.info
        return detect_host(lambda argv: "x86_64\n" if argv == ["uname", "-m"] else None, root / "host")

    def runs(self, image: Image) -> bool:
        """An image of another platform never reaches the guard here (exec format error)."""
        return self.platform in (None, image[1])


def nvidia_hosts() -> Iterator[Host]:
    for driver, cuda in CUDA_DRIVERS.items():
        for name, brand, cc in NVIDIA_GPUS:
            smi = ("#!/bin/sh\n"
                   f'[ "$1" = "-q" ] && {{ printf \'GPU 00000000:01:00.0\\n    Product Name : %s\\n'
                   f'    Product Brand : %s\\n\' "{name}" "{brand}"; exit 0; }}\n'
                   f'case "$1" in *driver_version*) echo "{driver}" ;; *compute_cap*) echo "{cc}" ;;'
                   f' *name*) echo "{name}" ;; *) exit 2 ;; esac\n')
            yield Host(f"{name} on {driver}", HostInfo(vendor="cuda", driver_version=driver, stack_version=cuda,
                                                        gpu_names=(name,), gpu_archs=(cc,), device_count=1),
                       tools={"nvidia-smi": smi})


def jetson_hosts() -> Iterator[Host]:
    """Jetson Orin modules: aarch64 hosts whose GPU (8.7) the SBSA builds do not serve."""
    for driver, cc in JETSONS:
        smi = ("#!/bin/sh\n"
               '[ "$1" = "-q" ] && { printf \'GPU 00000000:00:00.0\\n    Product Name : Orin (nvgpu)\\n\'; exit 0; }\n'
               f'case "$1" in *driver_version*) echo "{driver}" ;; *compute_cap*) echo "{cc}" ;;'
               ' *name*) echo "Orin (nvgpu)" ;; *) exit 2 ;; esac\n')
        known = None if driver.startswith("[") else driver
        yield Host(f"Jetson Orin on {driver}, compute_cap {cc}",
                   HostInfo(vendor="cuda", driver_version=known, gpu_names=("Orin (nvgpu)",), gpu_archs=("8.7",),
                            device_count=1, machine="aarch64"),
                   tools={"nvidia-smi": smi}, platform="linux/arm64")


def amd_tree(version: int) -> dict[str, str]:
    """/dev/kfd, a render node and the KFD topology of one GPU whose gfx_target_version is `version`."""
    return {"dev/kfd": "", "dev/dri/renderD128": "",
            "sys/class/kfd/kfd/topology/nodes/0/properties": "cpu_cores_count 16\ngfx_target_version 0\n",
            "sys/class/kfd/kfd/topology/nodes/1/properties":
                f"cpu_cores_count 0\ngfx_target_version {version}\nvendor_id 4098\n"}


def amd_hosts() -> Iterator[Host]:
    for version, target in GFX_TARGETS.items():
        yield Host(target, HostInfo(vendor="rocm", gpu_archs=(target,), device_count=1, stack_version="7.2.1"),
                   files=amd_tree(version))
    for version, target in ((90402, "gfx942"), (90006, "gfx906"), (110000, "gfx1100")):
        for driver in AMDGPU_DRIVERS:
            yield Host(f"{target} on amdgpu {driver}", None,
                       files={**amd_tree(version), "sys/module/amdgpu/version": f"{driver}\n"})
        for override in MALFORMED_OVERRIDES:
            yield Host(f"{target}, HSA_OVERRIDE_GFX_VERSION={override}", None, files=amd_tree(version),
                       env={"HSA_OVERRIDE_GFX_VERSION": override})


def intel_hosts() -> Iterator[Host]:
    for name, device_id in INTEL_GPUS:
        files = {"dev/dri/renderD128": "", "sys/class/drm/renderD128/device/vendor": "0x8086\n",
                 "sys/class/drm/renderD128/device/device": f"{device_id}\n"}
        yield Host(name, HostInfo(vendor="xpu", gpu_names=(name,), gpu_archs=(name,), device_count=1), files=files)
    for label, nodes in SYSFS_ONLY_GPUS.items():
        files = {}
        for index, (node, slot) in enumerate(nodes):
            vendor, device_id = node.split(":")
            where = f"sys/class/drm/renderD{128 + index}/device"
            uevent = f"PCI_ID={vendor[2:]}:{device_id[2:]}\nPCI_SLOT_NAME=0000:{slot}\n".upper()
            files |= {f"dev/dri/renderD{128 + index}": "", f"{where}/vendor": f"{vendor}\n",
                      f"{where}/device": f"{device_id}\n", f"{where}/uevent": uevent}
        yield Host(label, None, files=files)


def gaudi_hosts() -> Iterator[Host]:
    for release, model in GAUDI:
        driver = f"{release}-0abcdef"
        smi = ("#!/bin/sh\n"
               f'case "$2" in driver_version) echo "{driver}" ;; name) echo "{model}" ;; *) exit 2 ;; esac\n')
        yield Host(f"{model} on {driver}", HostInfo(vendor="gaudi", driver_version=driver, stack_version=release,
                                                     gpu_names=(model,), gpu_archs=(generation(model) or "",),
                                                     device_count=1),
                   tools={"hl-smi": smi}, files={"dev/accel/accel0": "", "dev/accel/accel_controlD0": ""})
        # A read-only root (Apptainer's SIF, Pyxis without --container-writable): HABANA_LOGS cannot be made
        # (a path under a plain file stands in), and the guard falls back to a directory under TMPDIR.
        yield Host(f"{model} on {driver}, read-only HABANA_LOGS", HostInfo(
            vendor="gaudi", driver_version=driver, stack_version=release, gpu_names=(model,),
            gpu_archs=(generation(model) or "",), device_count=1),
            tools={"hl-smi": smi}, files={"dev/accel/accel0": "", "dev/accel/accel_controlD0": "", "read-only": ""},
            env={"HABANA_LOGS": "@HOST@/read-only/var/log/habana_logs", "TMPDIR": "@ROOT@/tmp"})


def cuda_hosts() -> Iterator[Host]:
    yield from nvidia_hosts()
    yield from jetson_hosts()


CORPUS = {"cuda": cuda_hosts, "rocm": amd_hosts, "xpu": intel_hosts, "gaudi": gaudi_hosts}

# ---- running the guards -----------------------------------------------------------------------


def materialise(host: Host, root: Path) -> Path:
    """The host's fake tools (bin/) and tree (host/) under root."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    for name, body in host.tools.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    for relative, content in {"habana_logs/.keep": "", **{f"host/{k}": v for k, v in host.files.items()}}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (root / "host" / "dev").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir()
    return root


def run_guard(vendor: str, image: Image, root: Path, host_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    tag, platform = image
    added = {key: value.replace("@HOST@", str(root / "host")).replace("@ROOT@", str(root))
             for key, value in host_env.items()}
    env = {"PATH": str(root / "bin"), "LC_ALL": "C", "ACCEL_IMAGES_DEV_ROOT": str(root / "host"),
           "ACCEL_IMAGES_FACTS": str(root / "no-facts.json"), "HABANA_LOGS": str(root / "habana_logs"),
           "ACCEL_IMAGES_REQUIRE_ACCELERATOR": "1", **rendered_env(vendor, tag, platform), **added}
    result = subprocess.run([SHELL, str(ROOT / "images" / vendor / tag / "guard.sh"), "true"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, GUARD_EXIT), f"{tag} ({platform}): {result.stderr}"
    return result


Image = tuple[str, str]
"""(tag, platform): one image of a tag's index. A multi-platform tag's Dockerfile sets each platform's
own architectures, sibling images and GPUs not served (tests/dockerfile_env.py)."""


@dataclass(frozen=True)
class Row:
    vendor: str
    host: Host
    info: HostInfo
    image: Image
    starts: bool
    named: str | None
    said: str


def decide_all(vendor: str, hosts: Iterable[Host], images: list[Image], tmp: Path) -> list[Row]:
    roots = {host.label: materialise(host, tmp / f"h{index}") for index, host in enumerate(hosts)}
    by_label = {host.label: host for host in hosts}
    assert len(by_label) == len(roots) == len(list(hosts)), "one label per host"
    described = {label: by_label[label].described(root) for label, root in roots.items()}
    jobs = [(label, image) for label in roots for image in images if by_label[label].runs(image)]

    tags = {tag for tag, _ in images}

    def one(job: tuple[str, Image]) -> Row:
        label, image = job
        result = run_guard(vendor, image, roots[label], by_label[label].env)
        named = NAMED.search(result.stderr) if result.returncode == GUARD_EXIT else None
        image_named = named.group(1) if named and named.group(1) in tags else None   # not "use NVIDIA's L4T..."
        return Row(vendor, by_label[label], described[label], image, result.returncode == 0, image_named,
                   result.stderr.strip())

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, jobs))


@pytest.fixture(scope="module")
def variants() -> dict[Image, Variant]:
    return {(v.tag, v.platform): v for v in expand(load_matrix(FROZEN_MATRIX), load_kb()).variants}


@pytest.mark.parametrize("vendor", sorted(CORPUS))
def test_guard_recommend_and_hints_agree_on_every_host(vendor: str, variants: dict[Image, Variant],
                                                       tmp_path: Path) -> None:
    """Each image is the one a host of its platform pulls: its hints and siblings are that platform's."""
    kb = load_kb()
    tags = sorted(p.name for p in (ROOT / "images" / vendor).iterdir())
    images = sorted(image for image in variants if image[0] in tags)
    assert tags and {tag for tag, _ in images} == set(tags)
    hosts = list(CORPUS[vendor]())
    rows = decide_all(vendor, hosts, images, tmp_path)
    starts = {(row.host.label, row.image): row.starts for row in rows}
    problems = []
    for row in rows:
        (tag, platform), variant = row.image, variants[row.image]
        where = f"{tag} ({platform}) on {row.host.label}"
        fit = judge(row.info, variant, kb)
        if fit.fits != row.starts:
            problems.append(f"{where}: guard starts={row.starts}, recommend fits={fit.fits}"
                            f" ({'; '.join(fit.rejections) or row.said})")
        if row.named is not None and not starts.get((row.host.label, (row.named, platform)), False):
            problems.append(f"{where} names {row.named}, which refuses that host on {platform}: {row.said}")
        if not row.starts and row.named is None:
            siblings = [t for t, p in images if p == platform and (variants[t, p].python, variants[t, p].os) ==
                        (variant.python, variant.os) and starts.get((row.host.label, (t, p)), False)]
            if siblings:
                problems.append(f"{where} names no image, but {siblings[0]} starts there")
    assert problems == [], "\n".join(problems[:20]) + f"\n({len(problems)} disagreements)"
    refused = sum(not row.starts for row in rows)
    assert 0 < refused < len(rows), "the corpus must hold hosts each way"
