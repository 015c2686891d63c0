"""A fake image's file system for the launcher's unit tests: an honest CPU image's layout, as the
engine's archive API would show it (accel_images.smoke.integrity.FileReader), and an engine that
serves it.

`honest_files()` is consistent in every way the integrity checks look at: python on PATH is a
link chain ending at an ELF binary in pyvenv.cfg's `home`, torch's key files exist, and the
RECORD lists every file with its hash. Tests change one thing and expect the launcher to say so.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel_images.builder.engine import RunResult
from accel_images.model.imagefacts import FACTS_PATH
from accel_images.smoke.integrity import Entry
from accel_images.smoke.integrity import Entry, ImageConfig, Recorded, take_inventory

SITE = "/opt/venv/lib/python3.11/site-packages"
PATH = "PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin"
ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 9
TORCH_FILES = {
    "torch/__init__.py": b"from torch._C import *\n__version__ = '2.13.0+cpu'\n",
    "torch/version.py": b"__version__ = '2.13.0+cpu'\n",
    "torch/_C.cpython-311-x86_64-linux-gnu.so": ELF + b"torch extension",
    "torch/lib/libtorch_cpu.so": ELF + b"libtorch",
    "torch-2.13.0+cpu.dist-info/METADATA": b"Name: torch\nVersion: 2.13.0+cpu\n",
}


def file_entry(path: str, data: bytes) -> Entry:
    """A regular file as the engine's reader gives it (content kept only where the reader keeps it)."""
    keep = path.endswith(("/RECORD", ".pth", "/pyvenv.cfg"))
    return Entry(path, "file", hashlib.sha256(data).hexdigest(), head=data[:64], data=data if keep else None)


def link(path: str, target: str) -> Entry:
    return Entry(path, "link", target=target)


def record_line(name: str, data: bytes) -> str:
    encoded = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={encoded},{len(data)}"


def honest_files(site_files: Mapping[str, bytes] | None = None) -> dict[str, Entry]:
    """An honest image: the venv's python, the standard library, torch and its RECORD."""
    packages = dict(TORCH_FILES if site_files is None else site_files)
    record = "\n".join([*(record_line(name, data) for name, data in sorted(packages.items())),
                        "torch-2.13.0+cpu.dist-info/RECORD,,"]) + "\n"
    packages["torch-2.13.0+cpu.dist-info/RECORD"] = record.encode()
    entries = [
        facts_entry(json.dumps(facts_document()).encode()),
        link("/opt/venv/bin/python", "python3"), link("/opt/venv/bin/python3", "/usr/bin/python3"),
        link("/usr/bin/python3", "python3.11"), file_entry("/usr/bin/python3.11", ELF + b"python"),
        file_entry("/opt/venv/pyvenv.cfg", b"home = /usr/bin\ninclude-system-site-packages = false\n"),
        Entry("/usr/lib/python3.11", "dir"), file_entry("/usr/lib/python3.11/os.py", b"# os\n"),
        Entry("/usr/lib/python3.11/lib-dynload", "dir"), Entry(SITE, "dir"),
        *(file_entry(f"{SITE}/{name}", data) for name, data in packages.items()),
    ]
    return {entry.path: entry for entry in entries}


def facts_document(*, torch: str = "2.13.0+cpu", python: str = "3.11.2", backend: str = "cpu",
                   toolkit: Mapping[str, str] | None = None, archs: list[str] | None = None,
                   companions: Mapping[str, str] | None = None, distributions: Mapping[str, str] | None = None,
                   machine: str = "x86_64") -> dict[str, Any]:
    """A schema 1 facts document (accel_images/smoke/facts.py) of an honest CPU image unless told otherwise."""
    public, _, local = torch.partition("+")
    kits = {"cuda": None, "hip": None, "xpu": None, "cudnn": None, "nccl": None, "gaudi": None, **(toolkit or {})}
    extras = dict(companions or {})
    return {"schema": 1, "platform": {"os": "linux", "machine": machine}, "python": python,
            "torch": {"version": torch, "public": public, "local": local or None}, "backend": backend,
            "toolkit": kits, "archs": [] if archs is None else archs, "ptx": [], "companions": extras,
            "distributions": dict(sorted({"torch": torch, "numpy": "2.4.6", **extras, **(distributions or {})}.items()))}


def machine_of(platform: object) -> str:
    """What `uname -m` says in an image built for `platform` (None: the engine's own, linux/amd64): the
    machine the builder itself names for that architecture (accel_images/kb/wheels.py)."""
    from accel_images.kb import wheels
    from accel_images.kb.compat import load_kb
    from accel_images.model import platforms

    return wheels.machine_of(load_kb(), platforms.architecture(str(platform or platforms.DEFAULT)))


