"""`--apt-mirror` reaches the base image's own apt sources: the rewrite the render puts before
`apt-get update` is run in the real Debian 12 base, and its sources then name the mirror."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest
from click.testing import CliRunner

from accel_images.cli import main
from conftest import TEST_LABEL, BaseImages

MIRROR = "http://127.0.0.1:8081/debian-mirror"
STEP_START = 't0="$(($(date +%s) - 1))" \\\n    && '
"""What every reproducible step starts with (templates/partials/reproducible.j2)."""


def rendered_rewrite(tmp_path: Path, *mirror_args: str) -> str:
    result = CliRunner().invoke(main, ["render", "--vendor", "cpu", "--os", "debian12", "--torch", "2.13",
                                       "--out", str(tmp_path), *mirror_args])
    assert result.exit_code == 0, result.output
    dockerfile = (tmp_path / "cpu" / "2.13.0-cpu-py3.11-debian12" / "Dockerfile").read_text()
    first_apt_step = dockerfile.split("RUN ", 2)[1].removeprefix(STEP_START)
    return first_apt_step.split(" \\\n    && apt-get update")[0]


def test_without_a_mirror_nothing_is_rewritten(tmp_path: Path) -> None:
    assert rendered_rewrite(tmp_path).startswith("apt-get update")


@pytest.mark.engine
def test_the_base_images_sources_point_at_the_mirror(tmp_path: Path, docker_client: docker.DockerClient,
                                                      base_images: BaseImages) -> None:
    rewrite = rendered_rewrite(tmp_path, "--apt-mirror", f"deb.debian.org={MIRROR}")
    assert rewrite.startswith("for f in /etc/apt/sources.list")
    output = docker_client.containers.run(base_images.slim, ["bash", "-c", f"{rewrite} && cat /etc/apt/sources.list.d/*"],
                                          remove=True, labels={TEST_LABEL: "1"}).decode()
    uris = [line for line in output.splitlines() if line.startswith("URIs:")]
    assert uris and all(line.startswith(f"URIs: {MIRROR}/") for line in uris), output
    assert "deb.debian.org" not in output.replace("# http://snapshot.debian.org", "")
