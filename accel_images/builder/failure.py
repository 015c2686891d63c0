"""Why a build failed, in one short line a person can act on, and identical causes grouped.

Docker's own error for a failing step is `The command '/bin/sh -c <the whole RUN line>' returned
a non-zero code: 1`: a line of a few thousand characters that says nothing of the cause, which
is somewhere in the log above it (pip's "Could not find a version that satisfies the
requirement", apt's "Unable to locate package"). This module reads the step line and the log
tail the engine kept and says `step 5/24 (pip install) failed: no torch==2.14.0 in wheelhouse
/var/cache/wheelhouse (it has 2.13.0+cpu)`; the full log stays on disk, its path printed on a
line of its own. A cause never names its variant, so forty variants that fail for one reason
(a base image missing from a mirror) are shown once, with the count (`group`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from accel_images.builder.apt_causes import apt_cause
from accel_images.render.apt import AptMirror

STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (\S+)\s*(.*)$")
DOCKER_EXIT_RE = re.compile(r"returned a non-zero code: (\d+)")
MAX_CAUSE = 260
"""The longest cause shown; what is cut is in the log, whose path is printed beside it."""

TOOLS = (("apt-get -s upgrade", "OS updates"), ("pip install", "pip install"),
         ("apt-get install", "apt-get install"), ("apt install", "apt install"), ("dnf install", "dnf install"),
         ("microdnf install", "microdnf install"), ("useradd", "create the user"), ("groupadd", "create the group"),
         ("install -D", "arrange the image's own files"), ("-m venv", "python -m venv"),
         ("pip list", "pin the installed torch"), ("apt-get update", "apt-get update"), ("curl", "curl"),
         ("wget", "wget"))
"""What a RUN step is named by, first match wins: the step's purpose, not its first word (`set`, `t0=...`)."""
APT_OPTIONS = re.compile(r"(?<=apt-get)(?: -o \S+)+")
"""`apt-get -o Dir::Cache=... install`: the options between apt-get and its command, left out to name the step."""
INSTRUCTIONS = {"SHELL": "set the shell", "ENV": "set the environment", "USER": "set the user",
                "WORKDIR": "set the working directory", "ENTRYPOINT": "set the entry point",
                "CMD": "set the default command", "LABEL": "label the image", "EXPOSE": "declare ports",
                "VOLUME": "declare volumes", "HEALTHCHECK": "set the health check", "STOPSIGNAL": "set the stop signal"}
"""What the instructions that only configure the image do, said as such."""
REPRODUCIBLE_PREFIX = re.compile(r"^t0=.*?&&\s*c0=.*?\}'\)\"\s*(?:\\\s*)?&&\s*")
"""The time stamp every reproducible RUN starts with (templates/partials/reproducible.j2, begin())."""


@dataclass(frozen=True)
class Pattern:
    """A log line that names a cause, and how to say it."""

    regex: re.Pattern[str]
    tool: str | None        # names the step when its own line does not ("pip install")
    say: str                # format string over the regex's named groups and {source}


PATTERNS = (
    Pattern(re.compile(r"Could not find a version that satisfies the requirement (?P<req>\S+)"
                       r"(?: \(from versions: (?P<have>[^)]*)\))?"), "pip install",
            "no {req} in {source} (it has {have})"),
    Pattern(re.compile(r"No matching distribution found for (?P<req>\S+)"), "pip install", "no {req} in {source}"),
    Pattern(re.compile(r"ResolutionImpossible|conflicting dependencies"), "pip install",
            "pip found conflicting requirements (see the log)"),
    Pattern(re.compile(r"E: Unable to locate package (?P<pkg>\S+)"), "apt-get install", "apt has no package {pkg}"),
    Pattern(re.compile(r"E: Package '(?P<pkg>[^']+)' has no installation candidate"), "apt-get install",
            "apt has no installation candidate for {pkg}"),
    Pattern(re.compile(r"(?:Temporary failure resolving|Could not resolve host:?|Failed to establish a new "
                       r"connection|Name or service not known)\s*'?(?P<host>[\w.-]*)"), None,
            "no network access ({host}): build offline with --registry-mirror and --pip-find-links,"
            " or give the build a network with --network"),
    Pattern(re.compile(r"No space left on device"), None, "no space left on device"),
    Pattern(re.compile(r"unknown instruction: (?P<word>\S+)", re.IGNORECASE), None,
            "Dockerfile: unknown instruction {word}"),
)


