"""The Docker engine wrapper: stream checking and error translation offline, then the real
daemon (builds FROM scratch, containers from local/debian:bookworm)."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import unavailable

from accel_images import buildlog
from accel_images.engine import Engine, registry_error
from accel_images.errors import BuildFailed, EngineError, RegistryError

DEBIAN = "local/debian:bookworm"
BASE_IMAGE_WAIT_S = 300
TEST_LABEL = "io.accel-images.test"
RUN_ID = uuid.uuid4().hex[:12]
LEAK_FILTER = f"{TEST_LABEL}={RUN_ID}"




# -- build logs -----------------------------------------------------------------------

def test_tail(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert buildlog.tail(log, 3) == ["line 97", "line 98", "line 99"]
    assert buildlog.tail(tmp_path / "absent.log", 3) == []


# -- stream handling, against a stand-in daemon on a unix socket ----------------------

class _FakeDaemon(socketserver.StreamRequestHandler):
    """Answers version/ping, and a build with the server's `events`, then ends the chunked
    stream cleanly or (`cut`) drops the connection mid-event, as a dying dockerd does."""

    def handle(self) -> None:
        request = self.rfile.readline().decode()
        headers = {}
        while (line := self.rfile.readline().decode().strip()):
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        self._skip_body(headers)
        if "/build" not in request:
            body = json.dumps({"ApiVersion": "1.41"}).encode()
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            return
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
        for event in self.server.events:  # type: ignore[attr-defined]
            chunk = json.dumps(event).encode() + b"\r\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        cut = self.server.cut  # type: ignore[attr-defined]
        self.wfile.write(b'40\r\n{"stream": "half' if cut else b"0\r\n\r\n")

    def _skip_body(self, headers: dict[str, str]) -> None:
        if headers.get("transfer-encoding") == "chunked":
            while (size := int(self.rfile.readline().strip(), 16)):
                self.rfile.read(size + 2)
            self.rfile.readline()
        else:
            self.rfile.read(int(headers.get("content-length", 0)))


@pytest.fixture
def fake_daemon(tmp_path: Path) -> Iterator[Any]:
    """`start(events, cut)` -> an Engine connected to a stand-in daemon."""
    servers: list[socketserver.UnixStreamServer] = []

    def start(events: list[dict[str, Any]], cut: bool = False) -> Engine:
        path = tmp_path / f"fake{len(servers)}.sock"
        server = socketserver.ThreadingUnixStreamServer(str(path), _FakeDaemon)
        server.daemon_threads = True
        server.events, server.cut = events, cut  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return Engine.connect(f"unix://{path}")

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def context_dir(tmp_path: Path, dockerfile: str = "FROM scratch\n") -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir(exist_ok=True)
    (ctx / "Dockerfile").write_text(dockerfile)
    (ctx / "hello.txt").write_text("hello\n")
    return ctx


FAILING_BUILD = [
    {"stream": "Step 1/2 : FROM base"},
    {"stream": "\n"},
    {"stream": "Step 2/2 : RUN make"},
    {"stream": "\n ---> Running in abc\n"},
    *({"stream": f"compiling {i}\n"} for i in range(30)),
    {"errorDetail": {"code": 2, "message": "The command '/bin/sh -c make' returned a non-zero code: 2"},
     "error": "The command '/bin/sh -c make' returned a non-zero code: 2"},
]


def test_error_event_inside_the_stream_is_build_failed(fake_daemon: Any, tmp_path: Path) -> None:
    log = tmp_path / "logs" / "b.log"
    seen: list[str] = []
    with pytest.raises(BuildFailed) as caught:
        fake_daemon(FAILING_BUILD).build(context_dir(tmp_path), "t:1", log_path=log, on_line=seen.append)
    message = caught.value.message
    assert message == "step 2/2 (make) failed: exit code 2; last output: compiling 29"
    assert caught.value.step == "Step 2/2 : RUN make"
    assert "compiling 29" in caught.value.log_tail[-2] and "compiling 5" not in "".join(caught.value.log_tail)
    assert caught.value.log_path == log
    assert "compiling 0" in log.read_text()
    assert "Step 1/2 : FROM base" in seen  # fragments are joined into whole lines


def test_daemon_dying_mid_build_is_an_engine_error(fake_daemon: Any, tmp_path: Path) -> None:
    engine = fake_daemon([{"stream": "Step 1/1 : FROM scratch\n"}], cut=True)
    log = tmp_path / "b.log"
    with pytest.raises(EngineError, match="went away during the build of t:1") as caught:
        engine.build(context_dir(tmp_path), "t:1", log_path=log)
    assert str(log) in caught.value.message
    assert "Step 1/1" in log.read_text()


def test_stream_ending_without_an_image_is_an_engine_error(fake_daemon: Any, tmp_path: Path) -> None:
    engine = fake_daemon([{"stream": "Step 1/1 : FROM scratch\n"}])
    with pytest.raises(EngineError, match="ended without producing an image"):
        engine.build(context_dir(tmp_path), "t:1", log_path=tmp_path / "b.log")


@pytest.mark.parametrize(("detail", "reason", "transient"), [
    ('Get "http://127.0.0.1:5999/v2/": dial tcp 127.0.0.1:5999: connect: connection refused',
     "connection refused", True),
    ('Get "https://x.invalid/v2/": dial tcp: lookup x.invalid on 10.0.0.53:53: no such host',
     "unknown host", True),
    ("received unexpected HTTP status: 503 Service Unavailable", "server error", True),
    ("manifest for 127.0.0.1:5000/nope/nothing:1 not found: manifest unknown: manifest unknown",
     "not found", False),
    ("unauthorized: authentication required", "docker login", False),
    ("http: server gave HTTP response to HTTPS client", "insecure-registries", False),
    ('Put "http://127.0.0.1:5999/v2/x/blobs/uploads/3f0c?_state=SECRETSTATE&digest=sha256:ab": EOF',
     "connection closed early", True),
    ("write tcp 127.0.0.1:1->127.0.0.1:5999: use of closed network connection", "connection closed early", True),
])
def test_registry_failures_are_classified(detail: str, reason: str, transient: bool) -> None:
    err = registry_error("push", "127.0.0.1:5999/x:1", detail)
    assert reason in err.message
    assert err.message.startswith("push of 127.0.0.1:5999/x:1 failed")
    assert "registry 127.0.0.1:5999" in err.message
    assert err.transient is transient


def test_an_unknown_failure_keeps_its_cause_and_never_the_upload_token() -> None:
    url = "http://127.0.0.1:5999/v2/team/x/blobs/uploads/3f0c9e?_state=" + "T0KEN" * 80 + "&digest=sha256:" + "a" * 64
    err = registry_error("push", "127.0.0.1:5999/x:1", f'Patch "{url}": blob upload invalid: the cause at the end')
    assert "T0KEN" not in err.message and "T0KEN" not in err.detail
    assert err.message.endswith("blob upload invalid: the cause at the end")
    long = registry_error("push", "127.0.0.1:5999/x:1", "start " + "x" * 600 + " the cause")
    assert long.message.endswith(" the cause") and len(long.message) < 400


# -- the real engine ------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    try:
        connected = Engine.connect()
    except EngineError as err:
        unavailable(err.one_line())
    yield connected
    connected.close()


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
    assert message == "step 2/2 (echo) failed: exit code 1; last output: before-the-end"
    assert "before-the-end" in "\n".join(caught.value.log_tail)
    assert "returned a non-zero code: 1" in caught.value.detail
    assert caught.value.log_path == log
    assert "returned a non-zero code: 1" in log.read_text()
    assert engine.inspect_image(tag) is None


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
