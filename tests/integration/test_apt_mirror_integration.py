"""`--apt-mirror` reaches the base image's own apt sources: the rewrite the render puts before
`apt-get update` is run in the real Debian 12 base, and its sources then name the mirror.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_apt_mirror.py.
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

import containers
from conftest import BaseImages
from test_apt_mirror import rendered_rewrite

MIRROR = "http://127.0.0.1:8081/debian-mirror"


@pytest.mark.engine
def test_the_base_images_sources_point_at_the_mirror(tmp_path: Path, docker_client: docker.DockerClient,
                                                      base_images: BaseImages) -> None:
    rewrite = rendered_rewrite(tmp_path, "--apt-mirror", f"deb.debian.org={MIRROR}")
    assert rewrite.startswith("for f in /etc/apt/sources.list")
    output = containers.output(docker_client, base_images.slim,
                               ["bash", "-c", f"{rewrite} && cat /etc/apt/sources.list.d/*"])
    uris = [line for line in output.splitlines() if line.startswith("URIs:")]
    assert uris and all(line.startswith(f"URIs: {MIRROR}/") for line in uris), output
    assert "deb.debian.org" not in output.replace("# http://snapshot.debian.org", "")
