"""What an image holds, asked of its own binaries at build time (copied there as /opt/accel-images/facts.py).

The last steps of every image's build run this file with the image's Python, with no device, after
torch and its companions are installed (templates/partials/common.j2, finish()). It imports torch and
writes what torch and the installed distributions say about themselves to /opt/accel-images/facts.json;
with --constraints it also writes the pip constraints file (PIP_CONSTRAINT) that pins every
distribution of the environment as installed. The knowledge base predicts these values; from the
build on, this file is the authority: the builder checks it against the knowledge base
(accel_images/kb/claims.py), the guard decides from it, the smoke record and the catalogue carry it.

Each value is read from torch or the distributions' metadata; a read that an older or another
vendor's torch does not support gives null, never a failed build. A torch that does not import is
a failed build: exit status 1 and one line on stderr.

Standard library + torch only, Python 3.10-3.15: the file is copied verbatim into every image.

JSON schema 1 (accel_images/smoke/facts.schema.json; every key always present):
    {"schema": 1,
     "platform": {"os": "linux", "machine": "x86_64"},
     "python": "3.12.3",
     "torch": {"version": "2.15.0+cu132", "public": "2.15.0", "local": "cu132"},
     "backend": "cuda",          # cuda | rocm | xpu | hpu | cpu: what this torch build targets
     "toolkit": {"cuda": "13.2", "hip": null, "xpu": null, "cudnn": "9.26.0", "nccl": "2.30.7",
                 "gaudi": null},  # as torch reports them; gaudi: the habana-torch-plugin release
     "archs": ["sm_75", ...],    # compiled kernel targets (SASS, gfx, XPU), as torch reports them;
                                 # [] for a CPU build, null where torch cannot say
     "ptx": [],                  # JIT-able targets (compute_XX); [] when the build carries none
     "companions": {"torchvision": "0.29.2", ...},   # those of torchvision, torchaudio, numpy installed
     "distributions": {"torch": "2.15.0+cu132", ...}, # every distribution importlib.metadata finds,
                                                      # by normalized name (PEP 503)
     "cuda_compat": "595.58.03",  # the CUDA forward-compatibility libcuda under /usr/local/cuda/compat,
                                  # by the version in its name; null where there is none. Optional in
                                  # the schema: files written before it was read lack it (unknown).
     "network": {"ibverbs": "1.14.44.0", "ucx": "1.13.1", "mpi": "Open MPI 4.1.4",
                 "collective": {"name": "nccl", "version": "2.30.7"}}}
                                  # what training across nodes can use: the RDMA verbs library (the
                                  # version in its file name), UCX, the MPI on PATH, and the collective
                                  # library torch uses between devices. Each null where absent; optional
                                  # in the schema like cuda_compat.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

SCHEMA = 1
FACTS_PATH = "/opt/accel-images/facts.json"
COMPANIONS = ("torchvision", "torchaudio", "numpy")
BACKENDS = ("cuda", "rocm", "xpu", "hpu", "cpu")
GAUDI_PLUGIN = "habana-torch-plugin"
"""The distribution of Intel Gaudi's PyTorch bridge (habana_frameworks.torch)."""
PTX_PREFIX = "compute_"
"""An arch flag that names PTX (JIT-compiled by the driver) rather than compiled SASS: compute_120."""
CUDA_COMPAT_DIR = "usr/local/cuda/compat"
"""Where nvidia/cuda's bases put the cuda-compat package's libraries (through the /usr/local/cuda link),
and where the NVIDIA Container Toolkit looks for them (its enable-cuda-compat hook:
NVIDIA/nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat/cudacompat.go, cudaCompatPath)."""
COMPAT_LIBCUDA = re.compile(r"libcuda\.so\.(\d+(?:\.\d+)+)")
VERBS_SONAME = "libibverbs.so.1"
"""The RDMA verbs library as NCCL and RCCL open it at run time (NVIDIA/nccl src/misc/ibvwrap.cc: dlopen of
libibverbs.so, then libibverbs.so.1); its real file's name carries the version (libibverbs.so.1.14.44.0)."""
UCX_VERSION = re.compile(r"[Vv]ersion:?\s*([0-9][0-9.]*)")
"""`ucx_info -v`'s first line: '# Version 1.13.1' (UCX 1.13, Debian 12's, run here) or '# Library version: 1.16.0'
(openucx/ucx src/tools/info/version_info.c in later releases)."""
MPI_VERSION = re.compile(r"\((Open MPI|Intel\(R\) MPI Library)[^)]*\)\s*([0-9][0-9.]*)|"
                         r"(Intel\(R\) MPI Library)[^,]*, Version ([0-9][0-9.]*)")
