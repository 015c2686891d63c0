"""Every command's --help ends with an example a reader can copy: `Example: accel-images ...`.

The walk covers the group itself, every command it lists and every command of a subgroup, so a new
command without an example fails here. Each example must run the command whose help shows it, and
name only options that command has: an example that drifted from its command fails too.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from accel_images.cli import main

PROGRAM = "accel-images"
STOPS = {"|", ">", "--"}
"""Where a command's own words end in an example: a pipe, a redirection, the command run in a container."""


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Each command under `command` with the words that name it, the group itself first."""
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, name
            yield from walk(sub, (*path, name))


COMMANDS = list(walk(main))


def examples(command: click.Command) -> list[str]:
    """The example lines of a command's help: its last paragraph, `Example:` and the lines after it."""
    last = (command.help or "").strip().split("\n\n")[-1].strip().lstrip("\b").strip()
    head, _, rest = last.partition(":")
    if head not in ("Example", "Examples"):
        return []
    return [line.strip() for line in rest.strip().splitlines() if line.strip()]


def option_names(command: click.Command) -> set[str]:
    return {name for param in command.params if isinstance(param, click.Option) for name in param.opts} | {
        "--help", "-h"}


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(path) or PROGRAM for path, _ in COMMANDS])
def test_the_help_has_an_example_of_this_command(path: tuple[str, ...], command: click.Command) -> None:
    lines = examples(command)
    assert lines, f"`{' '.join((PROGRAM, *path))} --help` has no example paragraph"
    shown = CliRunner().invoke(main, [*path, "--help"], prog_name=PROGRAM)
    assert shown.exit_code == 0 and "Example" in shown.output
    for line in lines:
        words = shlex.split(line)
        assert words[:1 + len(path)] == [PROGRAM, *path], f"{line!r} is not an example of {' '.join(path)}"
        if isinstance(command, click.Group):
            assert len(words) > 1 + len(path) and words[1 + len(path)] in command.list_commands(click.Context(command))
            continue
        own = words[1 + len(path):]
        own = own[:next((index for index, word in enumerate(own) if word in STOPS), len(own))]
        unknown = [word.split("=")[0] for word in own if word.startswith("-") and word != "-"  # '-': stdin
                   and word.split("=")[0] not in option_names(command)]
        assert unknown == [], f"{line!r} names options {' '.join(path)} lacks"


def test_the_walk_reaches_every_command_and_subcommand() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "recommend", "kb", "kb check", "host describe", "render"} <= names
