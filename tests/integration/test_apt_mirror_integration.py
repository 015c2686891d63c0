"""`--apt-mirror` reaches the base image's own apt sources: the rewrite the render puts before
`apt-get update` is run in the real Debian 12 base, and its sources then name the mirror.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_apt_mirror.py.
"""

from __future__ import annotations

import re
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


@pytest.mark.engine
@pytest.mark.registry
def test_a_dead_apt_mirror_is_reported_as_unreachable_not_as_a_missing_package(tmp_path: Path, wheelhouse: Path,
                                                                                base_images: BaseImages,
                                                                                registry: str) -> None:
    """The mirror is a closed local port: apt-get update only warns, apt-get install then misses every
    package; the failure names the mirror, the cause and the mapping (fails in the first RUN step)."""
    from test_build_integration import PUBLISHED, cli, offline
    result = cli("build", *PUBLISHED, *offline(registry, wheelhouse), "--apt-mirror", "deb.debian.org=http://127.0.0.1:9",
                 "--no-smoke", "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line for line in result.stderr.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and re.fullmatch(
        r"FAILED cpu/2\.13\.0-cpu-py3\.11-debian12: step 4/\d+ \(apt-get install\) failed: apt cannot reach the"
        r" mirror 127\.0\.0\.1:9 \(connection refused\): --apt-mirror deb\.debian\.org=http://127\.0\.0\.1:9 points"
        r" there; start that mirror or correct the mapping", failed[0]), result.stderr
