"""AMD ROCm images: exact Dockerfile text, each assertion citing the reference it follows."""

from __future__ import annotations

from collections.abc import Callable

from test_apt_mirror import STEP_START

STEP = "RUN " + STEP_START
"""How every reproducible step starts (templates/partials/reproducible.j2)."""
RUNTIME = ("rocm", "7.14", "2.14", "3.12", "ubuntu24.04", "runtime")
DEVEL = ("rocm", "7.2", "2.13", "3.12", "ubuntu24.04", "devel")


def test_runtime_on_plain_ubuntu_devel_on_rocm_dev(dockerfile: Callable[..., str]) -> None:
    # the rocmX.Y wheels bundle the ROCm user space (PyTorch "previous versions": --index-url .../whl/rocmX.Y)
    runtime = dockerfile(*RUNTIME)
    assert "\nFROM ubuntu:24.04\n" in runtime
    assert '--index-url https://download.pytorch.org/whl/rocm7.14 "torch==2.14.1"' in runtime
    # rocm/dev-ubuntu-24.04:<x>-complete carries hipcc and the headers (ROCm/ROCm-docker dev/)
    assert "\nFROM rocm/dev-ubuntu-24.04:7.2.4-complete\n" in dockerfile(*DEVEL)
    assert "ENV ROCM_PATH=/opt/rocm\n" in dockerfile(*DEVEL)


def test_render_group_like_rocm_docker(dockerfile: Callable[..., str]) -> None:
    # ROCm/ROCm-docker dev/Dockerfile-ubuntu-24.04: `RUN groupadd -g 109 render` (PR #93)
    text = dockerfile(*RUNTIME)
    assert STEP + "if ! getent group render > /dev/null; then groupadd -g 109 render || groupadd render; fi \\\n" in text
    assert 'for group in video render; do if getent group "${group}"' in text


def test_run_options_follow_the_rocm_docs(tmp_path) -> None:
    # https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html:
    # docker run --device /dev/kfd --device /dev/dri --security-opt seccomp=unconfined <image>
    from accel_images.vendors import device_options

    flags = device_options("rocm", tmp_path).cli_flags()
    assert flags[:4] == ["--device", "/dev/kfd", "--device", "/dev/dri"]
    assert flags[-2:] == ["--security-opt", "seccomp=unconfined"]


# pytorch/pytorch .ci/docker/manywheel/build.sh (commit 027375bf), case manylinux2_28-builder:rocm*, verbatim:
#   PYTORCH_ROCM_ARCH="gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1103;gfx1200;gfx1201;gfx1150;gfx1151"
#   ... else  (the legacy rocm/dev-almalinux-8 path: ROCm 7.2)
#   PYTORCH_ROCM_ARCH="gfx900;gfx906;${PYTORCH_ROCM_ARCH}"
BUILD_SH_COMMON = "gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1103;gfx1200;gfx1201;gfx1150;gfx1151"


def test_gfx_targets_follow_pytorchs_wheel_build_script(dockerfile: Callable[..., str]) -> None:
    # 7.14 installs from TheRock's multi-arch index: the common list only (no gfx900, no gfx906)
    common = BUILD_SH_COMMON.replace(";", ",")
    assert f'    ACCEL_IMAGES_GPU_ARCHS="{common}"' in dockerfile(*RUNTIME)
    # 7.2 takes the legacy path, which prepends gfx900;gfx906
    assert f'    ACCEL_IMAGES_GPU_ARCHS="gfx900,gfx906,{common}"' in dockerfile(*DEVEL)


def test_a_refusal_names_the_7_2_image_with_its_targets(dockerfile: Callable[..., str]) -> None:
    # the guard tries each named image's targets and amdgpu driver window on the refused host
    # (vendors/base.py alternatives): 7.2 from AMD GPU Driver 6.4 (amdgpu 6.12) on
    common = BUILD_SH_COMMON.replace(";", ",")
    assert (f'    ACCEL_IMAGES_ALTERNATIVES="2.13.0-rocm7.2-py3.12-ubuntu24.04|gfx900,gfx906,{common}|6.12-"'
            in dockerfile(*RUNTIME))


def test_the_amdgpu_driver_window_is_amds_support_matrix(dockerfile: Callable[..., str]) -> None:
    # AMD's user and kernel-space support matrix (instinct.docs.amd.com amdgpu-docs compatibility-matrix):
    # 7.14 on "30.10.x" and later, 7.2 on "6.4.x" and later; amdgpu-dkms 6.14.14.30100000 (30.10),
    # 6.12.12.60404 (6.4.4): the module series a host reports
    runtime, devel = dockerfile(*RUNTIME), dockerfile(*DEVEL)
    assert '    ACCEL_IMAGES_AMDGPU_WINDOW="6.14-"' in runtime
    assert '    ACCEL_IMAGES_AMDGPU_SUPPORT="AMD GPU Driver 30.10 or later (amdgpu 6.14 or later)"' in runtime
    assert '    ACCEL_IMAGES_AMDGPU_WINDOW="6.12-"' in devel


def test_gfx1103_only_from_the_release_that_builds_it(kb) -> None:
    # pytorch/pytorch#179653 (April 2026) added gfx1103; release/2.12 lacks it (O: unslothai/unsloth#9829),
    # a 2.11 rocm7.2 wheel prints no gfx1103 (O: astral-sh/uv#18730)
    from accel_images import vendors

    rocm = vendors.get("rocm")
    assert "gfx1103" not in rocm.gpu_archs(kb, "2.11.0", "7.2")
    assert "gfx1103" in rocm.gpu_archs(kb, "2.13.0", "7.2")
    assert rocm.gpu_archs(kb, "2.11.0", "7.2") == ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030",
                                                  "gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx1201", "gfx1150",
                                                  "gfx1151")
