"""NVIDIA CUDA images: exact Dockerfile text, each assertion citing the reference it follows."""

from __future__ import annotations

from collections.abc import Callable

RUNTIME_126 = ("cuda", "12.6", "2.14", "3.12", "ubuntu24.04", "runtime")
DEVEL_132 = ("cuda", "13.2", "2.14", "3.12", "ubuntu24.04", "devel")


def test_runtime_sits_on_plain_ubuntu(dockerfile: Callable[..., str]) -> None:
    # pytorch/pytorch docker.Makefile: BASE_RUNTIME = ubuntu (the wheels bring the CUDA libraries)
    text = dockerfile(*RUNTIME_126)
    assert "FROM ubuntu:24.04 AS build\n" in text
    assert "\nFROM ubuntu:24.04\n" in text
    assert "nvidia/cuda" not in text.split("LABEL")[0]


def test_devel_sits_on_nvidia_cuda_devel(dockerfile: Callable[..., str]) -> None:
    # pytorch/pytorch docker.Makefile: BASE_DEVEL = nvidia/cuda:$(CUDA_VERSION)-devel-...
    text = dockerfile(*DEVEL_132)
    assert "\nFROM nvidia/cuda:13.2.1-devel-ubuntu24.04\n" in text


def test_container_toolkit_variables(dockerfile: Callable[..., str]) -> None:
    # pytorch/pytorch Dockerfile (official stage): NVIDIA_VISIBLE_DEVICES all,
    # NVIDIA_DRIVER_CAPABILITIES compute,utility. NVIDIA_REQUIRE_CUDA: container toolkit requirement
    # syntax as nvidia/cuda images use it, asking only for the major (the MVC floor's CUDA).
    assert ("ENV NVIDIA_VISIBLE_DEVICES=all \\\n"
            "    NVIDIA_DRIVER_CAPABILITIES=compute,utility \\\n"
            '    NVIDIA_REQUIRE_CUDA="cuda>=12.0"\n') in dockerfile(*RUNTIME_126)
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=13.0"\n' in dockerfile(*DEVEL_132)


def test_torch_comes_from_the_cuda_wheel_index(dockerfile: Callable[..., str]) -> None:
    # https://pytorch.org/get-started/previous-versions/: pip install torch --index-url .../whl/cu126
    assert '--index-url https://download.pytorch.org/whl/cu126 "torch==2.14.1"' in dockerfile(*RUNTIME_126)


def test_guard_facts_are_the_knowledge_bases(dockerfile: Callable[..., str]) -> None:
    # driver floor 525.60.13 for 12.x (NVIDIA minor-version compatibility); toolkit driver of 12.6.3
    # 560.35.05 (CUDA release notes); SASS 5.0-9.0, no PTX (RELEASE.md CUDA support matrix)
    text = dockerfile(*RUNTIME_126)
    for line in ('ACCEL_IMAGES_CUDA="12.6.3"', 'ACCEL_IMAGES_DRIVER_FLOOR="525.60.13"',
                 'ACCEL_IMAGES_MIN_DRIVER="560.35.05"', 'ACCEL_IMAGES_GPU_ARCHS="5.0,6.0,7.0,7.5,8.0,8.6,9.0"',
                 'ACCEL_IMAGES_FOR_NEWER_GPU="2.14.1-cuda13.2-py3.12-ubuntu24.04"'):
        assert f"    {line}" in text, line
    # CUDA 13.2 wheels: SASS 7.5-12.0 and no PTX (pytorch/pytorch#175567: the released wheels carry none)
    assert 'ACCEL_IMAGES_GPU_ARCHS="7.5,8.0,8.6,9.0,10.0,12.0"' in dockerfile(*DEVEL_132)


def test_no_cudnn_flavor_base(dockerfile: Callable[..., str]) -> None:
    # pytorch/pytorch#80637: an older cuDNN on LD_LIBRARY_PATH shadows the wheel's own
    assert "cudnn" not in dockerfile(*DEVEL_132).lower().split("label")[0]
