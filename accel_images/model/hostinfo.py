"""What a host offers, and the small tools vendor probes share to find out.

Each vendor's probe (`accel_images/vendors/<name>.py`, or `<name>/detect.py`) asks that vendor's own tools and reads a
few driver files. Each tool runs under a short timeout and each answer is parsed defensively: a
missing, hung, crashing or babbling tool means "this vendor was not found", with a line of
evidence saying why, never an exception. Every file path hangs off ``root`` so that a test can
fake a whole machine in a temporary directory, and every command goes through ``run`` so that a
test can answer with recorded output.

A tool that exits non-zero is not silent: nvidia-smi prints "Failed to initialize NVML: Driver/library
version mismatch" on stdout and exits 18, rocminfo prints why it cannot open /dev/kfd. So the runner
hands back what such a tool printed as a `ToolOutput` whose `exit_code` is not 0, and each probe
decides whether that text names a broken driver (the host is then "accelerator present but
unusable") or is no answer at all (`answer()` gives None, as before). A fake runner stays a table of
plain strings: a plain str is a tool that exited 0, and the probes recognise a failure by what it
says, whatever the exit status.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeAlias
from collections.abc import Callable



class ToolOutput(str):
    """What a tool printed on stdout, decoded, with its exit status and its stderr beside it.

    A str, so parsers read it like any text; a plain str (what a fake runner returns) counts as
    exit status 0 with nothing on stderr.
    """

    exit_code: int
    stderr: str

    def __new__(cls, stdout: str, exit_code: int = 0, stderr: str = "") -> ToolOutput:
        output = super().__new__(cls, stdout)
        output.exit_code, output.stderr = exit_code, stderr
        return output


CommandOutput: TypeAlias = str
"""A tool's stdout (a `ToolOutput` from `run_command`, a plain str from a fake)."""

Runner: TypeAlias = Callable[[list[str]], "CommandOutput | None"]
"""Runs argv: its output (see `ToolOutput`), or None when the tool is missing, killed by a signal or
hung past its timeout. A non-zero exit status comes back as a ToolOutput with `exit_code` set:
probes written for the older contract (None for any failure) get that contract from `answer()`."""


def exit_code(output: CommandOutput | None) -> int | None:
    """The tool's exit status; None when it never answered."""
    return None if output is None else getattr(output, "exit_code", 0)


def answer(output: CommandOutput | None) -> str | None:
    """The output of a tool that succeeded (exit status 0); None for a missing, hung or failing one."""
    return output if exit_code(output) == 0 else None


def said(output: CommandOutput | None) -> str:
    """Everything the tool printed, stdout then stderr: where its own failure messages are."""
    if output is None:
        return ""
    stderr = getattr(output, "stderr", "")
    return f"{output}\n{stderr}" if stderr else str(output)


def failed(text: str, code: int = 1) -> ToolOutput:
    """What a tool that exited with status `code` printed; for fake runners that record a failure."""
    return ToolOutput(text, exit_code=code)

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
    unusable: str | None = None
    """Set when the vendor's driver is present but broken: the reason ("NVIDIA driver/library version
    mismatch ..."). The host then has `vendor` set to that vendor, and no image of it can run."""
    machine: str | None = None
    """The CPU architecture as `uname -m` prints it (x86_64, aarch64): which platform's image runs here
    without emulation. None when unknown (a recorded host from before it was read): x86_64 is assumed."""
    kernel_drivers: tuple[str, ...] = ()
    """The kernel drivers bound to the accelerator's devices, each once (Intel: i915, xe), where something
    is decided by them: Intel's Kubernetes device plugin names a GPU after its driver. Empty when unknown."""


@dataclass(frozen=True)
class Gpu:
    """One device as a tool listed it."""

    name: str | None
    arch: str | None = None


def host_from(vendor: str, gpus: list[Gpu], **fields: str | None) -> HostInfo:
    """A HostInfo for `vendor` from its devices (names per device, architectures once each)."""
    return HostInfo(vendor=vendor, gpu_names=tuple(g.name for g in gpus if g.name),
                    gpu_archs=distinct([g.arch for g in gpus]), device_count=len(gpus), **fields)  # type: ignore[arg-type]


def unusable_host(vendor: str, reason: str, gpus: list[Gpu] | None = None, **fields: str | None) -> HostInfo:
    """A host whose `vendor` driver is present but broken, with the devices that were still listed."""
    return replace(host_from(vendor, gpus or [], **fields), unusable=reason)


def summary(gpus: list[Gpu]) -> str:
    names = distinct([g.name for g in gpus])
    return f"{len(gpus)} device(s)" + (f" ({', '.join(names)})" if names else "")


def run_command(argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> ToolOutput | None:
    """Run a tool; what it printed with its exit status, or None when it is missing, was killed by a
    signal (a crash) or outlives the timeout.

    The tool gets a process group of its own so that a hung nvidia-smi, and whatever it spawned, is
    killed as a whole. Stderr is kept apart from stdout: tools print warnings there that are not
    answers, but also their reasons for failing (amd-smi logs "amdgpu not found in modules" there).
    """
    try:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except (OSError, ValueError):
        return None
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return None
    if process.returncode < 0:
        return None
    def decode(data: bytes) -> str:
        return data.decode("utf-8", errors="replace")
    return ToolOutput(decode(stdout), exit_code=process.returncode, stderr=decode(stderr))


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the tool's whole process group; wait without reading, in case a child escaped it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass  # already gone
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


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
    match = re.match(rf"\s*(\d+(?:\.\d+){{1,{parts - 1}}})", text or "")
    return match.group(1) if match else None


class Remembering:
    """The same runner, running each command once: a probe reads one output in several places
    (amd-smi's table gives GPUs and versions) without asking the tool twice, and can look back at
    everything a tool said (`outputs`) for its failure messages."""

    def __init__(self, run: Runner) -> None:
        self.run = run
        self.seen: dict[tuple[str, ...], CommandOutput | None] = {}

    def __call__(self, argv: list[str]) -> CommandOutput | None:
        key = tuple(argv)
        if key not in self.seen:
            self.seen[key] = self.run(argv)
        return self.seen[key]

    def outputs(self, tool: str) -> list[CommandOutput]:
        """What `tool` printed, over every command form asked so far, in the order asked."""
        return [out for argv, out in self.seen.items() if argv[0] == tool and out is not None]


def first_answer(run: Runner, forms: list[list[str]]) -> tuple[str, CommandOutput | None]:
    """The first of several command forms of one tool that the tool answers (newest form first),
    and its command line; a form the tool ran and failed ends the search, since the others fail too."""
    output: CommandOutput | None = None
    for argv in forms:
        output = run(argv)
        if output is not None:
            return " ".join(argv), output
    return " ".join(forms[-1]), output


def wsl(root: Path) -> bool:
    """WSL2: the GPU is reached through the DirectX paravirtual driver, /dev/dxg (AMD's WSL notes,
    tests/data/host/wsl-dev-dxg-doc.txt), not through the native device nodes or the PCI bus."""
    return (root / "dev" / "dxg").exists()


def pci_vendor_absent(root: Path, vendor_id: str) -> bool:
    """True only when sysfs lists PCI devices and none has vendor `vendor_id` ('0x10de'): a driver
    tool that fails there fails because there is no device for it, not because a driver broke.
    Unknown (no sysfs, or WSL2) is False."""
    vendors = [(read(path) or "").strip().lower() for path in listing(root / "sys/bus/pci/devices", "*/vendor")]
    return bool(vendors) and vendor_id.lower() not in vendors and not wsl(root)