def facts_of_dockerfile(text: str, machine: str = "x86_64") -> bytes:
    """The facts an honest build of a rendered Dockerfile would write on `machine`: what its labels promise
    (torch, Python, the companions it installs, at the knowledge base's release), and CUDA's toolkit and
    architectures."""
    import re

    from accel_images import vendors

    from accel_images.kb.compat import load_kb

    labels = dict(re.findall(r'io\.accel-images\.([a-z-]+)="([^"]*)"', text))
    vendor, stack = labels.get("vendor", "cpu"), labels.get("stack", "")
    local = {"cpu": "cpu", "cuda": "cu" + stack.replace(".", ""), "rocm": f"rocm{stack}", "xpu": "xpu"}.get(vendor)
    pairings = load_kb().release(labels.get("torch", "2.13.0")).companions
    companions = {name: f"{pairings[name]}.0" if pairings[name].count(".") == 1 else pairings[name]
                  for name in labels.get("companions", "").split(",") if name in pairings}
    toolkit: dict[str, str] = {}
    distributions: dict[str, str] = {}
    archs: list[str] = []
    if vendor == "cuda":
        toolkit["cuda"] = stack
        found = re.search(r'ACCEL_IMAGES_CUDA="([0-9.]+)"', text)
        if found:
            distributions["cuda-toolkit"] = found.group(1)
        archs = ["sm_" + arch.replace(".", "") for arch in labels.get("gpu-archs", "").split(",") if arch]
    elif vendor == "rocm":
        toolkit["hip"] = f"{stack}.0-fake"
        archs = [arch for arch in labels.get("gpu-archs", "").split(",") if arch]
    document = facts_document(torch=labels.get("torch", "2.13.0") + (f"+{local}" if local else ""),
                              python=labels.get("python", "3.11") + ".2", backend=vendors.get(vendor).smoke_backend,
                              toolkit=toolkit, archs=archs, companions=companions, distributions=distributions,
                              machine=machine)
    return json.dumps(document).encode()


def facts_entry(data: bytes) -> Entry:
    """/opt/accel-images/facts.json as the engine's reader gives it: its content kept."""
    return Entry(FACTS_PATH, "file", hashlib.sha256(data).hexdigest(), head=data[:64], data=data)
def honest_record(files: Mapping[str, Entry] | None = None, python: str = "3.11") -> Recorded:
    """What the build of the honest image (or of `files`) recorded (accel_images.smoke.integrity): the
    launcher runs an image only against its build's record."""
    inventory = take_inventory(FakeFiles(honest_files() if files is None else files),
                               ImageConfig((PATH,), "1000:1000"), python)
    return Recorded(FakeInfo().id, inventory.interpreter, inventory.files)


@dataclass
class FakeFiles:
    """FileReader over a dict of entries."""

    entries: Mapping[str, Entry]

    def entry(self, path: str) -> Entry | None:
        return self.entries.get(path)

    def tree(self, path: str) -> dict[str, Entry]:
        return {p: e for p, e in self.entries.items() if p == path or p.startswith(path.rstrip("/") + "/")}


@dataclass(frozen=True)
class FakeInfo:
    id: str = "sha256:" + "1" * 64
    env: tuple[str, ...] = (PATH,)
    user: str = "1000:1000"
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeEngine:
    """Serves one image's files; records the run and answers with a prepared result.

    The created container sees the image's files plus what `volumes` mounts, read from the host,
    unless `mounted` says otherwise (an engine that put something else at the mount path).
    """

    result: RunResult
    files: dict[str, Entry] = field(default_factory=honest_files)
    info: FakeInfo = field(default_factory=FakeInfo)
    mounted: Callable[[str, str], Entry] | None = None
    echo_nonce: bool = True
    calls: list[dict[str, Any]] = field(default_factory=list)

    def inspect_image(self, ref: str) -> FakeInfo:
        return self.info

    @contextmanager
    def image_files(self, image: str) -> Iterator[FakeFiles]:
        yield FakeFiles(self.files)

    def run(self, image: str, command: list[str], *, options: Mapping[str, Any] | None = None,
            timeout_s: float, labels: Mapping[str, str] | None = None,
            before_start: Callable[[FakeFiles], None] | None = None) -> RunResult:
        options = dict(options or {})
        self.calls.append({"image": image, "command": command, "options": options,
                           "timeout_s": timeout_s, "labels": dict(labels or {})})
        container = dict(self.files)
        for source, mount in (options.get("volumes") or {}).items():
            files = sorted(Path(source).iterdir()) if Path(source).is_dir() else [Path(source)]
            for file in files:  # a directory's files appear under the mount point
                target = f"{mount['bind']}/{file.name}" if Path(source).is_dir() else mount["bind"]
                container[target] = (self.mounted(str(file), target) if self.mounted else
                                     file_entry(target, file.read_bytes()))
        if before_start is not None:
            before_start(FakeFiles(container))
        if not self.echo_nonce:
            return self.result
        return RunResult(self.result.exit_code, with_nonce(self.result.stdout, command), self.result.stderr,
                         self.result.timed_out)


def without(files: Mapping[str, Entry], *paths: str) -> dict[str, Entry]:
    """The files with `paths` (and everything below them) removed."""
    return {p: e for p, e in files.items()
            if not any(p == gone or p.startswith(gone + "/") for gone in paths)}


def replaced(files: Mapping[str, Entry], path: str, data: bytes) -> dict[str, Entry]:
    """The files with `path` a regular file holding `data` (in place of whatever was there)."""
    return {**files, path: file_entry(path, data)}


def with_nonce(stdout: str, command: list[str]) -> str:
    """`stdout` with the run's --nonce put into every report line, as the real workload does."""
    nonce = command[command.index("--nonce") + 1] if "--nonce" in command else None
    lines = []
    for line in stdout.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if isinstance(value, dict) and "schema" in value and "nonce" not in value:
            line = json.dumps({**value, "nonce": nonce})
        lines.append(line)
    return "".join(line + "\n" for line in lines)
