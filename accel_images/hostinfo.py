"""What a host offers, and the small tools vendor probes share to find out.

Each vendor's probe (`accel_images/vendors/<name>.py`) asks that vendor's own tools and reads a
few driver files. Each tool runs under a short timeout and each answer is parsed defensively: a
missing, hung, crashing or babbling tool means "this vendor was not found", with a line of
evidence saying why, never an exception. Every file path hangs off ``root`` so that a test can
fake a whole machine in a temporary directory, and every command goes through ``run`` so that a
test can answer with recorded output.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeAlias

CommandOutput: TypeAlias = str
"""What a tool printed on stdout, decoded; only ever for a tool that exited with status 0."""

Runner: TypeAlias = Callable[[list[str]], "CommandOutput | None"]

TOOL_TIMEOUT_S = 10.0
"""Long enough for nvidia-smi on an 8-GPU node waking from idle, short enough that a wedged driver
does not stall `make image`."""

DOTTED = r"\d+(?:\.\d+)+"


@dataclass(frozen=True)
class HostInfo:
    """What the host offers. ``gpu_names`` has one entry per device when the source names them;
    ``gpu_archs`` lists each distinct architecture once, in the order first seen (NVIDIA compute
    capabilities '9.0', AMD gfx targets 'gfx942', Intel device names). ``stack_version`` is the
    vendor's stack as the host reports it: the newest CUDA the driver supports, the host's ROCm,
    the Gaudi software of the driver."""

    vendor: str = "cpu"
    driver_version: str | None = None
    stack_version: str | None = None
    gpu_names: tuple[str, ...] = ()
    gpu_archs: tuple[str, ...] = ()
    device_count: int = 0
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gpu:
    """One device as a tool listed it."""

    name: str | None
    arch: str | None = None


def host_from(vendor: str, gpus: list[Gpu], **fields: str | None) -> HostInfo:
    """A HostInfo for `vendor` from its devices (names per device, architectures once each)."""
    return HostInfo(vendor=vendor, gpu_names=tuple(g.name for g in gpus if g.name),
                    gpu_archs=distinct([g.arch for g in gpus]), device_count=len(gpus), **fields)  # type: ignore[arg-type]


def summary(gpus: list[Gpu]) -> str:
    names = distinct([g.name for g in gpus])
    return f"{len(gpus)} device(s)" + (f" ({', '.join(names)})" if names else "")


def run_command(argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> CommandOutput | None:
    """Run a tool; its stdout, or None when it is missing, exits non-zero or outlives the timeout.

    The tool gets a process group of its own so that a hung nvidia-smi, and whatever it spawned, is
    killed as a whole. Stderr is dropped: tools print warnings there that are not answers.
    """
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
    except (OSError, ValueError):
        return None
    try:
        stdout, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return None
    if process.returncode != 0:
        return None
    return stdout.decode("utf-8", errors="replace")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the tool's whole process group; wait without reading, in case a child escaped it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass  # already gone
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def listing(directory: Path, pattern: str) -> list[Path]:
    try:
        return sorted(directory.glob(pattern))
    except OSError:
        return []


def quote(text: str) -> str:
    """A short, one-line sample of unexpected output for the evidence."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return repr(first[:60] + ("..." if len(first) > 60 else ""))


def distinct(values: list[str | None]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value for value in values if value))


def leading_version(text: str | None, parts: int = 3) -> str | None:
    """The dotted version a text starts with, at most `parts` numbers: '6.4.1-120' -> '6.4.1'."""
    match = re.match(r"\s*(\d+(?:\.\d+){1,%d})" % (parts - 1), text or "")
    return match.group(1) if match else None
