"""Expected failures.

Every failure a user can cause or meet in normal operation (bad input, daemon down,
registry refusing, incompatible versions) is one of these. The CLI prints it as a single
line and exits with its code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


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
        """`file:line: field: message (hint)`, skipping the parts that are unknown."""
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        hint = f" ({self.hint})" if self.hint else ""
        text = f"{where}{field}{self.message}{hint}"
        return " ".join(text.split())  # one line, whatever the message carried


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


class BuildFailed(AccelError):
    """A build step failed; the message carries the log tail and the log path."""

    exit_code = 1


class SmokeFailed(AccelError):
    """The workload inside an image reported a failed check."""

    exit_code = 1