@dataclass(frozen=True)
class Cause:
    """A failed build in words: which step, and why."""

    step: str | None     # "step 5/24 (pip install)", None before the first step
    reason: str

    def __str__(self) -> str:
        if self.step is None:
            return f"build failed before its first step: {self.reason}"
        return f"{self.step} failed: {self.reason}"


BUILD_ARG_RE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
"""A build argument in an instruction (`${TARGETARCH}`, `$TARGETARCH`), as its label names it: `<TARGETARCH>`."""


def step_label(step_line: str | None, tool: str | None = None) -> str | None:
    """`Step 5/24 : RUN set -e; pip install torch` -> `step 5/24 (pip install)`: what the step does, never
    a fragment of the Dockerfile. The last step, a LABEL the build adds, is where the engine commits
    the image (seconds for gigabytes): `step 32/32 (committing the image)`."""
    if not step_line:
        return None
    match = STEP_RE.match(step_line.strip())
    if not match:
        return None
    number, total, instruction, rest = match.groups()
    if tool is None and instruction.upper() == "LABEL" and number == total:
        return f"step {number}/{total} (committing the image)"
    what = tool or _what(instruction.upper(), rest)
    return f"step {number}/{total} ({what})"


def _what(instruction: str, rest: str) -> str:
    words = rest.split()
    if instruction == "FROM":
        named = f"{words[2]} stage " if len(words) >= 3 and words[1].upper() == "AS" else ""
        # `FROM image-${TARGETARCH}`: the platform's own stage, by the build argument that names it
        source = BUILD_ARG_RE.sub(r"<\1>", words[0]) if words else "the base image"
        return f"{named}from {source}"[:80]
    if instruction == "ARG":
        return f"build argument {rest.split('=', 1)[0].strip()}"[:60]
    if instruction in ("COPY", "ADD"):
        sources = [word for word in words[:-1] if not word.startswith("--")]
        stage = next((word.split("=", 1)[1] for word in words if word.startswith("--from=")), None)
        return f"copy from the {stage} stage" if stage else f"copy {' '.join(sources) or 'files'}"[:60]
    if instruction != "RUN":
        return INSTRUCTIONS.get(instruction, instruction.lower())
    plain = APT_OPTIONS.sub("", rest)
    for needle, name in TOOLS:
        if needle in plain:
            return name
    command = REPRODUCIBLE_PREFIX.sub("", rest).split()
    return f"run {command[0]}"[:40] if command else "RUN"


PIP_RETRY = re.compile(r"Retrying \(Retry\(.*?\)\) after connection broken by '(?P<cause>.*)'")
"""pip's warning for each attempt to reach an index it cannot connect to (pip 23.2, observed here)."""
PIP_UNFETCHED = re.compile(r"Could not fetch URL \S+: (?P<cause>.*)")
"""pip's line for an index page it gave up on (an HTTPS problem among others)."""
PIP_NOT_FOUND = re.compile(r"(?:Could not find a version that satisfies the requirement|No matching distribution"
                           r" found for) (?P<req>\S+)")
CONNECTION_REASONS = (("connection refused", "connection refused"), ("name or service not known", "unknown host"),
                      ("nodename nor servname", "unknown host"),
                      ("temporary failure in name resolution", "DNS failure"),
                      ("certificate", "TLS certificate not trusted"),
                      ("wrong version number", "TLS to a plain HTTP port"), ("proxy", "proxy unreachable"),
                      ("timed out", "timed out"), ("connection reset", "connection reset"),
                      ("network is unreachable", "network unreachable"))
"""What pip's connection errors (urllib3's, as it prints them) mean, in the words registry errors use."""


