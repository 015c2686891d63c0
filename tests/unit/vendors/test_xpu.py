"""Intel XPU images: exact Dockerfile text, each assertion citing the reference it follows."""

from __future__ import annotations

from collections.abc import Callable

from test_apt_mirror import APT_GET, APT_UPDATE, STEP_START

STEP = "RUN " + STEP_START
"""How every reproducible step starts (templates/partials/reproducible.j2)."""
RUNTIME = ("xpu", "2026.1", "2.14", "3.12", "ubuntu24.04", "runtime")
DEVEL = ("xpu", "2026.1", "2.14", "3.12", "ubuntu24.04", "devel")


def test_runtime_adds_the_gpu_user_mode_driver_from_intels_ppa_without_add_apt_repository(
        dockerfile: Callable[..., str]) -> None:
    # intel/oneapi-containers deep-learning-essentials/Dockerfile.ubuntu-24.04: ppa:kobuk-team/intel-graphics,
    # `intel-opencl-icd libze-intel-gpu1 libze1`
    text = dockerfile(*RUNTIME)
    assert ("COPY apt/kobuk-team-intel-graphics.asc /etc/apt/keyrings/kobuk-team-intel-graphics.asc\n"
            "COPY apt/kobuk-team-intel-graphics.sources /etc/apt/sources.list.d/kobuk-team-intel-graphics.sources\n"
            + STEP + APT_UPDATE + " \\\n") in text
    # In the bulk layer, from the PPA and the release suites (partials/apt.j2: the PPA's suite is `noble`).
    # libze-dev: DLE's own list and PyTorch's XPU CI (Triton's XPU launcher includes level_zero/ze_api.h);
    # intel-ocloc: pytorch/pytorch .ci/docker/common/install_xpu.sh (client: `... libze-dev intel-ocloc xpu-smi`)
    assert (f"    && {{ {APT_GET} install -y --no-install-recommends libze1 libze-intel-gpu1 intel-opencl-icd libze-dev "
            "intel-ocloc \\\n") in text
    # https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html: pip install torch --index-url .../whl/xpu
    assert '--index-url https://download.pytorch.org/whl/xpu "torch==2.14.1"' in text


def test_devel_sits_on_deep_learning_essentials(dockerfile: Callable[..., str]) -> None:
    # intel/deep-learning-essentials:<oneAPI>-devel-ubuntu24.04 (tags seen in use, O)
    text = dockerfile(*DEVEL)
    assert "\nFROM intel/deep-learning-essentials:2026.1.0-devel-ubuntu24.04\n" in text
    assert "kobuk-team" not in text  # the DLE image already holds the GPU runtime
    assert "RUN source /opt/intel/oneapi/setvars.sh" not in text  # compat-facts §8.17: no second oneAPI runtime


def test_devel_resets_the_setvars_environment_dle_bakes_in(dockerfile: Callable[..., str]) -> None:
    # intel/oneapi-containers deep-learning-essentials/Dockerfile.ubuntu-24.04 (6131caba): ENV
    # LD_LIBRARY_PATH='/opt/intel/oneapi/...', OCL_ICD_FILENAMES='/opt/intel/oneapi/compiler/2026.0/lib/libintelocl.so',
    # SETVARS_COMPLETED='1': reset, so torch loads the +xpu wheels' runtime and setvars.sh can still be sourced
    assert ('ENV LD_LIBRARY_PATH="" \\\n'
            '    OCL_ICD_FILENAMES="" \\\n'
            '    SETVARS_COMPLETED=""\n') in dockerfile(*DEVEL)
    assert "LD_LIBRARY_PATH" not in dockerfile(*RUNTIME)


def test_run_options_follow_intels_container_guide(tmp_path) -> None:
    # Intel oneAPI container guide: docker run --device=/dev/dri
    from accel_images.vendors import device_options

    assert device_options("xpu", tmp_path).cli_flags()[:2] == ["--device", "/dev/dri"]


def _render_node(root, driver: str) -> None:
    """/dev/dri/renderD128 and its sysfs driver link, as the kernel lays them out."""
    (root / "dev" / "dri").mkdir(parents=True, exist_ok=True)
    (root / "dev" / "dri" / "renderD128").write_text("")
    bound = root / "sys" / "bus" / "pci" / "drivers" / driver
    bound.mkdir(parents=True)
    device = root / "sys" / "class" / "drm" / "renderD128" / "device"
    device.mkdir(parents=True)
    (device / "driver").symlink_to(bound)


def test_the_kubernetes_resource_follows_the_kernel_driver(tmp_path) -> None:
    """Intel's GPU device plugin README: "gpu.intel.com/i915 | Legacy i915 KMD ... provided GPU instance" and
    "gpu.intel.com/xe | xe KMD provided GPU instance" (intel-device-plugins-for-kubernetes, cmd/gpu_plugin)."""
    from accel_images.vendors import device_options
    assert device_options("xpu", tmp_path).k8s_resource == "gpu.intel.com/i915"   # nothing to tell: the legacy one
    _render_node(tmp_path / "i915", "i915")
    assert device_options("xpu", tmp_path / "i915").k8s_resource == "gpu.intel.com/i915"
    _render_node(tmp_path / "xe", "xe")
    assert device_options("xpu", tmp_path / "xe").k8s_resource == "gpu.intel.com/xe"
