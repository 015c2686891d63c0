"""Judging a smoke run: the workload's JSON compared with what the image promises.

The in-image verdict is not taken on trust: the versions the workload reports are checked
again here against the variant, with the same comparison rules (imported from the
workload file, which is importable without torch), so a stale smoke.py in an image or a
run that lost its --expect arguments still cannot pass a wrong build.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from collections.abc import Mapping

from accel_images import untrusted
from accel_images import vendors
from accel_images.model.imagefacts import ImageFacts
from accel_images.model.variant import Variant
from accel_images.smoke import workload

TAIL_CHARS = 2000


@dataclass(frozen=True)
class Expectation:
    """What an image promises: vendor, full torch version, stack version, Python major.minor."""

    vendor: str          # a vendor name: 'cpu', 'cuda', ...
    torch: str           # '2.13.0'
    stack: str | None    # '13.0', '7.2', '2026.1', '1.24.1'; None for cpu
    python: str          # '3.11'
    companions: tuple[str, ...] | None = None   # what the image promises beside torch; None: whatever is installed

    @classmethod
    def of(cls, variant: Variant) -> Expectation:
        """What the smoke workload must find inside the variant's image."""
        return cls(vendor=variant.vendor, torch=variant.torch, stack=variant.stack, python=variant.python)

    def expect_build(self) -> str:
        """The --expect-build argument: 'cpu', 'cuda:13.0', ..."""
        return self.vendor if self.stack is None else f"{self.vendor}:{self.stack}"

    def workload_args(self) -> list[str]:
        """The --expect-* arguments of the smoke workload."""
        args = ["--expect-torch", self.torch, "--expect-python", self.python, "--expect-build", self.expect_build()]
        if self.companions:
            args += ["--expect-companions", ",".join(self.companions)]
        return args


@dataclass(frozen=True)
class Check:
    """One check as the workload reported it."""

    name: str
    ok: bool
    detail: str
    ms: float | None
    numbers: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class NodesRecord:
    """The verdict of the N-node smoke test (accel_images.smoke.nodes) as a build's or a nightly's smoke result
    keeps it: what every report shows of it, one line or one small object."""

    ok: bool
    nodes: int
    backend: str
    device: str
    result_ok: bool                 # the all-reduce sum was exactly n(n+1)/2 on every node
    bandwidth_gbps: float | None    # the slowest node's; None when a node did not say
    seconds: float
    failures: tuple[str, ...] = ()

    def text(self) -> str:
        """'2-node: passed, gloo on cpu, 0.58 GB/s' or '2-node: failed: <its first failure>'."""
        if not self.ok:
            return f"{self.nodes}-node: failed: {self.first_failure()}"
        speed = f"{self.bandwidth_gbps:.2f} GB/s" if self.bandwidth_gbps is not None else "bandwidth unknown"
        return f"{self.nodes}-node: passed, {self.backend} on {self.device}, {speed}"

    def first_failure(self) -> str:
        return _one_line(self.failures[0]) if self.failures else "failed without a message"

    def cause(self) -> str:
        """The one line a failed N-node smoke adds to the smoke verdict's failures."""
        return f"{self.nodes}-node smoke failed: {self.first_failure()}"

    def record(self) -> dict[str, Any]:
        return {"ok": self.ok, "nodes": self.nodes, "backend": self.backend, "device": self.device,
                "result_ok": self.result_ok, "bandwidth_gbps": self.bandwidth_gbps, "seconds": round(self.seconds, 3),
                "failures": list(self.failures)}