def explain(error: str, step_line: str | None, tail: Sequence[str], *, wheelhouse: Path | None = None,
            apt_mirrors: Sequence[AptMirror] = ()) -> Cause:
    """The cause of a failed build from the engine's error, the step it ran and the log tail.

    Only the failed step's own lines are read (those after the last `Step` line of the tail): an
    earlier step's warning is not this step's cause. An index pip could not reach, and a repository
    apt could not fetch (accel_images.builder.apt_causes), come before what pip or apt then missed.
    """
    unreachable = _unreachable_index(_own_lines(tail), error)
    if unreachable is not None:
        return Cause(step_label(step_line, "pip install"), _short(unreachable))
    source = f"wheelhouse {wheelhouse}" if wheelhouse else "the package index"
    lines = _own_lines(tail)
    apt = apt_cause(lines, apt_mirrors)
    if apt is not None:
        return Cause(step_label(step_line), _short(apt))
    for pattern in PATTERNS:  # the most telling first: pip's "from versions" before its summary line
        for line in reversed([*lines, error]):
            found = pattern.regex.search(line)
            if found:
                fields = {k: (v or "none").strip() for k, v in found.groupdict().items()}
                return Cause(step_label(step_line, pattern.tool), _short(pattern.say.format(source=source, **fields)))
    code = DOCKER_EXIT_RE.search(error)
    if code:
        last = _last_output(lines)
        said = f"; last output: {last}" if last else ""
        return Cause(step_label(step_line), _short(f"exit code {code.group(1)}{said}"))
    return Cause(step_label(step_line), _short(error))


def _unreachable_index(tail: Sequence[str], error: str) -> str | None:
    """'the package index is unreachable (connection refused): pip found no torch==2.13.0 there', when pip
    found nothing because it could not connect to the index: its "(from versions: none)" says nothing of
    what the index has. None otherwise."""
    lines = [*tail, error]
    missing = next((found for line in reversed(lines) if (found := PIP_NOT_FOUND.search(line))), None)
    broken = next((found for line in reversed(lines)
                   if (found := PIP_RETRY.search(line) or PIP_UNFETCHED.search(line))), None)
    if missing is None or broken is None:
        return None
    cause = broken["cause"].lower()
    reason = next((said for needle, said in CONNECTION_REASONS if needle in cause),
                  broken["cause"].split("(", 1)[0].strip() or "no answer")
    return f"the package index is unreachable ({reason}): pip found no {missing['req']} there"


def _own_lines(tail: Sequence[str]) -> list[str]:
    """The lines of the tail after its last `Step N/M` line (all of it when it has none)."""
    starts = [index for index, line in enumerate(tail) if STEP_RE.match(line.strip())]
    return list(tail[starts[-1] + 1:] if starts else tail)


def _last_output(tail: Sequence[str]) -> str:
    """The last line the step printed itself: not Docker's own chatter, not an ERROR we added."""
    for line in reversed(tail):
        text = line.strip()
        if not text or text.startswith(("---> ", "Step ", "ERROR: ", "# build of", "Removing intermediate")):
            continue
        if DOCKER_EXIT_RE.search(text):
            continue
        return text
    return ""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CAUSE else text[: MAX_CAUSE - 3] + "..."


# ---- grouping -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    """One failed variant as reports show it."""

    key: str                 # vendor/tag
    cause: str
    log: str | None = None


@dataclass(frozen=True)
class FailureGroup:
    cause: str
    failures: tuple[Failure, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(failure.key for failure in self.failures)


def group(failures: Iterable[Failure]) -> list[FailureGroup]:
    """Failures with the same cause together, the largest group first, else in the order met."""
    groups: dict[str, list[Failure]] = {}
    for failure in failures:
        groups.setdefault(failure.cause, []).append(failure)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    return [FailureGroup(cause, tuple(members)) for cause, members in ordered]


def lines(groups: Sequence[FailureGroup]) -> list[str]:
    """Plain text: one FAILED line per cause, then the log path(s) on their own lines."""
    shown: list[str] = []
    for each in groups:
        if len(each.failures) == 1:
            failure = each.failures[0]
            shown.append(f"FAILED {failure.key}: {each.cause}")
            if failure.log:
                shown.append(f"  log: {failure.log}")
            continue
        shown.append(f"FAILED {len(each.failures)} variants: {each.cause}")
        for failure in each.failures:
            shown.append(f"  {failure.key}" + (f"  log: {failure.log}" if failure.log else ""))
    return shown


def run_exit_code(codes: Iterable[int]) -> int:
    """The exit code of a run from its failures' codes: 0 without any, their common code when
    they agree (4: every failure was a registry out of reach), else 1 (something failed)."""
    distinct = {code for code in codes if code}
    if not distinct:
        return 0
    return distinct.pop() if len(distinct) == 1 else 1
