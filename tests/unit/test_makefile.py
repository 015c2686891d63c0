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
pytestmark = pytest.mark.skipif(MAKE is None and not os.environ.get("CI"), reason="make not installed")


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
