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


NVIDIA_13_2_1 = (
    # gitlab.com/nvidia/container-images/cuda dist/13.2.1/ubuntu2404/base/Dockerfile, line 7 (read in the
    # mirror github.com/pranavmishra90/nvidia-container-images-cuda at f070c948), verbatim
    "cuda>=13.2 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 "
    "brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 "
    "brand=nvidiartx,driver>=535,driver<536 brand=vapps,driver>=535,driver<536 brand=vpc,driver>=535,driver<536 "
    "brand=vcs,driver>=535,driver<536 brand=vws,driver>=535,driver<536 brand=cloudgaming,driver>=535,driver<536 "
    "brand=unknown,driver>=570,driver<571 brand=grid,driver>=570,driver<571 brand=tesla,driver>=570,driver<571 "
    "brand=nvidia,driver>=570,driver<571 brand=quadro,driver>=570,driver<571 brand=quadrortx,driver>=570,driver<571 "
    "brand=nvidiartx,driver>=570,driver<571 brand=vapps,driver>=570,driver<571 brand=vpc,driver>=570,driver<571 "
    "brand=vcs,driver>=570,driver<571 brand=vws,driver>=570,driver<571 brand=cloudgaming,driver>=570,driver<571 "
    "brand=unknown,driver>=580,driver<581 brand=grid,driver>=580,driver<581 brand=tesla,driver>=580,driver<581 "
    "brand=nvidia,driver>=580,driver<581 brand=quadro,driver>=580,driver<581 brand=quadrortx,driver>=580,driver<581 "
    "brand=nvidiartx,driver>=580,driver<581 brand=vapps,driver>=580,driver<581 brand=vpc,driver>=580,driver<581 "
    "brand=vcs,driver>=580,driver<581 brand=vws,driver>=580,driver<581 brand=cloudgaming,driver>=580,driver<581 "
    "brand=unknown,driver>=590,driver<591 brand=grid,driver>=590,driver<591 brand=tesla,driver>=590,driver<591 "
    "brand=nvidia,driver>=590,driver<591 brand=quadro,driver>=590,driver<591 brand=quadrortx,driver>=590,driver<591 "
    "brand=nvidiartx,driver>=590,driver<591 brand=vapps,driver>=590,driver<591 brand=vpc,driver>=590,driver<591 "
    "brand=vcs,driver>=590,driver<591 brand=vws,driver>=590,driver<591 brand=cloudgaming,driver>=590,driver<591")


def test_container_toolkit_variables(dockerfile: Callable[..., str]) -> None:
    # pytorch/pytorch Dockerfile (official stage): NVIDIA_VISIBLE_DEVICES all,
    # NVIDIA_DRIVER_CAPABILITIES compute,utility. NVIDIA_REQUIRE_CUDA: container toolkit requirement
    # syntax as nvidia/cuda images use it, asking first for the major (the MVC floor's CUDA).
    assert ("ENV NVIDIA_VISIBLE_DEVICES=all \\\n"
            "    NVIDIA_DRIVER_CAPABILITIES=compute,utility \\\n"
            '    NVIDIA_REQUIRE_CUDA="cuda>=12.0"\n') in dockerfile(*RUNTIME_126)


def test_devel_keeps_nvidias_forward_compatibility_clauses(dockerfile: Callable[..., str]) -> None:
    # The devel base nvidia/cuda:13.2.1-devel ships cuda-compat-13-2 (its base Dockerfile installs it):
    # NVIDIA's own OR'ed brand/driver clauses stay, after the MVC term `cuda>=13.0` that replaces its
    # `cuda>=13.2` (space = OR: NVIDIA/libnvidia-container src/cli/dsl.c). CUDA forward compatibility:
    # https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html
    nvidia_clauses = NVIDIA_13_2_1.removeprefix("cuda>=13.2 ")
    assert f'    NVIDIA_REQUIRE_CUDA="cuda>=13.0 {nvidia_clauses}"\n' in dockerfile(*DEVEL_132)


def test_runtime_finds_a_driver_injected_under_usr_local_nvidia(dockerfile: Callable[..., str]) -> None:
    # pytorch/pytorch Dockerfile (official stage): ENV LD_LIBRARY_PATH /usr/local/nvidia/lib:/usr/local/nvidia/lib64,
    # ENV PATH /usr/local/nvidia/bin:...; nvidia/cuda dist/13.2.1/ubuntu2404/base/Dockerfile sets the same.
    # GKE's device plugin mounts the host driver at /usr/local/nvidia (container-engine-accelerators
    # cmd/nvidia_gpu/nvidia_gpu.go). The devel flavor inherits the lines from its nvidia/cuda base.
    assert ("ENV PATH=/usr/local/nvidia/bin:${PATH} \\\n"
            "    LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64\n") in dockerfile(*RUNTIME_126)
    assert "/usr/local/nvidia" not in dockerfile(*DEVEL_132)


