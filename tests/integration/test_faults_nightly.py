"""The nightly's own report under faults: whatever fails, the run ends in a report and its exit code.

Each test runs `accel-images nightly` in-process (CliRunner) on the tiny fixture templates against
the shared engine and the local registry, in a namespace of its own (the `site` fixture of
test_nightly_integration.py), and checks the exit code, that no traceback escaped, and the report.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

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


@pytest.mark.engine
@pytest.mark.registry
def test_an_unreachable_base_registry_ends_in_a_report_and_exit_4_with_its_hint_as_text(site: Site) -> None:
    """The hint names `--registry-mirror HOST=HOST[/PATH]`, which rich once read as a closing tag."""
    result = CliRunner().invoke(nightly_command, [*offline_args(site), "--json"])
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    report = json.loads(result.stdout)
    [record] = report["variants"]
    assert record["tag"] == DEBIAN and record["status"] == "failed"
    assert "unreachable" in record["error"] and "=HOST[/PATH]" in record["error"]
    assert "=HOST[/PATH]" in result.stderr      # the table, on stderr beside --json, shows it as it is
    assert json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text()) == report


@pytest.mark.engine
@pytest.mark.registry
def test_build_with_an_unreachable_base_registry_shows_its_hint_as_text(site: Site) -> None:
    args = [a for a in offline_args(site) if a not in ("--no-attest",)]
    args = args[args.index("--matrix"):]                              # build takes no --registry
    result = CliRunner().invoke(build_command, [*args, "--pull", "always", "--no-smoke"])
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    assert "=HOST[/PATH]" in result.stdout                           # the table's cause column
    [record] = json.loads((site.state / "reports" / "build-latest" / "report.json").read_text())["variants"]
    assert record["status"] == "failed" and "=HOST[/PATH]" in record["error"]
