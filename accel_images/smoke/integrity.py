"""What the launcher checks from outside an image before it trusts the smoke workload's report.

The workload's JSON is written by whatever runs inside the container, so a hostile image (a
`python` that prints a success document, a deleted or replaced torch, a sitecustomize.py) could
forge it. These checks read the image's files through the engine (a container that is created,
never started: no code of the image runs) and refuse an image whose interpreter or torch is not
what it should be:

- structural checks, which need nothing but the image: `python` on the image's PATH resolves to
  an executable binary (ELF), not a script; a virtual environment's pyvenv.cfg points at that
  binary's directory and adds no system site-packages; torch's key files exist; every file a
  distribution's RECORD lists has the hash pip recorded; no sitecustomize / usercustomize and
  no .pth file that no RECORD owns (both run code at interpreter start); nothing named like
  torch shadows it earlier on sys.path; no /etc/ld.so.preload, and no LD_PRELOAD / LD_AUDIT in
  the image's environment; a non-root user;
- the build's record: right after a build, the builder reads the same files of the image it just
  built and keeps their hashes in the state directory, keyed by the image's fingerprint label.
  An image carrying that fingerprint (the same build, or one derived from it or copying its
  labels) must hold exactly those files; the first difference is named with both hashes.

What this cannot see is written down in RELIABILITY.md (Security): code of the image that runs
in-process and is not among the files hashed here (the C library, other shared libraries) can
still fake what the workload computes.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from accel_images import untrusted
from accel_images.formatting import inert
from accel_images.model.imagefacts import FACTS_PATH

ELF_MAGIC = b"\x7fELF"
MAX_LINKS = 16
LD_VARIABLES = ("LD_PRELOAD", "LD_AUDIT")
"""Environment variables that load a library of the image's choosing into every process."""
STARTUP_MODULES = ("sitecustomize", "usercustomize", "apport_python_hook")
"""Modules the interpreter imports at start from the first sys.path entry that has them (the last is
what Debian's and Ubuntu's own sitecustomize imports)."""
DPKG_STATUS = "/var/lib/dpkg/status"
SHADOWED = ("torch", "numpy")
"""Packages a same-named module earlier on sys.path (the standard library's directories) would replace."""
KEEP_SUFFIXES = ("/RECORD", ".pth", "/pyvenv.cfg", "/sitecustomize.py", DPKG_STATUS, FACTS_PATH)
"""Files whose content the checks read, besides hashing them (and the image's facts, which the builder reads)."""
KEY_FILES = ("torch/__init__.py", "torch/version.py")
RECORD_VERSION = 1


@dataclass(frozen=True)
class Entry:
    """One path of the image as the engine's archive gives it: a link is not followed."""

    path: str
    kind: str                 # 'file' | 'link' | 'dir' | 'other'
    sha256: str = ""          # files
    target: str = ""          # links
    head: bytes = b""         # the first bytes of a file: ELF magic or a '#!' line
    data: bytes | None = field(default=None, repr=False)  # content of the files in KEEP_SUFFIXES

    def digest(self) -> str:
        """How the record and the messages show this entry."""
        if self.kind == "file":
            return f"sha256:{self.sha256}"
        if self.kind == "link":
            return f"a link to {shown(self.target)}"
        return "a directory" if self.kind == "dir" else f"a {self.kind} entry"


class FileReader(Protocol):
    """Reads a container's files through the engine (accel_images.builder.engine.ContainerFiles)."""

    def entry(self, path: str) -> Entry | None:
        """The entry at `path` (not following a final link), or None when there is none."""
        ...

    def tree(self, path: str) -> Mapping[str, Entry]:
        """Every entry at and below the directory `path`, by absolute path; empty when absent."""
        ...


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image's config the checks read."""

    env: tuple[str, ...] = ()
    user: str = ""

    def variable(self, name: str) -> str | None:
        """The value the image's ENV gives `name`, or None."""
        for item in self.env:
            key, _, value = item.partition("=")
            if key == name:
                return value
        return None


@dataclass(frozen=True)
class Inventory:
    """What the checks read: the interpreter run, every file hashed, and what was wrong."""

    interpreter: str                      # the path the launcher runs, e.g. /opt/venv/bin/python
    files: Mapping[str, str]              # path -> Entry.digest() (or 'absent')
    failures: tuple[str, ...]             # structural problems, one line each

    def record(self, image_id: str, layers: tuple[str, ...] = ()) -> dict[str, object]:
        """The build's record of this image (JSON): its ID, its layers (diff IDs, base first) and its files."""
        return {"version": RECORD_VERSION, "image_id": image_id, "layers": list(layers),
                "interpreter": self.interpreter, "files": dict(sorted(self.files.items()))}


