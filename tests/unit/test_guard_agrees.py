"""The in-image guard and `recommend` take the same decision from the same data.

Every driver in the knowledge base's driver table (and each floor, just below and at it) is put
against every CUDA image of the matrix, and so is every GPU architecture that matters (each
compiled target, each just-newer minor, each next major, and the ones no wheel has): the guard,
run in dash with a fake nvidia-smi, must refuse exactly when `recommend`'s judgement rejects.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from dockerfile_env import rendered_env
from accel_images.kb.compat import load_kb
from accel_images.model.hostinfo import HostInfo
from accel_images.host.recommend import judge
from accel_images.render.contexts import guard_script
from accel_images.plan.matrix import load_matrix
from accel_images.model.variant import Variant
from accel_images.plan.variants import expand
from accel_images.vendors.cuda import split_archs
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
SHELL = shutil.which("dash") or shutil.which("sh")
GUARD_EXIT = 78
FAKE_NVIDIA_SMI = """#!/bin/sh
case "$*" in
    *driver_version*) echo "$FAKE_DRIVER" ;;
    *compute_cap*) echo "$FAKE_CC" ;;
esac
"""
TOOLS = ("sort", "head", "cut", "tr", "id", "stat", "cat", "printf", "true", "dirname")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Variant]]:
    root = tmp_path_factory.mktemp("guard")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    (bin_dir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    (root / "guard.sh").write_bytes(guard_script("cuda"))
    expansion = expand(load_matrix(FROZEN_MATRIX), load_kb())
    return root, [v for v in expansion.variants if v.vendor == "cuda"]


def image_env(variant: Variant) -> dict[str, str]:
    """The guard's facts as the rendered image of the variant's platform sets them (an arm64 image's
    GPUs not served are not the amd64 image's); a variant the matrix lacks gets its own archs."""
    env = rendered_env(variant.vendor, variant.tag, variant.platform)
    return {**env, "ACCEL_IMAGES_GPU_ARCHS": ",".join(variant.gpu_archs)}


def with_ptx(variant: Variant) -> Variant:
    """The variant as a build that also carries PTX of its newest target (none of the released wheels do)."""
    return replace(variant, gpu_archs=(*variant.gpu_archs[:-1], variant.gpu_archs[-1] + "+PTX"))


def guard_refuses(root: Path, variant: Variant, driver: str, cc: str) -> bool:
    env = {"PATH": str(root / "bin"), "LC_ALL": "C", "FAKE_DRIVER": driver, "FAKE_CC": cc, **image_env(variant)}
    result = subprocess.run([SHELL, str(root / "guard.sh"), "true"], env=env, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode in (0, GUARD_EXIT), result.stderr
    return result.returncode == GUARD_EXIT


def recommend_rejects(variant: Variant, driver: str, cc: str) -> bool:
    host = HostInfo(vendor="cuda", driver_version=driver, gpu_archs=(cc,), device_count=1)
    return not judge(host, variant, load_kb()).fits


def drivers_to_try() -> list[str]:
    facts = load_kb().facts("cuda")
    floors = {str(row["mvc_floor"]) for row in facts.families.values()}
    below = {f"{int(f.split('.')[0]) - 1}.99" for f in floors}
    return sorted(set(facts.drivers.values()) | floors | below)


def archs_to_try(variants: list[Variant]) -> list[str]:
    found = {"3.5", "5.2", "6.1", "7.0", "7.2", "8.7", "8.9", "10.3", "11.0", "12.1", "13.0"}
    for variant in variants:
        sass, _ = split_archs(variant.gpu_archs)
        for arch in sass:
            major, minor = arch.split(".")
            found |= {arch, f"{major}.{int(minor) + 1}", f"{int(major) + 1}.0"}
    return sorted(found, key=lambda a: tuple(int(p) for p in a.split(".")))


def test_no_released_cuda_wheel_carries_ptx(world: tuple[Path, list[Variant]]) -> None:
    # pytorch/pytorch#175567: the released CUDA wheels carry SASS only, so the PTX rule is tested
    # on variants made to carry it (with_ptx)
    _, variants = world
    assert len(variants) >= 10
    assert {split_archs(v.gpu_archs)[1] for v in variants} == {None}


def test_every_driver_gets_the_same_decision_from_guard_and_recommend(world: tuple[Path, list[Variant]]) -> None:
    root, variants = world
    disagreements = []
    for variant in variants:
        for driver in drivers_to_try():
            guard, rec = guard_refuses(root, variant, driver, "9.0"), recommend_rejects(variant, driver, "9.0")
            if guard != rec:
                disagreements.append(f"{variant.tag} driver {driver}: guard refuses={guard}, recommend rejects={rec}")
    assert disagreements == []


def test_every_architecture_gets_the_same_decision_from_guard_and_recommend(
        world: tuple[Path, list[Variant]]) -> None:
    root, variants = world
    newest = "999.0"
    disagreements = []
    for variant in [*variants, *map(with_ptx, variants)]:
        for cc in archs_to_try(variants):
            guard, rec = guard_refuses(root, variant, newest, cc), recommend_rejects(variant, newest, cc)
            if guard != rec:
                disagreements.append(f"{variant.tag} cc {cc}: guard refuses={guard}, recommend rejects={rec}")
    assert disagreements == []


@pytest.mark.parametrize("tag, driver, refused", [
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "535.104.05", False),  # the README's 8 x H100 example: MVC
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "525.60.13", False),   # exactly the 12.x floor
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "525.53", True),       # the floor's major, below it: not majors alone
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "525.60.12", True),    # one patch below the floor
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "520.61.05", True),
    ("2.14.1-cuda13.2-py3.12-ubuntu24.04", "580.65.06", False),   # an R580 LTS driver under MVC
    ("2.14.1-cuda13.2-py3.12-ubuntu24.04", "575.57.08", True),
])
def test_named_cases(world: tuple[Path, list[Variant]], tag: str, driver: str, refused: bool) -> None:
    root, variants = world
    variant = next(v for v in variants if v.tag == tag)
    assert guard_refuses(root, variant, driver, "9.0") is refused
    assert recommend_rejects(variant, driver, "9.0") is refused


