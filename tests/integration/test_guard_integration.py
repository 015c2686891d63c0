"""The in-image entry point guard (accel_images/smoke/guard.sh), run with the host's POSIX shells.

Its inputs are faked: PATH holds only the tools it needs plus, where a test wants one, a fake
`nvidia-smi` answering from recorded output (tests/data/host); ACCEL_IMAGES_DEV_ROOT points its
/dev checks at a device tree in tmp_path. The image facts (minimum driver, GPU architectures)
are read from a rendered CUDA Dockerfile, so the guard is tested with what an image really sets.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_guard.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import containers
from accel_images.render.contexts import guard_script
from test_guard import GUARD_EXIT

# ---- inside the built CPU image -----------------------------------------------------------------


@pytest.fixture
def cpu_image(published_build: dict) -> str:
    """The suite's CPU image (tests/conftest.py published_build), under the name only this run gives it."""
    return str(published_build["image"])


@pytest.mark.engine
def test_the_built_image_starts_through_the_guard(docker_client, cpu_image: str) -> None:
    config = docker_client.images.get(cpu_image).attrs["Config"]
    assert config["Entrypoint"] == ["/usr/bin/tini", "-s", "-g", "--", "/opt/accel-images/guard.sh"]  # tini: PID 1
    output = containers.output(docker_client, cpu_image, ["python", "-c", "print(1)"], network_disabled=True)
    assert output == "1\n"


@pytest.mark.engine
def test_the_guard_inside_the_image_refuses_a_missing_required_gpu(docker_client, cpu_image: str,
                                                                  tmp_path: Path) -> None:
    """A CUDA image's guard, mounted over the built CPU image's (no CUDA image can be built here),
    runs as the image's user with the image's shell."""
    guard = tmp_path / "guard.sh"
    guard.write_bytes(guard_script("cuda"))
    guard.chmod(0o755)
    container = docker_client.containers.run(
        cpu_image, ["python", "-c", "print(1)"], detach=True, network_disabled=True,
        environment={"ACCEL_IMAGES_REQUIRE_ACCELERATOR": "1"},
        volumes={str(guard): {"bind": "/opt/accel-images/guard.sh", "mode": "ro"}},
        labels={"io.accel-images.test": "1"})
    try:
        status = container.wait(timeout=120)["StatusCode"]
        stdout = container.logs(stdout=True, stderr=False)
        stderr = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    assert status == GUARD_EXIT
    assert stdout == b""
    assert stderr.startswith("accel-images: error: ") and "--gpus all" in stderr
