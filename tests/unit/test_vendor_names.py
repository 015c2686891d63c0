"""A vendor named the way people say it, or mistyped, gets "did you mean" and the name to use."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from accel_images.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAID = [("cdua", "cuda"), ("nvidia", "cuda"), ("NVIDIA", "cuda"), ("amd", "rocm"), ("rcom", "rocm"),
        ("intel", "xpu"), ("habana", "gaudi"), ("guadi", "gaudi")]


@pytest.fixture(autouse=True)
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def error_line(args: list[str]) -> str:
    """The one line a refused command prints; it must exit 2 (bad input) with no traceback."""
    result = CliRunner().invoke(main, args, prog_name="accel-images")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("accel-images: error: ")
    return line


@pytest.mark.parametrize("said, meant", SAID)
def test_list_suggests_the_vendor_meant(said: str, meant: str) -> None:
    assert error_line(["list", "--vendor", said]).endswith(f"unknown vendor {said!r}: did you mean {meant!r}?")


@pytest.mark.parametrize("command", [["build"], ["render", "--out", "/nonexistent"], ["bake"], ["ci-matrix"],
                                     ["recommend"], ["pull"], ["devcontainer", "--print"],
                                     ["run", "img:latest", "--print"]])
def test_every_command_with_vendor_suggests(command: list[str], tmp_path: Path) -> None:
    host = tmp_path / "host.json"
    host.write_text('{"vendor": "cpu"}')
    extra = ["--host-json", str(host)] if command[0] in ("recommend", "pull", "devcontainer") else []
    line = error_line([*command, *extra, "--vendor", "nvidia"])
    assert "--vendor: unknown vendor 'nvidia': did you mean 'cuda'?" in line


def test_a_vendor_like_none_names_the_vendors() -> None:
    line = error_line(["list", "--vendor", "tpu"])
    assert line == "accel-images: error: --vendor: unknown vendor 'tpu' (one of cpu, cuda, rocm, xpu, gaudi)"


def test_a_recorded_host_with_an_alias_for_its_vendor_suggests(tmp_path: Path) -> None:
    host = tmp_path / "host.json"
    host.write_text('{"vendor": "amd"}')
    line = error_line(["recommend", "--host-json", str(host)])
    assert line.endswith(f"--host-json: {host}: unknown vendor 'amd': did you mean 'rocm'?")


def test_the_suggestion_is_one_place() -> None:
    from accel_images import vendors
    assert vendors.suggestion("nvidia") == "cuda" and vendors.suggestion("cdua") == "cuda"
    assert vendors.suggestion("tpu") is None and vendors.suggestion("cuda") is None
    assert vendors.suggestion("ypu") is None  # as close to cpu as to xpu: no guess
    assert set(vendors.ALIASES.values()) <= set(vendors.names())
