"""Expected size of a CUDA image, which cannot be built here, from the package index alone.

A CUDA runtime image is plain Ubuntu plus torch's wheels: the wheels bring cuBLAS, cuDNN, NCCL
and the rest, so their sizes are the floor of the image. This walks torch's Linux requirements
(extras and environment markers included) over the index's JSON simple API (PEP 691) and reads
each chosen wheel's zip directory with HTTP range requests: a few kilobytes per wheel give both
its requirements (METADATA) and its installed size (the files' uncompressed sizes), without
downloading gigabytes. Only the torch builds on the public index (one CUDA per release) are
reachable this way; the other cuXYZ builds live on PyTorch's own wheel index.
"""

from __future__ import annotations

import io
import json
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from benchmarks.harness import BenchResult, Row, Series

SIMPLE = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class Wheel:
    """One wheel an install would download: its compressed and installed size."""

    name: str
    version: str
    filename: str
    size: int
    installed: int


@dataclass(frozen=True)
class Resolution:
    """The wheels found, and the pinned requirements the index here does not carry."""

    wheels: tuple[Wheel, ...]
    missing: tuple[str, ...]


class RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, so zipfile can read only the directory it needs."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.pos = url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.pos >= self.size:
            return 0
        last = min(self.pos + len(buffer), self.size) - 1
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{last}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            data = answer.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def project_files(name: str, simple: str = SIMPLE) -> list[dict]:
    """The files of one project on the index (PEP 691 JSON)."""
    request = urllib.request.Request(f"{simple}/{name}/", headers={"Accept": SIMPLE_JSON})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return list(json.load(answer)["files"])


def linux_environment(python: str) -> dict[str, str]:
    """The marker environment of an x86_64 Linux image with this CPython."""
    env = {key: str(value) for key, value in default_environment().items()}
    env.update(sys_platform="linux", platform_system="Linux", platform_machine="x86_64", os_name="posix",
               implementation_name="cpython", platform_python_implementation="CPython",
               python_version=python, python_full_version=f"{python}.0")
    return env


def installs_here(filename: str, python: str) -> bool:
    """A wheel that x86_64 Linux CPython of this version installs (manylinux, abi3 or pure)."""
    if not filename.endswith(".whl"):
        return False
    cp = f"cp{python.replace('.', '')}"
    tags = parse_wheel_filename(filename)[3]
    return any((t.platform == "any" or (t.platform.endswith("x86_64") and "linux" in t.platform))
               and (t.interpreter in (cp, "py3") or (t.abi == "abi3" and t.interpreter.startswith("cp3")))
               for t in tags)


def choose_file(req: Requirement, files: list[dict], python: str) -> dict | None:
    """The newest non-yanked wheel the requirement allows on this platform, or None."""
    fitting = [(parse_wheel_filename(f["filename"])[1], f) for f in files
               if not f.get("yanked") and installs_here(f["filename"], python)]
    allowed = [(v, f) for v, f in fitting if req.specifier.contains(v, prereleases=True)]
    return max(allowed, key=lambda pair: (pair[0], pair[1]["size"]))[1] if allowed else None


def read_wheel(file: dict) -> tuple[Wheel, list[str]]:
    """A wheel's installed size and its Requires-Dist lines, read from its zip directory."""
    name, version, _, _ = parse_wheel_filename(file["filename"])
    with zipfile.ZipFile(io.BufferedReader(RangeFile(file["url"], file["size"]), 1 << 16)) as wheel:
        installed = sum(entry.file_size for entry in wheel.infolist())
        metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        lines = wheel.read(metadata).decode("utf-8", "replace").splitlines()
    requires = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    return Wheel(str(name), str(version), file["filename"], int(file["size"]), installed), requires


def applies(req: Requirement, extras: set[str], env: dict[str, str]) -> bool:
    """A requirement that applies on Linux with one of these extras (or none)."""
    return req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in extras | {""})


def resolve(roots: list[str], python: str, simple: str = SIMPLE) -> Resolution:
    """Every wheel the requirements pull in on Linux, one per project, first choice wins.

    Not a full resolver: a later, conflicting requirement on a project already chosen is not
    re-solved. torch pins its CUDA wheels exactly, which is the case this serves.
    """
    env = linux_environment(python)
    chosen: dict[str, tuple[Wheel, list[str]]] = {}
    extras: dict[str, set[str]] = {}
    missing: list[str] = []
    pending = [Requirement(r) for r in roots]
    while pending:
        req = pending.pop(0)
        name = canonicalize_name(req.name)
        added = set(req.extras) - extras.get(name, set())
        if name in chosen and not added:
            continue
        extras.setdefault(name, set()).update(req.extras)
        if name not in chosen:
            file = choose_file(req, project_files(name, simple), python)
            if file is None:
                missing.append(str(req).split(";")[0])
                continue
            chosen[name] = read_wheel(file)
        pending.extend(_requirements(chosen[name][1], extras[name], env))
    return Resolution(tuple(w for w, _ in chosen.values()), tuple(missing))


