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