def shown(text: str) -> str:
    """`text` inert (formatting.inert), so a message stays one line whatever a name holds."""
    return inert(text)


# ---------------------------------------------------------------- the inventory

def take_inventory(reader: FileReader, config: ImageConfig, python: str) -> Inventory:
    """Read the interpreter, the standard library and site-packages of an image, and check them.

    `python` is the major.minor the image promises: it names the library directories.
    """
    failures = config_failures(config)
    files: dict[str, str] = {}
    preload = reader.entry("/etc/ld.so.preload")
    files["/etc/ld.so.preload"] = preload.digest() if preload else "absent"
    if preload is not None:
        failures.append("the image has /etc/ld.so.preload: a library loaded into every process, "
                        "which the smoke test cannot vouch for")
    command, chain, problem = find_interpreter(reader, config.variable("PATH") or "")
    if command is None:
        return Inventory("", files, tuple([*failures, problem]))
    files.update({entry.path: entry.digest() for entry in chain})
    binary = chain[-1]
    home, venv, venv_problem = venv_home(reader, command, binary, files)
    if problem or venv_problem:
        failures.append(problem or venv_problem)  # a script in place of python is not also "outside home"
    prefix = posixpath.dirname(home or posixpath.dirname(binary.path))
    stdlib = f"{prefix}/lib/python{python}"
    before = reader.tree(stdlib)
    zipped = f"{prefix}/lib/python{python.replace('.', '')}.zip"
    zip_entry = reader.entry(zipped)
    files[zipped] = zip_entry.digest() if zip_entry else "absent"
    if zip_entry is not None:
        failures.append(f"{zipped} exists: it comes first on sys.path, ahead of torch")
    files.update({path: entry.digest() for path, entry in before.items()})
    distro = distro_sitecustomize(reader, f"{stdlib}/sitecustomize.py", before, files)
    failures += [problem for problem in shadow_failures(stdlib, before)
                 if not (distro and problem.startswith(f"{stdlib}/sitecustomize.py "))]
    sites = [f"{venv}/lib/python{python}/site-packages"] if venv else [
        f"{prefix}/lib/python{python}/site-packages", f"/usr/local/lib/python{python}/dist-packages",
        "/usr/lib/python3/dist-packages", f"{prefix}/lib/python{python}/dist-packages"]
    found_torch = False
    for site in dict.fromkeys(sites):
        tree = reader.tree(site)
        files.update({path: entry.digest() for path, entry in tree.items()})
        failures += site_failures(site, tree)
        found_torch = found_torch or f"{site}/torch/__init__.py" in tree
    if not found_torch:
        failures.append(f"torch is not installed: no torch/__init__.py in {', '.join(dict.fromkeys(sites))}")
    else:
        failures += key_file_failures(sites, files)
    return Inventory(command, files, tuple(failures))


def config_failures(config: ImageConfig) -> list[str]:
    """An injected library or a root user, from the image's config alone."""
    failures = []
    for name in LD_VARIABLES:
        value = config.variable(name)
        if value:
            failures.append(f"the image sets {name}={shown(value)}: a library loaded into every process, "
                            "which the smoke test cannot vouch for")
    if config.user.split(":")[0] in ("", "0", "root"):
        failures.append(f"the image runs as root (User {shown(config.user) or 'unset'}); "
                        "accel-images images run as a non-root user")
    return failures


def find_interpreter(reader: FileReader, path_variable: str) -> tuple[str | None, tuple[Entry, ...], str]:
    """(`python` as exec finds it on the image's PATH, its link chain to the binary, a problem or '').

    The chain ends at a regular file; that file must be an ELF executable, not a script that
    prints a report of its own.
    """
    for directory in path_variable.split(":"):
        if not directory.startswith("/"):
            continue
        command = posixpath.join(directory, "python")
        chain = follow_links(reader, command)
        if not chain:
            continue
        last = chain[-1]
        if last.kind != "file":
            return command, chain, (f"{command} leads to {shown(last.path)}, {last.digest()}, "
                                    "not the interpreter")
        if not last.head.startswith(ELF_MAGIC):
            start = shown(last.head[:24].decode("latin-1"))
            return command, chain, (f"{command} resolves to {shown(last.path)}, which is not an executable "
                                    f"binary (it starts with {start!r}): a script in place of the interpreter")
        return command, chain, ""
    return None, (), f"no python on the image's PATH ({shown(path_variable) or 'unset'})"


def follow_links(reader: FileReader, path: str) -> tuple[Entry, ...]:
    """The entries from `path` through each link to what it finally names; empty when absent."""
    chain: list[Entry] = []
    current = path
    for _ in range(MAX_LINKS):
        entry = reader.entry(current)
        if entry is None:
            return tuple(chain) if chain else ()
        chain.append(entry)
        if entry.kind != "link":
            return tuple(chain)
        current = posixpath.normpath(posixpath.join(posixpath.dirname(current), entry.target))
    return tuple(chain)


