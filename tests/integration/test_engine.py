"""The Docker engine wrapper: stream checking and error translation offline, then the real
daemon (builds FROM scratch, containers from local/debian:bookworm).

Here: the tests that need the real engine or registry; the others are in tests/unit/test_engine_unit.py.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import unavailable

from accel_images.builder.engine import Engine
from accel_images.errors import BuildFailed, EngineError, RegistryError
from test_engine_unit import context_dir
from test_engine_unit import engine  # noqa: F401  (a fixture)

DEBIAN = "local/debian:bookworm"
BASE_IMAGE_WAIT_S = 300
TEST_LABEL = "io.accel-images.test"
RUN_ID = uuid.uuid4().hex[:12]
LEAK_FILTER = f"{TEST_LABEL}={RUN_ID}"


@pytest.fixture(scope="module")
def debian(engine: Engine) -> str:
    """The debootstrapped base image, which may still be in the making when tests start."""
    deadline = time.monotonic() + BASE_IMAGE_WAIT_S
    while engine.inspect_image(DEBIAN) is None:
        if time.monotonic() > deadline:
            unavailable(f"{DEBIAN} did not appear within {BASE_IMAGE_WAIT_S} s")
        time.sleep(5)
    return DEBIAN


@pytest.fixture
def images(engine: Engine) -> Iterator[list[str]]:
    """Refs created by a test; all removed afterwards."""
    created: list[str] = []
    yield created
    for ref in reversed(created):
        engine.remove_image(ref, force=True)


@pytest.fixture
def no_leaks(engine: Engine) -> Iterator[None]:
    yield
    assert engine.list_containers(LEAK_FILTER) == []


def unique_tag(name: str) -> str:
    return f"accel-images-test/{name}:{uuid.uuid4().hex[:10]}"


def build_scratch(engine: Engine, tmp_path: Path, images: list[str], **kwargs: Any) -> Any:
    tag = unique_tag("scratch")
    images.append(tag)
    images.extend(kwargs.get("extra_tags", ()))
    return engine.build(context_dir(tmp_path, "FROM scratch\nCOPY hello.txt /hello.txt\n"), tag,
                        log_path=tmp_path / "logs" / "scratch.log", **kwargs)


@pytest.mark.engine
def test_good_build_returns_the_image_and_writes_the_log(engine: Engine, tmp_path: Path,
                                                         images: list[str]) -> None:
    lines: list[str] = []
    extra = unique_tag("alias")
    built = build_scratch(engine, tmp_path, images, on_line=lines.append, extra_tags=[extra])
    assert built.id.startswith("sha256:")
    assert built.tag == images[0]
    assert built.size >= len("hello\n")
    info = engine.inspect_image(built.tag)
    assert info is not None and info.id == built.id
    assert set(info.tags) >= {built.tag, extra}
    log = (tmp_path / "logs" / "scratch.log").read_text()
    assert "Step 2/2 : COPY hello.txt /hello.txt" in log
    assert "Successfully built" in log
    assert "Step 2/2 : COPY hello.txt /hello.txt" in lines


@pytest.mark.engine
def test_labels_and_build_args_land_on_the_image(engine: Engine, tmp_path: Path,
                                                 images: list[str]) -> None:
    tag = unique_tag("labels")
    images.append(tag)
    ctx = context_dir(tmp_path, "FROM scratch\nARG FLAVOR\nLABEL flavor=$FLAVOR\nCOPY hello.txt /\n")
    engine.build(ctx, tag, buildargs={"FLAVOR": "devel"}, labels={"io.accel-images.vendor": "cpu"},
                 log_path=tmp_path / "b.log")
    info = engine.inspect_image(tag)
    assert info is not None
    assert info.labels["flavor"] == "devel"
    assert info.labels["io.accel-images.vendor"] == "cpu"
    assert engine.disk_usage_of(tag) == info.size


@pytest.mark.engine
def test_failing_step_raises_with_step_tail_and_log(engine: Engine, debian: str, tmp_path: Path,
                                                    images: list[str]) -> None:
    tag = unique_tag("fails")
    images.append(tag)
    ctx = context_dir(tmp_path, f"FROM {debian}\nRUN echo before-the-end; false\n")
    log = tmp_path / "fail.log"
    with pytest.raises(BuildFailed) as caught:
        engine.build(ctx, tag, log_path=log, network_mode="none")
    message = caught.value.message
    assert message == "step 2/2 (run echo) failed: exit code 1; last output: before-the-end"
    assert "before-the-end" in "\n".join(caught.value.log_tail)
    assert "returned a non-zero code: 1" in caught.value.detail
    assert caught.value.log_path == log
    assert "returned a non-zero code: 1" in log.read_text()
    assert engine.inspect_image(tag) is None


@pytest.mark.engine
def test_a_stopped_build_removes_the_intermediate_containers_its_labels_mark(
        engine: Engine, debian: str, tmp_path: Path, images: list[str], docker_client) -> None:
    """What a Ctrl-C during the classic builder's metadata steps leaves: containers in state Created
    (`/bin/sh -c '#(nop) LABEL ...'`) carrying the build's labels. A stopped build removes those of its own
    labels (its start time among them), in any state, and never another build's."""
    labels = {"io.accel-images.fingerprint": f"sha256:{RUN_ID}-stopped",
              "org.opencontainers.image.created": "2026-12-07T00:00:00Z"}
    own = docker_client.api.create_container(debian, command=["/bin/sh", "-c", "#(nop) LABEL a=b"], labels=labels)
    other = docker_client.api.create_container(debian, command=["true"], labels={
        **labels, "org.opencontainers.image.created": "2026-12-07T00:00:01Z"})   # a build started a second later

    def ctrl_c(line: str) -> None:
        raise KeyboardInterrupt

    tag = unique_tag("stopped")
    images.append(tag)
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.build(context_dir(tmp_path, f"FROM {debian}\nLABEL a=b\nRUN sleep 30\n"), tag, labels=labels,
                         log_path=tmp_path / "stopped.log", on_line=ctrl_c, network_mode="none")
        left = {c["Id"] for c in docker_client.api.containers(
            all=True, filters={"label": f"io.accel-images.fingerprint={labels['io.accel-images.fingerprint']}"})}
        assert own["Id"] not in left
        assert other["Id"] in left
    finally:
        for container in (own, other):
            try:
                docker_client.api.remove_container(container["Id"], force=True)
            except Exception:  # noqa: BLE001 (already gone)
                pass


