"""Where the matrix and the templates come from: the checkout you stand in, or the installed package.

Run inside a checkout, the checkout's `matrix.yaml` and `templates/` are used, so an edit there
shows at once. Run anywhere else, from a plain `pip install` or `pipx install`, the copies that
the wheel carries are used (`pyproject.toml` bundles them under `accel_images/_bundled/`), so
`list`, `render` and `recommend` answer the same everywhere. In a source tree or an editable
install nothing is bundled and the package's own source tree is the checkout.

Two environment variables stand in for these defaults, read here and nowhere else: ACCEL_IMAGES_MATRIX
names a matrix file to use where no `--matrix` is given, and ACCEL_IMAGES_KB_DIR a directory holding a
knowledge base (`kb.yaml` and `vendors/<vendor>.yaml`) to use in place of the package's own. The unit
tests point both at a frozen copy (tests/data/frozen), so a new release in the live files changes none
of them.
"""

from __future__ import annotations

import os
from pathlib import Path

from accel_images.errors import InputError

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_DIR = PACKAGE_DIR / "_bundled"
SOURCE_ROOT = PACKAGE_DIR.parent
MATRIX_NAME = "matrix.yaml"
TEMPLATES_NAME = "templates"
IMAGES_DIR = Path("images")
"""Relative to the working directory, like the checkout's own `images/`."""
KB_DIR = PACKAGE_DIR / "data"
"""The knowledge base the package carries: `kb.yaml` and `vendors/<vendor>.yaml`."""
MATRIX_ENV = "ACCEL_IMAGES_MATRIX"
KB_DIR_ENV = "ACCEL_IMAGES_KB_DIR"


def bundled(name: str) -> Path:
    """A file or directory the package carries: in the wheel's bundle, else in the source tree."""
    for base in (BUNDLED_DIR, SOURCE_ROOT):
        candidate = base / name
        if candidate.exists() and (base is BUNDLED_DIR or (SOURCE_ROOT / "pyproject.toml").is_file()):
            return candidate
    raise InputError(f"this installation of accel-images lacks its {name} (reinstall the package)")


def default_matrix() -> Path:
    """$ACCEL_IMAGES_MATRIX when set, else `./matrix.yaml` when there is one (a checkout), else the matrix
    the package carries."""
    if os.environ.get(MATRIX_ENV):
        return Path(os.environ[MATRIX_ENV])
    local = Path(MATRIX_NAME)
    return local if local.is_file() else bundled(MATRIX_NAME)


def default_templates() -> Path:
    """`./templates/` when there is one (a checkout), else the templates the package carries."""
    local = Path(TEMPLATES_NAME)
    return local.resolve() if local.is_dir() else bundled(TEMPLATES_NAME)


def kb_dir() -> Path:
    """$ACCEL_IMAGES_KB_DIR when set, else the knowledge base the package carries (KB_DIR)."""
    return Path(os.environ[KB_DIR_ENV]) if os.environ.get(KB_DIR_ENV) else KB_DIR
