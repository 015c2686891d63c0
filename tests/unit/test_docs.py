"""The README is the front door and docs/ the manual: the README stays short, every page of the manual
is in mkdocs.yml's nav, the README's links reach files that exist, and the site builds with warnings as
errors (mkdocs.yml: `strict: true`, broken internal links and anchors are warnings)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 300


def _config() -> dict[str, Any]:
    class Loader(yaml.SafeLoader):  # mkdocs.yml may carry !!python/name tags; none are read here
        pass
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)  # noqa: S506 (a SafeLoader subclass)


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def test_the_readme_is_a_front_door_under_300_lines() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines: move detail into a page under docs/"


def test_every_page_of_the_manual_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = _config()
    nav = _nav_pages(config["nav"])
    pages = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages, "docs/*.md and mkdocs.yml's nav differ"
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_the_site_is_strict_and_checks_links_and_anchors() -> None:
    config = _config()
    assert config["strict"] is True
    validation = config["validation"]
    for key in ("omitted_files", "absolute_links", "unrecognized_links", "anchors", "not_found"):
        assert validation[key] == "warn", key  # a warning fails a strict build


def test_the_readme_links_reach_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [target for target in targets if "://" not in target]
    assert local, "the README links to no page of the manual"
    missing = [target for target in local if not (ROOT / target).exists()]
    assert missing == [], missing


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """`mkdocs build --strict`, as `make lint` runs it: the CLI reference (mkdocs-click over the click
    group), the matrix reference (docs/hooks/matrix_reference.py) and every internal link and anchor."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-4000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert 'id="accel-images-recommend"' in cli and "--host-json" in cli
    matrix = (tmp_path / "site" / "reference" / "matrix" / "index.html").read_text()
    assert "experimental_python" in matrix and "matrix-reference -->" not in matrix
