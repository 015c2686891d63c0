"""Launching the smoke workload inside an image and judging what it printed.

The container gets the vendor's device options (accel_images/devices.py) and otherwise as little
as possible: no network, no capabilities beyond what the device needs, no privilege gain,
bounded memory and processes. Without device options the image runs in CPU mode, and the
result says so.
"""

from __future__ import annotations

from typing import Any, Protocol
from collections.abc import Mapping

from accel_images.devices import DeviceOptions
from accel_images.smoke.judge import Expectation, SmokeResult, judge

SMOKE_PATH = "/opt/accel-images/smoke.py"
# The images put their virtual environment (or, on Gaudi, a `python` link) first on PATH.
SMOKE_PYTHON = "python"
PIDS_LIMIT = 1024
SMOKE_LABEL = "io.accel-images.smoke"


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


class Runner(Protocol):
    """The part of accel_images.engine.Engine the launcher uses."""

    def run(self, image: str, command: list[str], *, options: Mapping[str, Any] | None = None,
            timeout_s: float, labels: Mapping[str, str] | None = None) -> RunOutcome: ...


def smoke_command(expectation: Expectation, require_accelerator: bool) -> list[str]:
    """The command run inside the image."""
    command = [SMOKE_PYTHON, SMOKE_PATH, *expectation.workload_args()]
    if require_accelerator:
        command.append("--require-accelerator")
    return command


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


def run_smoke(engine: Runner, image: str, expectation: Expectation, *,
              vendor_options: DeviceOptions | None, require_accelerator: bool,
              timeout_s: float = 300, mem_limit: str = "8g") -> SmokeResult:
    """Run the smoke workload in `image` and judge it against `expectation`.

    Engine failures (image missing, unknown runtime, daemon gone) raise EngineError from the
    engine; everything the workload itself does wrong is in the returned SmokeResult.
    """
    labels = {SMOKE_LABEL: "true", f"{SMOKE_LABEL}.image": image}
    outcome = engine.run(image, smoke_command(expectation, require_accelerator),
                         options=container_options(vendor_options, mem_limit=mem_limit),
                         timeout_s=timeout_s, labels=labels)
    return judge(expectation, outcome.stdout, outcome.exit_code, require_accelerator,
                 stderr=outcome.stderr, timed_out_after_s=timeout_s if outcome.timed_out else None)
