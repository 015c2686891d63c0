"""A package index that counts what it serves, over a directory of wheels; and wheels to fill it.

`WheelIndex` answers the simple repository API (PEP 503) for any index name in the path
(`/<index>/<project>/`, so `--pip-index-url http://HOST:PORT/{index}` works for every variant) with
links that carry each file's sha256, and serves the files; it counts the bytes of every file it
sends, and the bytes of its pages apart. It offers no PEP 658 metadata files, like many mirrors.

`synthetic_torch` writes a torch release's wheels in miniature, shaped like the real CUDA stack
(tests/research measured 2.8 GB for 2.15.0: the torch wheel per Python, and py3-none runtime
wheels that every Python shares): torch, torchvision and numpy per CPython version, a
py3-none runtime wheel all of them share, and setuptools. The payloads are random, so nothing
compresses them away in transit or in a layer. The wheels are valid (METADATA, WHEEL and a RECORD
with every file's hash), so pip installs them; nothing in them runs.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import threading
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


def normalized(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def make_wheel(directory: Path, name: str, version: str, tag: str, payload_bytes: int,
               requires: Iterable[str] = ()) -> Path:
    """A valid wheel `<name>-<version>-<tag>.whl` holding `payload_bytes` of random data."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = f"{name.replace('-', '_')}-{version}"
    path = directory / f"{dist}-{tag}.whl"
    metadata = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                        *(f"Requires-Dist: {requirement}\n" for requirement in requires)])
    files = {f"{name.replace('-', '_')}/payload.bin": os.urandom(payload_bytes),
             f"{name.replace('-', '_')}/__init__.py": b"",
             f"{dist}.dist-info/METADATA": metadata.encode(),
             f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: false\nTag: {tag}\n"
             .encode()}
    record = "".join(f"{name},sha256={_urlsafe_digest(data)},{len(data)}\n" for name, data in files.items())
    files[f"{dist}.dist-info/RECORD"] = (record + f"{dist}.dist-info/RECORD,,\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


def _urlsafe_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class Sizes:
    """Payload bytes of the synthetic wheels."""

    torch: int = 48_000_000          # per Python
    runtime: int = 120_000_000       # py3-none, shared by every Python (the NVIDIA wheels' part)
    torchvision: int = 3_000_000     # per Python
    numpy: int = 6_000_000           # per Python
    setuptools: int = 400_000


def synthetic_torch(directory: Path, torch: str, torchvision: str, pythons: Iterable[str], local: str = "cpu",
                    sizes: Sizes = Sizes(), extra_requires: Iterable[str] = ()) -> list[Path]:
    """The wheels of one torch release for `pythons` (X.Y each), manylinux_2_28 x86_64."""
    made = [make_wheel(directory, "bench-runtime", "1.0.0", "py3-none-manylinux_2_28_x86_64", sizes.runtime),
            make_wheel(directory, "setuptools", "80.0.0", "py3-none-any", sizes.setuptools)]
    for python in pythons:
        cp = "cp" + python.replace(".", "")
        tag = f"{cp}-{cp}-manylinux_2_28_x86_64"
        made += [make_wheel(directory, "torch", f"{torch}+{local}", tag, sizes.torch,
                            requires=("bench-runtime==1.0.0", "setuptools", *extra_requires)),
                 make_wheel(directory, "torchvision", f"{torchvision}+{local}", tag, sizes.torchvision,
                            requires=(f"torch=={torch}",)),
                 make_wheel(directory, "numpy", "2.4.6", tag, sizes.numpy)]
    return made


@dataclass
class Served:
    """What the index sent: file bytes and names, page bytes."""

    file_bytes: int = 0
    page_bytes: int = 0
    files: list[str] = field(default_factory=list)


class WheelIndex:
    """A counting simple index over `directory`, on `host` (0.0.0.0 lets containers reach it)."""

    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        self.directory = directory
        self.served = Served()
        self._lock = threading.Lock()
        self._hashes: dict[str, str] = {}
        self._server = ThreadingHTTPServer((host, 0), self._handler())
        self.port = self._server.server_address[1]

    def url(self, host: str = "127.0.0.1") -> str:
        """`http://HOST:PORT/{index}`: what --pip-index-url takes."""
        return f"http://{host}:{self.port}/{{index}}"

    def reset(self) -> Served:
        with self._lock:
            served, self.served = self.served, Served()
        return served

    def page(self, project: str) -> bytes | None:
        links = [f'<a href="../files/{html.escape(path.name)}#sha256={self._sha256(path)}">{html.escape(path.name)}</a>'
                 for path in sorted(self.directory.glob("*.whl")) if normalized(path.name.split("-")[0]) == project]
        return ("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode() if links else None

    def _sha256(self, path: Path) -> str:
        if path.name not in self._hashes:
            self._hashes[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        return self._hashes[path.name]

    def _count(self, name: str | None, size: int) -> None:
        with self._lock:
            if name is None:
                self.served.page_bytes += size
            else:
                self.served.file_bytes += size
                self.served.files.append(name)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                parts = [unquote(part) for part in self.path.split("?")[0].split("/") if part]
                body, name = None, None
                if len(parts) == 3 and parts[1] == "files" and (index.directory / parts[2]).is_file():
                    body, name = (index.directory / parts[2]).read_bytes(), parts[2]
                elif len(parts) == 2:
                    body = index.page(normalized(parts[1]))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream" if name else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                index._count(name, len(body))

        return Handler

    @contextmanager
    def running(self) -> Iterator[WheelIndex]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
