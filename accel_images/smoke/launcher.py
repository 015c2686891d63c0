"""Launching the smoke workload inside an image and judging what it printed.

The container gets the vendor's device options (accel_images/model/devices.py) and otherwise as little
as possible: no network, no capabilities beyond what the device needs, no privilege gain,
bounded memory and processes. Without device options the image runs in CPU mode, and the
result says so.

The report is written inside the image, so before it is believed the launcher checks from
outside what it can (accel_images/smoke/integrity.py): the interpreter and torch are the
image's real ones and the files are those the build recorded; an image whose build no state
directory here recorded is refused. The
workload is this package's own file, mounted read-only at a path chosen for the run and
checked from outside to be what the container sees there; the interpreter is run by its full
path as the entry point (not the image's ENTRYPOINT, not a PATH lookup), isolated (`-I`: no
PYTHON* variables, no user site-packages), without a health check; and the report must carry
a nonce drawn for the run.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Callable, Mapping

from accel_images.model.devices import DeviceOptions
from accel_images.errors import EngineError, FactsContradicted
from accel_images.model.imagefacts import FACTS_PATH, FactsError, ImageFacts
from accel_images.smoke import workload
from accel_images.smoke.integrity import (FileReader, ImageConfig, Inventory, Recorded, differences, shown,
                                          take_inventory)
from accel_images.smoke.judge import Expectation, SmokeResult, judge

SMOKE_PATH = "/opt/accel-images/smoke.py"
"""Where the images keep a copy of the workload for people; the smoke run mounts its own."""
WORKLOAD_FILE = Path(workload.__file__).resolve()
"""The workload the launcher mounts: this package's, never the image's copy."""
MOUNT_ROOT = "/run/accel-images-smoke-"
"""The mount directory's prefix; a random suffix per run, so no image can prepare that path."""
PIDS_LIMIT = 1024
SMOKE_LABEL = "io.accel-images.smoke"
NO_RECORD = ("no build record of this image: only an image whose build accel-images recorded "
             "(builds/<fingerprint>.json of the state directory) is checked file by file, byte code included, "
             "and trusted (build it with `accel-images build`, or point --state-dir at the state directory that "
             "built it)")


class RunOutcome(Protocol):
    """What a run answers (engine.RunResult); read-only, so a frozen dataclass satisfies it."""

    @property
    def exit_code(self) -> int: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def timed_out(self) -> bool: ...


class Inspection(Protocol):
    """What the launcher reads of an image's inspection (engine.ImageInfo)."""

    @property
    def id(self) -> str: ...
    @property
    def env(self) -> tuple[str, ...]: ...
    @property
    def user(self) -> str: ...


class ContainerRunner(Protocol):
    """Runs a command in a container of an image (accel_images.builder.engine.Engine.run); the SBOM probe
    needs no more."""

    def run(self, image: str, command: list[str], *, options: Mapping[str, Any] | None = None,
            timeout_s: float, labels: Mapping[str, str] | None = None,
            before_start: Callable[[FileReader], None] | None = None) -> RunOutcome: ...


class Runner(ContainerRunner, Protocol):
    """The part of accel_images.builder.engine.Engine the launcher uses: runs, and reads an image from outside."""

    def inspect_image(self, ref: str) -> Inspection | None: ...

    def image_files(self, image: str) -> AbstractContextManager[FileReader]: ...


class NotMounted(Exception):
    """The file the container would run at the mount path is not the workload mounted there."""


@dataclass(frozen=True)
class Launch:
    """One run's draw: the nonce the report must carry and where the workload is mounted."""

    nonce: str
    mount_dir: str

    @classmethod
    def draw(cls) -> Launch:
        """Fresh random values: a canned report cannot know the nonce, an image cannot prepare the path."""
        return cls(secrets.token_hex(16), MOUNT_ROOT + secrets.token_hex(8))

    @property
    def workload(self) -> str:
        return f"{self.mount_dir}/smoke.py"


def smoke_command(expectation: Expectation, require_accelerator: bool, launch: Launch) -> list[str]:
    """The arguments of the interpreter (the entry point): isolated mode, the mounted workload, the checks."""
    command = ["-I", launch.workload, *expectation.workload_args(), "--nonce", launch.nonce]
    if require_accelerator:
        command.append("--require-accelerator")
    return command


def launch_options(interpreter: str, launch: Launch, source: Path) -> dict[str, Any]:
    """What replaces the image's own start: its entry point, its health check; the directory holding the
    workload, read-only (a directory, not the file: Podman's archive API cannot read a file mounted alone)."""
    return {"entrypoint": [interpreter], "healthcheck": {"test": ["NONE"]},
            "volumes": {str(source): {"bind": launch.mount_dir, "mode": "ro"}}}


def container_options(vendor_options: DeviceOptions | None, *, mem_limit: str) -> dict[str, Any]:
    """Docker SDK keyword arguments: the device's needs on top of a locked-down default."""
    device = vendor_options.sdk_kwargs() if vendor_options is not None else {}
    return {
        **device,
        "network_disabled": True,
        "cap_drop": ["ALL"],
        "cap_add": list(device.get("cap_add", [])),
        "security_opt": ["no-new-privileges", *device.get("security_opt", [])],
        "mem_limit": mem_limit,
        "pids_limit": PIDS_LIMIT,
    }


