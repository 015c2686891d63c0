"""`accel-images host describe`: the host description `--host-json` reads, captured from a node.

The node here is faked the way the images' guard tests fake one: a PATH holding only fake vendor
tools that answer with recorded output (tests/data/host), and ACCEL_IMAGES_DEV_ROOT over a fake
/dev, /sys and /proc. Detection runs for real against them (subprocesses, files), so what `describe`
prints is what `recommend` sees when it detects, and what `recommend --host-json` reads back.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from accel_images.cli import main
from accel_images.errors import InputError
from accel_images.host.choosing import load_host
from accel_images.model.hostinfo import HostInfo

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "host"
SCHEMA_FILE = ROOT / "accel_images" / "host" / "host.schema.json"
"""The format of a host description, in the package (the --host-json help names it)."""
EXECUTABLE = Path(sys.executable).with_name("accel-images")
CHOOSING_COMMANDS = ("recommend", "pull", "run", "devcontainer")
"""Every command that takes --host-json (cli.options.choice_options)."""


def fake_tool(bin_dir: Path, name: str, answers: dict[str, Path]) -> None:
    """A tool on the fake PATH: prints a recorded file for each argument string it knows, else fails
    with nothing said (a form of the command this tool does not have)."""
    cases = "".join(f"    {shlex.quote(args)}) cat {shlex.quote(str(path))} ;;\n" for args, path in answers.items())
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\ncase \"$*\" in\n{cases}    *) exit 1 ;;\nesac\n")
    script.chmod(0o755)


@pytest.fixture
def mi300x_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A node with two AMD MI300X: /dev/kfd under the fake device root, rocminfo and amd-smi on PATH. Its
    amd-smi is the recorded one with the amdgpu driver of AMD GPU Driver 30.30 (the recording's 6.10.5, a 6.3
    driver, supports no ROCm the matrix's images have: AMD's user and kernel-space support matrix)."""
    bin_dir, dev_root = tmp_path / "bin", tmp_path / "host"
    bin_dir.mkdir()
    (dev_root / "dev").mkdir(parents=True)
    (dev_root / "dev" / "kfd").write_text("")
    for tool in ("sh", "cat"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    fake_tool(bin_dir, "rocminfo", {"": DATA / "rocminfo-mi300x.txt"})
    amd_smi = tmp_path / "amd-smi-version.txt"
    amd_smi.write_text((DATA / "amd-smi-version-6.4.1.txt").read_text().replace("amdgpu version: 6.10.5",
                                                                                 "amdgpu version: 6.16.13"))
    fake_tool(bin_dir, "amd-smi", {"version": amd_smi})
    (tmp_path / "machine.txt").write_text("x86_64\n")
    fake_tool(bin_dir, "uname", {"-m": tmp_path / "machine.txt"})
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("ACCEL_IMAGES_DEV_ROOT", str(dev_root))
    monkeypatch.chdir(ROOT)
    return tmp_path


def cli(*args: str, stdin: str | None = None):
    return CliRunner().invoke(main, list(args), input=stdin, prog_name="accel-images")


def test_describe_prints_the_detected_node_as_host_json(mi300x_node: Path) -> None:
    result = cli("host", "describe")
    assert result.exit_code == 0, result.output
    described = json.loads(result.stdout)
    assert (described["vendor"], described["device_count"], described["gpu_archs"]) == ("rocm", 2, ["gfx942"])
    assert (described["stack_version"], described["driver_version"], described["machine"]) == ("6.4.1", "6.16.13",
                                                                                              "x86_64")
    assert described["evidence"][-1] == "chose rocm"
    assert set(described) == {field.name for field in dataclasses.fields(HostInfo)}


def test_describe_round_trips_through_recommend_host_json(mi300x_node: Path, tmp_path: Path) -> None:
    """What describe prints, handed back by file or on stdin, is the host recommend detects itself."""
    described = cli("host", "describe").stdout
    detected = cli("recommend", "--json")
    assert detected.exit_code == 0, detected.output
    host_file = tmp_path / "host.json"
    host_file.write_text(described)
    from_file = cli("recommend", "--json", "--host-json", str(host_file))
    from_stdin = cli("recommend", "--json", "--host-json", "-", stdin=described)
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_file.output + from_stdin.output
    assert json.loads(from_file.stdout) == json.loads(from_stdin.stdout) == json.loads(detected.stdout)
    assert json.loads(detected.stdout)["host"] == json.loads(described)
    from accel_images.host.describe import host_record
    assert host_record(load_host(host_file)) == json.loads(described)  # nothing lost or changed on the way


def test_describe_piped_into_recommend_in_a_shell(mi300x_node: Path) -> None:
    """`host describe | recommend --host-json -`, as two processes joined by a pipe, prints what
    `recommend` prints when it detects the node itself."""
    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([shutil.which("sh", path="/bin:/usr/bin") or "/bin/sh", "-c", line], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
    piped = shell(f"{EXECUTABLE} host describe | {EXECUTABLE} recommend --host-json -")
    detected = shell(f"{EXECUTABLE} recommend")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == detected.stdout and piped.stderr == detected.stderr
    assert piped.stderr.startswith("host: rocm") and "rocm" in piped.stdout.splitlines()[-1]


def test_describe_output_matches_the_schema(mi300x_node: Path) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(cli("host", "describe").stdout), schema)
    assert set(schema["properties"]) == {field.name for field in dataclasses.fields(HostInfo)}
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("content", ['{"vendor": "cuda", "gpus": 3}', '{"device_count": -1}',
                                     '{"gpu_names": "A100"}', '{"machine": 64}', "[1, 2]"])
def test_what_load_host_refuses_the_schema_refuses(tmp_path: Path, content: str) -> None:
    """The schema documents the checks load_host makes: neither accepts what the other refuses."""
    schema = json.loads(SCHEMA_FILE.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(content), schema)
    path = tmp_path / "host.json"
    path.write_text(content)
    result = cli("recommend", "--host-json", str(path))
    assert result.exit_code == 2 and "--host-json" in result.stderr


@pytest.mark.parametrize("command", CHOOSING_COMMANDS)
def test_host_json_is_in_the_help_with_its_format(command: str) -> None:
    text = " ".join(cli(command, "--help").output.split())
    assert "--host-json" in text
    assert "accel-images host describe" in text and "'-' reads standard input" in text
    assert "accel_images/host/host.schema.json" in text and "`accel-images host schema` prints" in text
    assert SCHEMA_FILE.relative_to(ROOT).as_posix() == "accel_images/host/host.schema.json"


def test_host_schema_prints_the_schema_the_package_carries() -> None:
    result = cli("host", "schema")
    assert result.exit_code == 0, result.output
    assert result.stdout == SCHEMA_FILE.read_text() and json.loads(result.stdout)["additionalProperties"] is False


def test_a_missing_host_json_points_at_help_that_lists_the_option(tmp_path: Path) -> None:
    result = cli("recommend", "--host-json", str(tmp_path / "missing.json"))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("accel-images: error: ") and "Traceback" not in result.output
    assert "missing.json" in line and "see 'accel-images recommend --help'" in line
    assert "--host-json" in cli("recommend", "--help").output


def test_describe_on_a_node_with_nothing_is_the_cpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No vendor tool at all (an empty PATH, an empty device tree): the CPU host, each probe saying why."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ACCEL_IMAGES_DEV_ROOT", str(tmp_path))
    result = cli("host", "describe")
    assert result.exit_code == 0, result.output
    described = json.loads(result.stdout)
    assert (described["vendor"], described["machine"]) == ("cpu", None)
    assert described["evidence"][-1] == "chose cpu: no accelerator found"


def test_host_json_dash_on_a_terminal_is_one_error_not_a_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--host-json -` with nothing piped in would wait for typed JSON: it says what to pipe instead."""
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True
    monkeypatch.setattr(sys, "stdin", Terminal())
    with pytest.raises(InputError, match="standard input is a terminal: pipe `accel-images host describe` into it"):
        load_host(Path("-"))
