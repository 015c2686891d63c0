"""The Makefile as a newcomer meets it: a fresh clone (no .venv) and a shell where pip's own
environment variables are set. Run with `make -n`, so nothing is built; the commands Make would
run are the evidence."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make not installed")   # a failure under CI (conftest)


def dry_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    """The commands `make -n ARGS` prints, in a copy of the Makefile with no .venv beside it."""
    (tmp_path / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    result = subprocess.run([MAKE or "make", "-n", *args], cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": os.environ["PATH"], **(env or {})}, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_a_fresh_clones_first_make_image_installs_first(tmp_path: Path) -> None:
    commands = dry_run(tmp_path, "image", "VENDOR=cpu")
    install = next(i for i, c in enumerate(commands) if "pip install" in c and "-e" in c)
    build = next(i for i, c in enumerate(commands) if "accel-images build" in c)
    assert commands[0].endswith("-m venv .venv")
    assert install < build


def test_pips_own_environment_does_not_reach_the_images(tmp_path: Path) -> None:
    env = {"PIP_INDEX_URL": "https://pypi.example.com/simple", "PIP_FIND_LINKS": "/srv/host-wheels"}
    build = next(c for c in dry_run(tmp_path, "image", "VENDOR=cpu", env=env) if "accel-images build" in c)
    assert "--pip-index-url" not in build and "--pip-find-links" not in build


def test_the_projects_own_variables_do(tmp_path: Path) -> None:
    build = next(c for c in dry_run(tmp_path, "image", "VENDOR=cpu", "TORCH_INDEX_URL=http://m.example/whl/{index}",
                                    "WHEELHOUSE=/w", "APT_MIRROR=deb.debian.org=http://apt.example") if "build" in c)
    assert "--pip-index-url 'http://m.example/whl/{index}'" in build
    assert "--pip-find-links /w" in build and "--apt-mirror deb.debian.org=http://apt.example" in build


def test_companions_to_build_without_reach_build_and_nightly(tmp_path: Path) -> None:
    build = next(c for c in dry_run(tmp_path, "image", "VENDOR=cpu", "WITHOUT_COMPANION=torchaudio torchvision")
                 if "accel-images build" in c)
    assert "--without-companion torchaudio --without-companion torchvision" in build
    nightly = next(c for c in dry_run(tmp_path, "nightly", "REGISTRY=r.example", "WITHOUT_COMPANION=torchaudio")
                   if "accel-images nightly" in c)
    assert "--without-companion torchaudio" in nightly
    offline = next(c for c in dry_run(tmp_path, "image-offline") if "accel-images build" in c)
    assert offline.endswith("--without-companion torchvision")   # CI's wheelhouse holds no +cpu torchvision


def test_the_wheel_cache_is_a_make_variable_for_images_and_the_nightly(tmp_path: Path) -> None:
    cache = ("CACHE_DIR=/srv/wheels", "CACHE_MAX_SIZE=50G")
    for target in (("image", "VENDOR=cpu"), ("images", "VENDOR=cpu"), ("nightly", "REGISTRY=reg.example")):
        command = next(c for c in dry_run(tmp_path, *target, *cache) if "accel-images" in c and " --" in c)
        assert "--cache-dir /srv/wheels --cache-max-size 50G" in command, command
    assert not any("--cache" in c for c in dry_run(tmp_path, "image", "VENDOR=cpu"))


def test_make_image_offline_honours_wheelhouse_and_registry_mirror(tmp_path: Path) -> None:
    build = next(c for c in dry_run(tmp_path, "image-offline", "WHEELHOUSE=/srv/wheels",
                                    "REGISTRY_MIRROR=docker.io=harbor.example/hub") if "accel-images build" in c)
    assert "--pip-find-links '/srv/wheels'" in build and "--registry-mirror docker.io=harbor.example/hub" in build
    default = next(c for c in dry_run(tmp_path, "image-offline") if "accel-images build" in c)
    assert "--pip-find-links '/var/cache/accel-images/wheelhouse'" in default


def make_here(*args: str) -> subprocess.CompletedProcess[str]:
    """`make ARGS` in the checkout, its .venv taken as current (-o: never reinstalled by a test)."""
    return subprocess.run([MAKE or "make", "-s", "-o", ".venv/bin/accel-images", *args], cwd=ROOT, capture_output=True,
                          text=True, env={"PATH": os.environ["PATH"]}, timeout=120, check=False)


def test_make_image_offline_without_the_wheelhouse_says_what_to_do() -> None:
    result = make_here("image-offline", "WHEELHOUSE=/nonexistent/wheelhouse")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        "make image-offline: no wheelhouse at /nonexistent/wheelhouse: run `make engine` (Debian 12, as root) to make"
        " the one CI uses, or point WHEELHOUSE= at a directory of wheels (docs/platform/mirrors.md)")


@pytest.mark.live_data
def test_a_make_targets_failure_speaks_make() -> None:
    """`make image WHEELHOUSE=/nowhere`: the CLI's one line names WHEELHOUSE, not --pip-find-links."""
    result = make_here("image", "VENDOR=cpu", "WHEELHOUSE=/nonexistent/wheelhouse")
    error = next(line for line in result.stderr.splitlines() if line.startswith("accel-images: error:"))
    assert error.startswith("accel-images: error: WHEELHOUSE: wheelhouse directory /nonexistent/wheelhouse does not"
                            " exist (a wheelhouse holds torch for the image's Python"), error
    assert "--pip-find-links" not in result.stderr


def test_every_make_variable_the_hints_name_passes_that_option() -> None:
    from accel_images.formatting import MAKE_VARIABLES
    lines = (ROOT / "Makefile").read_text().splitlines()
    for option, variable in MAKE_VARIABLES.items():
        assert any(option + " " in line and f"$({variable})" in line for line in lines), (option, variable)
