"""Fault injection for the reliability tests.

- `FaultProxy`: a threaded HTTP proxy on 127.0.0.1:<free port> in front of the real registry.
  Docker treats every 127.0.0.x registry as insecure, so a push to the proxy's port speaks
  plain HTTP and passes through it. It can refuse connections, answer 401 to everything,
  answer 500 for the Nth PUT of a manifest or a blob, cut the connection mid-upload, add
  latency to every request, demand Basic credentials of its own, add a `Link: <...>; rel="next"`
  header to every tag list it passes on, or answer chosen requests itself (`Canned`): a referrers
  list that lies, a registry that cannot delete (`NO_DELETE`), a 503 on a blob, an error message
  full of escape sequences.
- `RequestSink`: an HTTP server on a loopback port of its own that answers every request with an
  empty tag list and records what it was sent (method, path, headers): the "other host" a
  registry's answer may point a client at.
- `DisposableDaemon`: a second, throw-away dockerd on its own socket and data root, so tests
  can stop and kill a daemon without touching the shared one at /var/run/docker.sock.
"""

from __future__ import annotations

import base64
import http.client
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import TypeVar
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import docker
import docker.errors

UPSTREAM = "127.0.0.1:5000"
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate", "content-length"}


def free_port() -> int:
    """A loopback port nothing listens on (right now): connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Canned:
    """An answer the proxy gives itself, instead of the registry's, to every `method` request whose
    path (with its query) `path` matches (re.search)."""

    method: str
    path: str
    status: int
    body: bytes = b""
    content_type: str = "application/json"

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and re.search(self.path, path) is not None


NO_DELETE = Canned("DELETE", r"/v2/.+/manifests/", 405,
                   b'{"errors":[{"code":"UNSUPPORTED","message":"The operation is unsupported."}]}')
"""What the distribution registry (2.8) answers every manifest DELETE with when storage.delete is off,
for a digest it holds or not (observed on docker-registry 2.8 here, with and without the setting)."""


@dataclass
class Faults:
    """What the proxy does wrong; counters are per proxy, 1-based."""

    unauthorized: bool = False
    fail_put: dict[str, set[int]] = field(default_factory=dict)  # 'manifest'|'blob' -> which PUTs get a 500
    cut_upload: int = 0                                        # Nth blob upload request: connection closed
    delay_s: float = 0.0                                       # added to every request (a far registry)
    in_flight: int = 0                                         # requests being answered now
    peak_in_flight: int = 0                                    # the most at any one time
    seen: list[str] = field(default_factory=list)              # "METHOD path" of every request
    canned: list[Canned] = field(default_factory=list)         # answered by the proxy, first match wins
    basic: tuple[str, str] | None = None                       # (user, password) the proxy demands, else 401
    next_link: str | None = None                               # Link header added to tag lists ({self}: this proxy)
    next_link_on: str = "/tags/list"                           # ... whose request path contains this


_Proxy = TypeVar("_Proxy", bound="FaultProxy")


class _Server(ThreadingHTTPServer):
    """A listen backlog for many clients at once: with the default 5, a burst of concurrent
    connections overflows it, and each dropped SYN waits out the kernel's 1 s retransmit."""

    request_queue_size = 128


class FaultProxy:
    """Forwards to `upstream` except where `faults` say otherwise. Use as a context manager."""

    def __init__(self, upstream: str = UPSTREAM) -> None:
        self.upstream = upstream
        self.faults = Faults()
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.host = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self: _Proxy) -> _Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.refuse()

    def refuse(self) -> None:
        """Stop listening: from now on connections to the port are refused."""
        self._server.shutdown()
        self._server.server_close()

    def count(self, kind: str) -> int:
        with self._lock:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            return self._counts[kind]


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass(frozen=True)
class Received:
    """One request a RequestSink was sent."""

    method: str
    path: str
    headers: dict[str, str]


