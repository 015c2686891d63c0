"""The nightly's own report under faults: whatever fails, the run ends in a report and its exit code.

Each test runs `accel-images nightly` in-process (CliRunner) on the tiny fixture templates against
the shared engine and the local registry, in a namespace of its own (the `site` fixture of
test_nightly_integration.py), and checks the exit code, that no traceback escaped, and the report.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from accel_images.cli.build import build_command
from accel_images.cli.nightly import nightly_command
from faultproxy import free_port
from test_nightly import DEBIAN
from test_nightly_integration import Site, site  # noqa: F401  (site is a fixture)
from test_registry_hostile import ended_cleanly


def offline_args(site: Site) -> list[str]:
    """The site's arguments with its base images behind a mirror nothing listens on: every pull is
    unreachable, as vault.habana.ai is from an offline Gaudi runner."""
    args = site.cli_args()
    at = args.index("--registry-mirror")
    args[at + 1] = f"docker.io=127.0.0.1:{free_port()}/{site.namespace}"
    return [*args, "--os", "debian12"]


MIRROR_HINT = "points there: start that mirror or correct the mapping"


@pytest.mark.engine
@pytest.mark.registry
def test_an_unreachable_base_registry_ends_in_a_report_and_exit_4_with_its_hint_as_text(site: Site) -> None:
    """The hint names the `--registry-mirror` mapping that pointed at the dead registry (an earlier hint's
    `HOST=HOST[/PATH]` was read by rich as a closing tag: tests/unit/test_outside_text.py holds that)."""
    result = CliRunner().invoke(nightly_command, [*offline_args(site), "--json"])
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    report = json.loads(result.stdout)
    [record] = report["variants"]
    assert record["tag"] == DEBIAN and record["status"] == "failed"
    assert "unreachable" in record["error"] and MIRROR_HINT in record["error"]
    assert MIRROR_HINT in " ".join(result.stderr.split())   # the table, on stderr beside --json, as it is
    assert json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text()) == report


@pytest.mark.engine
@pytest.mark.registry
def test_build_with_an_unreachable_base_registry_shows_its_hint_as_text(site: Site) -> None:
    args = [a for a in offline_args(site) if a not in ("--no-attest",)]
    args = args[args.index("--matrix"):]                              # build takes no --registry
    result = CliRunner().invoke(build_command, [*args, "--pull", "always", "--no-smoke"])
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    assert MIRROR_HINT in " ".join(result.stdout.split())           # the table's cause column, wrapped in a pipe
    [record] = json.loads((site.state / "reports" / "build-latest" / "report.json").read_text())["variants"]
    assert record["status"] == "failed" and MIRROR_HINT in record["error"]


# ---- a full disk ------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 256 KiB of our own, mounted under tmp_path (root can mount one; CI runs as root)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")   # a failure under CI (conftest)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(disk: Path, leave: int = 0) -> None:
    """Write to `disk` until it is full, then free `leave` bytes again."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))


@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize("command", ["nightly", "build"])
def test_a_full_disk_under_the_state_directory_is_one_line_and_exit_2(site: Site, small_disk: Path,
                                                                     command: str) -> None:
    fill(small_disk)
    result = run_on(site, small_disk, command)
    assert ended_cleanly(result), result.output
    assert result.exit_code == 2, result.output
    [line] = result.output.splitlines()
    assert line == (f"accel-images: error: {small_disk}/state/nightly.lock: cannot write the lock file: No space left"
                    " on device (free space on its file system, or choose another --state-dir)")


@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize("command", ["nightly", "build"])
def test_a_disk_that_fills_during_the_run_ends_in_one_line_and_exit_2(site: Site, small_disk: Path,
                                                                      command: str) -> None:
    """Room for the lock and the context, not for the build log and the reports: the variant fails
    (`cannot write the build log ...`), then the reports cannot be written either; never a traceback."""
    fill(small_disk, leave=64 * 1024)
    result = run_on(site, small_disk, command)
    assert ended_cleanly(result), result.output
    assert result.exit_code == 2, result.output
    last = result.output.splitlines()[-1]
    assert last.startswith(f"accel-images: error: {small_disk}/state/reports/{command}-")
    assert last.endswith(": cannot write the reports: No space left on device (the report directory must be a"
                         " writable directory)")


def run_on(site: Site, disk: Path, command: str) -> Result:
    """`nightly` or `build` of the Debian variant with the state directory on `disk`."""
    args = [*site.cli_args(), "--os", "debian12", "--state-dir", str(disk / "state")]
    if command == "build":
        args = [a for a in args[args.index("--matrix"):] if a != "--no-attest"]
    return CliRunner().invoke(nightly_command if command == "nightly" else build_command, args)
