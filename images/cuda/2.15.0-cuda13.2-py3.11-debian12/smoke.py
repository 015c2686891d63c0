"""The smoke workload that runs inside every image (copied there as /opt/accel-images/smoke.py).

It proves three things about an image, on whatever device the container was given:
the build is the one the tag promises (torch, Python, CUDA/ROCm/XPU/Gaudi stack), the
device computes correctly, and a small model trains on it. The outcome is ONE JSON object
on the last line of stdout, read by the builder (accel_images/smoke/judge.py), and the exit
status: 0 when every check passed, 1 when one failed, 2 when the arguments were bad.

The file must stay self-contained (standard library + torch) and run on Python 3.10-3.14,
because it is copied verbatim into images whose only other content is their Python stack.
torch is imported inside run(), so the builder can import the helpers here without torch.

JSON schema 1 (every key always present):
    {"schema": 1, "ok": bool,
     "torch": str, "python": str,                     # torch.__version__, platform.python_version()
     "build": {"kind": "cpu"|"cuda"|"rocm"|"xpu"|"gaudi"|"unknown",
               "cuda": str|null, "hip": str|null, "xpu": str|null, "gaudi": str|null,
               "local": str|null},                    # what torch was built for
     "backend": "cuda"|"rocm"|"xpu"|"hpu"|"cpu",      # what the workload actually ran on
     "device": str, "device_name": str, "device_count": int, "accelerator_present": bool,
     "expect": {"torch": str|null, "python": str|null, "build": str|null,
                "require_accelerator": bool},
     "nonce": str|null,                               # the launcher's --nonce, echoed
     "checks": [{"name": str, "ok": bool, "detail": str, "ms": float|null, "numbers": {str: number}}]}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import re
import sys
import time
import traceback
import warnings
from typing import Any
from collections.abc import Callable

SCHEMA = 1
BUILD_KINDS = ("cpu", "cuda", "rocm", "xpu", "gaudi")
CPU_BACKEND = "cpu"
"""The backend the workload reports when it ran on the CPU (no usable accelerator)."""
STACK_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "gaudi": "Gaudi"}

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_ARGUMENTS = 2

SEED = 1234
MATMUL_SIZE = 192
# Relative Frobenius error allowed against the float64 reference. Float32 leaves room for
# TF32-like reduced-precision matmul paths that some accelerators take by default.
MATMUL_TOLERANCE = {"float32": 2e-3, "bfloat16": 3e-2}
MLP_STEPS = 30
MLP_LEARNING_RATE = 0.05
MLP_MOMENTUM = 0.9
# The final loss must be at most this fraction of the first. Over 200 seeds this setup
# ends at 0.22x or lower, so the check has a wide margin against flakiness.
MLP_REQUIRED_DROP = 0.5
COPY_ELEMENTS = 1 << 20
COMPILE_BACKENDS = {"hpu": "hpu_backend"}
"""torch.compile backends other than Inductor: Gaudi's (docs.habana.ai PyTorch support matrix:
`backend="hpu_backend"`; Inductor is not supported there)."""
COMPANIONS = ("torchvision", "torchaudio")
PROBE_PACKAGE = "accel_images_probe"
OFFLINE_WHEELS = "/opt/accel-images/wheels"   # accel_images.render.companions.BUILD_BACKENDS
GENERIC_PIP_ERROR = "subprocess-exited-with-error"
PIP_WARNINGS = ("is not owned or is not writable", "Defaulting to user installation", "home directory")
"""pip output that means the user's environment is broken even though the install went through."""


# ---------------------------------------------------------------- arguments and versions

class ArgumentError(Exception):
    """A bad command line; reported as a failed check instead of argparse's exit."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArgumentError(message)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse and validate the command line; raises ArgumentError with a readable message."""
    parser = _Parser(prog="smoke.py", description="accel-images smoke workload")
    parser.add_argument("--expect-torch", metavar="X.Y.Z")
    parser.add_argument("--expect-python", metavar="X.Y")
    parser.add_argument("--expect-build", metavar="cpu|cuda:13.0|rocm:7.2|xpu:2026.1|gaudi:1.24.1")
    parser.add_argument("--require-accelerator", action="store_true")
    parser.add_argument("--nonce", default=None, help="drawn by the launcher for this run; echoed in the report")
    parser.add_argument("--expect-companions", metavar="torchvision,torchaudio", default=None,
                        help="companion packages the image promises (default: those installed)")
    args = parser.parse_args(argv)
    if args.expect_torch is not None and release_tuple(args.expect_torch) is None:
        raise ArgumentError(f"--expect-torch {args.expect_torch!r} is not a version like 2.13.0")
    if args.expect_python is not None and not re.fullmatch(r"\d+\.\d+", args.expect_python):
        raise ArgumentError(f"--expect-python {args.expect_python!r} is not a version like 3.11")
    if args.expect_build is not None:
        parse_expected_build(args.expect_build)
    if args.expect_companions:
        unknown = set(args.expect_companions.split(",")) - set(COMPANIONS)
        if unknown:
            raise ArgumentError(f"--expect-companions: unknown package(s) {', '.join(sorted(unknown))}")
    return args