def venv_home(reader: FileReader, command: str, binary: Entry,
              files: dict[str, str]) -> tuple[str | None, str | None, str]:
    """(the base interpreter's directory, the virtual environment, a problem or '').

    A virtual environment's pyvenv.cfg decides where the standard library comes from (`home`)
    and whether system site-packages join sys.path: both are read from outside and checked.
    """
    venv = posixpath.dirname(posixpath.dirname(command))
    config_path = f"{venv}/pyvenv.cfg"
    entry = reader.entry(config_path)
    if entry is None or entry.kind != "file":
        return None, None, ""
    files[config_path] = entry.digest()
    settings = pyvenv_settings(entry.data or b"")
    home = posixpath.normpath(settings.get("home", ""))
    if settings.get("include-system-site-packages", "false").lower() == "true":
        return home, venv, f"{config_path} adds the system site-packages to sys.path"
    if posixpath.dirname(binary.path) != home:
        return home, venv, (f"{command} resolves to {shown(binary.path)}, outside the environment's "
                            f"base interpreter directory {shown(home)} ({config_path})")
    return home, venv, ""


def pyvenv_settings(data: bytes) -> dict[str, str]:
    """`key = value` lines of a pyvenv.cfg, keys lower-cased."""
    settings = {}
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            settings[key.strip().lower()] = value.strip()
    return settings


def distro_sitecustomize(reader: FileReader, path: str, tree: Mapping[str, Entry], files: dict[str, str]) -> bool:
    """Whether the standard library's sitecustomize is the distribution's own, untouched.

    Debian and Ubuntu ship `/usr/lib/pythonX.Y/sitecustomize.py` as a link to the package's
    configuration file `/etc/pythonX.Y/sitecustomize.py`, whose MD5 dpkg keeps in its status
    file: a file that still has that MD5 is the distribution's (it only imports apport's hook,
    refused on its own when present). Anything else there is a start-up hook of the image's.
    """
    if path not in tree:
        return False
    chain = follow_links(reader, path)
    files.update({entry.path: entry.digest() for entry in chain})
    last = chain[-1] if chain else None
    if last is None or last.kind != "file" or last.data is None:
        return False
    status = reader.entry(DPKG_STATUS)
    listed = dpkg_conffiles(status.data or b"") if status is not None else {}
    return listed.get(last.path) == hashlib.md5(last.data, usedforsecurity=False).hexdigest()


def dpkg_conffiles(status: bytes) -> dict[str, str]:
    """path -> MD5 of every configuration file dpkg's status file lists."""
    listed = {}
    inside = False
    for line in status.decode("utf-8", "replace").splitlines():
        if line.startswith("Conffiles:"):
            inside = True
        elif inside and line.startswith(" "):
            parts = line.split()
            if len(parts) >= 2:
                listed[parts[0]] = parts[1]
        else:
            inside = False
    return listed


def shadow_failures(stdlib: str, tree: Mapping[str, Entry]) -> list[str]:
    """Start-up modules and torch look-alikes in the standard library's directories.

    The standard library and lib-dynload come before site-packages on sys.path: a `torch` there
    replaces the real one, a sitecustomize there runs before anything.
    """
    failures = []
    for directory in (stdlib, f"{stdlib}/lib-dynload"):
        for path in tree:
            parent, name = posixpath.split(path)
            if parent != directory:
                continue
            stem = name.split(".", 1)[0]
            if stem in SHADOWED or stem in STARTUP_MODULES:
                failures.append(f"{shown(path)} is on sys.path ahead of site-packages: "
                                f"it would {'replace ' + stem if stem in SHADOWED else 'run at interpreter start'}")
    return failures


def site_failures(site: str, tree: Mapping[str, Entry]) -> list[str]:
    """RECORD hashes, start-up modules and unowned .pth files of one site-packages directory."""
    owned: set[str] = set()
    failures: list[str] = []
    for path, entry in sorted(tree.items()):
        if entry.kind == "file" and path.endswith(".dist-info/RECORD") and posixpath.dirname(
                posixpath.dirname(path)) == site:
            listed, problems = record_failures(site, path, entry.data or b"", tree)
            owned |= listed
            failures += problems
    for path in sorted(tree):
        parent, name = posixpath.split(path)
        if parent != site:
            continue
        if name.split(".", 1)[0] in STARTUP_MODULES:
            failures.append(f"{shown(path)} runs at interpreter start, before the smoke workload")
        elif name.endswith(".pth") and path not in owned:
            failures.append(f"{shown(path)} is a .pth file no installed distribution's RECORD lists: "
                            "it can run code at interpreter start")
    return failures


