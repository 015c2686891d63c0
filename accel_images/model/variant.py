"""A variant: one frozen value per image, with every fact later stages need.

A Variant carries the base image, wheel index, driver floor and GPU architectures, resolved once
from the knowledge base (accel_images.plan.variants makes them), so rendering, building,
smoke-testing and publishing never re-derive a fact. Its tag comes from the one tag scheme
(accel_images.model.tags).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accel_images.model import platforms as _platforms
from accel_images.model import tags
from accel_images.model.knowledge import minor_of
from accel_images.versions import newest_first

OS_ORDER = ("debian12", "ubuntu22.04", "ubuntu24.04")
LABEL_PREFIX = "io.accel-images"
GUARD_PATH = "/opt/accel-images/guard.sh"
"""Where every image keeps its guard (accel_images/smoke/guard.sh): the template installs it here."""
TINI = "/usr/bin/tini"
"""PID 1 of every image (templates/partials/python.j2 installs the distribution's package): it reaps zombies and
passes SIGTERM on to the command's process group (-g), so `docker stop` ends a container at once with 143
instead of killing it after 10 s; -s (subreaper) keeps it working, and quiet, where it is not PID 1
(`docker run --init`, Apptainer without --pid, Pyxis). jupyter/docker-stacks start the same way
(images/docker-stacks-foundation/Dockerfile: ENTRYPOINT ["tini", "-g", "--"]) [V]."""
ENTRYPOINT = (TINI, "-s", "-g", "--", GUARD_PATH)
"""The images' ENTRYPOINT (the template writes it from here): runtimes that replace an image's entry point
(a Pod's `command:`, Pyxis) start these words before the command, so the image starts the same way."""


@dataclass(frozen=True, order=True)
class Variant:
    vendor: str
    stack: str | None
    torch: str
    python: str
    os: str
    flavor: str
    base_image: str
    wheel_index: str | None = None
    toolkit: str | None = None
    min_driver: str | None = None
    mvc_driver: str | None = None
    gpu_archs: tuple[str, ...] = ()
    system_python: bool = True
    package_index: bool = False
    """torch, its companions and their libraries come from the package index (pypi.org, or the mirror
    of it, --pip-extra-index-url), whose default wheel is this very build, not from PyTorch's own
    index `wheel_index` (the CUDA images on Debian: accel_images/data/vendors/cuda.yaml package_index)."""
    line: int = 0
    platform: str = _platforms.DEFAULT
    """The platform this value describes (its image is one manifest of the tag's index)."""
    platforms: tuple[str, ...] = (_platforms.DEFAULT,)
    """Every platform the tag serves: the manifests of its image index, in listing order."""

    @property
    def tag(self) -> str:
        return tags.full_tag(self)

    @property
    def torch_minor(self) -> str:
        return minor_of(self.torch)

    @property
    def key(self) -> str:
        """`<vendor>/<tag>`: the variant's directory under images/ and its id in reports; a platform
        other than the default adds `@<platform>` (`cpu/2.14.1-cpu-py3.11-debian12@linux/arm64`)."""
        where = "" if self.platform == _platforms.DEFAULT else f"@{self.platform}"
        return f"{self.vendor}/{self.tag}{where}"

    @property
    def local_tag(self) -> str:
        """The tag of this platform's image on the build host: an engine without a multi-platform
        image store holds one image per name, so a platform other than the default gets its own
        (`<tag>-arm64`); the registry's tag is always `tag`, an index of every platform."""
        return self.tag + _platforms.suffix(self.platform)

    @property
    def multi_platform(self) -> bool:
        """Whether the tag is (or is part of) an index of several platforms, or of a platform other
        than the default: its builds then name their base by the platform's own digest."""
        return len(self.platforms) > 1 or self.platform != _platforms.DEFAULT

    def labels(self) -> dict[str, str]:
        """Project labels: what the image promises, read back by smoke, nightly and recommend."""
        labels = {
            "vendor": self.vendor,
            "stack": self.stack or "",
            "torch": self.torch,
            "python": self.python,
            "os": self.os,
            "flavor": self.flavor,
            "tag": self.tag,
            "min-driver": self.min_driver or "",
            "mvc-driver": self.mvc_driver or "",
            "gpu-archs": ",".join(self.gpu_archs),
        }
        return {f"{LABEL_PREFIX}.{k}": v for k, v in labels.items()}

    def sort_key(self) -> tuple[Any, ...]:
        """Newest first within a vendor: torch, stack, python, os, runtime before devel (the order
        across vendors is the registry's: accel_images.plan.variants.listing_order)."""
        return (newest_first(self.torch), newest_first(self.stack),
                newest_first(self.python),
                -OS_ORDER.index(self.os) if self.os in OS_ORDER else 0, self.flavor != "runtime",
                _platforms.rank(self.platform))