def parse_expected_build(text: str) -> tuple[str, str | None]:
    """'cuda:13.0' -> ('cuda', '13.0'); 'cpu' -> ('cpu', None). Raises ArgumentError."""
    kind, _, stack = text.partition(":")
    if kind not in BUILD_KINDS:
        raise ArgumentError(f"--expect-build {text!r}: kind must be one of {', '.join(BUILD_KINDS)}")
    if kind == "cpu":
        if stack:
            raise ArgumentError(f"--expect-build {text!r}: cpu takes no version")
        return kind, None
    if release_tuple(stack) is None:
        raise ArgumentError(f"--expect-build {text!r}: needs a version, e.g. {kind}:1.2")
    return kind, stack


def release_tuple(text: str | None) -> tuple[int, ...] | None:
    """The leading numeric release of a version string: '7.2.26015-fc0010' -> (7, 2, 26015).

    Versions are compared as integer tuples, never as floats or strings (ROCm 7.2 < 7.14).
    """
    if not text:
        return None
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def split_local(version: str) -> tuple[str, str | None]:
    """'2.13.0+cpu' -> ('2.13.0', 'cpu'); '2.13.0' -> ('2.13.0', None)."""
    public, plus, local = version.partition("+")
    return public, (local if plus else None)


def same_release(actual: str | None, expected: str, parts: int | None = None) -> bool:
    """True when the first `parts` release numbers agree (all of the expected ones by default).

    A missing trailing part counts as 0, so torch '2.13' equals '2.13.0'.
    """
    have, want = release_tuple(actual), release_tuple(expected)
    if have is None or want is None:
        return False
    size = parts if parts is not None else len(want)
    pad = (0,) * size
    return (have + pad)[:size] == (want + pad)[:size]


def xpu_release(torch_xpu_version: str | None) -> str | None:
    """torch.version.xpu is the SYCL compiler version YYYYMMPP: '20250101' -> '2025.1.1'."""
    if not torch_xpu_version:
        return None
    digits = torch_xpu_version.strip()
    if re.fullmatch(r"\d{8}", digits):
        return f"{int(digits[:4])}.{int(digits[4:6])}.{int(digits[6:])}"
    return digits if release_tuple(digits) else None


def describe_build(build: dict[str, Any]) -> str:
    """A build as a person reads it: 'CUDA 13.0', 'ROCm 7.2.26015', 'CPU'."""
    kind = build.get("kind")
    if kind == "cpu":
        return "CPU"
    if kind in STACK_NAMES:
        return f"{STACK_NAMES[kind]} {build_stack_version(build) or '(version unknown)'}"
    return f"an unrecognised stack (+{build.get('local')})"


def build_stack_version(build: dict[str, Any]) -> str | None:
    """The stack version of a build dict, in the same form as --expect-build uses."""
    kind = build.get("kind")
    if kind == "cuda":
        return build.get("cuda")
    if kind == "rocm":
        return build.get("hip")
    if kind == "xpu":
        return xpu_release(build.get("xpu"))
    if kind == "gaudi":
        return build.get("gaudi")
    return None


