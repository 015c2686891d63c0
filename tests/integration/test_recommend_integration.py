"""recommend and pull: recorded hosts (tests/data/host, sources in its README) against the real matrix.

Hosts come from host.detect_host fed with the recorded tool outputs, the way tests/unit/test_host.py does;
a few rule tests build a HostInfo directly where no recording shows the case (a Gaudi 2 host on a
release newer than the matrix, RDNA2 consumer GPUs).

Here: the tests that need the real engine or registry; the others are in tests/unit/test_recommend.py.
"""

from __future__ import annotations

import contextlib
import io
import uuid

import docker.errors
import pytest

from accel_images.cli import fanout as cli_fanout
from accel_images.host.detect import HostInfo
from test_recommend import host_file, run


@pytest.mark.registry
@pytest.mark.engine
def test_pull_from_a_real_registry(tmp_path, docker_client, registry):
    """A stand-in image pushed under the name recommend picks for a CPU host, then pulled back."""
    prefix = f"{registry}/test-{uuid.uuid4().hex[:12]}"
    ref = f"{prefix}/accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"
    image, _ = docker_client.images.build(fileobj=io.BytesIO(b"FROM scratch\nLABEL io.accel-images.test=pull\n"),
                                          rm=True)
    try:
        image.tag(ref)
        for line in docker_client.images.push(ref, stream=True, decode=True):
            assert "error" not in line, line
        docker_client.images.remove(ref)
        result = run(cli_fanout.pull_command, "--host-json", str(host_file(tmp_path, HostInfo())),
                     "--registry", prefix, "--from-matrix")
        assert result.exit_code == 0, result.output
        assert docker_client.images.get(ref).id == image.id
        assert result.stdout.strip() == f"docker run --rm -it --ipc host {ref}"
    finally:
        for name in (ref, image.id):
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.images.remove(name, force=True)


@pytest.mark.engine
def test_pull_from_an_unreachable_registry_is_a_registry_error(tmp_path, docker_client):
    result = run(cli_fanout.pull_command, "--host-json", str(host_file(tmp_path, HostInfo())),
                 "--registry", "127.0.0.1:9")
    assert result.exit_code == 4, result.output
    assert result.stderr.strip().splitlines()[-1].startswith("accel-images: error:")
    assert "Traceback" not in result.output
