"""The Docker engine wrapper: stream checking and error translation offline, then the real
daemon (builds FROM scratch, containers from local/debian:bookworm).

Here: the tests that need no engine or registry; those that do are in tests/integration/test_engine.py.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import unavailable

from accel_images.builder import buildlog
from accel_images.builder.engine import Engine, registry_error
from accel_images.errors import BuildFailed, EngineError




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
        # a short poll: shutdown() waits for the loop's next look, 0.5 s by default, once per server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
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
    *({"stream": f"compiling {i}\n"} for i in range(100)),
    {"errorDetail": {"code": 2, "message": "The command '/bin/sh -c make' returned a non-zero code: 2"},
     "error": "The command '/bin/sh -c make' returned a non-zero code: 2"},
]


def test_error_event_inside_the_stream_is_build_failed(fake_daemon: Any, tmp_path: Path) -> None:
    log = tmp_path / "logs" / "b.log"
    seen: list[str] = []
    with pytest.raises(BuildFailed) as caught:
        fake_daemon(FAILING_BUILD).build(context_dir(tmp_path), "t:1", log_path=log, on_line=seen.append)
    message = caught.value.message
    assert message == "step 2/2 (run make) failed: exit code 2; last output: compiling 99"
    assert caught.value.step == "Step 2/2 : RUN make"
    assert "compiling 99" in caught.value.log_tail[-2] and "compiling 5" not in caught.value.log_tail
    assert caught.value.log_path == log
    assert "compiling 0" in log.read_text()
    assert "Step 1/2 : FROM base" in seen  # fragments are joined into whole lines


@pytest.mark.parametrize("userinfo", ["builder:SECRET-TOKEN==", "builder:pa@ss-SECRET", "builder:pa/ss-SECRET",
                                      "builder:it's-SECRET", "builder:p%40ss%2F-SECRET", "SECRET-TOKEN=="],
                         ids=["token-ending-in-equals", "password-with-at", "password-with-slash",
                              "password-with-quote", "percent-encoded", "token-alone"])
def test_the_build_log_and_its_failure_mask_credentials_whatever_they_hold(fake_daemon: Any, tmp_path: Path,
                                                                           userinfo: str) -> None:
    """A step's output may quote an index or a mirror with its login (pip masks only what it parses as a
    password): the log file, the progress lines, the failure's cause, detail and tail all mask it."""
    url = f"http://{userinfo}@mirror.example.com/simple/cpu"
    events = [{"stream": "Step 1/1 : RUN pip install torch\n"}, {"stream": f"Looking in indexes: {url}\n"},
              {"stream": f"ERROR: Could not fetch URL {url}/torch/: connection refused\n"},
              {"error": f"The command '/bin/sh -c pip install --index-url {url} torch' returned a non-zero code: 1"}]
    log, seen = tmp_path / "b.log", list[str]()
    with pytest.raises(BuildFailed) as caught:
        fake_daemon(events).build(context_dir(tmp_path), "t:1", log_path=log, on_line=seen.append)
    failed = caught.value
    for text in (log.read_text(), "\n".join(seen), failed.one_line(), failed.detail, "\n".join(failed.log_tail)):
        assert "SECRET" not in text and "http://***@mirror.example.com/simple/cpu" in text, text


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


# ---- reading a container's files: Docker's archive answer and Podman's ------------------------------

class _ArchiveApi:
    """`get_archive` answering with one tar member and the stat header beside it."""

    def __init__(self, member: Any, data: bytes, stat: dict[str, Any]) -> None:
        import io
        import tarfile
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.addfile(member, io.BytesIO(data) if data else None)
        self.body, self.stat = buffer.getvalue(), stat

    def get_archive(self, container: str, path: str, chunk_size: int) -> tuple[Iterator[bytes], dict[str, Any]]:
        return iter([self.body]), self.stat


def _member(name: str, *, link: str = "", size: int = 0) -> Any:
    import tarfile
    member = tarfile.TarInfo(name)
    member.type, member.linkname, member.size = (tarfile.SYMTYPE, link, 0) if link else (tarfile.REGTYPE, "", size)
    return member


GO_SYMLINK = 1 << 27


def test_a_final_link_is_a_link_from_docker_and_from_podman() -> None:
    """Docker sends the link itself; Podman 4.3.1's compatible service follows it and sends python3.11's bytes
    named `python`, with a stat header that still says link (mode has os.ModeSymlink) and where it leads."""
    from accel_images.builder.engine import ContainerFiles
    docker_answer = _ArchiveApi(_member("python", link="python3.11"), b"",
                                {"name": "python", "mode": GO_SYMLINK | 0o777, "linkTarget": "python3.11"})
    podman_answer = _ArchiveApi(_member("python", size=4), b"\x7fELF",
                                {"name": "python3.11", "mode": GO_SYMLINK | 0o777, "linkTarget": "/usr/bin/python3.11"})
    plain_file = _ArchiveApi(_member("python3.11", size=4), b"\x7fELF",
                             {"name": "python3.11", "mode": 0o755, "linkTarget": "/usr/bin/python3.11"})
    read = {name: ContainerFiles(api, "c").entry(path) for name, api, path in (
        ("docker", docker_answer, "/opt/venv/bin/python"), ("podman", podman_answer, "/opt/venv/bin/python"),
        ("file", plain_file, "/usr/bin/python3.11"))}
    assert (read["docker"].kind, read["docker"].target) == ("link", "python3.11")
    assert (read["podman"].kind, read["podman"].target) == ("link", "/usr/bin/python3.11")
    assert read["file"].kind == "file"   # Podman names a plain file's own path as linkTarget: no link bit, no link