@pytest.mark.parametrize("tag, cc, refused", [
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "10.0", True),   # Blackwell: cu126 stops at sm_90, no PTX
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "12.0", True),
    ("2.14.1-cuda12.6-py3.12-ubuntu24.04", "8.9", False),   # 8.6 SASS runs on 8.9
    ("2.14.1-cuda13.2-py3.12-ubuntu24.04", "12.0", False),
    ("2.14.1-cuda13.2-py3.12-ubuntu24.04", "13.0", True),   # no 13.x SASS, no PTX
    ("2.14.1-cuda13.2-py3.12-ubuntu24.04", "12.1", False),  # 12.0 SASS runs on 12.1
    ("2.14.1-cuda13.2-py3.12-ubuntu24.04", "11.0", True),   # no 11.x SASS
    ("2.14.1-cuda13.2-py3.12-ubuntu24.04", "7.0", True),    # CUDA 13 dropped Volta
])
def test_named_architectures(world: tuple[Path, list[Variant]], tag: str, cc: str, refused: bool) -> None:
    root, variants = world
    variant = next(v for v in variants if v.tag == tag)
    assert guard_refuses(root, variant, "999.0", cc) is refused
    assert recommend_rejects(variant, "999.0", cc) is refused


@pytest.mark.parametrize("cc, refused", [
    ("13.0", False),  # 12.0 PTX, JIT compiled by the driver
    ("12.1", False),
    ("11.0", True),   # no 11.x SASS, and PTX 12.0 is newer than the GPU
    ("7.0", True),
])
def test_ptx_architectures(world: tuple[Path, list[Variant]], cc: str, refused: bool) -> None:
    root, variants = world
    variant = with_ptx(next(v for v in variants if v.tag == "2.14.1-cuda13.2-py3.12-ubuntu24.04"))
    assert guard_refuses(root, variant, "999.0", cc) is refused
    assert recommend_rejects(variant, "999.0", cc) is refused


@pytest.mark.parametrize("platform, cc, refused", [
    # Jetson Orin (8.7) and Xavier (7.2) are not SBSA: the arm64 images refuse them and point to
    # NVIDIA's L4T containers (cuda.yaml platforms."linux/arm64".not_served; pytorch/pytorch README
    # "NVIDIA Jetson Platforms", V). The amd64 image has no Jetson: 8.7 runs its 8.6 SASS as the
    # knowledge base's x86_64 arch list says (same major, older minor: CUDA C Programming Guide, V).
    ("linux/arm64", "8.7", True),
    ("linux/arm64", "7.2", True),
    ("linux/amd64", "8.7", False),
    ("linux/arm64", "8.6", False),   # 8.0 SASS runs on 8.6
])
def test_jetson_is_refused_on_the_platform_that_has_it(world: tuple[Path, list[Variant]], platform: str, cc: str,
                                                       refused: bool) -> None:
    root, variants = world
    variant = next(v for v in variants if (v.tag, v.platform) == ("2.15.0-cuda13.2-py3.12-ubuntu24.04", platform))
    assert guard_refuses(root, variant, "999.0", cc) is refused
    assert recommend_rejects(variant, "999.0", cc) is refused
