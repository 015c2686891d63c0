"""Exit codes and streams as the README's tables say, one test per point of the user's view: data on
stdout, status on stderr, a closed pipe is not a failed build, one vocabulary in every table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from accel_images.cli import main
from accel_images.cli.group import PIPE_CLOSED_EXIT

ROOT = Path(__file__).resolve().parents[2]
EXECUTABLE = Path(sys.executable).parent / "accel-images"


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_a_reader_that_stops_early_is_not_a_failed_build() -> None:
    """`accel-images list | head -1`: the pipe closes before the table is written; exit 141, no traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([str(EXECUTABLE), "list", "--explain", "--json"], cwd=ROOT, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert done.returncode == PIPE_CLOSED_EXIT == 141
    assert done.stderr == ""


def test_no_arguments_prints_the_help_on_stderr_and_exits_2() -> None:
    done = subprocess.run([str(EXECUTABLE)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "Usage: accel-images" in done.stderr and "Commands:" in done.stderr


def test_list_explain_with_a_vendor_explains_only_that_vendors_prunes() -> None:
    result = cli("list", "--vendor", "gaudi", "--explain")
    pruned = [line for line in result.stdout.splitlines() if line.strip().startswith("pruned")]
    assert pruned and all(": gaudi " in line for line in pruned), pruned
    assert f"{len(pruned)} combinations pruned" in result.stdout


def test_list_json_has_one_shape_with_or_without_explain() -> None:
    plain = json.loads(cli("list", "--vendor", "gaudi", "--json").stdout)
    explained = json.loads(cli("list", "--vendor", "gaudi", "--explain", "--json").stdout)
    assert plain == explained
    assert set(plain) == {"variants", "pruned"}
    assert {row["vendor"] for row in plain["variants"] + plain["pruned"]} == {"gaudi"}


def test_piped_list_has_no_trailing_padding() -> None:
    lines = cli("list").stdout.splitlines()
    assert len(lines) > 40
    assert [line for line in lines if line != line.rstrip()] == []


def test_list_tags_prints_only_the_tags() -> None:
    tags = cli("list", "--vendor", "cpu", "--torch", "2.13", "--tags").stdout.splitlines()
    rows = json.loads(cli("list", "--vendor", "cpu", "--torch", "2.13", "--json").stdout)["variants"]
    assert tags == list(dict.fromkeys(row["tag"] for row in rows)) and tags  # a tag once, whatever its platforms


def test_list_refuses_two_outputs_at_once() -> None:
    result = CliRunner().invoke(main, ["list", "--tags", "--json"])
    assert result.exit_code == 2 and "give one" in result.stderr


@pytest.mark.live_data
def test_render_writes_its_status_on_stderr(tmp_path: Path) -> None:
    result = cli("render", "--vendor", "cpu", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0
    assert result.stdout == "" and result.stderr.startswith("rendered ")
    check = cli("render", "--check")
    assert check.stdout == "" and "is up to date" in check.stderr


def test_bake_writes_its_status_on_stderr(tmp_path: Path) -> None:
    result = cli("bake", "--vendor", "cpu", "--out", str(tmp_path / "bake.json"))
    assert result.stdout == "" and result.stderr.startswith("wrote ")


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_nightly_without_registry_says_what_is_needed() -> None:
    done = subprocess.run(["make", "-n", "nightly"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "make nightly needs REGISTRY" in done.stderr and "unexpected extra argument" not in done.stderr


def test_readme_does_not_claim_matrix_on_commands_that_have_none() -> None:
    """`--matrix` is on every command that reads the matrix; the manual's commands page names the ones that do not."""
    import click
    ctx = click.Context(main)
    without = sorted(name for name in main.list_commands(ctx)
                     if not isinstance(command := main.get_command(ctx, name), click.Group)
                     and "--matrix" not in {o for p in command.params for o in getattr(p, "opts", ())})
    readme = (ROOT / "docs" / "reference" / "commands.md").read_text()
    assert "`--matrix FILE` (default `matrix.yaml`) on every command." not in readme
    assert without == ["compat", "smoke", "verify"]
    assert all(f"`{name}`" in readme.split("`--matrix FILE`", 1)[1].split("\n\n", 1)[0] for name in without)


def test_readme_says_how_to_reach_the_command_after_the_quick_start() -> None:
    quick_start = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "source .venv/bin/activate" in quick_start


# ---- build and nightly, with the engine and the registry faked --------------------------------------

SMALL = ROOT / "tests" / "matrices" / "small.yaml"


def _variants() -> tuple[Any, ...]:
    from accel_images.cli.options import chosen_variants
    return chosen_variants(str(SMALL), {"vendor": "cpu"})[1]


def _smoke() -> Any:
    from accel_images.smoke.judge import SmokeResult
    return SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=())


class FakeBuilder:
    """Stands in for accel_images.builder.builder.Builder: one variant built and tested, the next unchanged."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.finished: list[Any] = []

    def run(self, variants: tuple[Any, ...]) -> list[Any]:
        from accel_images.builder.outcome import Outcome
        first, *rest = variants
        return [Outcome(first, "built", f"accel-images/pytorch:{first.tag}", "sha256:1", 10**9, 42.0, smoke=_smoke()),
                *(Outcome(v, "skipped", f"accel-images/pytorch:{v.tag}", "sha256:2", 10**9,
                          earlier_smoke="on cpu") for v in rest)]


@pytest.fixture
def fake_build(monkeypatch: pytest.MonkeyPatch) -> None:
    from accel_images.cli import build as cli_build
    monkeypatch.setattr(cli_build, "Builder", FakeBuilder)
    monkeypatch.setattr("accel_images.cli.build.Engine.connect", classmethod(lambda cls: AnAmd64Engine()))
    monkeypatch.setattr(cli_build, "reclaim", lambda engine, started: [])


class AnAmd64Engine:
    """The engine a build asks which platform it builds natively (without --platform, its own only)."""

    def platform(self) -> str:
        return "linux/amd64"


@pytest.mark.parametrize("pin", [(), ("--pin",)], ids=["lock", "pin-over-a-bad-lock"])
def test_a_bad_lock_file_is_refused_before_the_state_directory_is_written(fake_build: None, tmp_path: Path,
                                                                        pin: tuple[str, ...]) -> None:
    """Bad input writes nothing: the lock file is read before the state directory's lock is taken (which
    creates the directory and its nightly.lock)."""
    bad = tmp_path / "bad.lock"
    bad.write_text("[]\n")
    state = tmp_path / "state"
    result = CliRunner().invoke(main, ["build", "--matrix", str(SMALL), "--vendor", "cpu", "--lock", str(bad), *pin,
                                       "--state-dir", str(state)])
    assert result.exit_code == 2 and "not an accel-images lock file" in result.output, result.output
    assert not state.exists(), sorted(str(p.relative_to(tmp_path)) for p in state.rglob("*"))


def test_build_json_is_the_report_alone_on_stdout(fake_build: None, tmp_path: Path) -> None:
    assert len(_variants()) >= 2, "the fake needs a built and a skipped variant"
    result = CliRunner().invoke(main, ["build", "--matrix", str(SMALL), "--vendor", "cpu", "--state-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["summary"]["counts"] == {"built": 1, "skipped": len(_variants()) - 1, "failed": 0}
    assert "variant" in result.stderr and "report:" in result.stderr


def test_build_speaks_one_vocabulary(fake_build: None, tmp_path: Path) -> None:
    """The table's statuses are the summary's words; a skipped image shows where it passed before, as the
    report does, never "not run"."""
    result = CliRunner().invoke(main, ["build", "--matrix", str(SMALL), "--vendor", "cpu", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.stdout.splitlines() if " skipped " in line]
    assert skipped and all("passed earlier on cpu" in line for line in skipped)
    assert "not run" not in result.stdout
    assert f"1 built, {len(_variants()) - 1} skipped, 0 failed; report: " in result.stderr
    assert "| passed earlier on cpu |" in (tmp_path / "reports" / "build-latest" / "summary.md").read_text()
    assert "<title>accel-images build report, " in (tmp_path / "reports" / "build-latest" / "index.html").read_text()


def test_a_second_build_report_compares_with_the_first(fake_build: None, tmp_path: Path) -> None:
    for _ in range(2):
        assert CliRunner().invoke(main, ["build", "--matrix", str(SMALL), "--vendor", "cpu", "--state-dir", str(tmp_path)]).exit_code == 0
    document = json.loads((tmp_path / "reports" / "build-latest" / "report.json").read_text())
    assert document["changes"]["previous"] and document["changes"]["new_failures"] == []


def _night(variant: Any, reused: bool) -> Any:
    from accel_images.publish.nightly import NightlyOutcome
    from accel_images.builder.outcome import Outcome
    built = Outcome(variant, "built", f"reg.example:5000/team/pytorch:{variant.tag}", "sha256:1", 10**9,
                    None if reused else 42.0, smoke=_smoke())
    return NightlyOutcome(built, "first publication", registry_digest="sha256:" + "d" * 64)


def test_nightly_progress_and_table_say_passed_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    from accel_images.cli.nightly import nightly_table
    from accel_images.publish.nightly import describe
    first, second = _variants()[:2]
    assert describe(_night(first, reused=False)).startswith(
        "published (first publication): built in 42 s, smoke passed on cpu, ")
    assert describe(_night(second, reused=True)).startswith(
        "published (first publication): the local build reused, smoke passed on cpu, ")
    from rich.console import Console
    console = Console(width=300, record=True)
    console.print(nightly_table([_night(first, False), _night(second, True)]))
    text = console.export_text()
    assert "reused local build" in text and "smoke passed" not in text and "passed on cpu" in text


def test_nightly_json_is_the_report_alone_on_stdout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from accel_images.cli import nightly as cli_nightly
    monkeypatch.setattr(cli_nightly, "run_nightly", lambda *a, **k: [_night(v, False) for v in a[3]])
    monkeypatch.setattr("accel_images.cli.nightly.Engine.connect", classmethod(lambda cls: None))
    monkeypatch.setattr(cli_nightly, "reclaim", lambda engine, started: [])
    monkeypatch.setattr(cli_nightly, "apply_retention", lambda *a: "not applied in this test")
    result = CliRunner().invoke(main, ["nightly", "--registry", "reg.example:5000/team", "--matrix", str(SMALL),
                                       "--vendor", "cpu", "--state-dir", str(tmp_path), "--no-attest", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["summary"]["counts"]["built"] == len(_variants())
    assert f"{len(_variants())} published" in result.stderr


def test_every_nightly_outcome_line_is_an_outcome_for_quiet_progress() -> None:
    """`-q` keeps only outcome lines: a rebuild that kept the published digest is one too."""
    from dataclasses import replace

    from accel_images.publish.nightly import NightlyOutcome, describe
    from accel_images.builder.outcome import Outcome
    from accel_images.builder.progress import is_final
    variant = _variants()[0]
    built = _night(variant, reused=False)
    nights = [built, _night(variant, reused=True), replace(built, kept=True),
              NightlyOutcome(Outcome(variant, "skipped", "x"), "unchanged since 2026-12-01"),
              NightlyOutcome(Outcome(variant, "failed", "x", error="step 2/4 failed"), "changed")]
    assert [is_final(describe(night)) for night in nights] == [True] * len(nights)