@dataclass(frozen=True)
class SmokeResult:
    """The verdict on one smoke run."""

    ok: bool
    ran_on: str | None              # 'cuda' | 'rocm' | 'xpu' | 'hpu' | 'cpu'; None when unknown
    cpu_fallback: bool              # an accelerator image that ran in CPU mode
    failures: tuple[str, ...]       # one readable line each
    checks: tuple[Check, ...]
    raw: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)
    timings: Mapping[str, float] = field(default_factory=dict, hash=False, compare=False)
    output_tail: str = ""           # end of the output, kept for reports when something failed
    facts: ImageFacts | None = field(default=None, hash=False, compare=False)
    """What the image's build recorded of its own torch (/opt/accel-images/facts.json), read from outside
    before the run; None for an image built without them. Carried into the smoke record and the catalogue."""
    nodes: NodesRecord | None = None
    """The N-node smoke test's verdict (--smoke-nodes), run after this one passed; None where it was not asked for."""

    def summary(self) -> str:
        """One line for a report or an error message."""
        where = self.ran_on or "unknown device"
        mode = f"{where} (CPU mode)" if self.cpu_fallback else where
        if self.ok:
            return f"smoke passed on {mode}"
        return f"smoke failed on {mode}: " + "; ".join(self.failures)


def with_nodes(result: SmokeResult, nodes: NodesRecord) -> SmokeResult:
    """The smoke verdict with the N-node test's: a failed N-node test fails it, its cause one more failure."""
    if nodes.ok:
        return replace(result, nodes=nodes)
    return replace(result, ok=False, nodes=nodes, failures=(*result.failures, nodes.cause()))


def judge(expectation: Expectation, stdout: str, exit_code: int, require_accelerator: bool,
          *, stderr: str = "", timed_out_after_s: float | None = None, nonce: str | None = None) -> SmokeResult:
    """The verdict on a smoke run, from its output and exit status.

    `timed_out_after_s` is set when the run was killed at that time limit. `nonce`, drawn by
    the launcher for this run, must be in the report, and the report must be the only one on
    stdout: a document prepared in advance, or printed beside the real one, does not pass.
    """
    tail = output_tail(stdout, stderr)
    report = last_json_object(stdout)
    failures: list[str] = []
    if timed_out_after_s is not None:
        failures.append(f"smoke workload timed out after {timed_out_after_s:g} s")
    if report is None:
        failures.append(f"smoke workload printed no JSON result (exit code {exit_code}); "
                        f"output ends: {_one_line(tail[-400:]) or '(nothing)'}")
        return SmokeResult(ok=False, ran_on=None, cpu_fallback=False, failures=tuple(failures),
                           checks=(), output_tail=tail)
    if nonce is not None:
        failures += nonce_failures(stdout, report, nonce)
    if report.get("schema") != workload.SCHEMA:
        failures.append(f"smoke JSON has schema {report.get('schema')!r}, expected {workload.SCHEMA}")
    checks = _checks(report)
    ran_on = report.get("backend") if isinstance(report.get("backend"), str) else None
    cpu_fallback = vendors.get(expectation.vendor).accelerator and ran_on == workload.CPU_BACKEND
    promises = promise_failures(expectation, report)
    failures += promises
    failures += device_failures(expectation, ran_on, require_accelerator)
    failures += [f"check {check.name} failed: {check.detail}" for check in checks
                 if not check.ok and not _already_said(check, promises)]
    failures += _verdict_failures(report, checks, exit_code)
    return SmokeResult(
        ok=not failures, ran_on=ran_on, cpu_fallback=cpu_fallback, failures=tuple(failures),
        checks=checks, raw=report, timings={c.name: c.ms for c in checks if c.ms is not None},
        output_tail="" if not failures else tail,
    )


def nonce_failures(stdout: str, report: Mapping[str, Any], nonce: str) -> list[str]:
    """The report must carry this run's nonce, and be the only report on stdout."""
    failures = []
    if report.get("nonce") != nonce:
        failures.append("smoke JSON does not carry this run's nonce: a report written in advance, "
                        "not by this run's workload")
    reports = sum(1 for line in stdout.splitlines() if _is_report(line))
    if reports > 1:
        failures.append(f"stdout holds {reports} smoke reports; the workload prints one")
    return failures


