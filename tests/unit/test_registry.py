"""accel_images.registry: labels and digests read over the registry API, tag deletion that leaves
other tags alone, authentication, and failures as one-line RegistryErrors.

Most tests talk to the real local registry (127.0.0.1:5000) with images made of a config
blob and a manifest, pushed over HTTP by the test itself; authentication runs against a
small stand-in registry on a loopback port.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_registry_integration.py.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from accel_images.errors import InputError, RegistryError
from accel_images.registry import Destination, RegistryClient, is_loopback, parse_time
from faultproxy import RequestSink
from nightly_fixture.rawregistry import (DOCKER_MANIFEST)


@pytest.fixture
def client(registry: str) -> RegistryClient:
    return RegistryClient(registry, credentials=lambda host: None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- failures ---------------------------------------------------------------------------------

def test_unreachable_registry_is_a_transient_one_line_error() -> None:
    port = free_port()
    with pytest.raises(RegistryError) as caught:
        RegistryClient(f"127.0.0.1:{port}", credentials=lambda host: None).image("a/b", "c")
    assert caught.value.transient is True
    assert f"registry 127.0.0.1:{port} unreachable (connection refused)" in caught.value.one_line()
    assert "\n" not in caught.value.one_line()


# ---- authentication, against a stand-in registry ------------------------------------------------

class FakeRegistry(BaseHTTPRequestHandler):
    """A registry that wants `auth` ('basic' or 'bearer') for everything, with user `u` / password `p`."""

    server: Any

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.path.startswith("/token"):
            return self._token()
        if self.server.status is not None:
            return self._send(self.server.status, {"errors": [{"code": "UNAVAILABLE", "message": "down"}]})
        wanted = "Basic " + base64.b64encode(b"u:p").decode() if self.server.auth == "basic" else "Bearer tok-123"
        if self.headers.get("Authorization") != wanted:
            return self._challenge()
        if self.path == "/v2/":
            return self._send(200, {})
        if "/tags/list" in self.path:  # pages on forever: each names the next
            page = int(self.path.rsplit("last=t", 1)[1]) if "last=t" in self.path else 0
            return self._send(200, {"name": "team/img", "tags": [f"t{page + 1}"]},
                              {"Link": f'</v2/team/img/tags/list?n=1&last=t{page + 1}>; rel="next"'})
        if self.path.endswith("/manifests/missing"):
            return self._send(404, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]})
        if "/manifests/" in self.path:
            return self._send(200, {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "layers": [],
                                    "config": {"digest": "sha256:" + "c" * 64, "size": 1}},
                              {"Docker-Content-Digest": "sha256:" + "d" * 64, "Content-Type": DOCKER_MANIFEST})
        if "/blobs/" in self.path:
            return self._send(200, {"created": "2026-11-01T00:00:00Z", "config": {"Labels": {"k": "v"}}})
        self._send(404, {})

    do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        """An upload starts here and goes on where `upload_location` says (a storage service elsewhere)."""
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        wanted = "Basic " + base64.b64encode(b"u:p").decode()
        if self.headers.get("Authorization") != wanted:
            return self._challenge()
        self._send(202, {}, {"Location": self.server.upload_location})

    def _challenge(self) -> None:
        host = f"127.0.0.1:{self.server.server_address[1]}"
        header = ('Basic realm="fake"' if self.server.auth == "basic" else
                  f'Bearer realm="http://{host}/token",service="fake",scope="repository:team/img:pull"')
        self._send(401, {"errors": [{"code": "UNAUTHORIZED"}]}, {"WWW-Authenticate": header})

    def _token(self) -> None:
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"u:p").decode():
            return self._send(401, {})
        assert "scope=repository%3Ateam%2Fimg%3Apull" in self.path and "service=fake" in self.path
        self._send(200, {"token": "tok-123"})

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


@pytest.fixture
def fake_registry() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeRegistry)
    server.auth, server.status, server.seen = "bearer", None, []  # type: ignore[attr-defined]
    server.upload_location = ""  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def docker_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, user: str, password: str) -> None:
    """A Docker config file as `docker login` writes it, found through DOCKER_CONFIG."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))


