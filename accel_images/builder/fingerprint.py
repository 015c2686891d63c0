"""A content hash of everything that determines an image.

An image carries its fingerprint as the label FINGERPRINT_LABEL; when a fresh fingerprint
matches the label of the image already there, the build is skipped. So the hash covers
exactly what the daemon would see: every file docker-py sends as the build context (the
same .dockerignore rules, through docker-py's own walker), the build args, and the resolved
base image. Timestamps are left out, so re-rendering identical files changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from docker.utils.build import exclude_paths

from accel_images import untrusted
from accel_images.errors import InputError

FINGERPRINT_LABEL = "io.accel-images.fingerprint"

_FORMAT_VERSION = 1
_CHUNK = 1 << 20
_RACY_WINDOW_S = 2.0
"""A file modified this recently may change again within one timestamp tick, unseen by
stat; its digest is not cached (git calls these entries racy)."""

_digest_cache: dict[str, str] = {}
"""File digests by inode identity: hard-linked copies of one wheel (one per build context)
share an entry, and the cache can be saved in the state dir so a no-op run hashes nothing."""


def fingerprint(context_dir: Path, buildargs: Mapping[str, str], base_image_id: str) -> str:
    """`sha256:<hex>` over the context's files, the build args and the base image ID/digest."""
    manifest = {
        "version": _FORMAT_VERSION,
        "files": context_entries(Path(context_dir)),
        "buildargs": sorted((str(k), str(v)) for k, v in buildargs.items()),
        "base": base_image_id,
    }
    encoded = json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def context_entries(context_dir: Path) -> list[list[str]]:
    """`[relative path, kind, content digest]` for each path docker-py would send, sorted.

    kind is `x` (executable file), `f` (file), `l` (symlink, digest of its target), `d`
    (directory) or `o` (anything else docker sends as a bare header).
    """
    root = context_dir.resolve()
    if not root.is_dir():
        raise InputError(f"build context {context_dir} is not a directory")
    sent = exclude_paths(str(root), _dockerignore_patterns(root), dockerfile="Dockerfile")
    return [_entry(root, rel) for rel in sorted(Path(p).as_posix() for p in sent)]


def _dockerignore_patterns(root: Path) -> list[str]:
    """The .dockerignore patterns, parsed as docker-py's build does."""
    ignore_file = root / ".dockerignore"
    if not ignore_file.exists():
        return []
    lines = (line.strip() for line in ignore_file.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _entry(root: Path, rel: str) -> list[str]:
    path = root / rel
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return [rel, "l", _sha256_hex(os.readlink(path).encode())]
    if stat.S_ISDIR(info.st_mode):
        return [rel, "d", ""]
    if stat.S_ISREG(info.st_mode):
        kind = "x" if info.st_mode & 0o111 else "f"
        return [rel, kind, _file_digest(path, info)]
    return [rel, "o", ""]


def file_digest(path: Path) -> str:
    """The file's sha256 (hex), from the digest cache when it is unchanged since last hashed."""
    return _file_digest(path, path.stat())


def _file_digest(path: Path, info: os.stat_result) -> str:
    """The file's sha256, from the cache when its inode, size and mtime are unchanged.

    ctime is left out on purpose: adding a hard link (each build context links the
    wheelhouse) changes it without changing a byte.
    """
    key = f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
    cached = _digest_cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    hexdigest = digest.hexdigest()
    if time.time() - info.st_mtime_ns / 1e9 > _RACY_WINDOW_S:
        _digest_cache[key] = hexdigest
    return hexdigest


def load_digest_cache(path: Path) -> None:
    """Merge digests saved by an earlier run (a missing or corrupt file is ignored)."""
    try:
        saved = untrusted.loads(Path(path).read_text())
    except (OSError, ValueError):
        return
    if isinstance(saved, dict):
        _digest_cache.update({k: v for k, v in saved.items() if isinstance(k, str) and isinstance(v, str)})


def save_digest_cache(path: Path) -> None:
    """Persist the digests for the next run (atomically; losing it only costs time)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A fresh temporary file (O_EXCL): a link planted at a fixed temporary name is never written through.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(_digest_cache))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
