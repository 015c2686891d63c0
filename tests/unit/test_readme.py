"""The README and the manual (docs/): the blocks generated from code stay equal to what the code prints
now, each in the one page that holds it; the commands and options they name exist. No test here pins
prose or a timing figure (benchmarks/RESULTS.md reports timings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from accel_images.cli import main

ROOT = Path(__file__).resolve().parents[2]
SUPPORTED_IMAGES = ROOT / "docs" / "using" / "supported-images.md"
"""The supported-images table: `accel-images list --markdown`."""
RUNNING = ROOT / "docs" / "using" / "running.md"
"""The run forms per runtime: `python -m accel_images.host.runtimes.examples`."""


def readme_table() -> str:
    text = SUPPORTED_IMAGES.read_text()
    match = re.search(r"<!-- BEGIN supported-images -->\n(.*?)<!-- END supported-images -->", text, re.S)
    assert match, "docs/using/supported-images.md lost its supported-images markers"
    return match.group(1)


@pytest.mark.live_data   # the docs page is generated from the live matrix
def test_supported_images_table_matches_the_matrix(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["list", "--markdown"])
    assert result.exit_code == 0, result.output
    assert readme_table() == result.output, (
        "docs/using/supported-images.md's table is stale: paste the output of `accel-images list --markdown`")


def test_supported_images_table_covers_all_vendors() -> None:
    vendors = {line.split("|")[1].strip() for line in readme_table().splitlines()[2:]}
    assert vendors == {"cpu", "cuda", "rocm", "xpu", "gaudi"}


def test_readme_names_the_test_command_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest -q" in readme
    assert ".venv/bin/python -m pytest -q" in ci


@pytest.mark.live_data   # the docs page is generated from the live matrix
def test_run_forms_are_what_the_renderers_print(monkeypatch) -> None:
    from accel_images.host.runtimes.examples import markdown, newest_tags
    monkeypatch.chdir(ROOT)
    text = RUNNING.read_text()
    match = re.search(r"<!-- BEGIN running-elsewhere -->\n(.*?)<!-- END running-elsewhere -->", text, re.S)
    assert match, "docs/using/running.md lost its running-elsewhere markers"
    assert match.group(1) == markdown(newest_tags()), (
        "docs/using/running.md's generated examples are stale: paste the output of"
        " `.venv/bin/python -m accel_images.host.runtimes.examples`")


def test_run_forms_have_every_runtime_and_vendor() -> None:
    from accel_images.host.runtimes import ENGINES
    from accel_images.host.runtimes.examples import TITLES
    text = RUNNING.read_text()
    section = text[text.index("<!-- BEGIN running-elsewhere -->"):text.index("<!-- END running-elsewhere -->")]
    assert [line[4:] for line in section.splitlines() if line.startswith("### ")] == [TITLES[e] for e in ENGINES]
    for vendor in ("cpu", "cuda", "rocm", "xpu", "gaudi"):
        assert section.count(f"# {vendor}\n") == 4 and section.count(f"<summary>{vendor}</summary>") == 2


def test_the_signing_key_commands_write_outside_the_checkout_and_pem_files_are_ignored(tmp_path: Path) -> None:
    """A private key written into the checkout is one `git add -A` away from a leak: the manual's commands
    put it under the user's configuration directory, private, and .gitignore ignores `*.pem` anyway.
    The commands run here, in a scratch checkout-like directory, with XDG_CONFIG_HOME pointed elsewhere."""
    import os
    import shutil
    import subprocess
    page = (ROOT / "docs" / "platform" / "supply-chain.md").read_text()
    block = next(b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "genpkey" in b)
    keygen = "\n".join(line.split("    #")[0] for line in block.splitlines()[:2])
    assert shutil.which("openssl"), "openssl is needed (Debian's openssl package)"
    checkout, config = tmp_path / "checkout", tmp_path / "config"
    checkout.mkdir()
    subprocess.run(["bash", "-ec", keygen], cwd=checkout, check=True, timeout=60,
                   env={"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(config)})
    assert list(checkout.iterdir()) == []
    key = config / "accel-images" / "sign.pem"
    assert key.is_file() and key.stat().st_mode & 0o077 == 0 and (config / "accel-images").stat().st_mode & 0o077 == 0
    assert "*.pem" in (ROOT / ".gitignore").read_text().splitlines()


def test_quick_start_puts_the_unit_suite_first() -> None:
    """A newcomer runs the first test command they meet: the fast one that needs nothing."""
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    unit = quick.index("\n.venv/bin/python -m pytest -q -n 2 tests/unit\n")
    whole = quick.index("\n.venv/bin/python -m pytest -q\n")
    assert unit < whole


def test_the_install_line_for_users_works_today_and_says_which() -> None:
    """`pipx install accel-images` needs a release on PyPI: the README's tour gives the install that works
    from a checkout or a wheel built there (tests/integration/test_installed_wheel.py installs that wheel
    outside the checkout), and names the workflow that publishes a release."""
    readme = (ROOT / "README.md").read_text()
    paragraph = readme[readme.index("Most users never build"):].split("\n\n", 1)[0]
    assert "`pipx install .`" in paragraph and "pipx install dist/accel_images-" in paragraph
    assert "`pipx install accel-images`" in paragraph and ".github/workflows/release.yml" in paragraph
    assert (ROOT / ".github" / "workflows" / "release.yml").is_file()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version and f"accel_images-{version.group(1)}-py3-none-any.whl" in paragraph


def test_the_manual_says_where_images_come_from_and_where_a_release_is() -> None:
    """Before: the only registry documented was a placeholder, and nothing said that a name without a
    registry is a Docker Hub name (issue 41, 1). The options, variables and files it names are the code's."""
    from accel_images.host.sources import CONFIG_NAME, REGISTRY_ENV
    text = " ".join((ROOT / "docs" / "using" / "pulling.md").read_text().split())
    section = text[text.index("## Where images come from"):text.index("## Tags")]
    for needed in ("--pull never", "--registry REG", REGISTRY_ENV, f"~/.config/{CONFIG_NAME.as_posix()}",
                   "`registry: REG`"):
        assert needed in section, needed
    registries = " ".join((ROOT / "docs" / "platform" / "registries.md").read_text().split())
    for needed in ("ghcr.io/<owner>/accel-images/pytorch:TAG", "repository variable `REGISTRY`"):
        assert needed in registries, needed


def test_the_manual_says_why_a_published_image_has_its_tags() -> None:
    """Before: each published image left seven tags and nothing said why (issue 41, 5)."""
    text = (ROOT / "docs" / "using" / "pulling.md").read_text()
    table = text[text.index("Why a published image has the tags it has"):]
    table = table[:table.index("\n\n", table.index("| Tag |"))]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == 6
    for kind in ("(the full tag)", "(dated)", "(aliases)", "`…-tested`", "`sha256-<digest>.smoke`", "`sha256-<digest>`"):
        assert any(kind in row for row in rows), kind


def test_the_compose_commands_work_with_compose_v2_and_debians_v1() -> None:
    """Before: only `docker compose`, which Debian's Compose (v1, the docker-compose package) does not have."""
    text = " ".join(RUNNING.read_text().split())
    bullet = text[text.index("- **Docker Compose**"):text.index("- **VS Code")]
    assert "`docker-compose.yml`" in bullet  # the file name both read
    assert "`docker compose run --rm dev` (v2)" in bullet and "`docker-compose run --rm dev` (v1)" in bullet