class RequestSink:
    """Records every request sent to its port; answers each with an empty tag list. A context manager."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                sink.received.append(Received(self.command, self.path, dict(self.headers.items())))
                body = b'{"name": "sink", "tags": ["from-the-sink"]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _handle

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.host = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> RequestSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _kind(method: str, path: str) -> str | None:
    if method == "PUT" and "/manifests/" in path:
        return "manifest"
    if method == "PUT" and "/blobs/uploads/" in path:
        return "blob"
    return None


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        # Headers and body leave in separate writes: with Nagle's algorithm on, each answer on a kept-alive
        # connection waits out the client's delayed ACK (40 ms), which would swamp an injected delay.
        disable_nagle_algorithm = True

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _handle(self) -> None:
            faults = proxy.faults
            faults.seen.append(f"{self.command} {self.path}")
            if faults.delay_s:
                with proxy._lock:
                    faults.in_flight += 1
                    faults.peak_in_flight = max(faults.peak_in_flight, faults.in_flight)
                try:
                    time.sleep(faults.delay_s)
                finally:
                    with proxy._lock:
                        faults.in_flight -= 1
            if faults.unauthorized or (faults.basic and self.headers.get("Authorization") != _basic(*faults.basic)):
                self._body()
                self._answer(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}',
                             {"WWW-Authenticate": f'Basic realm="{proxy.host}"',
                              "Content-Type": "application/json",
                              "Docker-Distribution-API-Version": "registry/2.0"})
                return
            if (faults.cut_upload and self.command in ("PATCH", "PUT") and "/blobs/uploads/" in self.path
                    and proxy.count("upload") == faults.cut_upload):
                self.rfile.read(min(int(self.headers.get("Content-Length") or 1024), 1024))
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            body = self._body()
            canned = next((answer for answer in faults.canned if answer.matches(self.command, self.path)), None)
            if canned is not None:
                self._answer(canned.status, canned.body, {"Content-Type": canned.content_type,
                                                          "Docker-Distribution-API-Version": "registry/2.0"})
                return
            kind = _kind(self.command, self.path)
            if kind and proxy.count(kind) in faults.fail_put.get(kind, set()):
                self._answer(500, b'{"errors":[{"code":"UNKNOWN","message":"injected server error"}]}',
                             {"Content-Type": "application/json"})
                return
            self._forward(body)

        def _forward(self, body: bytes) -> None:
            upstream = http.client.HTTPConnection(proxy.upstream, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            upstream.request(self.command, self.path, body=body if body or self.command in ("PUT", "PATCH", "POST")
                             else None, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            self.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_BY_HOP:
                    self.send_header(key, value)
            if proxy.faults.next_link and proxy.faults.next_link_on in self.path:
                link = proxy.faults.next_link.replace("{self}", f"http://{proxy.host}")
                self.send_header("Link", f'<{link}>; rel="next"')
            # HEAD answers carry the size of what a GET would return: clients (dockerd) rely on it.
            length = response.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            upstream.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _handle

    return Handler


@contextmanager
def disposable_daemon(shared: docker.DockerClient, root: Path, base: str, *as_names: str) -> Iterator[DisposableDaemon]:
    """A started DisposableDaemon holding the shared daemon's image `base`, also tagged `as_names`."""
    daemon = DisposableDaemon(root)
    try:
        daemon.start()
        client = daemon.client()
        try:
            [loaded] = client.images.load(shared.images.get(base).save())  # type: ignore[arg-type]  # chunks stream
            for name in as_names:
                repository, _, tag = name.rpartition(":")
                loaded.tag(repository, tag)
        finally:
            client.close()
        yield daemon
    finally:
        daemon.stop()


class DisposableDaemon:
    """A dockerd of our own under `root`; never the shared one.

    It runs in a network namespace of its own: a dockerd started with `--bridge none` deletes
    any `docker0` interface it sees at start-up, which would cut the shared daemon's
    containers off the network.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.log = root / "dockerd.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._end_containerd()  # a killed dockerd leaves its containerd, which blocks a restart
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                ["unshare", "--net", "dockerd", "--host", self.host, "--data-root", str(self.root / "data"),
                 "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
                 "--bridge", "none", "--iptables=false"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"dockerd exited: {self.log.read_text()[-2000:]}")
            try:
                client = docker.DockerClient(base_url=self.host, timeout=5)
            except docker.errors.DockerException:
                time.sleep(0.3)
                continue
            try:
                client.ping()
                return
            except docker.errors.DockerException:
                time.sleep(0.3)
            finally:
                client.close()
        raise RuntimeError(f"dockerd did not answer within {timeout_s} s")

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host, timeout=120)

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: the socket file stays behind."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM and wait; then end the containerd it started, if that outlived it."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=30)
        self._end_containerd()
        self._unmount_leftovers()

    def _unmount_leftovers(self) -> None:
        """A killed dockerd leaves its data root mounted; unmount what lies under our root."""
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(str(self.root) + "/")), key=len, reverse=True):
            subprocess.run(["umount", mount], capture_output=True, check=False)

    def _end_containerd(self) -> None:
        pidfile = self.root / "exec" / "containerd" / "containerd.pid"
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            return
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
