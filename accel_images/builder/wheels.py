"""The run's wheelhouse: every wheel a run's builds install, fetched once, on this host.

Without it each build's pip downloads its own copy from the index, inside the build: a nightly over
the runtime and devel flavors and two Pythons of one CUDA torch downloads the same gigabytes of
py3-none NVIDIA wheels four times, and a build fails where only the host reaches the index. With
it (`--pip-fetch host`, the default) the run asks pip on this host, before each build, for the
variant's closure: what the build's own `pip install` would take from the variant's index (torch,
its companions, numpy, and the build backend kept in the image), for the variant's Python and
platform. pip downloads into a directory per index (the cache: `<state>/cache/wheels/`, or
`--cache-dir`) and takes a file already there instead of downloading it ("File was already
downloaded"; it checks the file against the index's sha256 first), so a wheel is fetched from its
index at most once per run, and not again while the cache keeps it. The variant's build context then
gets exactly its closure as `wheels/` (hard links) and the Dockerfile the wheelhouse route renders
(`--no-index --find-links`), so the image, its layers and its fingerprint are those of a wheelhouse
build, and the fingerprint now follows the wheels' bytes. Each wheel's index and sha256 go into
the provenance (accel_images.model.wheels).

pip resolves exactly as the build's would: the same requirements against the same index, with the
platform tags the image's OS and machine accept (accel_images.kb.wheels.manylinux_tags: manylinux_2_X
down from the OS's glibc, then linux_<arch>; the machine the base image's architecture, so an arm64
image gets aarch64 wheels), its Python's tags, and environment markers read as on that Python and
machine (accel_images.builder.pip_target). pip's configuration files and its source
options from the environment are not read:
where a wheel comes from is the variant's index alone (PIP_CERT, PIP_CLIENT_CERT, PIP_TRUSTED_HOST,
PIP_PROXY, PIP_RETRIES and PIP_TIMEOUT pass, as do the proxy and CA variables requests reads).

What enters the cache is recorded and checked. pip downloads into a directory of its own inside the
cache's (`.incoming-*`, where its temporary files go too, so a full disk is the cache's), which holds
links to the files already cached; a file it saved is moved into the cache, under its real name, only
once it is whole, and its sha256 goes into the directory's record (`.sha256.json`). A file pip took
from the cache instead must still have the recorded sha256: an index that gives no hashes makes pip
take any file of the right name, so one replaced in the cache (or planted there, or left by a version
that kept no record) is removed, fetched again, and said in the status and the build's notes.

Which files pip took is read from its own lines, `Saved <path>` and `File was already downloaded
<path>` (pip/_internal/operations/prepare.py, req_install.py), checked against its closing
`Successfully downloaded <names>`: pip has no report for `download`, and `install --dry-run
--report`, which has one, downloads every wheel in full to read its metadata from an index
without PEP 658 metadata files, and then again for real.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from accel_images import untrusted
from accel_images.builder.fingerprint import file_digest
from accel_images.credentials import hide_credentials, without_credentials
from accel_images.errors import InputError, WheelFetchError
from accel_images.formatting import human_size
from accel_images.lock import held
from accel_images.model.wheels import Wheel

PASSED_PIP_VARIABLES = ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_TRUSTED_HOST", "PIP_PROXY", "PIP_RETRIES", "PIP_TIMEOUT",
                        "PIP_DEFAULT_TIMEOUT")
"""How pip reaches an index, not which one: kept in pip's environment; every other PIP_* variable is not."""
LOCK_WAIT_S = 6 * 3600.0
"""How long a run waits for another run (or thread) fetching into the same cache."""
RECORD_FILE = ".sha256.json"
"""In each index's directory of the cache: file name -> the sha256 it had when it entered the cache."""
INCOMING_PREFIX = ".incoming-"
"""pip's own directory inside an index's directory, for one download: nothing in it is in the cache yet."""
CACHE_HINT = "free space on its file system, or choose another --cache-dir"
_SAVED = re.compile(r"^\s*(?:Saved|File was already downloaded) (?P<path>\S+)\s*$")
_DONE = re.compile(r"^Successfully downloaded (?P<names>.+)$")
_NO_SPACE = re.compile(r"No space left on device|\[Errno 28\]")