def test_torch_comes_from_the_cuda_wheel_index(dockerfile: Callable[..., str]) -> None:
    # https://pytorch.org/get-started/previous-versions/: pip install torch --index-url .../whl/cu126
    assert '--index-url https://download.pytorch.org/whl/cu126 "torch==2.14.1"' in dockerfile(*RUNTIME_126)


def test_guard_facts_are_the_knowledge_bases(dockerfile: Callable[..., str]) -> None:
    # driver floor 525.60.13 for 12.x (NVIDIA minor-version compatibility); toolkit driver of 12.6.3
    # 560.35.05 (CUDA release notes); SASS 5.0-9.0, no PTX (RELEASE.md CUDA support matrix)
    text = dockerfile(*RUNTIME_126)
    for line in ('ACCEL_IMAGES_CUDA="12.6.3"', 'ACCEL_IMAGES_DRIVER_FLOOR="525.60.13"',
                 'ACCEL_IMAGES_MIN_DRIVER="560.35.05"', 'ACCEL_IMAGES_GPU_ARCHS="5.0,6.0,7.0,7.5,8.0,8.6,9.0"'):
        assert f"    {line}" in text, line
    # The images a refusal may name, each with the facts the guard tries it by
    # (floor|archs|branches|compat driver): same flavor and torch first, one per distinct set of facts
    # (vendors/base.py alternatives); a devel base's compat libcuda is its toolkit release's driver
    assert ('    ACCEL_IMAGES_ALTERNATIVES="2.14.1-cuda13.2-py3.12-ubuntu24.04|580|7.5,8.0,8.6,9.0,10.0,12.0|| '
            '2.11.0-cuda12.8-py3.12-ubuntu24.04|525.60.13|7.5,8.0,8.6,9.0,10.0,12.0|| '
            '2.14.1-cuda13.2-py3.12-ubuntu24.04-devel|580|7.5,8.0,8.6,9.0,10.0,12.0|535,570,580,590|595.58.03 '
            '2.14.1-cuda13.0-py3.12-ubuntu24.04-devel|580|7.5,8.0,8.6,9.0,10.0,12.0|535,550,565,570,575|580.126.20 '
            '2.14.1-cuda12.6-py3.12-ubuntu24.04-devel|525.60.13|5.0,6.0,7.0,7.5,8.0,8.6,9.0|470,535,550|560.35.05"'
            ) in text
    assert 'ACCEL_IMAGES_COMPAT_DRIVER="595.58.03"' in dockerfile(*DEVEL_132)
    assert "ACCEL_IMAGES_COMPAT_DRIVER" not in text  # the runtime flavor's plain Ubuntu has no compat library
    # CUDA 13.2 wheels: SASS 7.5-12.0 and no PTX (pytorch/pytorch#175567: the released wheels carry none)
    assert 'ACCEL_IMAGES_GPU_ARCHS="7.5,8.0,8.6,9.0,10.0,12.0"' in dockerfile(*DEVEL_132)


def test_no_cudnn_flavor_base(dockerfile: Callable[..., str]) -> None:
    # pytorch/pytorch#80637: an older cuDNN on LD_LIBRARY_PATH shadows the wheel's own
    assert "cudnn" not in dockerfile(*DEVEL_132).lower().split("label")[0]


CU130_214 = ("cuda", "13.0", "2.14", "3.12", "ubuntu24.04", "runtime")


def test_cu130_wheels_of_2_13_and_2_14_carry_toolkit_13_0_3(dockerfile: Callable[..., str], kb) -> None:
    # V, the wheels' own metadata: torch 2.13.0, 2.14.0 and 2.14.1 (the package index's cp311 wheels,
    # x86_64 and aarch64 alike) declare `Requires-Dist: cuda-toolkit[...]==13.0.3`; the 13.0.3 toolkit's
    # driver is 580.126.20 (NVIDIA's runfile cuda_13.0.3_580.126.20_linux.run)
    cuda = kb.facts("cuda")
    assert [cuda.toolkit(minor, "13.0") for minor in ("2.13", "2.14")] == ["13.0.3", "13.0.3"]
    text = dockerfile(*CU130_214)
    assert '    ACCEL_IMAGES_CUDA="13.0.3"' in text
    assert '    ACCEL_IMAGES_MIN_DRIVER="580.126.20"' in text