def build_mismatches(build: dict[str, Any], expected_kind: str, expected_stack: str | None) -> list[str]:
    """Readable reasons why a reported build is not the promised one; empty when it is.

    CUDA must match major.minor exactly; ROCm's HIP version must start with the ROCm
    major.minor; XPU compares year.minor of the SYCL compiler when torch reports it; Gaudi
    compares the release of the Habana plugin as far as the promise goes.
    """
    kind = build.get("kind")
    promised = "CPU" if expected_kind == "cpu" else f"{STACK_NAMES[expected_kind]} {expected_stack}"
    if kind != expected_kind:
        return [f"torch is built for {describe_build(build)}, image promises {promised}"]
    if expected_kind == "cpu":
        local = build.get("local")
        if local not in (None, "cpu"):
            return [f"torch local version label is '+{local}', image promises a '+cpu' build"]
        return []
    actual = build_stack_version(build)
    if actual is None:
        if expected_kind in ("xpu", "gaudi"):
            return []  # not reported by this torch; recorded, not judged
        return [f"torch reports no {STACK_NAMES[expected_kind]} version, image promises {promised}"]
    parts = {"cuda": 2, "rocm": 2, "xpu": 2}.get(expected_kind)
    if not same_release(actual, expected_stack or "", parts):
        return [f"torch reports {STACK_NAMES[expected_kind]} {actual}, image promises {promised}"]
    return []


def torch_mismatch(actual: str, expected: str) -> str | None:
    """Compare torch versions ignoring the local label ('+cpu', '+cu130')."""
    public, _ = split_local(actual)
    if same_release(public, expected) and same_release(expected, public):
        return None
    return f"torch is {actual}, image promises {expected}"


def python_mismatch(actual: str, expected: str) -> str | None:
    """Compare Python major.minor."""
    if same_release(actual, expected, 2):
        return None
    return f"Python is {actual}, image promises {expected}"


# ---------------------------------------------------------------- checks

def _check(name: str, ok: bool, detail: str, ms: float | None = None,
           numbers: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "ok": bool(ok), "detail": detail,
            "ms": None if ms is None else round(ms, 3), "numbers": numbers or {}}


def _timed(name: str, body: Callable[[], tuple[bool, str, dict[str, Any]]]) -> dict[str, Any]:
    """Run one check; an exception becomes a failed check naming it, never a crash."""
    start = time.perf_counter()
    try:
        ok, detail, numbers = body()
    except Exception as exc:  # noqa: BLE001 - any failure inside a check is that check's result
        elapsed = (time.perf_counter() - start) * 1000
        return _check(name, False, f"{type(exc).__name__}: {_one_line(_first_line(str(exc)))}", elapsed)
    return _check(name, ok, detail, (time.perf_counter() - start) * 1000, numbers)


def _first_line(text: str) -> str:
    """The first non-empty line: torch's long errors (Inductor's compiler hints) start with the cause."""
    return next((line for line in text.splitlines() if line.strip()), text)


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Device:
    """The device the workload runs on, and how to wait for it."""

    def __init__(self, torch: Any, backend: str, device_type: str, name: str, count: int,
                 mark_step: Callable[[], None] | None = None) -> None:
        self.torch = torch
        self.backend = backend
        self.type = device_type
        self.name = name
        self.count = count
        self._mark_step = mark_step

    def step(self) -> None:
        """Gaudi lazy mode executes the accumulated graph here; a no-op elsewhere."""
        if self._mark_step is not None:
            self._mark_step()

    def synchronize(self) -> None:
        module = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "hpu": "hpu"}.get(self.backend)
        if module is not None:
            getattr(self.torch, module).synchronize()


class GaudiPlugin:
    """The Habana PyTorch plugin of a Gaudi image: its release and htcore.mark_step."""

    def __init__(self, version: str | None, mark_step: Callable[[], None]) -> None:
        self.version = version
        self.mark_step = mark_step


def gaudi_plugin() -> GaudiPlugin | None:
    """The Habana plugin when it is installed; importing it also registers the hpu device."""
    try:
        import habana_frameworks.torch.core as htcore  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - absent or broken plugin means "not a Gaudi image"
        return None
    try:
        from importlib import metadata
        version: str | None = metadata.version("habana-torch-plugin")
    except Exception:  # noqa: BLE001 - installed some other way: the module may know
        import habana_frameworks.torch as hft  # type: ignore[import-not-found]
        version = getattr(hft, "__version__", None)
    return GaudiPlugin(str(version) if version else None, htcore.mark_step)


def build_info(torch: Any, gaudi: GaudiPlugin | None) -> dict[str, Any]:
    """What torch was built for, independent of the device present."""
    version = torch.version
    cuda = getattr(version, "cuda", None)
    hip = getattr(version, "hip", None)
    xpu = getattr(version, "xpu", None)
    _, local = split_local(str(torch.__version__))
    if hip:
        kind = "rocm"
    elif cuda:
        kind = "cuda"
    elif gaudi is not None or (local or "").startswith("hpu"):
        kind = "gaudi"
    elif xpu or (local or "").startswith("xpu"):
        kind = "xpu"
    elif local in (None, "cpu"):
        kind = "cpu"
    else:
        kind = "unknown"
    return {"kind": kind, "cuda": cuda, "hip": hip, "xpu": xpu,
            "gaudi": gaudi.version if gaudi is not None else None, "local": local}


