"""The Python packages an image installs beside torch, and where pip looks after the build.

torchvision (and torchaudio while it is released) must come from the same wheel index as torch:
the default index's builds do not load beside a +cpu/+rocm/+xpu torch ("operator
torchvision::nms does not exist"). Every companion the knowledge base pairs with the torch release
is installed, from an index (upstream or a mirror) or a wheelhouse. One is left out only when the
user says so (`--without-companion NAME`): the image then carries the label
`io.accel-images.without-companions`, and the build output, every report and the catalogue say it.
A wheelhouse that lacks a companion's build for the variant (the local label of its wheel index) is
an error naming the way out, never a silent omission: an image without torchvision is not the
image the README promises.

The image keeps pip pointed where the build took its packages from (`/etc/pip.conf`): torch's index
(upstream or the `--pip-index-url` mirror) first, so a later `pip install torchvision` takes the
matching build, and the package index the build used as the extra one (pypi.org, or
`--pip-extra-index-url`; none when only a mirror of torch's index was given). An image built from a
wheelhouse reached no index and names none (`no-index`): in an air-gapped site a later `pip install`
then fails at once instead of waiting on pypi.org. pip has no priority between two indexes ("There is
no priority in the locations that are searched", pip's install documentation): a same-named higher
version on the package index would win (the torchtriton incident of December 2022). So the
constraints file (PIP_CONSTRAINT, written by the facts step, accel_images/smoke/facts.py) pins every
distribution the build installed, not only torch.

IPython (TOOLS) is installed in every image beside torch, numpy and the companions, for the people
who work in it. Torch's wheel indexes do not carry it (pytorch/test-infra s3_management/manage_v2.py:
PACKAGE_ALLOW_LIST and PACKAGE_LINKS_ALLOW_LIST name no ipython [V]), so it comes from the package
index, in a pip call of its own (never an extra index beside torch's, from which a same-named
torch could be taken), or from the wheelhouse, which must hold it (check_wheelhouse).

pip itself is a tool in that call too: `python -m venv` seeds the environment with the pip the OS
bundles for ensurepip (Debian 12's python3-pip-whl: pip 23.0.1, which the images shipped), and an old
pip is what every later `pip install` in the image runs. Named in the tools' call, pip upgrades
itself to the newest release the package index (or the wheelhouse) holds, and the constraints file
then pins that pip like every other installed distribution.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

from accel_images.errors import InputError
from accel_images.model.platforms import DEFAULT as DEFAULT_PLATFORM

UPSTREAM_WHEEL_INDEX = "https://download.pytorch.org/whl"
PACKAGE_INDEX = "https://pypi.org/simple"
PIP_CONF = "pip.conf"
BUILD_BACKEND = "setuptools"
"""What `pip install .` of a project fetches first in an isolated build: kept in the image (BUILD_BACKENDS)."""
TOOLS = ("ipython", "pip")
"""Installed (pip: upgraded) in every image whose environment accel-images builds, from the package index or
the wheelhouse."""
BUILD_BACKENDS = "/opt/accel-images/wheels"
"""Where an image keeps the build backend (setuptools) for isolated builds without a network;
pip.conf names it as find-links. The smoke workload's OFFLINE_WHEELS is the same path."""


WITHOUT_OPTION = "--without-companion"
WITHOUT_LABEL = "without-companions"
"""The label (under io.accel-images.) that lists the companions an image was built without."""


@dataclass(frozen=True)
class CompanionPlan:
    """What pip installs beside torch, and what the release pairs with it that the user left out."""

    requirements: tuple[str, ...] = ()   # 'torchvision==0.29.*' ('==0.29.2.*': that release, any local label)
    names: tuple[str, ...] = ()          # 'torchvision'
    notes: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()       # the companions left out by --without-companion


def plan(companions: Mapping[str, str], wheel_index: str | None, python: str,
         wheelhouse: Path | None, without: Iterable[str] = (), from_package_index: bool = False,
         target: Target | None = None) -> CompanionPlan:
    """The companions to install for a torch release whose pairings are `companions`, less `without`.
    The package index's wheels carry no local label in their file names (`torchvision-0.29.2-py3-...`):
    a wheelhouse for a variant from the package index is checked without one, and for the build's
    `target` platform.

    Raises InputError when the wheelhouse lacks one that is not left out on purpose.
    """
    target = target or Target()
    if wheel_index is None:
        return CompanionPlan()  # the vendor's base image brings its own (Gaudi)
    unwanted = set(without)
    requirements, names, notes, left_out = [], [], [], []
    for name, line in sorted(companions.items()):
        if name in unwanted:
            left_out.append(name)
            notes.append(f"{name} {line} left out ({WITHOUT_OPTION} {name})")
            continue
        local = None if from_package_index else wheel_index
        if wheelhouse is not None and not in_wheelhouse(wheelhouse, name, line, local, python, target.machines):
            build = "package index" if local is None else f"+{local}"
            raise InputError(f"the wheelhouse has no {build} build of {name} {line} for Python {python}{target.on()};"
                             f" add one, or leave {name} out with {WITHOUT_OPTION} {name}",
                             file=str(wheelhouse), field="--pip-find-links")
        requirements.append(f"{name}=={line}.*")
        names.append(name)
    return CompanionPlan(tuple(requirements), tuple(names), tuple(notes), tuple(left_out))


