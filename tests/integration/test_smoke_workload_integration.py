"""The in-image smoke workload: its helpers without torch here, the whole file in a container.

The engine tests build (once per machine, cached by tag) a Debian 12 image with the CPU
torch wheel from the local wheelhouse, and a thin image on top holding the current
workload file, tagged by its content hash.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_smoke_workload.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from conftest import unavailable

from accel_images.smoke import workload
from test_smoke_workload import WORKLOAD_FILE, IMAGE_EXPECTATIONS, last_json
WHEELHOUSE = Path("/var/cache/accel-images/wheelhouse")
BASE_IMAGE = "local/debian:bookworm"
TORCH_IMAGE_REPO = "accel-images-test/torch-cpu-dev"
SMOKE_IMAGE_REPO = "accel-images-test/smoke-cpu"
MISMATCHED = Path(os.environ.get("ACCEL_TEST_MISMATCHED", "/var/cache/accel-images/mismatched-wheels"))
MISMATCHED_IMAGE_REPO = "accel-images-test/smoke-cpu-mismatched"
SMOKE_IN_IMAGE = "/opt/accel-images/smoke.py"
RUN_TIMEOUT_S = 300

# What a developer image holds for the workload's developer checks: a compiler and the Python
# headers (torch.compile), ninja (torch.utils.cpp_extension), numpy, an environment the image's user
# can pip install into, the build backend pip.conf points at for offline builds, and git.
TORCH_DOCKERFILE = f"""\
FROM {BASE_IMAGE} AS build
COPY wheels /wheels
RUN python3 -m venv /opt/venv \\
    && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels torch==2.13.0 numpy \\
    && mkdir -p {workload.OFFLINE_WHEELS} && cp /wheels/setuptools-*.whl {workload.OFFLINE_WHEELS}/
