"""The Python packages an image installs beside torch, and where pip looks after the build.

torchvision (and torchaudio while it is released) must come from the same wheel index as torch:
the default index's builds do not load beside a +cpu/+rocm/+xpu torch ("operator
torchvision::nms does not exist"). From an index (upstream or a mirror) the companions the
knowledge base pairs with the torch release are installed; from a wheelhouse only those it holds
in the variant's own build (the local label of its wheel index), and the rest are left out with a
note that the build output and the report repeat.

The image keeps pip pointed at that same index (`/etc/pip.conf`, with the package index as the
extra one), so a later `pip install torchvision` takes the matching build. pip has no priority
between the two ("There is no priority in the locations that are searched", pip's install
documentation): a same-named higher version on the package index would win (the torchtriton
incident of December 2022). So the constraints file (PIP_CONSTRAINT, written by the facts step,
accel_images/smoke/facts.py) pins every distribution the build installed, not only torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

UPSTREAM_WHEEL_INDEX = "https://download.pytorch.org/whl"
PACKAGE_INDEX = "https://pypi.org/simple"
PIP_CONF = "pip.conf"
BUILD_BACKENDS = "/opt/accel-images/wheels"
"""Where an image keeps the build backend (setuptools) for isolated builds without a network;
pip.conf names it as find-links. The smoke workload's OFFLINE_WHEELS is the same path."""


@dataclass(frozen=True)
class CompanionPlan:
    """What pip installs beside torch, and why anything the release pairs with it is left out."""

    requirements: tuple[str, ...] = ()   # 'torchvision==0.29.*' ('==0.29.2.*': that release, any local label)
    names: tuple[str, ...] = ()          # 'torchvision'
    notes: tuple[str, ...] = ()


def plan(companions: Mapping[str, str], wheel_index: str | None, python: str,
         wheelhouse: Path | None) -> CompanionPlan:
    """The companions to install for a torch release whose pairings are `companions`."""
    if wheel_index is None:
        return CompanionPlan()  # the vendor's base image brings its own (Gaudi)
    requirements, names, notes = [], [], []
    for name, line in sorted(companions.items()):
        if wheelhouse is not None and not in_wheelhouse(wheelhouse, name, line, wheel_index, python):
            notes.append(f"{name} {line} left out: the wheelhouse {wheelhouse} has no +{wheel_index} build of it"
                         f" for Python {python}")
            continue
        requirements.append(f"{name}=={line}.*")
        names.append(name)
    return CompanionPlan(tuple(requirements), tuple(names), tuple(notes))


def in_wheelhouse(wheelhouse: Path, name: str, line: str, local: str, python: str) -> bool:
    """A wheel `<name>-<line>[.N]+<local>-<py tag>-...` for this Python (cpXY or py3) is there: `line` is a
    release line ('0.29') or an exact release ('0.29.2')."""
    tag = "cp" + python.replace(".", "")
    pattern = re.compile(rf"{re.escape(name)}-{re.escape(line)}(?:\.\d+)*\+{re.escape(local)}-(?:{tag}|py3)-")
    try:
        return any(pattern.match(entry.name) for entry in wheelhouse.iterdir())
    except OSError:
        return False


def index_url(wheel_index: str, pip_index_url: str | None) -> str:
    """The index pip uses inside the image: the mirror when one was given, without credentials."""
    url = pip_index_url.replace("{index}", wheel_index) if pip_index_url else f"{UPSTREAM_WHEEL_INDEX}/{wheel_index}"
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def pip_conf(wheel_index: str | None, pip_index_url: str | None) -> bytes | None:
    """/etc/pip.conf for the image, or None where the vendor's base image has its own torch."""
    if wheel_index is None:
        return None
    return ("# Written by accel-images: later `pip install`s take torch's companions from torch's own\n"
            "# index (the package index's builds do not match this torch), everything else from the\n"
            "# package index. pip prefers neither: PIP_CONSTRAINT pins every installed distribution.\n"
            "# find-links: the build backend, for `pip install .` without a network.\n"
            "[global]\n"
            f"index-url = {index_url(wheel_index, pip_index_url)}\n"
            f"extra-index-url = {PACKAGE_INDEX}\n"
            f"find-links = {BUILD_BACKENDS}\n").encode()