def _requirements(lines: list[str], extras: set[str], env: dict[str, str]) -> Iterator[Requirement]:
    for line in lines:
        req = Requirement(line)
        if applies(req, extras, env):
            yield req


def is_cuda_library(wheel: Wheel) -> bool:
    """NVIDIA's CUDA libraries: what an nvidia/cuda:*-runtime base would carry a second copy of."""
    return wheel.name.startswith(("nvidia-", "cuda-"))


# --- the benchmark -----------------------------------------------------------------------------

MATRIX_TORCH = ("2.13.0", "2.14.1", "2.15.0")
"""The torch releases the matrix publishes CUDA images of (`accel-images list --vendor cuda`)."""
PYTHON = "3.12"
"""The Python of every CUDA runtime image in the matrix."""


def toolkit_pin(wheels: tuple[Wheel, ...]) -> str:
    """The CUDA release the resolved wheels carry (cuda-toolkit's version, else cuda-runtime's)."""
    by_name = {w.name: w.version for w in wheels}
    for name in ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"):
        if name in by_name:
            return by_name[name]
    return "none (a CPU build)"


def bench_cuda_size(quick: bool) -> BenchResult:
    """Per torch release: the compressed and installed size of its CUDA wheels, the image's floor."""
    result = BenchResult("cuda_size")
    for torch in MATRIX_TORCH[-1:] if quick else MATRIX_TORCH:
        resolution = resolve([f"torch=={torch}", "numpy"], PYTHON)
        result.rows.extend(_size_rows(torch, resolution))
        if resolution.missing:
            result.notes.append(f"torch {torch}: not on the index here, left out: {', '.join(resolution.missing)}")
    result.commands = [f"resolve torch=={t} numpy for CPython {PYTHON}, x86_64 Linux, over {SIMPLE} "
                       f"(PEP 691 JSON; each wheel's zip directory read by HTTP range requests)"
                       for t in MATRIX_TORCH]
    result.notes += CUDA_SIZE_NOTES
    return result


def _size_rows(torch: str, resolution: Resolution) -> list[Row]:
    wheels = resolution.wheels
    cuda = [w for w in wheels if is_cuda_library(w)]
    total = Series("all wheels", (float(sum(w.size for w in wheels)),), "B")
    libraries = Series("CUDA libraries", (float(sum(w.size for w in cuda)),), "B")
    installed = Series("installed", (float(sum(w.installed for w in wheels)),), "B")
    what = f"torch {torch} from the public index (CUDA {toolkit_pin(wheels)}), CPython {PYTHON}"
    return [
        Row("cuda_size", f"{what}: wheels, compressed (the image's floor above its base)", total,
            note=f"{len(wheels)} wheels; installed {installed.median / 1e6:,.1f} MB"),
        Row("cuda_size", f"{what}: NVIDIA's CUDA libraries among them", libraries, baseline=total,
            ratio=libraries.median / total.median, ratio_meaning="of the wheels",
            note="what an nvidia/cuda:*-runtime base would have held a second copy of"),
    ]


CUDA_SIZE_NOTES = [
    "No CUDA image can be built or pulled on this machine (no registry is reachable), so its size is "
    "expected, not measured: the public index's wheels are the Python environment of the runtime image, "
    "which sits on plain ubuntu:24.04 (pytorch/pytorch's Dockerfile does the same); the image adds the "
    "base and the OS package layer measured for the CPU image under image_size.",
    "The runtime flavor used to sit on nvidia/cuda:*-runtime, whose cuBLAS, cuDNN, NCCL... duplicated "
    "the wheels' copies: the 'CUDA libraries' rows are that duplicate's order of size (the base's own "
    "copies are the toolkit's, not byte-identical to the wheels').",
    "Only the build on the public index (one CUDA per torch release) can be resolved here; the other "
    "cuXYZ builds are on download.pytorch.org, which this machine cannot reach. Their wheels pin the "
    "same libraries of another CUDA release, so their sizes are of the same order (inferred).",
]


WHEEL_BENCHES = {"cuda_size": bench_cuda_size}