@dataclass(frozen=True)
class WheelRequest:
    """What one variant's build installs, as pip on this host is asked to fetch it."""

    index_url: str = field(repr=False)   # with any credentials: given to pip in its environment only
    requirements: tuple[str, ...]        # with their dependencies: `torch==2.13.0`, `torchvision==0.28.*`, `numpy`
    without_deps: tuple[str, ...]        # alone: `setuptools`, which the image keeps for offline builds
    python: str                          # `3.11`
    machine: str                         # `x86_64`: the image's, as wheel tags spell it
    platforms: tuple[str, ...]           # platform tags, most specific first

    @property
    def public_index(self) -> str:
        return without_credentials(self.index_url)


@dataclass(frozen=True)
class Closure:
    """The wheels one request resolved to, where they lie in the cache, and what fetching them cost."""

    wheels: tuple[Wheel, ...]
    paths: tuple[Path, ...]
    fetched_bytes: int = 0   # downloaded from the index for this request (0: every file was in the cache)
    notes: tuple[str, ...] = ()
    """What the cache held that it should not have (a wheel replaced since it was fetched), fetched again."""


@dataclass(frozen=True)
class Download:
    """What one `pip download` put in the cache: each file it named with its sha256, and the ones it saved."""

    digests: Mapping[str, str]
    saved: frozenset[str]
    notes: tuple[str, ...] = ()   # the cached files it found changed, and fetched again


@dataclass
class FetchTally:
    """What the run's fetches cost, for the report: files and bytes downloaded, files reused."""

    fetched_files: int = 0
    fetched_bytes: int = 0
    reused_files: int = 0
    requests: int = 0

    def record(self) -> dict[str, int]:
        return {"requests": self.requests, "fetched_files": self.fetched_files, "fetched_bytes": self.fetched_bytes,
                "reused_files": self.reused_files}

    def summary(self) -> str:
        """`fetched 1.20 GB of wheels (31 files; 12 were in the cache)`, or '' when the run fetched none."""
        if not self.requests:
            return ""
        return (f"fetched {human_size(self.fetched_bytes)} of wheels ({self.fetched_files} file(s);"
                f" {self.reused_files} were in the cache)")


Runner = Callable[[list[str], Mapping[str, str]], "subprocess.CompletedProcess[str]"]


def run_pip(command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=dict(env), capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL)


def pip_command(request: WheelRequest, dest: Path, requirements: Iterable[str], *, deps: bool) -> list[str]:
    """`pip download` of `requirements` into `dest`, for the request's Python and platform (the index comes
    from the environment, pip_environment, so no credential is on a command line)."""
    abi = "cp" + request.python.replace(".", "")
    command = [sys.executable, "-m", "accel_images.builder.pip_target", request.python, request.machine, "download",
               "--dest", str(dest), "--no-cache-dir", "--progress-bar", "off", "--disable-pip-version-check",
               "--no-input", "--only-binary=:all:", "--python-version", request.python, "--implementation", "cp",
               "--abi", abi]
    for platform in request.platforms:
        command += ["--platform", platform]
    if not deps:
        command.append("--no-deps")
    return [*command, *requirements]


