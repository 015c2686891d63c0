"""One renderer per container runtime, each reading the same Launch (accel_images.host.launch).

    docker.py      `docker run`: the line `recommend` prints and `run` executes
    podman.py      `podman run`: CDI devices, rootless groups and user namespace
    apptainer.py   `apptainer run docker://...`: --nv / --rocm, the host user and its home
    enroot.py      `srun --container-image=...` with Pyxis: the image's `#` form, Slurm's GRES
    kubernetes.py  a Pod: the device plugin's resource, /dev/shm in memory, the image's user
    pod.py         the Pod's parts, which kubernetes_nodes.py's indexed Job and PyTorchJob hold too
    kubernetes_nodes.py  N Pods: an indexed Job and a headless Service, or a Kubeflow PyTorchJob
    compose.py     a Compose service: NVIDIA's device reservation, devices and groups for the others
    nodes.py       what their many-node forms share (a Launch with a Cluster of several nodes)
    slurm.py       the allocation and rendezvous the Slurm forms (Enroot, Apptainer) share

A renderer follows its runtime's documentation (cited where it decides) and reads the vendor only
through DeviceOptions: nothing here names a vendor. What a runtime cannot express, or expresses only by
inference, is said in the notes, which the commands print on standard error.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accel_images.errors import InputError

if TYPE_CHECKING:
    from accel_images.host.launch import Launch


@dataclass(frozen=True)
class Rendered:
    """What a renderer makes of a Launch: the text to print (a command line or a YAML document, ending in
    a newline), the argv to execute where the runtime is local, and notes for the person."""

    engine: str
    text: str
    argv: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()


Renderer = Callable[["Launch"], Rendered]

ENGINES = ("docker", "podman", "apptainer", "enroot", "kubernetes", "compose")
"""The runtimes `--engine` names, in the order the README and the help list them."""
LOCAL = ("docker", "podman")
"""The runtimes `accel-images run` starts on this host; it prints the others."""


def renderer(engine: str) -> Renderer:
    """The renderer of `engine`; imported when asked, so `recommend` pays only for the one it prints."""
    import importlib
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}", field="--engine", hint=f"one of {', '.join(ENGINES)}")
    module = importlib.import_module(f"accel_images.host.runtimes.{engine}")
    render: Renderer = module.render
    return render


def render(engine: str, launch: Launch) -> Rendered:
    return renderer(engine)(launch)


def refuse_engine_args(launch: Launch, engine: str) -> None:
    """A file format has no command line to take raw engine arguments."""
    if launch.extras.engine_args:
        raise InputError(f"{engine} is a file, not a command line: {' '.join(launch.extras.engine_args)} has"
                         " nowhere to go", field="--engine-arg", hint="edit the printed document instead")


class ShellWord(str):
    """A word written as it is, unquoted, for the shell to expand (`"$MASTER_ADDR:29500"`): only a renderer
    makes one, never from what a user passed."""


def shell_join(argv: Iterable[str]) -> str:
    """The line a POSIX shell (bash, zsh) reads back as exactly `argv`, and that shows every character: a word
    with a tab, a newline, a no-break space or any other character that is not printable is written in
    ANSI-C quoting (`$'a\\tb'`, each such character as the bytes of its UTF-8 escaped), the rest as
    shlex.quote writes it. So the line `run --print` shows is the line `run` executes, character for character,
    and a terminal shows nothing in it that a person cannot see."""
    return " ".join(word if isinstance(word, ShellWord) else shlex.quote(word) if word.isprintable()
                    else ansi_c_quoted(word) for word in argv)


def ansi_c_quoted(word: str) -> str:
    """`$'...'` of `word`: backslash and quote escaped, printable characters as they are, every other as the
    `\\xHH` escapes of its bytes (surrogate-escaped bytes of an undecodable name as the bytes themselves)."""
    parts = []
    for char in word:
        if char in "\\'":
            parts.append("\\" + char)
        elif char.isprintable():
            parts.append(char)
        else:
            parts.append("".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogateescape")))
    return "$'" + "".join(parts) + "'"


def refuse_separators(value: str, separators: str, engine: str, field: str, why: str) -> str:
    """`value`, unless it holds one of `separators`, which `engine` reads as the end of the value and has no
    escape for: then one line naming the option, the character and the runtime's rule."""
    found = [char for char in separators if char in value]
    if found:
        shown = " and ".join(repr(char) for char in found)
        raise InputError(f"{value!r} holds {shown}, which {engine} reads as a separator ({why})", field=field,
                         hint=f"use a path without {shown} for --engine {engine}")
    return value