def find_device(torch: Any, gaudi: GaudiPlugin | None) -> Device:
    """The accelerator the container can use, else the CPU."""
    version = torch.version
    if getattr(version, "hip", None) and torch.cuda.is_available():
        return Device(torch, "rocm", "cuda", torch.cuda.get_device_name(0), torch.cuda.device_count())
    if getattr(version, "cuda", None) and torch.cuda.is_available():
        return Device(torch, "cuda", "cuda", torch.cuda.get_device_name(0), torch.cuda.device_count())
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return Device(torch, "xpu", "xpu", xpu.get_device_name(0), xpu.device_count())
    hpu = getattr(torch, "hpu", None)
    if gaudi is not None and hpu is not None and hpu.is_available():
        return Device(torch, "hpu", "hpu", hpu.get_device_name(0), hpu.device_count(), gaudi.mark_step)
    return Device(torch, "cpu", "cpu", cpu_name(), 1)


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where Linux has one, else the machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def matmul_check(device: Device, dtype_name: str) -> tuple[bool, str, dict[str, Any]]:
    """A matrix product on the device against a float64 product on the CPU."""
    torch = device.torch
    generator = torch.Generator().manual_seed(SEED)
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, generator=generator, dtype=torch.float64)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, generator=generator, dtype=torch.float64)
    dtype = getattr(torch, dtype_name)
    product = a.to(dtype).to(device.type) @ b.to(dtype).to(device.type)
    device.step()
    result = product.to("cpu").to(torch.float64)
    reference = a.to(dtype).to(torch.float64) @ b.to(dtype).to(torch.float64)
    error = float(torch.linalg.norm(result - reference) / torch.linalg.norm(reference))
    tolerance = MATMUL_TOLERANCE[dtype_name]
    ok = math.isfinite(error) and error <= tolerance
    detail = f"{MATMUL_SIZE}x{MATMUL_SIZE} {dtype_name}: relative error {error:.2e} (limit {tolerance:.0e})"
    return ok, detail, {"size": MATMUL_SIZE, "relative_error": error, "tolerance": tolerance}


def mlp_check(device: Device) -> tuple[bool, str, dict[str, Any]]:
    """A small MLP trains for a few steps on seeded synthetic data; its loss must fall.

    The update is SGD with momentum written out by hand: the first torch.optim optimizer a
    process builds costs over a second of imports, more than the whole workload may take.
    """
    torch = device.torch
    generator = torch.Generator().manual_seed(SEED)
    inputs = torch.randn(256, 16, generator=generator)
    weights = torch.randn(16, 1, generator=generator)
    targets = torch.tanh(inputs @ weights) + 0.05 * torch.randn(256, 1, generator=generator)
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    model = model.to(device.type)
    parameters = list(model.parameters())
    velocities = [torch.zeros_like(parameter) for parameter in parameters]
    x, y = inputs.to(device.type), targets.to(device.type)
    losses = []
    for _ in range(MLP_STEPS):
        for parameter in parameters:
            parameter.grad = None
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        device.step()
        with torch.no_grad():
            for parameter, velocity in zip(parameters, velocities, strict=True):
                velocity.mul_(MLP_MOMENTUM).add_(parameter.grad)
                parameter.sub_(MLP_LEARNING_RATE * velocity)
        device.step()
        losses.append(loss.detach())
    values = [float(value) for value in torch.stack(losses).to("cpu")]
    first, last = values[0], values[-1]
    ok = all(math.isfinite(value) for value in values) and last <= first * MLP_REQUIRED_DROP
    detail = (f"{MLP_STEPS} SGD steps: loss {first:.4f} -> {last:.4f} "
              f"(must reach <= {MLP_REQUIRED_DROP:g} x first)")
    return ok, detail, {"steps": MLP_STEPS, "first_loss": first, "last_loss": last}


