"""Text from outside reaches the terminal as text: never read as rich markup or an emoji code.

Error messages quote build logs, registry answers and the tool's own hints, and those hold square
brackets: `--registry-mirror vault.habana.ai=HOST[/PATH]`, the hint for an unreachable vendor
registry, reads to rich as a closing tag with no opening one (MarkupError), and `[bold]` or
`:smile:` in a log line would change what is shown. Every table and line rich renders gets its
outside text as `rich.text.Text`, which rich shows as it is.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from accel_images.builder.outcome import Outcome
from accel_images.builder.progress import LiveProgress
from accel_images.cli import options
from accel_images.cli.build import outcome_table
from accel_images.cli.nightly import nightly_table
from accel_images.publish.nightly import NightlyOutcome
from test_nightly import expansion  # noqa: F401  (a fixture)
from accel_images.plan.variants import Expansion

OFFLINE = ("pull of vault.habana.ai/gaudi-docker/1.23.0/ubuntu24.04/habanalabs/pytorch-installer-2.9.0:latest failed:"
           " registry vault.habana.ai unreachable (DNS failure) (offline or behind a firewall? pull through a"
           " mirror: --registry-mirror vault.habana.ai=HOST[/PATH])")
MARKUP_LIKE = [OFFLINE, "[/]", "[bold red]not bold[/bold red]", "step 3/9 (RUN) failed: [/usr/lib] :smile: :+1:",
               "[link=http://x]y[/link]"]


def rendered(renderable: object, width: int = 2000) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def flat(text: str) -> str:
    """The rendered text with rich's column padding and line ends squeezed to single spaces."""
    return " ".join(text.split())


@pytest.mark.parametrize("text", MARKUP_LIKE)
def test_the_nightly_table_shows_failure_text_as_it_is(expansion: Expansion, text: str) -> None:
    night = NightlyOutcome(Outcome(expansion.variants[0], "failed", "x", error=text), reason=text)
    assert flat(text) in flat(rendered(nightly_table([night])))


@pytest.mark.parametrize("text", MARKUP_LIKE)
def test_the_build_table_shows_failure_text_as_it_is(expansion: Expansion, text: str) -> None:
    outcome = Outcome(expansion.variants[0], "failed", "x", error=text)
    assert flat(text) in flat(rendered(outcome_table([outcome])))


@pytest.mark.parametrize("text", MARKUP_LIKE)
def test_the_command_tables_and_lines_show_cells_as_they_are(text: str, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert flat(text) in flat(rendered(options.table(("tag", "cause"), [("t", text)])))
    options.out.cache_clear()
    monkeypatch.setenv("COLUMNS", "400")
    try:
        options.print_table(("tag", "cause"), [("t", text)])
        options.print_line(text)
    finally:
        options.out.cache_clear()
    printed = capsys.readouterr().out
    assert flat(printed).count(flat(text)) == 2


@pytest.mark.parametrize("text", MARKUP_LIKE)
def test_the_live_progress_shows_a_failure_as_it_is(expansion: Expansion, text: str) -> None:
    progress = LiveProgress(expansion.variants, console=Console(file=io.StringIO(), width=400))
    progress(expansion.variants[0], f"FAILED: {text}")
    assert flat(f"FAILED: {text}") in flat(rendered(progress._table()))


def test_the_consoles_print_notes_as_they_are(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    options.err.cache_clear()
    try:
        options.note(f"pinned 2 base image(s) in {tmp_path}/[/x]/accel-images.lock")
    finally:
        options.err.cache_clear()
    assert f"{tmp_path}/[/x]/accel-images.lock" in capsys.readouterr().err
