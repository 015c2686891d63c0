"""The sources of `kb check`, served from recorded responses on 127.0.0.1 (no network needed).

`World.recorded()` is the state of 2026-12-03: the package index's project JSON for torch,
torchvision and torchaudio as recorded then (tests/data/kb/recorded/pypi, trimmed), and the
SYNTHETIC wheel index pages and registry tag lists of tests/data/kb/synthetic (the hosts were not
reachable when the package index was recorded; see tests/data/kb/README.md). A test edits the
world (a route's status, body or headers) before it asks; the server answers from it:

- `/pypi/<package>/json`, `/whl/<index>/torch/`, `/v2/<repository>/tags/list`, by exact path;
- a route can answer any status, any bytes, a streamed body of N bytes, or a 401 challenge that
  only a Bearer token from `/token` passes.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DATA = Path(__file__).parent / "data" / "kb"
TOKEN = "recorded-token"


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream_bytes: int = 0          # > 0: send this many bytes of filler, without Content-Length
    needs_token: bool = False      # answer 401 with a Bearer challenge unless the token is sent


@dataclass
class World:
    routes: dict[str, Route] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    @classmethod
    def recorded(cls) -> World:
        world = cls()
        for package in ("torch", "torchvision", "torchaudio"):
            body = gzip.decompress((DATA / "recorded" / "pypi" / f"{package}.json.gz").read_bytes())
            world.routes[f"/pypi/{package}/json"] = Route(body)
        for page in (DATA / "synthetic" / "whl").glob("*/torch/index.html"):
            world.routes[f"/whl/{page.parent.parent.name}/torch/"] = Route(page.read_bytes(), content_type="text/html")
        for listing in (DATA / "synthetic" / "v2").rglob("tags/list.json"):
            repository = listing.parent.parent.relative_to(DATA / "synthetic" / "v2").as_posix()
            world.routes[f"/v2/{repository}/tags/list"] = Route(listing.read_bytes())
        return world

    # ---- edits ------------------------------------------------------------------------------

    def project(self, package: str) -> dict[str, Any]:
        return json.loads(self.routes[f"/pypi/{package}/json"].body)

    def set_project(self, package: str, data: dict[str, Any]) -> None:
        self.routes[f"/pypi/{package}/json"] = Route(json.dumps(data).encode())

    def page(self, index: str) -> str:
        return self.routes[f"/whl/{index}/torch/"].body.decode()

    def set_page(self, index: str, text: str) -> None:
        self.routes[f"/whl/{index}/torch/"] = Route(text.encode(), content_type="text/html")

    def tags(self, repository: str) -> list[str]:
        return list(json.loads(self.routes[f"/v2/{repository}/tags/list"].body)["tags"])

    def set_tags(self, repository: str, tags: list[str]) -> None:
        self.routes[f"/v2/{repository}/tags/list"] = Route(json.dumps({"name": repository, "tags": tags}).encode())


class _Handler(BaseHTTPRequestHandler):
    world: World
    base: str

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.world.asked.append(self.path)
        if path == "/token":
            return self._send(Route(json.dumps({"token": TOKEN, "expires_in": 300}).encode()))
        route = self.world.routes.get(self.path) or self.world.routes.get(path)  # a page by its query, else the path
        if route is None:
            return self._send(Route(json.dumps({"errors": [{"code": "NAME_UNKNOWN", "message": "not found"}]}).encode(),
                                    status=404))
        if route.needs_token and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            challenge = f'Bearer realm="{self.base}/token",service="recorded",scope="repository:x:pull"'
            return self._send(Route(b'{"errors":[{"code":"UNAUTHORIZED"}]}', status=401,
                                    headers={"WWW-Authenticate": challenge}))
        self._send(route)

    def _send(self, route: Route) -> None:
        self.send_response(route.status)
        self.send_header("Content-Type", route.content_type)
        for name, value in route.headers.items():
            self.send_header(name, value.replace("{base}", self.base))
        if route.stream_bytes:
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b" " * (1 << 20)
            sent = 0
            try:
                while sent < route.stream_bytes:
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        self.wfile.write(route.body)


@contextmanager
def serving(world: World) -> Iterator[str]:
    """Serve `world` on 127.0.0.1:<free port>; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.RequestHandlerClass = type("Handler", (_Handler,), {"world": world, "base": base})
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def source_args(base: str) -> list[str]:
    """The `kb check` options that point every source at the server."""
    return ["--pypi-url", f"{base}/pypi", "--wheel-index-url", f"{base}/whl",
            "--registry-url", f"docker.io={base}", "--registry-url", f"vault.habana.ai={base}"]