def copy_check(device: Device) -> tuple[bool, str, dict[str, Any]]:
    """Host -> device -> host round trip of exactly representable values, after a device op."""
    torch = device.torch
    source = torch.arange(COPY_ELEMENTS, dtype=torch.float32) % 4096
    on_device = source.to(device.type) * 2 + 1
    device.step()
    device.synchronize()
    start = time.perf_counter()
    back = on_device.to("cpu")
    copy_ms = (time.perf_counter() - start) * 1000
    mismatches = int((back != source * 2 + 1).sum())
    megabytes = COPY_ELEMENTS * 4 / 1e6
    detail = f"{megabytes:.1f} MB device->host: {mismatches} wrong elements"
    return mismatches == 0, detail, {"megabytes": megabytes, "wrong_elements": mismatches,
                                     "copy_ms": round(copy_ms, 3)}


def numpy_check(device: Device) -> tuple[bool, str, dict[str, Any]]:
    """tensor.numpy() and torch.from_numpy() both ways: `import torch` only warns without numpy."""
    import numpy

    torch = device.torch
    on_device = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(device.type) * 3
    device.step()
    array = on_device.to("cpu").numpy()
    back = torch.from_numpy(array * 2).to(device.type)
    device.step()
    ok = bool(numpy.array_equal(back.to("cpu").numpy(), numpy.arange(12, dtype=numpy.float32).reshape(3, 4) * 6))
    return ok, f"numpy {numpy.__version__}: device -> numpy -> device round trip", {}


INDUCTOR_QUICK = {"compile_threads": 1, "cpp_cache_precompile_headers": False, "cpp.vec_isa_ok": False}
"""Inductor settings for the check alone. They skip what a developer pays once per machine and
what does not decide whether compiling works: the pool of compile workers, the precompiled
header, and the probes that compile a test program per vector ISA (a failed probe only makes the
kernels scalar). The kernel is still C++ compiled by the image's compiler against its Python
headers. On the CPU image this takes the check from about 15 s to about 4 s."""


def compile_check(device: Device) -> tuple[bool, str, dict[str, Any]]:
    """torch.compile of a small function against eager: Inductor needs a C/C++ compiler and the
    Python headers at run time (pytorch/pytorch#116696); Gaudi compiles with its own backend."""
    torch = device.torch
    backend = COMPILE_BACKENDS.get(device.backend, "inductor")

    def function(x: Any) -> Any:
        return torch.sin(x) * torch.cos(x) + x * x

    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(64, 64, generator=generator).to(device.type)
    compiled = torch.compile(function, backend=backend)
    with inductor_settings(backend):
        got, want = compiled(x), function(x)
    device.step()
    error = float((got - want).abs().max().to("cpu"))
    ok = math.isfinite(error) and error <= 1e-4
    return ok, f"torch.compile (backend {backend}) matches eager: max error {error:.1e}", {"max_error": error}


def inductor_settings(backend: str) -> Any:
    """INDUCTOR_QUICK while the check compiles with Inductor; nothing changed for another backend.

    Only the settings this torch has: one a later release renames makes the check slower, not failed.
    """
    if backend != "inductor":
        return contextlib.nullcontext()
    import torch._inductor.config as inductor_config  # torch is imported at run time, in the image
    known = inductor_config.get_config_copy()
    return inductor_config.patch({name: value for name, value in INDUCTOR_QUICK.items() if name in known})


def installed_companions() -> list[str]:
    from importlib import metadata

    found = []
    for name in COMPANIONS:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def companion_check(device: Device, name: str) -> tuple[bool, str, dict[str, Any]]:
    """One operator of the companion package on the device: a build from another index than torch's
    fails here (torchvision's C++ ops do not load: "operator torchvision::nms does not exist")."""
    torch = device.torch
    if name == "torchvision":
        import torchvision

        boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [50.0, 50.0, 60.0, 60.0]])
        scores = torch.tensor([0.9, 0.8, 0.7])
        kept = torchvision.ops.nms(boxes.to(device.type), scores.to(device.type), 0.5).to("cpu").tolist()
        return kept == [0, 2], f"torchvision {torchvision.__version__}: ops.nms kept {kept}", {}
    import torchaudio

    wave = torch.sin(torch.linspace(0, 100, 4000)).to(device.type)
    spectrum = torchaudio.transforms.Spectrogram(n_fft=256).to(device.type)(wave)
    device.step()
    ok = tuple(spectrum.shape) == (129, 32) and bool(torch.isfinite(spectrum).all())
    return ok, f"torchaudio {torchaudio.__version__}: Spectrogram {tuple(spectrum.shape)}", {}


