"""Handing the fan-out to engines that exist: a GitHub Actions job matrix and a docker-bake.json.

A nightly rebuild of every variant does not fit on one machine, and each vendor's smoke test needs
that vendor's hardware. `ci_matrix` describes one CI job per variant, on a runner with the right
labels; `bake` describes every variant as a target of `docker buildx bake` for a BuildKit cluster.
Both read the rendered build contexts under images/<vendor>/<tag>/, which `render --check` keeps
true in CI.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from accel_images import vendors
from accel_images.model import tags
from accel_images.build.settings import BuildSettings, build_args
from accel_images.errors import InputError
from accel_images.model.reference import image_ref
from accel_images.plan.variants import Expansion
from accel_images.model.variant import Variant

IMAGES_DIR = "images"
DOCKERFILE = "Dockerfile"
PLATFORMS = ("linux/amd64",)
"""The wheels the images install (torch x86_64 manylinux, Gaudi's installer images) are x86_64."""

MAX_MATRIX_JOBS = 256
"""GitHub Actions: "A matrix can generate a maximum of 256 jobs per workflow run"."""

CPU_RUNNER_LABELS = ("ubuntu-latest",)
"""Where a variant whose vendor names no runner of its own runs: a hosted runner."""

_BAKE_TARGET_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")  # buildx bake: validTargetNameChars


def runner_labels(vendor: str) -> tuple[str, ...]:
    """Where a variant's job runs: build, smoke test and push share one Docker engine, so an
    accelerator variant runs wholly on its GPU runner (moving a 5-25 GB image between runners would
    cost more than building it there); CPU variants run on a hosted runner."""
    return vendors.get(vendor).runner_labels or CPU_RUNNER_LABELS


def context_dir(variant: Variant) -> str:
    return f"{IMAGES_DIR}/{variant.vendor}/{variant.tag}"


def cli_filters(variant: Variant) -> str:
    """The `accel-images` filters that select exactly this variant: its tag is made of these six."""
    pairs = [("vendor", variant.vendor), ("stack", variant.stack), ("torch", variant.torch),
             ("python", variant.python), ("os", variant.os), ("flavor", variant.flavor)]
    return shlex.join([part for key, value in pairs if value for part in (f"--{key}", value)])


def ci_matrix(variants: Sequence[Variant], image: str) -> dict[str, Any]:
    """A GitHub Actions `strategy.matrix` with one `include` entry per variant.

    `runner` is what `runs-on` takes; `gpu_runner` the accelerator's labels (empty for CPU), so a
    workflow can tell which jobs must find a device (`--require-accelerator`); `filters` selects the
    variant in any `accel-images` command.
    """
    if len(variants) > MAX_MATRIX_JOBS:
        raise InputError(f"{len(variants)} variants exceed GitHub's {MAX_MATRIX_JOBS} jobs per matrix",
                         hint="split the run with filters, e.g. one workflow job per --vendor")
    return {"include": [_matrix_entry(v, image) for v in variants]}


def _matrix_entry(variant: Variant, image: str) -> dict[str, Any]:
    gpu = vendors.get(variant.vendor).runner_labels
    return {
        "variant": variant.key, "vendor": variant.vendor, "stack": variant.stack or "",
        "torch": variant.torch, "python": variant.python, "os": variant.os, "flavor": variant.flavor,
        "tag": variant.tag, "image": image_ref(image, variant.tag), "context": context_dir(variant),
        "filters": cli_filters(variant), "runner": list(runner_labels(variant.vendor)),
        "gpu_runner": list(gpu), "accelerator": bool(gpu),
    }


def bake_target_name(variant: Variant) -> str:
    """A bake target name ([a-zA-Z0-9_-]) from the tag, which already names the vendor."""
    name = variant.tag.replace(".", "_")
    if not _BAKE_TARGET_NAME.match(name):
        raise InputError(f"tag {variant.tag!r} gives no valid bake target name")
    return name


def bake(variants: Sequence[Variant], expansion: Expansion, registry: str | None = None,
         settings: BuildSettings | None = None) -> dict[str, Any]:
    """A docker-bake.json definition: one target per variant, a group per vendor, `default` for all.

    Takes the expansion rather than the bare image name because it also carries the user the build
    args name and the full variant set: a floating alias (`latest-cuda`) belongs to the newest
    variant of the whole matrix, even when `variants` is a filtered part of it.
    """
    settings = settings or BuildSettings()
    targets: dict[str, Any] = {}
    groups: dict[str, list[str]] = {}
    for variant in variants:
        name = bake_target_name(variant)
        if name in targets:
            raise InputError(f"two variants share the bake target name {name!r}")
        targets[name] = _bake_target(variant, expansion, registry, settings)
        groups.setdefault(variant.vendor, []).append(name)
    group = {"default": {"targets": list(targets)}}
    group.update({vendor: {"targets": names} for vendor, names in groups.items()})
    return {"group": group, "target": targets}


def _bake_target(variant: Variant, expansion: Expansion, registry: str | None,
                 settings: BuildSettings) -> dict[str, Any]:
    names = (variant.tag, *tags.aliases_of(variant, expansion.variants))
    return {
        "context": context_dir(variant),
        "dockerfile": DOCKERFILE,
        "tags": [image_ref(expansion.image, name, registry) for name in names],
        "labels": variant.labels(),
        "args": build_args(variant, expansion, settings),
        "platforms": list(PLATFORMS),
    }