def run_smoke(engine: Runner, image: str, expectation: Expectation, *, recorded: Recorded | None,
              vendor_options: DeviceOptions | None, require_accelerator: bool,
              timeout_s: float = 300, mem_limit: str = "8g",
              status: Callable[[str], None] | None = None) -> SmokeResult:
    """Check `image` from outside, run the smoke workload in it and judge it against `expectation`.

    `recorded` is what the build of this image's fingerprint found in it (integrity.Recorded).
    Without it the image is refused: the structural checks alone leave what no package manager
    lists unchecked (compiled byte code in `__pycache__`, the standard library's files), and a
    poisoned `torch/__pycache__/__init__.cpython-311.pyc` whose header matches its source would
    run in place of torch. With it, every file of the standard library and site-packages, byte
    code included, must be what the build recorded. Engine failures (image missing, unknown runtime, daemon gone)
    raise EngineError from the engine; whatever is wrong with the image or the workload's
    report is in the returned SmokeResult. The run uses the image's ID, so the name cannot be
    moved to another image between the checks and the run. `status` hears each phase as it
    starts: the half minute of a CPU run is not silent.
    """
    say = status or (lambda text: None)
    info = engine.inspect_image(image)
    if info is None:
        raise EngineError(f"image {image} not found locally: build or pull it first")
    say("checking the image's interpreter and torch from outside (file hashes, nothing runs)")
    inventory = inventory_of(engine, info, expectation.python)
    problems = [*inventory.failures, *(differences(inventory, recorded) if recorded is not None else [NO_RECORD])]
    if problems:
        return refused(problems)
    launch = Launch.draw()
    workload_bytes = WORKLOAD_FILE.read_bytes()
    expected = hashlib.sha256(workload_bytes).hexdigest()
    where = "the accelerator" if vendor_options is not None else "the CPU"
    say(f"running the workload on {where}: versions, a matrix product, training steps, a device copy"
        f" (about half a minute on a CPU; at most {timeout_s:.0f} s)")
    labels = {SMOKE_LABEL: "true", f"{SMOKE_LABEL}.image": image}
    with tempfile.TemporaryDirectory(prefix="accel-images-smoke-") as mounted:
        (Path(mounted) / "smoke.py").write_bytes(workload_bytes)
        os.chmod(mounted, 0o755)
        try:
            outcome = engine.run(info.id, smoke_command(expectation, require_accelerator, launch),
                                 options={**container_options(vendor_options, mem_limit=mem_limit),
                                          **launch_options(inventory.interpreter, launch, Path(mounted))},
                                 timeout_s=timeout_s, labels=labels,
                                 before_start=lambda container: check_mounted(container, launch.workload, expected))
        except NotMounted as problem:
            return refused([str(problem)])
    result = judge(expectation, outcome.stdout, outcome.exit_code, require_accelerator,
                   stderr=outcome.stderr, timed_out_after_s=timeout_s if outcome.timed_out else None,
                   nonce=launch.nonce)
    return replace(result, facts=facts_or_none(engine, info.id))


def inventory_of(engine: Runner, info: Inspection, python: str) -> Inventory:
    """The integrity checks' reading of an image, through a container that never starts."""
    with engine.image_files(info.id) as files:
        return take_inventory(files, ImageConfig(info.env, info.user), python)


def facts_of(engine: Runner, image: str) -> ImageFacts:
    """What the image's build recorded of its own torch (/opt/accel-images/facts.json), read from
    outside through a container that never starts; FactsContradicted when it is absent or unreadable."""
    with engine.image_files(image) as files:
        entry = files.entry(FACTS_PATH)
    if entry is None or entry.kind != "file" or entry.data is None:
        found = "absent" if entry is None else entry.digest()
        raise FactsContradicted(f"the image has no facts file {FACTS_PATH} ({found}): its build did not ask its torch"
                                " what it holds (the final stage must end with partials/common.j2 finish())")
    try:
        return ImageFacts.from_bytes(entry.data)
    except FactsError as error:
        raise FactsContradicted(f"the image's {FACTS_PATH} is not schema 1 facts: {error}") from None


def facts_or_none(engine: Runner, image: str) -> ImageFacts | None:
    """The image's facts where it has readable ones (an image built before they existed has none)."""
    try:
        return facts_of(engine, image)
    except FactsContradicted:
        return None


def check_mounted(container: FileReader, path: str, expected_sha256: str) -> None:
    """The file the container sees at `path` must be the workload mounted there (raises NotMounted)."""
    entry = container.entry(path)
    seen = entry.digest() if entry is not None else "absent"
    if seen != f"sha256:{expected_sha256}":
        raise NotMounted(f"the workload at {shown(path)} in the container is {seen}, "
                         f"not the mounted sha256:{expected_sha256}")


def refused(problems: list[str]) -> SmokeResult:
    """The verdict on an image the launcher would not run the workload in: failed, saying why."""
    return SmokeResult(ok=False, ran_on=None, cpu_fallback=False,
                       failures=tuple(f"refused before the run: {problem}" for problem in problems), checks=())