def pip_check() -> tuple[bool, str, dict[str, Any]]:
    """What a developer does first: `pip install .` of a project, into the image's environment,
    as this user, with no network (--no-index).

    The project is written here (one module, a setuptools pyproject.toml). pip builds it the way
    it builds any project: in an isolated environment whose backend it must fetch first, from
    the image's OFFLINE_WHEELS (pip.conf's find-links). An image without that directory (Gaudi:
    the vendor's base has no pip.conf of ours) builds it with --no-build-isolation against the
    environment's own setuptools, and the detail says so. pip's own warnings about an unwritable
    home or cache fail the check too.
    """
    import os
    import subprocess
    import tempfile

    isolated = os.path.isdir(OFFLINE_WHEELS)
    with tempfile.TemporaryDirectory() as scratch:
        write_probe_project(scratch)
        pip = [sys.executable, "-m", "pip"]
        isolation = [] if isolated else ["--no-build-isolation"]
        installed = subprocess.run([*pip, "install", "--no-index", "--no-deps", *isolation, scratch],
                                   capture_output=True, text=True, timeout=180)
        said = installed.stdout + installed.stderr
        if installed.returncode != 0:
            return False, f"pip install . failed: {_first_error(said)}", {}
        probe = subprocess.run([sys.executable, "-c", f"import {PROBE_PACKAGE} as p; print(p.ANSWER)"],
                               capture_output=True, text=True, timeout=60, cwd="/")
        subprocess.run([*pip, "uninstall", "-y", PROBE_PACKAGE], capture_output=True, text=True, timeout=120)
    warned = [line for line in said.splitlines() if any(w in line for w in PIP_WARNINGS)]
    if warned:
        return False, f"pip install warned: {_one_line(warned[0])}", {}
    if probe.stdout.strip() != "42":
        return False, f"the installed package does not import: {_first_error(probe.stderr)}", {}
    how = f"isolated build, backend from {OFFLINE_WHEELS}" if isolated else "--no-build-isolation"
    return True, f"pip install . of a project without a network as this user ({how})", {}


