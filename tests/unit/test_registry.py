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
from urllib.parse import parse_qs

import pytest

from accel_images.errors import InputError, RegistryError
from accel_images.registry import Destination, RegistryClient, is_loopback, parse_time
from faultproxy import RequestSink
from nightly_fixture.rawregistry import (DOCKER_MANIFEST)

IMAGE_DIGEST = "sha256:" + "d" * 64
CONFIG_DIGEST = "sha256:" + "c" * 64


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

class HttpRegistryHandler(BaseHTTPRequestHandler):
    """A registry over HTTP that wants `auth` ('basic' or 'bearer') for everything, with user `u` / password `p`.

    Not the shared in-memory registry (tests/fakes.py InMemoryRegistry): that one replaces the client's HTTP
    exchange, and authentication, the token service and what goes over the socket are what this one is for.
    Otherwise it answers as that one and the distribution registry do (distribution-spec,
    https://github.com/opencontainers/distribution-spec/blob/main/spec.md): one image, the tag `tag` (its
    manifest sha256:d..., its config blob sha256:c...); an unknown tag or digest is 404 MANIFEST_UNKNOWN, an
    unknown blob 404 BLOB_UNKNOWN; the tag list (`server.tags`) is sorted and paged by `n` and `last`, with a
    `Link: <...>; rel="next"` header while tags remain; a manifest DELETE is 405 UNSUPPORTED while
    `server.deletes_enabled` is off, else 202 for the digest, 404 for another digest, 400 for a tag.
    `server.endless` makes it a hostile one instead: every tag-list page names a next one, forever.
    """

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
        path, _, query = self.path.partition("?")
        if path == "/v2/team/img/tags/list":
            return self._tag_list(parse_qs(query))
        if "/manifests/" in path:
            if path.rsplit("/", 1)[1] not in ("tag", IMAGE_DIGEST):
                return self._send(404, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]})
            return self._send(200, {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "layers": [],
                                    "config": {"digest": CONFIG_DIGEST, "size": 1}},
                              {"Docker-Content-Digest": IMAGE_DIGEST, "Content-Type": DOCKER_MANIFEST})
        if path.endswith(f"/blobs/{CONFIG_DIGEST}"):
            return self._send(200, {"created": "2026-11-01T00:00:00Z", "config": {"Labels": {"k": "v"}}})
        if "/blobs/" in path:
            return self._send(404, {"errors": [{"code": "BLOB_UNKNOWN", "message": "blob unknown to registry"}]})
        self._send(404, {"errors": [{"code": "NAME_UNKNOWN", "message": "repository name not known to registry"}]})

    def _tag_list(self, query: dict[str, list[str]]) -> None:
        """distribution-spec "Listing Tags": sorted, after `last`, `n` at most, a Link while more remain."""
        last = query.get("last", [""])[0]
        if self.server.endless:  # pages on forever: each names the next
            page = int(last[1:]) if last else 0
            return self._send(200, {"name": "team/img", "tags": [f"t{page + 1}"]},
                              {"Link": f'</v2/team/img/tags/list?n=1&last=t{page + 1}>; rel="next"'})
        if not self.server.tags:
            return self._send(404, {"errors": [{"code": "NAME_UNKNOWN", "message": "repository name not known"}]})
        names = [name for name in sorted(self.server.tags) if name > last]
        headers = {}
        if "n" in query and len(names) > int(query["n"][0]):
            names = names[:int(query["n"][0])]
            headers["Link"] = f'</v2/team/img/tags/list?n={query["n"][0]}&last={names[-1]}>; rel="next"'
        self._send(200, {"name": "team/img", "tags": names}, headers)

    def do_DELETE(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        wanted = "Basic " + base64.b64encode(b"u:p").decode() if self.server.auth == "basic" else "Bearer tok-123"
        if self.headers.get("Authorization") != wanted:
            return self._challenge()
        reference = self.path.rsplit("/", 1)[1]
        if not self.server.deletes_enabled:
            return self._send(405, {"errors": [{"code": "UNSUPPORTED", "message": "The operation is unsupported."}]})
        if not reference.startswith("sha256:"):
            return self._send(400, {"errors": [{"code": "UNSUPPORTED", "message": "delete by digest only"}]})
        if reference != IMAGE_DIGEST:
            return self._send(404, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]})
        self._send(202, {})

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
    server = ThreadingHTTPServer(("127.0.0.1", 0), HttpRegistryHandler)
    server.auth, server.status, server.seen = "bearer", None, []  # type: ignore[attr-defined]
    server.tags, server.endless, server.deletes_enabled = ["tag"], False, True  # type: ignore[attr-defined]
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
    fake_registry.endless = True  # type: ignore[attr-defined]
    host = f"127.0.0.1:{fake_registry.server_address[1]}"
    client = RegistryClient(host, credentials=lambda h: {"username": "u", "password": "p"})
    with pytest.raises(RegistryError) as caught:
        client.tags("team/img", page_size=1, max_pages=25)
    assert "the tag list goes on past 25 pages" in caught.value.one_line()
    assert caught.value.transient is False
    assert len([path for path, _ in fake_registry.seen if "/tags/list" in path]) <= 26  # type: ignore[attr-defined]


# ---- the stand-in answers as the distribution registry does -----------------------------------------

def basic_client(server: ThreadingHTTPServer) -> RegistryClient:
    server.auth = "basic"  # type: ignore[attr-defined]
    return RegistryClient(f"127.0.0.1:{server.server_address[1]}",
                          credentials=lambda h: {"username": "u", "password": "p"})


@pytest.mark.parametrize("count, page_size", [(0, 2), (1, 2), (5, 2), (6, 2), (4, 1000)])
def test_the_stand_in_pages_its_tag_list_by_n_and_last_to_every_tag_once(fake_registry: ThreadingHTTPServer,
                                                                           count: int, page_size: int) -> None:
    client = basic_client(fake_registry)
    wanted = [f"v{n}" for n in range(count)]
    fake_registry.tags = list(reversed(wanted))  # type: ignore[attr-defined]
    assert client.tags("team/img", page_size=page_size) == wanted
    pages = [path for path, auth in fake_registry.seen if "/tags/list" in path and auth]  # type: ignore[attr-defined]
    assert len(pages) == max(1, -(-count // page_size))


def test_the_stand_in_answers_404_for_an_unknown_manifest_or_blob(fake_registry: ThreadingHTTPServer) -> None:
    client = basic_client(fake_registry)
    assert client.manifest_digest("team/img", "tag") == IMAGE_DIGEST
    assert client.manifest_digest("team/img", "absent") is None
    assert client.manifest("team/img", "sha256:" + "1" * 64) is None
    with pytest.raises(RegistryError, match=r"answered 404 \(BLOB_UNKNOWN"):
        client.blob("team/img", "sha256:" + "2" * 64)


@pytest.mark.parametrize("enabled", [False, True])
def test_the_stand_in_refuses_deletes_with_405_while_they_are_disabled(fake_registry: ThreadingHTTPServer,
                                                                       enabled: bool) -> None:
    client = basic_client(fake_registry)
    fake_registry.deletes_enabled = enabled  # type: ignore[attr-defined]
    if enabled:
        client.check_deletes("team/img")   # the probe's unknown digest: 404, deletes work
        return
    with pytest.raises(RegistryError) as caught:
        client.check_deletes("team/img")
    assert "answered 405 (UNSUPPORTED" in caught.value.one_line()
    assert "storage.delete.enabled is off" in caught.value.one_line()


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
