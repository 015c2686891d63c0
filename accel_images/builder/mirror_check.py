"""A `--registry-mirror` key must name a registry some base image of the matrix comes from.

`--registry-mirror dockerhub=mirror.example.com` (instead of `docker.io=`) matches no image, so
every base would still be pulled from its upstream registry: in an air-gapped site that is the
very failure the mirror was meant to avoid, found minutes later as "docker.io unreachable". It
is refused up front instead (bad input, exit 2), with the registries the matrix's bases come
from. The whole matrix counts, not only the variants a filter chose, so one mirror list serves
every `--vendor` of a CI job.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from accel_images.errors import InputError
from accel_images.model.reference import Mirror, split_reference
from accel_images.model.variant import Variant

DOCKER_HUB_ALIASES = ("dockerhub", "docker.com", "hub.docker.com", "index.docker.io", "registry-1.docker.io",
                      "registry.hub.docker.com", "docker")
"""What people write for Docker Hub; image references name it docker.io (docker's own default)."""


def base_registries(variants: Iterable[Variant]) -> tuple[str, ...]:
    """The registries the variants' base images are pulled from, sorted."""
    return tuple(sorted({split_reference(variant.base_image)[0] for variant in variants}))


def check_mirrors(mirrors: Iterable[Mirror], variants: Iterable[Variant]) -> None:
    """InputError for the first mirror whose registry no base image comes from."""
    registries = base_registries(variants)
    for mirror in mirrors:
        if mirror.registry in registries:
            continue
        close = ["docker.io"] if mirror.registry.lower() in DOCKER_HUB_ALIASES else \
            difflib.get_close_matches(mirror.registry, registries, n=1, cutoff=0.6)
        guess = f"; did you mean {close[0]}={mirror.prefix}?" if close else ""
        raise InputError(f"'{mirror.registry}' matches no base image of the matrix (base images come from:"
                         f" {', '.join(registries) or 'none'}){guess}", field="--registry-mirror")