def venv_check() -> tuple[bool, str, dict[str, Any]]:
    """`python -m venv` as a developer (or tox, nox) makes one: Debian's and Ubuntu's Python stop
    with "ensurepip is not available" unless the image has pythonX.Y-venv."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        made = subprocess.run([sys.executable, "-m", "venv", f"{scratch}/env"], capture_output=True, text=True,
                              timeout=120)
        if made.returncode != 0:
            return False, f"python -m venv failed: {_one_line(made.stdout + made.stderr, 200)}", {}
        pip = subprocess.run([f"{scratch}/env/bin/python", "-m", "pip", "--version"], capture_output=True,
                             text=True, timeout=60)
    if pip.returncode != 0:
        return False, f"the new environment has no working pip: {_first_error(pip.stdout + pip.stderr)}", {}
    return True, f"python -m venv makes an environment with {' '.join(pip.stdout.split()[:2])}", {}


def git_check() -> tuple[bool, str, dict[str, Any]]:
    """Version control of a project, as this user: init, commit, log. A user with no identity
    configured gets one from the environment, as a developer's first commit in a fresh
    container would have to."""
    import os
    import subprocess
    import tempfile

    identity = {"GIT_AUTHOR_NAME": "smoke", "GIT_AUTHOR_EMAIL": "smoke@localhost",
                "GIT_COMMITTER_NAME": "smoke", "GIT_COMMITTER_EMAIL": "smoke@localhost"}
    with tempfile.TemporaryDirectory() as scratch:
        with open(f"{scratch}/README", "w") as readme:
            readme.write("probe\n")
        steps = [["init", "-q"], ["add", "README"], ["commit", "-q", "-m", "probe"], ["log", "-1", "--format=%s"]]
        for step in steps:
            try:
                done = subprocess.run(["git", "-C", scratch, *step], capture_output=True, text=True, timeout=30,
                                      env={**os.environ, **identity})
            except OSError as err:
                return False, f"git cannot run: {err}", {}
            if done.returncode != 0:
                return False, f"git {step[0]} failed: {_first_error(done.stdout + done.stderr)}", {}
    if done.stdout.strip() != "probe":
        return False, f"git log shows {done.stdout.strip()!r}, not the commit just made", {}
    return True, "git init, add, commit and log as this user", {}


def write_probe_project(directory: str) -> None:
    """A one-module project that any setuptools since 61 (PEP 621 metadata) builds."""
    from pathlib import Path

    root = Path(directory)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{PROBE_PACKAGE}"\nversion = "1.0"\n\n'
        f'[tool.setuptools]\npy-modules = ["{PROBE_PACKAGE}"]\n')
    (root / f"{PROBE_PACKAGE}.py").write_text("ANSWER = 42\n")


def toolchain_check() -> tuple[bool, str, dict[str, Any]]:
    """What torch.utils.cpp_extension.load()/load_inline() needs besides torch's own headers:
    ninja (it refuses to start without it) driving the C++ compiler it picks, against the Python
    headers. A build of torch/extension.h itself takes about 30 s on two cores, so the check has
    ninja compile and link a small program against Python.h instead, and runs it."""
    import subprocess
    import sysconfig
    import tempfile

    from torch.utils import cpp_extension

    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError as err:
        return False, _first_error(str(err)), {}
    compiler = cpp_extension.get_cxx_compiler()
    include = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory() as scratch:
        with open(f"{scratch}/probe.cpp", "w") as source:
            source.write("#include <Python.h>\nint main() { return PY_MAJOR_VERSION == 3 ? 0 : 1; }\n")
        with open(f"{scratch}/build.ninja", "w") as rules:
            rules.write(f"rule cxx\n  command = {compiler} -std=c++17 -I{include} -c $in -o $out\n"
                        f"rule link\n  command = {compiler} $in -o $out\n"
                        "build probe.o: cxx probe.cpp\nbuild probe: link probe.o\n")
        built = subprocess.run(["ninja", "-C", scratch], capture_output=True, text=True, timeout=120)
        if built.returncode != 0:
            return False, f"ninja could not build with {compiler}: {_first_error(built.stdout + built.stderr)}", {}
        ran = subprocess.run([f"{scratch}/probe"], capture_output=True, text=True, timeout=30)
    if ran.returncode != 0:
        return False, f"the program {compiler} built exits {ran.returncode}", {}
    return True, f"ninja drives {compiler} against the Python headers (torch.utils.cpp_extension's toolchain)", {}


def _first_error(text: str) -> str:
    """The line of tool output that says what went wrong: the last error line, else the first.
    pip's closing "error: subprocess-exited-with-error" names no cause; the line before it does."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and GENERIC_PIP_ERROR not in line]
    errors = [line for line in lines if line.startswith(("ERROR", "error", "Traceback")) or "Error" in line]
    return _one_line((errors[-1] if errors else lines[0]) if lines else "(no output)", 300)


def developer_checks(args: argparse.Namespace, device: Device) -> list[dict[str, Any]]:
    """What a developer does in the first five minutes, on the device the workload uses."""
    companions = args.expect_companions.split(",") if args.expect_companions else installed_companions()
    checks = [_timed("numpy", lambda: numpy_check(device)), _timed("torch_compile", lambda: compile_check(device))]
    checks += [_timed(f"companion_{name}", lambda name=name: companion_check(device, name))  # type: ignore[misc]
               for name in companions]
    checks.append(_timed("cpp_extension_toolchain", toolchain_check))
    checks.append(_timed("pip_install", pip_check))
    checks.append(_timed("venv", venv_check))
    checks.append(_timed("git", git_check))
    return checks