def _is_report(line: str) -> bool:
    """A stdout line that is a JSON object with a schema key: what the workload prints."""
    text = line.strip()
    if not text.startswith("{"):
        return False
    try:
        value = untrusted.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and "schema" in value


def promise_failures(expectation: Expectation, report: Mapping[str, Any]) -> list[str]:
    """The builder-side re-check of torch, Python and build against the expectation."""
    failures = []
    torch_version = report.get("torch")
    if not isinstance(torch_version, str) or not torch_version:
        failures.append(f"smoke JSON has no torch version, image promises {expectation.torch}")
    else:
        problem = workload.torch_mismatch(torch_version, expectation.torch)
        if problem:
            failures.append(problem)
    python_version = report.get("python")
    problem = workload.python_mismatch(str(python_version or "unknown"), expectation.python)
    if problem:
        failures.append(problem)
    build = report.get("build")
    if not isinstance(build, dict):
        failures.append("smoke JSON has no build information")
    else:
        failures += workload.build_mismatches(build, expectation.vendor, expectation.stack)
    return failures


def device_failures(expectation: Expectation, ran_on: str | None, require_accelerator: bool) -> list[str]:
    """The device used must be the image's own accelerator, or the CPU when that is allowed."""
    wanted = vendors.get(expectation.vendor).smoke_backend
    if ran_on is None:
        return ["smoke JSON does not say which device it ran on"]
    if ran_on == wanted:
        return []
    if ran_on == workload.CPU_BACKEND:
        if require_accelerator:
            return [f"no {expectation.vendor} accelerator was usable: the workload ran on the CPU"]
        return []
    return [f"a {expectation.vendor} image ran on {ran_on}"]


def _verdict_failures(report: Mapping[str, Any], checks: tuple[Check, ...], exit_code: int) -> list[str]:
    """The exit code, the JSON's own verdict and its checks must agree."""
    failures = []
    if not checks:
        failures.append("smoke JSON lists no checks")
    if report.get("ok") is not True and all(check.ok for check in checks):
        failures.append("smoke workload reports failure without a failed check")
    if exit_code != 0 and all(check.ok for check in checks):
        failures.append(f"smoke workload exited with code {exit_code}")
    return failures


def _already_said(check: Check, lines: list[str]) -> bool:
    """A failed in-image check whose every reason the builder-side re-check already gave."""
    reasons = [reason.strip() for reason in check.detail.split(";") if reason.strip()]
    return bool(reasons) and all(reason in lines for reason in reasons)


def _checks(report: Mapping[str, Any]) -> tuple[Check, ...]:
    raw_checks = report.get("checks")
    if not isinstance(raw_checks, list):
        return ()
    checks = []
    for item in raw_checks:
        if not isinstance(item, dict):
            continue
        ms = item.get("ms")
        numbers = item.get("numbers")
        checks.append(Check(
            name=str(item.get("name", "?")),
            ok=item.get("ok") is True,
            detail=str(item.get("detail", "")),
            ms=float(ms) if isinstance(ms, (int, float)) and not isinstance(ms, bool) else None,
            numbers=numbers if isinstance(numbers, dict) else {},
        ))
    return tuple(checks)


def last_json_object(stdout: str) -> dict[str, Any] | None:
    """The last line of stdout that is a JSON object, or None.

    The contract is that the report is the last line; scanning back past trailing lines
    tolerates a library that prints on exit, and a non-object or broken line is skipped.
    """
    for line in reversed(stdout.splitlines()):
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            value = untrusted.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def output_tail(stdout: str, stderr: str, limit: int = TAIL_CHARS) -> str:
    """The end of stdout and stderr together, for a failure message."""
    combined = stdout.rstrip()
    if stderr.strip():
        combined = f"{combined}\n--- stderr ---\n{stderr.rstrip()}" if combined else stderr.rstrip()
    return combined[-limit:]


def _one_line(text: str) -> str:
    return " ".join(text.split())
