"""The release workflow: what a tag runs before anything reaches PyPI, and how it publishes.

`pipx install accel-images` needs a release on the package index; .github/workflows/release.yml
makes one from a tag. Its build job checks what the README and the nightly rely on (the sdist and
wheel build, twine's metadata and README check, the tag equals the version, the wheel installed
outside a checkout renders exactly images/); its publish job uses trusted publishing, with the OIDC
permission in that job alone. Same hardening as the nightly (pinned actions, no persisted
credentials, zizmor finds nothing). tests/integration/test_installed_wheel.py runs the wheel check
here, on this machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from test_workflow import PINNED, VERSION_COMMENT, zizmor

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
DATA: dict[Any, Any] = yaml.safe_load(RELEASE.read_text())
JOBS: dict[str, Any] = DATA["jobs"]


def runs(job: str) -> str:
    return "\n".join(step.get("run", "") for step in JOBS[job]["steps"])


def test_a_tag_builds_checks_and_publishes() -> None:
    assert DATA[True]["push"] == {"tags": ["v*"]}   # YAML reads a bare `on` as True
    build = runs("build")
    assert "python -m build" in build and "python -m twine check --strict dist/*" in build
    assert 'test "${TAG#v}" = "$version"' in build
    install = build.index('pip" install dist/*.whl')
    assert build.index('cd "$RUNNER_TEMP"') > install             # outside the checkout
    assert 'accel-images" render --out "$RUNNER_TEMP/rendered"' in build
    assert 'diff -r "$RUNNER_TEMP/rendered" "$GITHUB_WORKSPACE/images"' in build
    publish = JOBS["publish"]
    assert publish["needs"] == "build" and publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert publish["steps"][-1]["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert "with" not in publish["steps"][-1]                   # trusted publishing: no token, no password
    assert publish["environment"]["name"] == "pypi"


def test_only_the_publish_job_may_ask_for_an_oidc_token() -> None:
    assert DATA["permissions"] == {}
    assert JOBS["build"]["permissions"] == {"contents": "read"}
    assert JOBS["publish"]["permissions"] == {"id-token": "write"}


def test_every_action_is_pinned_with_its_release_and_no_checkout_keeps_credentials() -> None:
    steps = [step for job in JOBS.values() for step in job["steps"]]
    uses = [step["uses"] for step in steps if "uses" in step]
    assert uses and all(PINNED.match(ref) for ref in uses), uses
    lines = [line for line in RELEASE.read_text().splitlines() if "uses:" in line]
    assert len(lines) == len(uses) and all(VERSION_COMMENT.search(line) for line in lines), lines
    checkouts = [step for step in steps if step.get("uses", "").startswith("actions/checkout@")]
    assert checkouts and all(step["with"]["persist-credentials"] is False for step in checkouts)


def test_zizmor_finds_nothing_in_the_release_workflow() -> None:
    findings = zizmor(RELEASE)
    assert findings == [], [(f["ident"], f["desc"]) for f in findings]


def test_make_lint_covers_every_workflow() -> None:
    assert "zizmor --offline .github/workflows/" in (ROOT / "Makefile").read_text()