def record_failures(site: str, record_path: str, data: bytes,
                    tree: Mapping[str, Entry]) -> tuple[set[str], list[str]]:
    """(the paths a RECORD lists, each listed file that is absent or has another hash than recorded).

    pip writes every installed file's sha256 into the distribution's RECORD; a file replaced or
    deleted after the install no longer matches. Only the first few problems are named.
    """
    listed: set[str] = set()
    problems: list[str] = []
    count = 0
    dist = posixpath.basename(posixpath.dirname(record_path))
    for row in csv.reader(io.StringIO(data.decode("utf-8", "replace"))):
        if not row or not row[0]:
            continue
        path = posixpath.normpath(posixpath.join(site, row[0]))
        listed.add(path)
        if not path.startswith(site + "/"):
            continue  # scripts in bin/: not on sys.path
        algorithm, _, encoded = (row[1] if len(row) > 1 else "").partition("=")
        if algorithm != "sha256" or not encoded:
            continue
        expected = _hex(encoded)
        entry = tree.get(path)
        if entry is not None and entry.kind == "file" and entry.sha256 == expected:
            continue
        count += 1
        if count == 1:
            now = entry.digest() if entry else "absent"
            problems.append(f"{shown(path)} is {now}, but {dist}/RECORD lists sha256:{expected}")
    if count > 1:
        problems[-1] += f" (and {count - 1} more file(s) {dist}/RECORD lists differ)"
    return listed, problems


def key_file_failures(sites: Iterable[str], files: Mapping[str, str]) -> list[str]:
    """torch's own files: __init__.py, version.py, its extension module and libtorch."""
    for site in sites:
        if f"{site}/torch/__init__.py" not in files:
            continue
        failures = [f"torch is incomplete: {site}/{name} is {files.get(f'{site}/{name}', 'absent')}"
                    for name in KEY_FILES if not files.get(f"{site}/{name}", "").startswith("sha256:")]
        if not any(posixpath.dirname(p) == f"{site}/torch" and posixpath.basename(p).startswith("_C.")
                   and p.endswith(".so") for p in files):
            failures.append(f"torch is incomplete: no extension module {site}/torch/_C*.so")
        if not any(posixpath.dirname(p) == f"{site}/torch/lib" and posixpath.basename(p).startswith("libtorch")
                   for p in files):
            failures.append(f"torch is incomplete: no libtorch*.so in {site}/torch/lib")
        return failures
    return []


def _hex(urlsafe_b64: str) -> str:
    """RECORD's unpadded urlsafe base64 digest as hex."""
    try:
        return base64.urlsafe_b64decode(urlsafe_b64 + "=" * (-len(urlsafe_b64) % 4)).hex()
    except (ValueError, TypeError):
        return urlsafe_b64


# ---------------------------------------------------------------- the build's record

@dataclass(frozen=True)
class Recorded:
    """What the build of one fingerprint found in the image it had just built."""

    image_id: str
    interpreter: str
    files: Mapping[str, str]
    layers: tuple[str, ...] = ()


def parse_record(text: str) -> Recorded | None:
    """A record written by Inventory.record, or None when it is not one (a damaged file counts as none)."""
    try:
        value = untrusted.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("version") != RECORD_VERSION:
        return None
    files = value.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    layers = value.get("layers")
    layers = tuple(layers) if isinstance(layers, list) and all(isinstance(layer, str) for layer in layers) else ()
    return Recorded(str(value.get("image_id", "")), str(value.get("interpreter", "")), files, layers)


def differences(now: Inventory, recorded: Recorded) -> list[str]:
    """One line naming the first file that differs from the build's record, with both hashes.

    torch's key files and the interpreter come first, so the line names what matters most.
    """
    changed = sorted((path for path in set(now.files) | set(recorded.files)
                      if now.files.get(path, "absent") != recorded.files.get(path, "absent")),
                     key=_importance)
    if now.interpreter != recorded.interpreter:
        return [f"the image runs {shown(now.interpreter) or 'no python'}, the build recorded "
                f"{shown(recorded.interpreter)}"]
    if not changed:
        return []
    first = changed[0]
    more = f" (and {len(changed) - 1} more path(s) differ from the build's record)" if len(changed) > 1 else ""
    return [f"{shown(first)} is {now.files.get(first, 'absent')}, the build recorded "
            f"{recorded.files.get(first, 'absent')}{more}"]


def _importance(path: str) -> tuple[int, str]:
    """Key files first (torch's, then libraries and the interpreter), then the rest by path."""
    if any(path.endswith("/" + name) for name in KEY_FILES):
        return 0, path
    if "/torch/_C." in path or "/torch/lib/" in path or "/bin/python" in path or path.endswith("pyvenv.cfg"):
        return 1, path
    return 2, path
