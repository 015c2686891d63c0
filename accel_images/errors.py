"""Expected failures.

Every failure a user can cause or meet in normal operation (bad input, daemon down,
registry refusing, incompatible versions) is one of these. The CLI prints it as a single
line and exits with its code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accel_images.formatting import inert


class AccelError(Exception):
    """An expected failure, shown to the user as one line."""

    exit_code = 1

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.hint = hint

    def one_line(self) -> str:
        """`file:line: field: message (hint)`, skipping the parts that are unknown.

        One line whatever the message carried, and inert on a terminal: a message may quote a
        registry's or a daemon's own words, escape sequences included (formatting.inert).
        """
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        hint = f" ({self.hint})" if self.hint else ""
        text = f"{where}{field}{self.message}{hint}"
        return inert(" ".join(text.split()))


class InputError(AccelError):
    """Bad input: a matrix, a template, a filter or a command-line value."""

    exit_code = 2


class IncompatibleError(AccelError):
    """A version combination that cannot work."""

    exit_code = 1


class UnknownToKnowledgeBase(IncompatibleError):
    """A version the knowledge base has no row for: neither compatible nor incompatible, unknown.

    Its own exit code, so a script can tell "impossible" (1) from "not known yet" (5): the fix
    for the second is a knowledge-base update (`accel-images kb check`), not another version.
    """

    exit_code = 5


class AcceleratorUnusable(AccelError):
    """The host's accelerator is present but unusable (a broken or unloaded driver): `recommend` and
    `pull` printed the CPU image in its stead. Its own exit code, so a script or a GPU CI job notices
    the fallback; `--vendor cpu` asks for the CPU image outright and exits 0."""

    exit_code = 6


class EngineError(AccelError):
    """The Docker engine is unreachable or refused an operation."""

    exit_code = 3


class RegistryError(AccelError):
    """A registry is unreachable or refused a push or a query.

    `transient` marks failures worth retrying (5xx, connection refused or reset, timeouts);
    an authentication failure or a missing manifest is permanent.
    """

    exit_code = 4
    transient: bool = False
    detail: str = ""
    """The registry's or daemon's own words, for logs; the message is the short reason."""


class MalformedAnswer(RegistryError):
    """The registry answered, but not in the shape its API defines (JSON nested past any sane depth,
    a field of the wrong type, a list where an object belongs): permanent, exit 4 like any registry
    that will not serve what is asked. Readers of many images (the catalogue) leave that image out."""


class NotInRegistry(RegistryError):
    """The registry answered and does not have the image (or tag): the registry is fine, the
    reference is not. Exit 1, like any operation that failed; 4 stays "a registry is unreachable
    or refuses us", which a retry or a network fix cures and this does not."""

    exit_code = 1


class BuildFailed(AccelError):
    """A build step failed. The message is the short cause (`step 5/24 (pip install) failed: ...`,
    accel_images.builder.failure); what it was read from stays on the error, so a caller that knows more
    (the wheelhouse a build used) can say it better, and the full log is named apart."""

    exit_code = 1

    def __init__(self, message: str, *, step: str | None = None, detail: str = "",
                 log_tail: tuple[str, ...] = (), log_path: Path | None = None, **where: Any) -> None:
        super().__init__(message, **where)
        self.step = step            # Docker's step line, `Step 5/24 : RUN ...`; None before the first
        self.detail = detail        # the engine's own error text
        self.log_tail = log_tail    # the last lines of the log
        self.log_path = log_path


class FactsContradicted(AccelError):
    """A built image's facts (/opt/accel-images/facts.json) are missing, unreadable, or contradict the
    knowledge base's row for the variant: a failed build, whose message names the row."""

    exit_code = 1


class WheelFetchError(AccelError):
    """pip on the host could not fetch a variant's wheels from its index (accel_images.builder.wheels)."""

    exit_code = 1


class SmokeFailed(AccelError):
    """The workload inside an image reported a failed check."""

    exit_code = 1
