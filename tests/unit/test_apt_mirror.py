"""`--apt-mirror` reaches the base image's own apt sources: the rewrite the render puts before
`apt-get update` is run in the real Debian 12 base, and its sources then name the mirror.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_apt_mirror_integration.py.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from accel_images.cli import main
STEP_START = ('t0="$(($(date +%s) - 1))" && c0="$(awk -v now="$(date +%s.%N)" \'BEGIN { printf "%.3f", now - 0.1 }\')"'
              ' \\\n    && ')
"""What every reproducible step starts with (templates/partials/reproducible.j2)."""
APT_GET = "apt-get -o Dir::Cache=/tmp/accel-images-apt/cache -o Dir::State::lists=/tmp/accel-images-apt/lists"
"""apt with its lists and caches in the step's own directory (templates/partials/apt.j2)."""
APT_UPDATE = ("mkdir -p /tmp/accel-images-apt/cache/archives/partial /tmp/accel-images-apt/lists/partial \\\n"
              f"    && {APT_GET} update")
""""apt-get update" as every apt step runs it, its directories made first."""


def rendered_rewrite(tmp_path: Path, *mirror_args: str) -> str:
    result = CliRunner().invoke(main, ["render", "--vendor", "cpu", "--os", "debian12", "--torch", "2.13",
                                       "--out", str(tmp_path), *mirror_args])
    assert result.exit_code == 0, result.output
    dockerfile = (tmp_path / "cpu" / "2.13.0-cpu-py3.11-debian12" / "Dockerfile").read_text()
    first_apt_step = dockerfile.split("RUN ", 2)[1].removeprefix(STEP_START)
    return first_apt_step.split(" \\\n    && " + APT_UPDATE)[0]


def test_without_a_mirror_nothing_is_rewritten(tmp_path: Path) -> None:
    assert rendered_rewrite(tmp_path).startswith(APT_UPDATE)