@pytest.mark.engine
def test_dockerfile_syntax_error_is_build_failed(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(BuildFailed, match="unknown instruction FORM") as caught:
        engine.build(context_dir(tmp_path, "FORM scratch\n"), unique_tag("syntax"),
                     log_path=tmp_path / "syntax.log")
    assert "before its first step" in caught.value.message
    assert "unknown instruction" in (tmp_path / "syntax.log").read_text()


@pytest.mark.engine
def test_run_separates_stdout_stderr_and_exit_code(engine: Engine, debian: str, no_leaks: None) -> None:
    result = engine.run(debian, ["sh", "-c", "echo out; echo err >&2; exit 3"],
                        options={"network_disabled": True, "environment": {"X": "y"}},
                        timeout_s=60, labels={TEST_LABEL: RUN_ID})
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (3, "out\n", "err\n", False)


@pytest.mark.engine
def test_run_timeout_kills_and_removes_the_container(engine: Engine, debian: str, no_leaks: None) -> None:
    result = engine.run(debian, ["sh", "-c", "echo started; sleep 600"], timeout_s=1,
                        labels={TEST_LABEL: RUN_ID})
    assert result.timed_out
    assert result.exit_code != 0
    assert result.stdout == "started\n"


@pytest.mark.engine
def test_run_never_loses_the_output_of_a_command_that_exits_at_once(engine: Engine, debian: str,
                                                                     no_leaks: None) -> None:
    """The logs are read from the exited container before it goes. The SDK's `containers.run(remove=True)`,
    which reads them after, came back empty in 51 of 150 such runs here (docker/docker-py#2427)."""
    command = ["dpkg-query", "-W", "-f", "${Version}", "libc6"]
    outputs = {engine.run(debian, command, timeout_s=60, labels={TEST_LABEL: RUN_ID}).stdout for _ in range(20)}
    assert len(outputs) == 1 and "" not in outputs, outputs


@pytest.mark.engine
def test_run_of_a_missing_image_is_an_engine_error(engine: Engine, no_leaks: None) -> None:
    with pytest.raises(EngineError, match="not found locally"):
        engine.run("accel-images-test/absent:nope", ["true"], timeout_s=10, labels={TEST_LABEL: RUN_ID})


@pytest.mark.engine
def test_absent_images_are_none_and_removing_them_is_fine(engine: Engine) -> None:
    assert engine.inspect_image("accel-images-test/absent:nope") is None
    engine.remove_image("accel-images-test/absent:nope")


@pytest.mark.engine
def test_bad_socket_is_a_one_line_engine_error() -> None:
    with pytest.raises(EngineError) as caught:
        Engine.connect("unix:///nonexistent.sock")
    text = caught.value.one_line()
    assert text.startswith("Docker daemon not reachable at unix:///nonexistent.sock")
    assert "start it" in text and "DOCKER_HOST" in text
    assert "\n" not in text


@pytest.mark.engine
def test_pull_from_a_closed_port_is_a_transient_registry_error(engine: Engine) -> None:
    with pytest.raises(RegistryError, match="connection refused") as caught:
        engine.pull("127.0.0.1:5999/nope:1")
    assert "127.0.0.1:5999/nope:1" in caught.value.message
    assert caught.value.transient


@pytest.mark.engine
def test_push_to_a_closed_port_is_a_transient_registry_error(engine: Engine, tmp_path: Path,
                                                              images: list[str]) -> None:
    built = build_scratch(engine, tmp_path, images)
    ref = "127.0.0.1:5999/accel-images-test/scratch:1"
    images.append(ref)
    engine.tag(built.id, ref)
    with pytest.raises(RegistryError, match="connection refused") as caught:
        engine.push(ref)
    assert caught.value.transient


@pytest.mark.engine
def test_push_of_a_missing_image_is_an_engine_error(engine: Engine) -> None:
    with pytest.raises(EngineError, match="no local image"):
        engine.push("127.0.0.1:5999/accel-images-test/absent:1")


@pytest.fixture
def registry_5000() -> str:
    """The local registry the test environment runs on 127.0.0.1:5000."""
    try:
        socket.create_connection(("127.0.0.1", 5000), timeout=2).close()
    except OSError:
        unavailable("no registry listening on 127.0.0.1:5000")
    return "127.0.0.1:5000"


@pytest.mark.engine
@pytest.mark.registry
def test_pull_of_an_unknown_repository_is_not_found(engine: Engine, registry_5000: str) -> None:
    with pytest.raises(RegistryError, match="not found") as caught:
        engine.pull(f"{registry_5000}/nope/nothing:1")
    assert f"{registry_5000}/nope/nothing:1" in caught.value.message
    assert not caught.value.transient


@pytest.mark.engine
@pytest.mark.registry
def test_push_returns_the_digest_and_the_image_pulls_back(engine: Engine, registry_5000: str,
                                                          tmp_path: Path, images: list[str]) -> None:
    built = build_scratch(engine, tmp_path, images)
    ref = f"{registry_5000}/accel-images-test/scratch:{uuid.uuid4().hex[:10]}"
    images.append(ref)
    engine.tag(built.id, ref)
    lines: list[str] = []
    digest = engine.push(ref, on_line=lines.append)
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert any("digest: " + digest in line for line in lines)
    engine.remove_image(ref)
    pulled = engine.pull(ref)
    assert pulled.id == built.id
    assert f"{ref.rsplit(':', 1)[0]}@{digest}" in pulled.repo_digests


@pytest.mark.engine
def test_removing_an_absent_container_is_fine(engine: Engine) -> None:
    engine.remove_container("0" * 64)
