"""apt works in a directory of its step's own, in every rendered image: no step reads, writes or
deletes the base's package lists and caches (templates/partials/apt.j2).

Deleting a file a lower layer holds leaves a whiteout the engine dates with the wall clock, so a
base that ships lists or .deb files would make every apt layer differ at each build; what the
real engine makes of it is tests/integration/test_apt_cache_base.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

IMAGES = Path(__file__).resolve().parents[2] / "images"
DOCKERFILES = sorted(IMAGES.glob("*/*/Dockerfile"))
OWN_DIRS = "-o Dir::Cache=/tmp/accel-images-apt/cache -o Dir::State::lists=/tmp/accel-images-apt/lists"
BASE_APT_PATHS = re.compile(r"/var/(?:lib/apt|cache/apt)\b")


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_every_apt_get_keeps_its_lists_and_caches_in_the_steps_own_directory(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    calls = re.findall(r"apt-get( .{0,%d})" % len(OWN_DIRS), text)  # noqa: UP031 - a regex's braces
    assert calls, "no apt-get in the image"
    assert all(call.startswith(" " + OWN_DIRS) for call in calls), [c for c in calls if OWN_DIRS not in c][:2]
    assert "apt-get clean" not in text and not BASE_APT_PATHS.search(text), BASE_APT_PATHS.findall(text)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_every_apt_step_removes_its_directory_when_it_ends(dockerfile: Path) -> None:
    for step in re.sub(r"\\\n", " ", dockerfile.read_text()).splitlines():
        if step.startswith("RUN ") and " update " in step and "accel-images-apt" in step:
            made, removed = step.find("mkdir -p /tmp/accel-images-apt/"), step.rfind("rm -rf /tmp/accel-images-apt ")
            assert -1 < made < step.find(" update ") < removed, step[:200]
