"""The command group's machinery: commands loaded on demand, click's errors as one line.

A command module imports the pipeline stages it drives (the docker SDK, requests, jinja2, rich's
live display); importing every module just to register its commands would make `accel-images list`
pay for all of them. So the group knows each command by name, by where it lives and by its
one-line help, and imports the module only when the command runs or its own help is asked for
(click's documented "lazy loading subcommands" pattern).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import click

NoSuchCommand: Any = getattr(click.exceptions, "NoSuchCommand", ())
PIPE_CLOSED_EXIT = 128 + signal.SIGPIPE
"""A reader that stopped early (`accel-images list | head -1`): the status a shell gives any command
SIGPIPE ends (141), never 1, which says a build failed."""
"""click >= 8.4 raises it (with close matches) for an unknown command; before, there is nothing to fix."""


class OneLineUsageErrors(click.Group):
    """Click's own errors (unknown option or command, a value out of range) as one line, like AccelError."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **kwargs)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as error:  # bare `accel-images`: the help, as click shows it
            error.show()
            sys.exit(error.exit_code)
        except click.ClickException as error:
            ctx = getattr(error, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            click.echo(f"accel-images: error: {' '.join(error.format_message().split())}{hint}", err=True)
            sys.exit(error.exit_code)
        except click.Abort as error:
            click.echo("accel-images: interrupted", err=True)
            sys.exit(getattr(error.__cause__, "exit_code", 130))
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        """The command, its output flushed here: click would turn a closed pipe into exit status 1."""
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()
        except BrokenPipeError:
            stdout_closed()
        return result


def stdout_closed() -> None:
    """Exit as a command SIGPIPE ended, without a traceback or a second error at exit.

    Python ignores SIGPIPE, so a closed pipe surfaces as BrokenPipeError, and the interpreter would
    fail again flushing stdout at exit: point stdout at /dev/null first (Python's documented recipe).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    sys.exit(PIPE_CLOSED_EXIT)


@dataclass(frozen=True)
class LazyCommand:
    """A command the group names and describes without importing the module that defines it."""

    name: str
    target: str
    """`package.module:attribute`, the click.Command object."""
    summary: str
    """The first paragraph of the command's help: what the group's --help shortens, as click would."""

    def load(self) -> click.Command:
        module_name, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command

    def stand_in(self) -> click.Command:
        """A help-only command with the same summary, so click shortens it by its own rules."""
        return click.Command(self.name, help=self.summary)


class LazyGroup(OneLineUsageErrors):
    """A group whose commands are imported when used; its --help lists them from their summaries."""

    def __init__(self, *args: Any, lazy_commands: Iterable[LazyCommand] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = {command.name: command for command in lazy_commands}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy_commands:
            command = self.lazy_commands[cmd_name].load()
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with the lazy commands' stand-ins: nothing is imported for --help."""
        listed: dict[str, click.Command] = {}
        for name in self.list_commands(ctx):
            lazy = self.lazy_commands.get(name)
            command = super().get_command(ctx, name) or (lazy.stand_in() if lazy else None)
            if command is not None:
                listed[name] = command
        click.Group(self.name, commands=listed).format_commands(ctx, formatter)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        """An unknown command still gets click's "Did you mean" from every name, loaded or not."""
        try:
            return super().resolve_command(ctx, args)
        except NoSuchCommand as error:
            raise NoSuchCommand(error.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None