def expectation_checks(args: argparse.Namespace, torch_version: str, python_version: str,
                       build: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks that the build is what the image tag promises."""
    checks = []
    if args.expect_torch:
        problem = torch_mismatch(torch_version, args.expect_torch)
        checks.append(_check("torch_version", problem is None, problem or f"torch {torch_version}"))
    if args.expect_python:
        problem = python_mismatch(python_version, args.expect_python)
        checks.append(_check("python_version", problem is None, problem or f"Python {python_version}"))
    if args.expect_build:
        kind, stack = parse_expected_build(args.expect_build)
        problems = build_mismatches(build, kind, stack)
        detail = "; ".join(problems) or f"torch is built for {describe_build(build)}"
        if not problems and kind in ("xpu", "gaudi") and build_stack_version(build) is None:
            detail += f" (stack version not reported by torch; promised {stack} not verified)"
        checks.append(_check("build", not problems, detail))
    return checks


def accelerator_check(torch: Any, gaudi: GaudiPlugin | None, required: bool) -> tuple[Device, dict[str, Any]]:
    """The device to use and the check saying what was found.

    Why an accelerator is unusable usually only shows as a warning from torch (e.g. "The
    NVIDIA driver on your system is too old"), so warnings raised while looking are kept
    in the check's detail.
    """
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            device, problem = find_device(torch, gaudi), None
        except Exception as exc:  # noqa: BLE001 - e.g. a driver that refuses to initialise
            device, problem = Device(torch, "cpu", "cpu", cpu_name(), 1), f"{type(exc).__name__}: {exc}"
    elapsed = (time.perf_counter() - start) * 1000
    notes = [_one_line(str(warning.message), 200) for warning in caught]
    if problem:
        notes.insert(0, _one_line(problem))
    why = f" ({'; '.join(notes)})" if notes else ""
    if device.backend != "cpu":
        return device, _check("accelerator", True, f"{device.backend}: {device.count} x {device.name}{why}",
                              elapsed, {"device_count": device.count})
    if required:
        return device, _check("accelerator", False,
                              f"no accelerator usable by torch; --require-accelerator was given{why}", elapsed)
    return device, _check("accelerator", problem is None, f"no accelerator usable by torch; ran in CPU mode{why}",
                          elapsed)


# ---------------------------------------------------------------- report

def _expect(args: argparse.Namespace | None) -> dict[str, Any]:
    if args is None:
        return {"torch": None, "python": None, "build": None, "require_accelerator": False}
    return {"torch": args.expect_torch, "python": args.expect_python, "build": args.expect_build,
            "require_accelerator": bool(args.require_accelerator)}


def empty_report(args: argparse.Namespace | None) -> dict[str, Any]:
    """A report with every key present, for runs that stop before torch could say anything."""
    return {"schema": SCHEMA, "ok": False, "torch": "", "python": platform.python_version(),
            "build": {"kind": "unknown", "cuda": None, "hip": None, "xpu": None, "gaudi": None, "local": None},
            "backend": "cpu", "device": "cpu", "device_name": "", "device_count": 0,
            "accelerator_present": False, "expect": _expect(args), "checks": [],
            "nonce": args.nonce if args is not None else None}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every check and return the report."""
    report = empty_report(args)
    start = time.perf_counter()
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch is the finding, not a crash
        report["checks"].append(_check("import_torch", False, f"{type(exc).__name__}: {_one_line(str(exc))}",
                                       (time.perf_counter() - start) * 1000))
        return report
    report["checks"].append(_check("import_torch", True, f"torch {torch.__version__}",
                                   (time.perf_counter() - start) * 1000))
    gaudi = gaudi_plugin()
    build = build_info(torch, gaudi)
    report.update(torch=str(torch.__version__), build=build)
    report["checks"].extend(expectation_checks(args, report["torch"], report["python"], build))
    device, found = accelerator_check(torch, gaudi, args.require_accelerator)
    report["checks"].append(found)
    report.update(backend=device.backend, device=device.type, device_name=device.name,
                  device_count=device.count, accelerator_present=device.backend != "cpu")
    report["checks"].append(_timed("matmul_float32", lambda: matmul_check(device, "float32")))
    report["checks"].append(_timed("matmul_bfloat16", lambda: matmul_check(device, "bfloat16")))
    report["checks"].append(_timed("mlp_training", lambda: mlp_check(device)))
    report["checks"].append(_timed("device_to_host", lambda: copy_check(device)))
    report["checks"].extend(developer_checks(args, device))
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point: always prints the JSON report as the last stdout line."""
    try:
        args = parse_args(argv)
    except ArgumentError as exc:
        report = empty_report(None)
        report["checks"].append(_check("arguments", False, str(exc)))
        _emit(report)
        return EXIT_BAD_ARGUMENTS
    try:
        report = run(args)
    except Exception as exc:  # noqa: BLE001 - keep the one-JSON-line contract on any surprise
        traceback.print_exc(file=sys.stderr)
        report = empty_report(args)
        report["checks"].append(_check("workload", False, f"{type(exc).__name__}: {_one_line(str(exc))}"))
    report["ok"] = bool(report["checks"]) and all(check["ok"] for check in report["checks"])
    _emit(report)
    return EXIT_OK if report["ok"] else EXIT_CHECK_FAILED


def _emit(report: dict[str, Any]) -> None:
    sys.stdout.flush()
    sys.stdout.write(json.dumps(_json_safe(report), sort_keys=True, allow_nan=False) + "\n")
    sys.stdout.flush()


def _json_safe(value: Any) -> Any:
    """Strict JSON: NaN and infinities (a diverged loss) become null, unknown objects text."""
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