def test_the_cu130_wheels_of_2_11_and_2_12_carry_toolkit_13_0_2(kb) -> None:
    # V, the wheels' own metadata (pip's --report of the package index's cp311 manylinux_2_28_x86_64 wheels,
    # the cu130 builds): torch 2.11.0, 2.12.0 and 2.12.1 declare `Requires-Dist: cuda-toolkit[...]==13.0.2`
    # (2.11.0's aarch64 wheel too). The 2.11 row said 13.0.0, the family's GA release, assumed.
    cuda = kb.facts("cuda")
    assert [cuda.toolkit(minor, "13.0") for minor in ("2.11", "2.12")] == ["13.0.2", "13.0.2"]


def test_the_2_15_wheel_carries_toolkit_13_2_2(kb) -> None:
    # V: torch 2.15.0's Requires-Dist pins cuda-toolkit[...]==13.2.2 (installed: cuda-toolkit 13.2.2)
    assert kb.facts("cuda").toolkit("2.15", "13.2") == "13.2.2"


# ---- the runtime image on Debian 12, from the package index -----------------------------------------

DEBIAN_132 = ("cuda", "13.2", "2.15", "3.11", "debian12", "runtime")


def test_debian_runtime_takes_torch_and_its_companions_from_the_package_index(dockerfile: Callable[..., str]) -> None:
    # The package index's default Linux torch 2.15.0 wheel is the cu132 build (its torch/version.py:
    # __version__ = '2.15.0+cu132'; cuda.yaml package_index, V): no PyTorch index is named.
    text = dockerfile(*DEBIAN_132)
    assert "FROM debian:bookworm-slim AS build\n" in text
    assert ('/opt/venv/bin/pip install --no-cache-dir --index-url https://pypi.org/simple "torch==2.15.0"'
            ' "torchaudio==2.11.1.*" "torchvision==0.29.2.*" numpy \\\n') in text
    assert "download.pytorch.org" not in text


def test_debian_runtime_follows_a_mirror_of_the_package_index_not_of_pytorchs(
        dockerfile: Callable[..., str]) -> None:
    """--pip-extra-index-url is the package index's mirror; a '{index}' mirror serves PyTorch's indexes."""
    from accel_images.render.contexts import RenderOptions
    both = RenderOptions(pip_index_url="https://mirror.example/whl/{index}",
                         pip_extra_index_url="https://mirror.example/pypi/simple")
    assert "--index-url https://mirror.example/pypi/simple \"torch==2.15.0\"" in dockerfile(*DEBIAN_132, options=both)
    only_pytorch = RenderOptions(pip_index_url="https://mirror.example/whl/{index}")
    assert "--index-url https://pypi.org/simple \"torch==2.15.0\"" in dockerfile(*DEBIAN_132, options=only_pytorch)
    plain = RenderOptions(pip_index_url="https://mirror.example/simple")
    assert "--index-url https://mirror.example/simple \"torch==2.15.0\"" in dockerfile(*DEBIAN_132, options=plain)


def test_debian_runtime_refusals_name_an_ubuntu_image_where_no_debian_one_serves(
        dockerfile: Callable[..., str]) -> None:
    # No CUDA 12.x build is on the package index for these releases: a pre-R580 host is sent to the
    # nearest image of the same Python that runs there (vendors.base.alternatives).
    text = dockerfile(*DEBIAN_132)
    alternatives = text.split('ACCEL_IMAGES_ALTERNATIVES="', 1)[1].split('"', 1)[0].split()
    assert alternatives[0] == "2.14.1-cuda12.6-py3.11-ubuntu22.04|525.60.13|5.0,6.0,7.0,7.5,8.0,8.6,9.0||"
    assert alternatives[1].startswith("2.11.0-cuda12.8-py3.12-ubuntu24.04|525.60.13|")


def test_a_mirror_of_pytorchs_indexes_alone_is_said_not_to_serve_a_debian_cuda_build(
        kb: object, expansion: object, variant: Callable[..., object]) -> None:
    """A firewalled site that mirrors download.pytorch.org only would reach pypi.org for this image: the build
    says so, and names the option that mirrors the package index."""
    from accel_images.render.contexts import Renderer, RenderOptions
    renderer, debian = Renderer(kb), variant(*DEBIAN_132)  # type: ignore[arg-type]
    only_pytorch = RenderOptions(pip_index_url="https://mirror.example/whl/{index}")
    [note] = renderer.context(debian, expansion, only_pytorch).notes  # type: ignore[arg-type]
    assert "--pip-extra-index-url" in note and "https://pypi.org/simple" in note
    both = RenderOptions(pip_index_url="https://mirror.example/whl/{index}",
                         pip_extra_index_url="https://mirror.example/pypi/simple")
    assert renderer.context(debian, expansion, both).notes == ()  # type: ignore[arg-type]
    ubuntu = variant("cuda", "13.2", "2.15", "3.12", "ubuntu24.04", "runtime")
    assert renderer.context(ubuntu, expansion, only_pytorch).notes == ()  # type: ignore[arg-type]
