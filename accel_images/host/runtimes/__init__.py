"""One renderer per container runtime, each reading the same Launch (accel_images.host.launch).

    docker.py      `docker run`: the line `recommend` prints and `run` executes
    podman.py      `podman run`: CDI devices, rootless groups and user namespace
    apptainer.py   `apptainer run docker://...`: --nv / --rocm, the host user and its home
    enroot.py      `srun --container-image=...` with Pyxis: the image's `#` form, Slurm's GRES
    kubernetes.py  a Pod: the device plugin's resource, /dev/shm in memory, the image's user
    compose.py     a Compose service: NVIDIA's device reservation, devices and groups for the others

A renderer follows its runtime's documentation (cited where it decides) and reads the vendor only
through DeviceOptions: nothing here names a vendor. What a runtime cannot express, or expresses only by
inference, is said in the notes, which the commands print on standard error.
"""

from __future__ import annotations

from collections.abc import Callable
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