@pytest.mark.parametrize("auth", ["bearer", "basic"])
def test_credentials_from_the_docker_config_answer_the_challenge(fake_registry: ThreadingHTTPServer, auth: str,
                                                                 tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake_registry.auth = auth  # type: ignore[attr-defined]
    host = f"127.0.0.1:{fake_registry.server_address[1]}"
    docker_config(tmp_path, monkeypatch, host, "u", "p")
    client = RegistryClient(host)
    image = client.image("team/img", "tag")
    assert image is not None and image.labels == {"k": "v"} and image.digest == "sha256:" + "d" * 64
    assert client.image("team/img", "missing") is None
    first_anonymous = fake_registry.seen[0]  # type: ignore[attr-defined]
    assert first_anonymous[1] is None


def test_refused_credentials_are_permanent_and_never_printed(fake_registry: ThreadingHTTPServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    host = f"127.0.0.1:{fake_registry.server_address[1]}"
    docker_config(tmp_path, monkeypatch, host, "u", "s3cret-pass")
    with pytest.raises(RegistryError) as caught:
        RegistryClient(host).image("team/img", "tag")
    message = caught.value.one_line()
    assert caught.value.transient is False
    assert f"docker login {host}" in message
    assert "s3cret-pass" not in message and base64.b64encode(b"u:s3cret-pass").decode() not in message


def test_no_credentials_for_a_registry_that_wants_them(fake_registry: ThreadingHTTPServer) -> None:
    fake_registry.auth = "basic"  # type: ignore[attr-defined]
    host = f"127.0.0.1:{fake_registry.server_address[1]}"
    with pytest.raises(RegistryError) as caught:
        RegistryClient(host, credentials=lambda h: None).ping()
    assert "denied access (authentication required)" in caught.value.one_line()
    assert f"`docker login {host}`" in caught.value.one_line()


def test_server_errors_are_transient(fake_registry: ThreadingHTTPServer) -> None:
    fake_registry.status = 503  # type: ignore[attr-defined]
    host = f"127.0.0.1:{fake_registry.server_address[1]}"
    with pytest.raises(RegistryError) as caught:
        RegistryClient(host, credentials=lambda h: None).image("team/img", "tag")
    assert caught.value.transient is True
    assert "answered 503 (UNAVAILABLE: down)" in caught.value.one_line()


def test_the_login_goes_only_to_the_registry_itself(fake_registry: ThreadingHTTPServer) -> None:
    """The registry names an upload location on another host: the request goes there (a storage service
    may need it), but without the Authorization header the registry's login is in."""
    fake_registry.auth = "basic"  # type: ignore[attr-defined]
    host = f"127.0.0.1:{fake_registry.server_address[1]}"
    with RequestSink() as sink:
        fake_registry.upload_location = f"http://{sink.host}/upload/1?_state=x"  # type: ignore[attr-defined]
        client = RegistryClient(host, credentials=lambda h: {"username": "u", "password": "p"})
        with pytest.raises(RegistryError):
            client.put_labels_image("team/img", "t", {"k": "v"})   # the sink answers 200, not 201
    [put] = sink.received
    assert put.method == "PUT" and "Authorization" not in put.headers, put
    assert client.is_home(f"http://{host}/v2/x") and not client.is_home(f"http://{sink.host}/v2/x")


@pytest.mark.parametrize("realm", ["http://auth.example.com/token", "ftp://auth.example.com/token", "/token"])
def test_an_https_registry_may_not_send_the_login_to_a_token_service_without_tls(realm: str) -> None:
    """The Bearer flow sends the stored login to the realm the registry names: over https only, when the
    registry itself is https (the challenge is answered before any request to the realm)."""
    client = RegistryClient("reg.example.com", credentials=lambda h: {"username": "u", "password": "p"})
    with pytest.raises(RegistryError) as caught:
        client._answer_challenge(f'Bearer realm="{realm}",service="reg"', "repository:a/b:pull", "reading a/b")
    assert "is not an https:// URL (the login is sent there)" in caught.value.one_line()
    assert caught.value.transient is False


def test_a_tag_list_that_pages_on_forever_is_bounded(fake_registry: ThreadingHTTPServer) -> None:
    fake_registry.auth = "basic"  # type: ignore[attr-defined]
    host = f"127.0.0.1:{fake_registry.server_address[1]}"
    client = RegistryClient(host, credentials=lambda h: {"username": "u", "password": "p"})
    with pytest.raises(RegistryError) as caught:
        client.tags("team/img", page_size=1, max_pages=25)
    assert "the tag list goes on past 25 pages" in caught.value.one_line()
    assert caught.value.transient is False
    assert len([path for path, _ in fake_registry.seen if "/tags/list" in path]) <= 26  # type: ignore[attr-defined]


# ---- values -----------------------------------------------------------------------------------

def test_destination_parsing() -> None:
    assert Destination.parse("127.0.0.1:5000") == Destination("127.0.0.1:5000")
    assert Destination.parse("ghcr.io/my-team/") == Destination("ghcr.io", "my-team")
    assert Destination.parse("http://reg.lan:5000/a/b") == Destination("reg.lan:5000", "a/b", "http")
    assert Destination.parse("ghcr.io/my-team").repository("accel-images/pytorch") == "my-team/accel-images/pytorch"
    for bad in ("", "bad host", "ftp://x", "reg.io/Upper", "reg.io/a;b", "-x.io"):
        with pytest.raises(InputError):
            Destination.parse(bad)


def test_scheme_is_http_only_for_loopback_unless_given() -> None:
    assert RegistryClient("127.0.0.1:5000").base_url == "http://127.0.0.1:5000"
    assert RegistryClient("localhost").base_url == "http://localhost"
    assert RegistryClient("[::1]:5000").base_url == "http://[::1]:5000"
    assert RegistryClient("ghcr.io").base_url == "https://ghcr.io"
    assert RegistryClient("docker.io").base_url == "https://registry-1.docker.io"
    assert RegistryClient("reg.lan:5000", scheme="http").base_url == "http://reg.lan:5000"
    assert not is_loopback("127.0.0.1.example.com")


def test_parse_time() -> None:
    assert parse_time("2026-12-02T12:00:00.123456789Z") == datetime(2026, 12, 2, 12, 0, 0, 123456,
                                                                    tzinfo=timezone.utc)
    assert parse_time("2026-12-02T12:00:00Z") == datetime(2026, 12, 2, 12, tzinfo=timezone.utc)
    assert parse_time("2026-12-02T14:00:00+02:00") == datetime(2026, 12, 2, 12, tzinfo=timezone.utc)
    assert parse_time("") is None and parse_time(None) is None and parse_time("yesterday") is None