FROM {BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends gcc g++ python3-dev ninja-build git \\
    && rm -rf /var/lib/apt/lists/* && useradd --uid 1000 --create-home smoke \\
    && printf '[global]\\nfind-links = {workload.OFFLINE_WHEELS}\\n' > /etc/pip.conf
COPY --from=build --chown=1000:1000 /opt/venv /opt/venv
COPY --from=build {workload.OFFLINE_WHEELS} {workload.OFFLINE_WHEELS}
ENV PATH=/opt/venv/bin:$PATH
"""

SMOKE_DOCKERFILE = """\
FROM {torch_image}
COPY smoke.py {smoke_in_image}
USER smoke
"""

MISMATCHED_DOCKERFILE = """\
FROM {smoke_image}
COPY wheels /tmp/wheels
RUN pip install --no-cache-dir --no-deps --no-index /tmp/wheels/torchvision-0.28.0-*.whl
"""


# -- in a container ---------------------------------------------------------------------------



def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def content_tag(repository: str, *texts: str | bytes) -> str:
    """`repository:<hash of what the image is made from>`: a cached image is reused only as it is."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() if isinstance(text, str) else text)
    return f"{repository}:{digest.hexdigest()[:12]}"


TORCH_IMAGE = content_tag(TORCH_IMAGE_REPO, TORCH_DOCKERFILE)


def ensure_torch_image(engine, work_dir: Path) -> str:
    """The cached Debian 12 + torch 2.13.0+cpu developer image, built from the wheelhouse if absent."""
    if engine.inspect_image(TORCH_IMAGE) is not None:
        return TORCH_IMAGE
    if engine.inspect_image(BASE_IMAGE) is None:
        unavailable(f"base image {BASE_IMAGE} is missing")
    if not list(WHEELHOUSE.glob("torch-2.13.0*.whl")):
        unavailable(f"no torch 2.13.0 wheel in {WHEELHOUSE}")
    context = work_dir / "torch-context"
    (context / "wheels").mkdir(parents=True)
    for wheel in WHEELHOUSE.glob("*.whl"):
        _link_or_copy(wheel, context / "wheels" / wheel.name)
    (context / "Dockerfile").write_text(TORCH_DOCKERFILE)
    engine.build(context, TORCH_IMAGE, log_path=work_dir / "torch-image.log")  # apt reaches Debian's mirror
    shutil.rmtree(context)
    return TORCH_IMAGE


def ensure_smoke_image(engine, work_dir: Path) -> str:
    """The torch image plus the current workload file, tagged by the file's content hash."""
    tag = content_tag(SMOKE_IMAGE_REPO, WORKLOAD_FILE.read_bytes(), TORCH_DOCKERFILE, SMOKE_DOCKERFILE)
    if engine.inspect_image(tag) is not None:
        return tag
    ensure_torch_image(engine, work_dir)
    context = work_dir / "smoke-context"
    context.mkdir(parents=True)
    shutil.copy2(WORKLOAD_FILE, context / "smoke.py")
    (context / "Dockerfile").write_text(SMOKE_DOCKERFILE.format(torch_image=TORCH_IMAGE, smoke_in_image=SMOKE_IN_IMAGE))
    engine.build(context, tag, log_path=work_dir / "smoke-image.log", network_mode="none")
    return tag


@pytest.fixture(scope="session")
def smoke_engine():
    from accel_images.builder.engine import Engine
    from accel_images.errors import EngineError

    try:
        engine = Engine.connect()
    except EngineError as err:
        unavailable(err.one_line())
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def smoke_image(smoke_engine, tmp_path_factory) -> str:
    return ensure_smoke_image(smoke_engine, tmp_path_factory.mktemp("smoke-image"))


def ensure_mismatched_image(engine, smoke: str, work_dir: Path) -> str:
    """The smoke image plus the package index's torchvision 0.28.0, built for the index's CUDA torch."""
    wheels = sorted(MISMATCHED.glob("torchvision-0.28.0-*.whl"))
    if not wheels:
        unavailable(f"no mismatched torchvision wheel in {MISMATCHED} (run .ci/setup-host.sh)")
    tag = f"{MISMATCHED_IMAGE_REPO}:{smoke.rsplit(':', 1)[1]}"
    if engine.inspect_image(tag) is not None:
        return tag
    context = work_dir / "mismatched-context"
    (context / "wheels").mkdir(parents=True)
    for wheel in wheels:
        _link_or_copy(wheel, context / "wheels" / wheel.name)
    (context / "Dockerfile").write_text(MISMATCHED_DOCKERFILE.format(smoke_image=smoke))
    engine.build(context, tag, log_path=work_dir / "mismatched-image.log", network_mode="none")
    return tag


def run_in_image(engine, image: str, *args: str, **options: object):
    return engine.run(image, ["python", SMOKE_IN_IMAGE, *args], timeout_s=RUN_TIMEOUT_S,
                      options={"network_disabled": True, **options})


def failed_checks(report: dict) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in report["checks"] if not c["ok"]}


@pytest.mark.engine
def test_in_image_passes_with_the_right_expectations(smoke_engine, smoke_image):
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS)
    report = last_json(result.stdout)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert report["ok"] is True
    assert report["torch"] == "2.13.0+cpu"
    assert report["build"]["kind"] == "cpu" and report["build"]["local"] == "cpu"
    assert report["backend"] == "cpu" and report["accelerator_present"] is False
    names = [check["name"] for check in report["checks"]]
    assert names == ["import_torch", "torch_version", "python_version", "build", "accelerator",
                     "matmul_float32", "matmul_bfloat16", "mlp_training", "device_to_host",
                     "numpy", "torch_compile", "cpp_extension_toolchain", "pip_install", "venv", "git"]
    timed = {c["name"]: c["ms"] for c in report["checks"] if c["ms"] is not None}
    assert set(timed) >= {"matmul_float32", "mlp_training", "device_to_host"}
    mlp = next(c for c in report["checks"] if c["name"] == "mlp_training")
    assert mlp["numbers"]["last_loss"] < mlp["numbers"]["first_loss"]


@pytest.mark.engine
def test_in_image_wrong_torch_fails_naming_both_versions(smoke_engine, smoke_image):
    result = run_in_image(smoke_engine, smoke_image, "--expect-torch", "2.12.0",
                          "--expect-python", "3.11", "--expect-build", "cpu")
    report = last_json(result.stdout)
    assert result.exit_code == workload.EXIT_CHECK_FAILED
    assert report["ok"] is False
    failed = [c for c in report["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["torch_version"]
    assert failed[0]["detail"] == "torch is 2.13.0+cpu, image promises 2.12.0"


@pytest.mark.engine
def test_in_image_require_accelerator_fails_on_a_cpu_host(smoke_engine, smoke_image):
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS, "--require-accelerator")
    report = last_json(result.stdout)
    assert result.exit_code == workload.EXIT_CHECK_FAILED
    assert "Traceback" not in result.stderr
    failed = [c for c in report["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["accelerator"]
    assert "--require-accelerator" in failed[0]["detail"]
    assert report["expect"]["require_accelerator"] is True


# -- the developer checks, each made to fail the way users met it ---------------------------------

@pytest.mark.engine
def test_in_image_a_mismatched_companion_fails_its_check(smoke_engine, smoke_image, tmp_path):
    """The package index's torchvision beside torch 2.13.0+cpu: exactly what a later
    `pip install torchvision` from the default index used to give."""
    image = ensure_mismatched_image(smoke_engine, smoke_image, tmp_path)
    result = run_in_image(smoke_engine, image, *IMAGE_EXPECTATIONS, "--expect-companions", "torchvision")
    failed = failed_checks(last_json(result.stdout))
    assert result.exit_code == workload.EXIT_CHECK_FAILED
    assert list(failed) == ["companion_torchvision"]
    assert "torchvision::nms does not exist" in failed["companion_torchvision"]


@pytest.mark.engine
def test_in_image_a_promised_companion_that_is_missing_fails(smoke_engine, smoke_image):
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS, "--expect-companions", "torchvision")
    failed = failed_checks(last_json(result.stdout))
    assert list(failed) == ["companion_torchvision"]
    assert failed["companion_torchvision"].startswith("ModuleNotFoundError: No module named 'torchvision'")


@pytest.mark.engine
def test_in_image_no_compiler_fails_torch_compile_with_inductors_reason(smoke_engine, smoke_image):
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS, environment={"PATH": "/opt/venv/bin"})
    failed = failed_checks(last_json(result.stdout))
    assert list(failed) == ["torch_compile", "cpp_extension_toolchain", "git"]
    assert "C++ compiler" in failed["torch_compile"] and "\n" not in failed["torch_compile"]
    assert "Ninja is required" in failed["cpp_extension_toolchain"]


@pytest.mark.engine
@pytest.mark.parametrize(("tool", "check", "said"), [
    # The image as it was before ninja-build: torch.utils.cpp_extension.load() refuses to start.
    ("/usr/bin/ninja", "cpp_extension_toolchain", "Ninja is required to load C++ extensions"),
    # The runtime flavor as it was before it had git: a developer's first `git init` fails.
    ("/usr/bin/git", "git", "git cannot run:"),
])
def test_in_image_a_missing_tool_fails_its_check(smoke_engine, smoke_image, tool, check, said):
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS,
                          volumes={"/dev/null": {"bind": tool, "mode": "ro"}})
    failed = failed_checks(last_json(result.stdout))
    assert list(failed) == [check]
    assert failed[check].startswith(said) and "\n" not in failed[check], failed


@pytest.mark.engine
def test_in_image_no_offline_build_backend_fails_pip_install(smoke_engine, smoke_image):
    """The image as it was before it kept setuptools for isolated builds: `pip install .` without a
    network cannot fetch the backend."""
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS, tmpfs={workload.OFFLINE_WHEELS: ""})
    failed = failed_checks(last_json(result.stdout))
    assert list(failed) == ["pip_install"]
    assert "setuptools>=61" in failed["pip_install"] and "\n" not in failed["pip_install"], failed


@pytest.mark.engine
def test_in_image_an_unwritable_environment_fails_pip_install(smoke_engine, smoke_image):
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS, read_only=True,
                          tmpfs={"/tmp": "", "/home/smoke": ""})
    failed = failed_checks(last_json(result.stdout))
    assert "pip_install" in failed and "Read-only file system" in failed["pip_install"]


@pytest.mark.engine
def test_in_image_no_ensurepip_fails_the_venv_check(smoke_engine, smoke_image):
    """The image as it was without pythonX.Y-venv in the final stage."""
    result = run_in_image(smoke_engine, smoke_image, *IMAGE_EXPECTATIONS, tmpfs={"/usr/lib/python3.11/ensurepip": ""})
    failed = failed_checks(last_json(result.stdout))
    assert list(failed) == ["venv"]
    assert failed["venv"].startswith("python -m venv failed:") and "ensurepip" in failed["venv"], failed