"""`mpirun --version`'s first line: 'mpirun (Open MPI) 4.1.4'; Intel MPI's 'Intel(R) MPI Library for Linux* OS,
Version 2021.14 ...'."""
COLLECTIVES = {"cuda": "nccl", "rocm": "rccl", "xpu": "xccl", "hpu": "hccl", "cpu": "gloo"}
"""The library torch.distributed uses between this build's devices (its backend names: nccl, which a ROCm build
serves with RCCL; xccl from torch 2.8 for XPU; hccl from habana_frameworks.torch.distributed.hccl; gloo on the
CPU): https://docs.pytorch.org/docs/stable/distributed.html#backends."""

EXIT_OK = 0
EXIT_NO_TORCH = 1


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them: 'Typing_Extensions' -> 'typing-extensions'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> dict[str, str]:
    """Every distribution on sys.path by normalized name; the first one found wins, as import would."""
    from importlib import metadata

    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and normalized(name) not in found:
            found[normalized(name)] = str(dist.version)
    return dict(sorted(found.items()))


def read(getter: Callable[[], Any]) -> Any:
    """What `getter` returns, or None where this torch lacks the API or it fails."""
    try:
        return getter()
    except Exception:  # noqa: BLE001 - a missing or failing API is an unknown value, not a failed build
        return None


def text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def backend_of(torch: Any, local: str | None, dists: dict[str, str]) -> str:
    """What the build targets, from torch's version module; never from a device (the build has none)."""
    version = read(lambda: torch.version)
    if read(lambda: version.hip):
        return "rocm"
    if read(lambda: version.cuda):
        return "cuda"
    if GAUDI_PLUGIN in dists or (local or "").startswith("hpu"):
        return "hpu"
    if read(lambda: version.xpu) or (local or "").startswith("xpu") or read(lambda: torch._C._has_xpu):
        return "xpu"
    return "cpu"


def cudnn_version(number: Any) -> str | None:
    """torch.backends.cudnn.version(): 92600 -> '9.26.0' (cuDNN 9: major*10000), 8907 -> '8.9.7'."""
    if not isinstance(number, int) or number <= 0:
        return None
    if number >= 90000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"


def nccl_version(value: Any) -> str | None:
    """torch.cuda.nccl.version(): (2, 30, 7) -> '2.30.7'; older torch gives 2708 -> '2.7.8'."""
    if isinstance(value, tuple) and value:
        return ".".join(str(part) for part in value)
    if isinstance(value, int) and value > 0:
        return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"
    return None


def toolkit(torch: Any, backend: str, dists: dict[str, str]) -> dict[str, str | None]:
    """The stack versions torch was built with, each null where it does not apply or cannot be read."""
    version = read(lambda: torch.version)
    gpu = backend in ("cuda", "rocm")
    return {
        "cuda": text(read(lambda: version.cuda)),
        "hip": text(read(lambda: version.hip)),
        "xpu": text(read(lambda: version.xpu)),
        "cudnn": cudnn_version(read(lambda: torch.backends.cudnn.version())) if backend == "cuda" else None,
        "nccl": nccl_version(read(lambda: torch.cuda.nccl.version())) if gpu else None,
        "gaudi": dists.get(GAUDI_PLUGIN),
    }


def arch_flags(torch: Any, backend: str) -> list[str] | None:
    """The compiled targets torch reports, without a device; [] for a CPU build, None when unknown.

    CUDA and ROCm: torch._C._cuda_getArchFlags(), the build's compile-time list (sm_75 ... or
    gfx90a ...), which torch.cuda.get_arch_list() returns only when a GPU is present in torch
    releases before pytorch/pytorch#180356. XPU: torch.xpu.get_arch_list(), gated on the build alone.
    """
    if backend == "cpu":
        return []
    if backend in ("cuda", "rocm"):
        flags = read(lambda: torch._C._cuda_getArchFlags())
        if isinstance(flags, str):
            return flags.split()
        listed = read(lambda: torch.cuda.get_arch_list())
        return list(listed) if listed else None
    if backend == "xpu":
        listed = read(lambda: torch.xpu.get_arch_list())
        return [str(arch) for arch in listed] if isinstance(listed, (list, tuple)) else None
    return None


def cuda_compat(root: str = "/") -> str | None:
    """The driver version of the CUDA forward-compatibility libcuda in this image, else None.

    Read as the container toolkit reads it, so the facts say what the toolkit will do: exactly one
    `libcuda.so.X.Y[.Z]` under /usr/local/cuda/compat, its version from the name (the hook takes the
    version so, and adds nothing when it finds none or several: cudacompat.go). nvidia/cuda's bases
    install cuda-compat only "if available", so a devel base may lack it; the knowledge base's promise
    of forward compatibility is checked against this value (accel_images/kb/claims.py).
    """
    found = {match.group(1) for path in glob.glob(os.path.join(root, CUDA_COMPAT_DIR, "libcuda.so.*.*"))
             if (match := COMPAT_LIBCUDA.fullmatch(os.path.basename(path)))}
    return found.pop() if len(found) == 1 else None


