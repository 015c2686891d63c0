"""Handing the fan-out to engines that exist: a GitHub Actions job matrix and a docker-bake.json.

A nightly rebuild of every variant does not fit on one machine, and each vendor's smoke test needs
that vendor's hardware. `ci_matrix` describes one CI job per variant and platform, on a runner of
that architecture with the right labels; `bake` describes every tag as a target of `docker buildx
bake` for a BuildKit cluster, with the platforms of its image index.
Both read the rendered build contexts under images/<vendor>/<tag>/, which `render --check` keeps
true in CI.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from accel_images import vendors
from accel_images.model import platforms as platform_names
from accel_images.model import tags
from accel_images.builder.settings import BuildSettings, build_args
from accel_images.errors import InputError
from accel_images.model.reference import image_ref
from accel_images.plan.variants import Expansion, one_per_tag
from accel_images.model.variant import Variant

IMAGES_DIR = "images"
DOCKERFILE = "Dockerfile"

MAX_MATRIX_JOBS = 256
"""GitHub Actions: "A matrix can generate a maximum of 256 jobs per workflow run"."""

CPU_RUNNER_LABELS = ("ubuntu-latest",)
"""Where a variant whose vendor names no runner of its own runs: a hosted runner."""
HOSTED_RUNNER_LABELS = {"linux/arm64": ("ubuntu-24.04-arm",)}
"""GitHub's hosted runners by platform where it is not x86_64: `ubuntu-24.04-arm` (Linux arm64 hosted
runners, free for public repositories since 2025-01-16: github.blog changelog, O; not yet for private
ones, swiftlang/github-workflows#209, O)."""
ARCHITECTURE_LABELS = {"linux/amd64": "x64", "linux/arm64": "ARM64"}
"""The architecture label GitHub gives every self-hosted runner (`self-hosted`, the OS, then `x64`,
`ARM` or `ARM64`: docs.github.com "Using labels with self-hosted runners", V). A vendor names its
accelerator runner for x86_64; the same labels with ARM64 select its arm64 machine (a GH200)."""

_BAKE_TARGET_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")  # buildx bake: validTargetNameChars


def runner_labels(vendor: str, platform: str = platform_names.DEFAULT) -> tuple[str, ...]:
    """Where a variant's job runs: build, smoke test and push share one Docker engine, so an
    accelerator variant runs wholly on its GPU runner (moving a 5-25 GB image between runners would
    cost more than building it there); CPU variants run on a hosted runner. A platform other than
    x86_64 runs on a machine of its own architecture: the vendor's labels with that architecture
    label, or GitHub's hosted arm64 runner."""
    labels = vendors.get(vendor).runner_labels
    if not labels:
        return HOSTED_RUNNER_LABELS.get(platform, CPU_RUNNER_LABELS)
    if platform == platform_names.DEFAULT:
        return labels
    native, wanted = ARCHITECTURE_LABELS[platform_names.DEFAULT], ARCHITECTURE_LABELS.get(platform)
    if wanted is None:
        raise InputError(f"no runner label is known for {platform}")
    return tuple(wanted if label == native else label for label in labels) + (
        () if native in labels else (wanted,))


def context_dir(variant: Variant) -> str:
    return f"{IMAGES_DIR}/{variant.vendor}/{variant.tag}"


def cli_filters(variant: Variant) -> str:
    """The `accel-images` filters that select exactly this variant: its tag is made of six, and the
    platform picks one image of the tag's index."""
    pairs = [("vendor", variant.vendor), ("stack", variant.stack), ("torch", variant.torch),
             ("python", variant.python), ("os", variant.os), ("flavor", variant.flavor),
             ("platform", variant.platform)]
    return shlex.join([part for key, value in pairs if value for part in (f"--{key}", value)])


def ci_matrix(variants: Sequence[Variant], image: str) -> dict[str, Any]:
    """A GitHub Actions `strategy.matrix` with one `include` entry per variant and platform.

    `runner` is what `runs-on` takes (a machine of the platform's architecture); `gpu_runner` the
    accelerator's labels (empty for CPU), so a workflow can tell which jobs must find a device
    (`--require-accelerator`); `filters` selects the variant and platform in any `accel-images`
    command; `job` names it in places that take no `/` (artifact names).
    """
    if len(variants) > MAX_MATRIX_JOBS:
        raise InputError(f"{len(variants)} variants exceed GitHub's {MAX_MATRIX_JOBS} jobs per matrix",
                         hint="split the run with filters, e.g. one workflow job per --vendor")
    return {"include": [_matrix_entry(v, image) for v in variants]}


def _matrix_entry(variant: Variant, image: str) -> dict[str, Any]:
    gpu = runner_labels(variant.vendor, variant.platform) if vendors.get(variant.vendor).runner_labels else ()
    return {
        "variant": variant.key, "vendor": variant.vendor, "stack": variant.stack or "",
        "torch": variant.torch, "python": variant.python, "os": variant.os, "flavor": variant.flavor,
        "platform": variant.platform, "tag": variant.tag, "job": variant.local_tag,
        "image": image_ref(image, variant.tag), "context": context_dir(variant),
        "filters": cli_filters(variant), "runner": list(runner_labels(variant.vendor, variant.platform)),
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
    for variant in one_per_tag(variants):
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
    labels = {key: value for key, value in variant.labels().items()
              if all(other.labels().get(key) == value for other in expansion.variants if other.tag == variant.tag)}
    return {
        "context": context_dir(variant),
        "dockerfile": DOCKERFILE,
        "tags": [image_ref(expansion.image, name, registry) for name in names],
        "labels": labels,  # what every platform shares; the Dockerfile's platform stages set the rest
        "args": build_args(variant, expansion, settings),
        "platforms": list(variant.platforms),  # one tag, one image index; BuildKit sets TARGETARCH for each
    }