def pip_environment(index_url: str, environ: Mapping[str, str] = os.environ,
                    tmpdir: Path | None = None) -> dict[str, str]:
    """This process's environment for pip: no configuration file, no PIP_* source option, the index given;
    its temporary files in `tmpdir` (pip downloads there, then copies into --dest)."""
    env = {key: value for key, value in environ.items()
           if not key.startswith("PIP_") or key in PASSED_PIP_VARIABLES}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=index_url, PIP_NO_INPUT="1")
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def fetched_files(output: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(file names, project names) pip download's output says it saved or found, in order, each once."""
    files: dict[str, None] = {}
    projects: tuple[str, ...] = ()
    for line in output.splitlines():
        saved = _SAVED.match(line)
        if saved:
            files[os.path.basename(saved["path"])] = None
        done = _DONE.match(line.strip())
        if done:
            projects = tuple(done["names"].split())
    return tuple(files), projects


def found_in_place(output: str) -> set[str]:
    """The file names pip download's output says it took from --dest (`File was already downloaded`), not
    fetched again after (`Saved`: pip re-downloads a file whose hash the index contradicts)."""
    found = {os.path.basename(line.strip().split(None, 4)[-1]) for line in output.splitlines()
             if line.strip().startswith("File was already downloaded ")}
    return found - newly_saved(output)


def newly_saved(output: str) -> set[str]:
    """The file names pip download's output says it downloaded (`Saved`), not found in place."""
    return {os.path.basename(line.split(None, 1)[1]) for line in output.splitlines()
            if line.strip().startswith("Saved ")}


def partition_name(public_index: str) -> str:
    """The cache directory of one index: its host and path, made file-safe, and a short digest of the URL."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", public_index.split("://", 1)[-1]).strip("-")[:80]
    return f"{readable}-{hashlib.sha256(public_index.encode()).hexdigest()[:8]}"


class RunWheelhouse:
    """The wheels of one run, fetched once each into `root` (one directory per index) by pip on this host.

    Thread-safe: variants built concurrently ask for their closures at once; fetches into the
    cache happen one at a time (a lock in the process, and `root/.lock` between processes that
    share a cache), so a wheel two variants need is downloaded by the first and found by the second.
    """

    def __init__(self, root: Path, runner: Runner = run_pip) -> None:
        self.root = root
        self.runner = runner
        self.tally = FetchTally()
        self._closures: dict[WheelRequest, Closure] = {}
        self._requests: dict[WheelRequest, threading.Lock] = {}
        self._lock = threading.Lock()       # guards the two dicts
        self._fetching = threading.Lock()   # one pip at a time into the cache

    def closure(self, request: WheelRequest, status: Callable[[str], None] | None = None) -> Closure:
        """The request's wheels in the cache, fetched now where missing; the same answer all run long.

        A variant whose closure is known gets it at once, while another variant's fetch runs.
        """
        with self._lock:
            pending = self._requests.setdefault(request, threading.Lock())
        with pending:
            if request not in self._closures:
                with self._fetching, held(self.root / ".lock", LOCK_WAIT_S, what="fetch into the wheel cache"):
                    closure = self._fetch(request, status or (lambda text: None))
                with self._lock:
                    self._closures[request] = closure
            closure = self._closures[request]
        touch(closure.paths)
        return closure

    def _fetch(self, request: WheelRequest, status: Callable[[str], None]) -> Closure:
        dest = self.root / partition_name(request.public_index)
        prepare_partition(dest)
        digests: dict[str, str] = {}
        fetched: set[str] = set()
        notes: list[str] = []
        for requirements, deps in ((request.requirements, True), (request.without_deps, False)):
            if not requirements:
                continue
            status(f"fetching {' '.join(requirements)} from {request.public_index}")
            download = self._checked_download(request, dest, requirements, deps, status)
            digests.update(download.digests)
            fetched |= download.saved
            notes += download.notes
        paths = tuple(dest / name for name in digests)
        try:
            wheels = tuple(Wheel(path.name, digests[path.name], path.stat().st_size, request.public_index)
                           for path in paths)
        except OSError as error:
            raise WheelFetchError(f"{Path(str(error.filename)).name} left the wheel cache during the fetch:"
                                  f" {error.strerror}", file=str(dest)) from None
        fetched_bytes = sum(w.size for w in wheels if w.filename in fetched)
        self.tally.requests += 1
        self.tally.fetched_files += len(fetched)
        self.tally.fetched_bytes += fetched_bytes
        self.tally.reused_files += len(wheels) - len(fetched & set(digests))
        return Closure(wheels, paths, fetched_bytes, tuple(dict.fromkeys(notes)))

    def _checked_download(self, request: WheelRequest, dest: Path, requirements: tuple[str, ...], deps: bool,
                          status: Callable[[str], None]) -> Download:
        """`pip download` into the cache, every file it found there checked against the cache's record.

        A file whose sha256 is not the recorded one is removed and the download asked again, once, so pip
        fetches it from the index; one still wrong after that is refused.
        """
        download, changed = self._download(request, dest, requirements, deps)
        if not changed:
            return download
        notes = tuple(f"{name} in the wheel cache {why}: fetched again" for name, why in changed.items())
        for name, note in zip(changed, notes, strict=True):
            status(note)
            remove_from_cache(dest / name)
        download, still = self._download(request, dest, requirements, deps)
        if still:
            name, why = next(iter(still.items()))
            raise WheelFetchError(f"{name} in the wheel cache {why}, and pip took such a file again instead of"
                                  " fetching it from the index: not used", file=str(dest))
        return replace(download, notes=notes)

    def _download(self, request: WheelRequest, dest: Path, requirements: tuple[str, ...],
                  deps: bool) -> tuple[Download, dict[str, str]]:
        """One `pip download` into a directory of its own inside `dest`; the whole files it saved moved into
        the cache and recorded. Also: the files it took from the cache whose sha256 is not the recorded one
        (name -> why), which are left out. pip failing on such a file (a replaced or truncated wheel it
        cannot read) is not a failure yet: the caller fetches the file again."""
        incoming = make_incoming(dest)
        try:
            wheels_dir, tmp = incoming / "wheels", incoming / "tmp"
            try:
                wheels_dir.mkdir()
                tmp.mkdir()
            except OSError as error:
                raise cache_error(dest, error) from None
            link_cached(dest, wheels_dir)
            done = self.runner(pip_command(request, wheels_dir, requirements, deps=deps),
                               pip_environment(request.index_url, tmpdir=tmp))
            recorded = read_record(dest)
            if done.returncode != 0:
                changed = unlike_cache(wheels_dir, found_in_place(done.stdout), recorded)
                if changed:
                    return Download({}, frozenset()), changed
                raise pip_failure(request, requirements, done, dest)
            files, projects = fetched_files(done.stdout)
            if not files or len(files) != len(projects):
                raise WheelFetchError(f"pip's output names {len(files)} file(s) for {len(projects)} project(s)"
                                      f" ({' '.join(projects) or 'none'}): cannot tell which wheels it fetched")
            saved = frozenset(newly_saved(done.stdout) & set(files))
            digests = {name: pip_file_digest(wheels_dir / name, dest) for name in files}
            changed = unlike_cache(wheels_dir, set(files) - saved, recorded, digests)
            kept = {name: digest for name, digest in digests.items() if name not in changed}
            admit(wheels_dir, dest, kept, {name: digests[name] for name in saved}, recorded)
            return Download(kept, saved), changed
        finally:
            shutil.rmtree(incoming, ignore_errors=True)

    def record(self) -> dict[str, int | str]:
        """What the run fetched, and where the wheels are kept: the report's `meta.wheels`."""
        return {**self.tally.record(), "directory": str(self.root)}

    def prune(self, max_bytes: int | None) -> Pruned:
        """Keep the cache at most `max_bytes`, the least recently used wheels going first."""
        if max_bytes is None or not self.root.is_dir():
            return Pruned()
        with self._fetching, held(self.root / ".lock", LOCK_WAIT_S, what="prune the wheel cache"):
            return prune(self.root, max_bytes)


def pip_error(done: subprocess.CompletedProcess[str]) -> str:
    """pip's last `ERROR:` line (the reason it gives), else the last line it wrote. `ERROR: Exception:`
    only announces a traceback: its last line, the exception, is the reason then."""
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    reason = (errors or lines or [f"exit {done.returncode}"])[-1]
    if reason == "Exception:" and lines:
        reason = lines[-1]
    return hide_credentials(reason)  # pip masks only the password


def pip_failure(request: WheelRequest, requirements: tuple[str, ...], done: subprocess.CompletedProcess[str],
                dest: Path) -> WheelFetchError:
    """pip's failure in one line: its reason, or, on a full disk, that and the directory that filled
    (pip's temporary files and its copy both go to the cache's file system)."""
    what = f"pip on this host could not fetch {' '.join(requirements)} for Python {request.python} from" \
           f" {request.public_index}"
    if _NO_SPACE.search(done.stderr + "\n" + done.stdout):
        return WheelFetchError(f"{what}: No space left on device in {dest}", hint=CACHE_HINT)
    return WheelFetchError(f"{what}: {pip_error(done)}", hint="see --pip-fetch build for builds that fetch themselves")


# ---- the cache's directories, its record, and what enters it -------------------------------------------

def cache_error(dest: Path, error: OSError) -> WheelFetchError:
    """A failed write into the wheel cache, in one line: the reason (`No space left on device`) and where."""
    reason = error.strerror or str(error)
    hint = CACHE_HINT if error.errno in (errno.ENOSPC, errno.EDQUOT) else "the cache must be a writable directory"
    return WheelFetchError(f"cannot write the wheel cache: {reason} in {dest}", hint=hint)


def prepare_partition(dest: Path) -> None:
    """The index's directory, made if missing, without the download directories of a run that was killed
    (the caller holds the cache's lock, so no other run is using one)."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot make the wheel cache's directory: {error.strerror}", file=str(dest),
                         field="--cache-dir") from None
    for stale in dest.glob(INCOMING_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)


def make_incoming(dest: Path) -> Path:
    """A fresh directory for one download inside the index's directory: the same file system, so a whole
    file moves into the cache by a rename, and a full disk fills where the error says."""
    try:
        return Path(tempfile.mkdtemp(prefix=INCOMING_PREFIX, dir=dest))
    except OSError as error:
        raise cache_error(dest, error) from None


def link_cached(dest: Path, wheels_dir: Path) -> None:
    """Hard links in `wheels_dir` to the wheels the cache holds, for pip to find in place. A file that
    cannot be linked is left out (pip downloads it again); a full disk stops the fetch."""
    for wheel in dest.glob("*.whl"):
        try:
            os.link(wheel, wheels_dir / wheel.name)
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise cache_error(dest, error) from None


def pip_file_digest(path: Path, dest: Path) -> str:
    """The sha256 of a file pip named; one it named but did not leave is an expected failure."""
    try:
        return file_digest(path)
    except OSError as error:
        raise WheelFetchError(f"pip said it fetched {path.name}, which is not in the wheel cache: {error.strerror}",
                              file=str(dest)) from None


def unlike_cache(wheels_dir: Path, names: Iterable[str], recorded: Mapping[str, str],
                 digests: Mapping[str, str] | None = None) -> dict[str, str]:
    """Of the files pip took from the cache, those whose sha256 is not the one recorded when they entered it:
    name -> why. `digests` where known already; a file that is gone counts as unlike (nothing to trust)."""
    changed = {}
    for name in sorted(names):
        try:
            digest = digests[name] if digests and name in digests else file_digest(wheels_dir / name)
        except OSError:
            digest = ""
        if digest != recorded.get(name):
            changed[name] = unlike_record(digest, recorded.get(name))
    return changed


def unlike_record(digest: str, recorded: str | None) -> str:
    """Why a file found in the cache is not taken: what it is, against what entered the cache."""
    if recorded is None:
        return f"was not recorded when it entered the cache (sha256 {digest[:12]} now)"
    return f"is not the file fetched into it (sha256 {digest[:12]} now, {recorded[:12]} when fetched)"


def admit(wheels_dir: Path, dest: Path, kept: Mapping[str, str], saved: Mapping[str, str],
          recorded: dict[str, str]) -> None:
    """Move the download's whole files into the cache under their names (a rename: never half a file there)
    and record the sha256 of those pip saved. A file pip found in the cache is a link to it: renaming a
    link onto its own file changes nothing."""
    recorded.update(saved)
    try:
        write_record(dest, recorded)
        for name in kept:
            os.replace(wheels_dir / name, dest / name)
    except OSError as error:
        raise cache_error(dest, error) from None


def read_record(dest: Path) -> dict[str, str]:
    """The index directory's record: file name -> sha256 when it entered the cache ({} when absent or damaged:
    every file is then fetched again rather than trusted)."""
    try:
        saved = untrusted.loads((dest / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(saved, dict):
        return {}
    return {name: digest for name, digest in saved.items() if isinstance(name, str) and isinstance(digest, str)}


def write_record(dest: Path, recorded: Mapping[str, str]) -> None:
    """The record, replaced whole (a fresh temporary file, then a rename)."""
    fd, tmp = tempfile.mkstemp(dir=dest, prefix=RECORD_FILE + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(sorted(recorded.items())), indent=0))
        os.replace(tmp, dest / RECORD_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_from_cache(path: Path) -> None:
    """A file the cache must not offer again; a build context's hard link to it keeps its own copy."""
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        raise cache_error(path.parent, error) from None


def touch(paths: Iterable[Path], now: float | None = None) -> None:
    """Mark files used now (their access time; the modification time stays): what pruning orders by."""
    moment = time.time() if now is None else now
    for path in paths:
        try:
            os.utime(path, (moment, path.stat().st_mtime))
        except OSError:
            pass  # pruned under us by another run: the build context's hard link still holds it


@dataclass(frozen=True)
class Pruned:
    removed: tuple[str, ...] = ()
    freed_bytes: int = 0
    kept_bytes: int = 0


def prune(root: Path, max_bytes: int) -> Pruned:
    """Delete the least recently used wheels under `root` until the rest take at most `max_bytes`.

    Recency is the access time (touch() sets it when a run uses a file). A wheel still linked from
    a build context only loses its name in the cache; its bytes stay until the context lets go.
    """
    files = sorted((path for path in root.glob("*/*.whl") if path.is_file()), key=lambda p: p.stat().st_atime)
    total = sum(path.stat().st_size for path in files)
    removed, freed = [], 0
    for path in files:
        if total - freed <= max_bytes:
            break
        size = path.stat().st_size
        path.unlink()
        removed.append(f"{path.parent.name}/{path.name}")
        freed += size
    return Pruned(tuple(removed), freed, total - freed)