def first_line(argv: list[str]) -> str:
    """The first line `argv` prints (stdout, else stderr), or '' where it is not on PATH or fails to start."""
    if not shutil.which(argv[0]):
        return ""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else ""


def verbs_library(root: str = "/") -> str | None:
    """The version of the libibverbs.so.1 the dynamic loader would find (its real file's name), else None."""
    patterns = ("usr/lib/*-linux-gnu", "lib/*-linux-gnu", "usr/lib64", "usr/lib")
    for pattern in patterns:
        for link in sorted(glob.glob(os.path.join(root, pattern, VERBS_SONAME))):
            name = os.path.basename(os.path.realpath(link))
            prefix = VERBS_SONAME.rsplit(".", 1)[0] + "."   # libibverbs.so.
            return name[len(prefix):] if name.startswith(VERBS_SONAME) else "1"
    return None


def mpi_version(line: str) -> str | None:
    """'mpirun (Open MPI) 4.1.4' -> 'Open MPI 4.1.4'; None for a line that names no MPI this knows."""
    match = MPI_VERSION.search(line)
    if not match:
        return None
    name, version = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    return f"{name} {version}"


def network(backend: str, tools: dict[str, str | None], root: str = "/") -> dict[str, Any]:
    """What training across nodes can use in this image: RDMA verbs, UCX, an MPI, the collective library."""
    ucx = UCX_VERSION.search(first_line(["ucx_info", "-v"]))
    name = COLLECTIVES.get(backend)
    version = tools.get("nccl") if backend in ("cuda", "rocm") else tools.get("gaudi") if backend == "hpu" else None
    return {
        "ibverbs": verbs_library(root),
        "ucx": ucx.group(1) if ucx else None,
        "mpi": mpi_version(first_line(["mpirun", "--version"])),
        "collective": {"name": name, "version": version},
    }


def collect(torch: Any, dists: dict[str, str], root: str = "/") -> dict[str, Any]:
    """The facts document of the installed torch and distributions (and of the file system under `root`:
    the CUDA forward-compatibility library)."""
    version = str(torch.__version__)
    public, plus, local = version.partition("+")
    backend = backend_of(torch, local if plus else None, dists)
    flags = arch_flags(torch, backend)
    tools = toolkit(torch, backend, dists)
    return {
        "schema": SCHEMA,
        "platform": {"os": sys.platform, "machine": platform.machine()},
        "python": platform.python_version(),
        "torch": {"version": version, "public": public, "local": local if plus else None},
        "backend": backend,
        "toolkit": tools,
        "archs": None if flags is None else [flag for flag in flags if not flag.startswith(PTX_PREFIX)],
        "ptx": None if flags is None else [flag for flag in flags if flag.startswith(PTX_PREFIX)],
        "companions": {name: dists[name] for name in COMPANIONS if name in dists},
        "distributions": dists,
        "cuda_compat": cuda_compat(root),
        "network": network(backend, tools, root),
    }


def constraints(dists: dict[str, str]) -> str:
    """A pip constraints file pinning every distribution as installed: `name==version`, one a line.

    pip has no priority between indexes ("There is no priority in the locations that are searched",
    pip's install documentation): a same-named higher version on the package index would replace the
    one torch's index installed (the torchtriton incident of December 2022). Pinned, it cannot.
    """
    return "".join(f"{name}=={version}\n" for name, version in dists.items())


def write(path: str, content: str) -> None:
    """Write beside the target and rename: never half a file."""
    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(content)
    os.replace(partial, path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="facts.py", description="write what this image's torch holds")
    parser.add_argument("--out", default=FACTS_PATH, help=f"the facts file (default {FACTS_PATH}); - for stdout")
    parser.add_argument("--constraints", default=None, metavar="PATH",
                        help="also write the pip constraints file pinning every distribution")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except Exception as error:  # noqa: BLE001 - any failure to import torch fails the build, in one line
        print(f"facts: torch does not import: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_NO_TORCH
    dists = distributions()
    document = json.dumps(collect(torch, dists), indent=1, sort_keys=True) + "\n"
    if args.out == "-":
        sys.stdout.write(document)
    else:
        write(args.out, document)
    if args.constraints:
        write(args.constraints, constraints(dists))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