def known_names(pairings: Iterable[Mapping[str, str]]) -> tuple[str, ...]:
    """Every companion any torch release is paired with: what `--without-companion` accepts."""
    return tuple(sorted({name for pairing in pairings for name in pairing}))


def install_requirements(torch: str, plan: CompanionPlan) -> tuple[str, ...]:
    """What the image's `pip install` asks for: torch, its companions, and numpy (without it `import
    torch` warns and tensor.numpy() fails). The render writes them into the Dockerfile and a host
    fetch (accel_images.builder.wheels) resolves the very same."""
    return (f"torch=={torch}", *plan.requirements, "numpy")


def shell_words(requirements: tuple[str, ...]) -> str:
    """Requirements as a shell command line takes them: a specifier quoted (`"torch==2.13.0"`), a bare name not."""
    return " ".join(f'"{r}"' if any(c in r for c in "<>=!~*;[ ") else r for r in requirements)


@dataclass(frozen=True)
class Target:
    """The platform a build installs wheels for, and the machine names (`uname -m`) a wheel built for it
    carries in its platform tag (the knowledge base's `platforms:`); no machines: any wheel will do."""

    platform: str = DEFAULT_PLATFORM
    machines: tuple[str, ...] = ()

    def on(self) -> str:
        """` on linux/arm64` in a refusal; '' for the default platform, whose messages name none."""
        return "" if self.platform == DEFAULT_PLATFORM else f" on {self.platform}"


def in_wheelhouse(wheelhouse: Path, name: str, line: str, local: str | None, python: str,
                  machines: tuple[str, ...] = ()) -> bool:
    """A wheel `<name>-<line>[.N]+<local>-<py tag>-...` for this Python (cpXY or py3) and one of `machines`
    is there: `line` is a release line ('0.29') or an exact release ('0.29.2'); `local` None: one without a
    local label."""
    tag = "cp" + python.replace(".", "")
    label = "" if local is None else rf"\+{re.escape(local)}"
    pattern = re.compile(rf"{re.escape(name)}-{re.escape(line)}(?:\.\d+)*{label}-(?:{tag}|py3)-")
    try:
        return any(pattern.match(entry.name) and for_machines(entry.name, machines) for entry in wheelhouse.iterdir())
    except OSError:
        return False


def wheel_platforms(name: str) -> tuple[str, ...]:
    """The platform tags of a wheel's file name (PEP 427: `...-<platform tag>.whl`, several joined by '.');
    () for a name that is not a wheel's."""
    parts = name.removesuffix(".whl").split("-") if name.endswith(".whl") else []
    return tuple(parts[-1].split(".")) if len(parts) >= 5 else ()


def for_machines(name: str, machines: tuple[str, ...]) -> bool:
    """Whether the wheel `name` installs on a Linux machine of one of `machines` (`x86_64`, `aarch64`): a pure
    wheel (`any`), or a linux, manylinux or musllinux one built for it. An arm64 build that found only x86_64
    wheels would otherwise spend minutes under emulation before pip says it has none."""
    if not machines:
        return True
    linux = ("linux_", "manylinux", "musllinux")
    return any(tag == "any" or (tag.startswith(linux) and tag.endswith(tuple(f"_{m}" for m in machines)))
               for tag in wheel_platforms(name))


def index_url(wheel_index: str, pip_index_url: str | None, pip_extra_index_url: str | None = None,
              from_package_index: bool = False) -> str:
    """The index pip uses inside the image: the mirror when one was given, without credentials."""
    return without_credentials(torch_index(wheel_index, pip_index_url, pip_extra_index_url, from_package_index))


def torch_index(wheel_index: str, pip_index_url: str | None, pip_extra_index_url: str | None,
                from_package_index: bool = False) -> str:
    """Where torch and its companions come from (credentials included): PyTorch's index for `wheel_index`
    (cu132, rocm7.2, cpu) or its --pip-index-url mirror ('{index}' replaced); for a variant whose torch is
    the package index's default wheel (Variant.package_index), the package index or its mirror
    (package_index_mirror)."""
    if from_package_index:
        return package_index_mirror(pip_index_url, pip_extra_index_url)
    return pip_index_url.replace("{index}", wheel_index) if pip_index_url else f"{UPSTREAM_WHEEL_INDEX}/{wheel_index}"


def package_index_note(pip_index_url: str | None, pip_extra_index_url: str | None) -> tuple[str, ...]:
    """What a build of a variant from the package index says when the only mirror given serves PyTorch's
    indexes: its wheels then come from pypi.org, which a firewalled site may not reach."""
    if pip_extra_index_url or not pip_index_url or "{index}" not in pip_index_url:
        return ()
    return (f"torch comes from the package index ({PACKAGE_INDEX}): --pip-index-url with '{{index}}' mirrors"
            " PyTorch's indexes only; give the package index's mirror with --pip-extra-index-url",)


def package_index_mirror(pip_index_url: str | None, pip_extra_index_url: str | None) -> str:
    """The package index a build uses: --pip-extra-index-url (the package index's mirror), else a
    --pip-index-url without '{index}' (a mirror given alone is taken to serve everything), else pypi.org.
    A '{index}' mirror serves PyTorch's indexes, whose cuXY builds are named in their files' local labels;
    it is not a mirror of the package index."""
    if pip_extra_index_url:
        return pip_extra_index_url
    if pip_index_url and "{index}" not in pip_index_url:
        return pip_index_url
    return PACKAGE_INDEX


def without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def package_index(wheel_index: str, pip_index_url: str | None, pip_extra_index_url: str | None) -> str:
    """Where what torch's index lacks (IPython) comes from: --pip-extra-index-url, else the
    --pip-index-url mirror (a mirror given alone is taken to serve everything), else the package index."""
    if pip_extra_index_url:
        return pip_extra_index_url
    if pip_index_url:
        return pip_index_url.replace("{index}", wheel_index)
    return PACKAGE_INDEX


def pip_conf(wheel_index: str | None, pip_index_url: str | None, pip_extra_index_url: str | None = None,
             wheelhouse: bool = False, from_package_index: bool = False) -> bytes | None:
    """/etc/pip.conf for the image, or None where the vendor's base image has its own torch."""
    if wheel_index is None:
        return None
    head = ("# Written by accel-images: pip in the image looks where the build took its packages from.\n"
            "# pip prefers no index over another: PIP_CONSTRAINT pins every installed distribution.\n"
            "# find-links: the build backend, for `pip install .` without a network.\n")
    if wheelhouse:
        return (head + "# Built from a wheelhouse with no index, so none is named here: a `pip install` fails at\n"
                "# once instead of waiting on an index out of reach. To use one at run time:\n"
                "#   docker run -e PIP_NO_INDEX=0 -e PIP_INDEX_URL=https://pypi.example/simple ...\n"
                "[global]\n"
                "no-index = true\n"
                f"find-links = {BUILD_BACKENDS}\n").encode()
    torch_url = index_url(wheel_index, pip_index_url, pip_extra_index_url, from_package_index)
    extra = without_credentials(package_index(wheel_index, pip_index_url, pip_extra_index_url))
    extra_line = f"extra-index-url = {extra}\n" if extra != torch_url and not from_package_index else ""
    return (head + "# Torch's own index first (a later `pip install torchvision` takes the build matching this\n"
            "# torch), the package index the build used after it. To point pip elsewhere at run time:\n"
            "#   docker run -e PIP_INDEX_URL=URL -e PIP_EXTRA_INDEX_URL=URL ...\n"
            "[global]\n"
            f"index-url = {torch_url}\n"
            f"{extra_line}"
            f"find-links = {BUILD_BACKENDS}\n").encode()


def check_wheelhouse(wheelhouse: Path, torch: str, local: str, python: str, target: Target | None = None) -> None:
    """InputError, before any build step, when the wheelhouse lacks this variant's torch or IPython for the
    build's `target` platform.

    pip would say so at the install step, minutes into the build (under emulation, for another platform's
    build); the wheelhouse is read here anyway (for the companions). A directory that cannot be read is
    left to the build context's writer, which names it."""
    target = target or Target()
    try:
        names = sorted(entry.name for entry in wheelhouse.iterdir())
    except OSError:
        return
    tag = "cp" + python.replace(".", "")
    wanted = re.compile(rf"torch-{re.escape(torch)}(\+{re.escape(local)})?-(?:{tag}|py3)-")
    if not any(wanted.match(name) and for_machines(name, target.machines) for name in names):
        found = sorted({_torch_build(name, target.machines) for name in names if name.startswith("torch-")})
        have = f" (it has {', '.join(found)})" if found else " (it has no torch)"
        raise InputError(f"wheelhouse {wheelhouse} has no torch {torch}+{local} for Python {python}{target.on()}{have}",
                         field="--pip-find-links", hint="add it with `pip download`, or choose a torch and Python"
                                                       " it holds (--torch, --python)")
    missing = [tool for tool in TOOLS if not any(name.lower().startswith(f"{tool}-") for name in names)]
    if missing:
        raise InputError(f"wheelhouse {wheelhouse} has no wheel of {' or '.join(missing)}, which every image installs",
                         field="--pip-find-links", hint=f"add it with `pip download {' '.join(missing)}`"
                                                       f" (for Python {python}, with its dependencies)")


def _torch_build(name: str, machines: tuple[str, ...] = ()) -> str:
    """'torch-2.13.0+cpu-cp311-cp311-...whl' -> '2.13.0+cpu for cp311', with ' on <platform tag>' where the wheel
    is for another machine than the build's."""
    parts = name.split("-")
    if len(parts) <= 2:
        return name
    platform = ".".join(wheel_platforms(name)) or "an unknown platform"
    elsewhere = "" if for_machines(name, machines) else f" on {platform}"
    return f"{parts[1]} for {parts[2]}{elsewhere}"
