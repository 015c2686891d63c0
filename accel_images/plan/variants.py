"""Expanding the matrix into variants: every group's axes crossed, checked by the compat rules.

What the knowledge base allows becomes a Variant (accel_images.model.variant) with every derived
fact resolved once; what it rules out is kept as a Pruned value with its reasons, so `list
--explain` can say why. Selection by the CLI's filters, and its explanations, live here too.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any
from collections.abc import Iterable, Mapping

from accel_images import vendors
from accel_images.errors import IncompatibleError, InputError
from accel_images.kb.compat import KnowledgeBase
from accel_images.model import platforms as platform_names
from accel_images.model.knowledge import Combo
from accel_images.model.variant import Variant
from accel_images.plan.matrix import Group, Matrix, User, load_matrix
from accel_images.resources import default_matrix

def listing_order(variant: Variant) -> tuple[Any, ...]:
    """Vendors in the registry's order, then newest first within each (Variant.sort_key)."""
    return (vendors.rank(variant.vendor), *variant.sort_key())


@dataclass(frozen=True)
class Pruned:
    """A combination the matrix asked for that cannot work, and why."""

    vendor: str
    stack: str | None
    torch: str
    python: str
    os: str
    flavor: str
    reasons: tuple[str, ...]
    line: int
    platform: str = ""
    """The platform the reasons are about; '' when the combination works on none."""

    def describe(self) -> str:
        stack = f"{self.vendor} {self.stack}" if self.stack else self.vendor
        where = f" {self.platform}" if self.platform else ""
        return (f"{stack} torch {self.torch} py{self.python} {self.os} {self.flavor}{where}: "
                + "; ".join(self.reasons))


@dataclass(frozen=True)
class Expansion:
    variants: tuple[Variant, ...]
    pruned: tuple[Pruned, ...]
    image: str
    user: User


def expand(matrix: Matrix, kb: KnowledgeBase) -> Expansion:
    """Cross every group's axes, keep what the knowledge base allows, explain the rest.

    A value the knowledge base does not know at all is an error first (accel_images.plan.known):
    only what it knows and rules out is pruned.
    """
    from accel_images.plan.known import check_known  # known imports matrix and compat, as this module does
    check_known(matrix, kb)
    variants: dict[tuple[str, str], Variant] = {}
    pruned: list[Pruned] = []
    for group in matrix.groups:
        for combo in _combinations(group):
            reasons = kb.why_not(*combo, experimental_python=group.experimental_python)
            if reasons:
                if group.explicit:
                    raise InputError("; ".join(reasons), file=matrix.file, line=group.line,
                                     field=f"vendors.{group.vendor}")
                pruned.append(Pruned(*combo, tuple(reasons), group.line))
                continue
            for platform in group.platforms:
                reasons = kb.why_not_on(platform, *combo)
                if reasons:
                    pruned.append(Pruned(*combo, tuple(reasons), group.line, platform))
                    continue
                variant = make_variant(kb, *combo, line=group.line, platform=platform)
                variants.setdefault((variant.tag, platform), variant)
    return Expansion(_with_platforms(variants.values()), tuple(pruned), matrix.image, matrix.user)


def _with_platforms(variants: Iterable[Variant]) -> tuple[Variant, ...]:
    """Every variant knowing all the platforms of its tag (the manifests of its index), in listing order."""
    found: dict[str, list[str]] = {}
    for variant in variants:
        found.setdefault(variant.tag, []).append(variant.platform)
    return tuple(sorted((replace(v, platforms=platform_names.sort(found[v.tag])) for v in variants),
                        key=listing_order))


def by_tag(variants: Iterable[Variant]) -> list[tuple[Variant, ...]]:
    """The variants grouped by tag (one image index each), in the order their tags first come."""
    groups: dict[str, list[Variant]] = {}
    for variant in variants:
        groups.setdefault(variant.tag, []).append(variant)
    return [tuple(group) for group in groups.values()]


def one_per_tag(variants: Iterable[Variant]) -> tuple[Variant, ...]:
    """The first variant of each tag: what is the same on every platform (the tag, its Dockerfile)."""
    return tuple(group[0] for group in by_tag(variants))


def _combinations(group: Group) -> Iterable[tuple[str, str | None, str, str, str, str]]:
    for stack, torch, python, os, flavor in itertools.product(
            group.stacks, group.torch, group.python, group.os, group.flavors):
        yield group.vendor, stack, torch, python, os, flavor


def make_variant(kb: KnowledgeBase, vendor: str, stack: str | None, torch: str, python: str,
                 os: str, flavor: str, line: int = 0, platform: str = platform_names.DEFAULT) -> Variant:
    """Resolve one allowed combination, on one platform, into a Variant with every derived fact filled in."""
    facts = vendors.get(vendor).resolve(kb, Combo(vendor, stack, torch, python, os, flavor, platform))
    return Variant(
        vendor=vendor, stack=facts.stack, torch=facts.torch, python=python, os=os, flavor=flavor,
        base_image=facts.base_image, wheel_index=facts.wheel_index, toolkit=facts.toolkit,
        min_driver=facts.min_driver, mvc_driver=facts.mvc_driver, gpu_archs=facts.gpu_archs,
        package_index=facts.package_index, system_python=python == kb.os[os].python, line=line, platform=platform,
        platforms=(platform,))


def select(variants: Iterable[Variant], filters: Mapping[str, str | None]) -> tuple[Variant, ...]:
    """Variants matching every given filter (torch by minor or full version, stack by prefix)."""
    def keep(v: Variant) -> bool:
        for key, wanted in filters.items():
            if wanted is None:
                continue
            value = {"vendor": v.vendor, "stack": v.stack or "", "torch": v.torch, "python": v.python,
                     "os": v.os, "flavor": v.flavor, "tag": v.tag, "platform": v.platform}[key]
            if not (value == wanted or (key in ("torch", "stack") and value.startswith(wanted + "."))):
                return False
        return True
    return tuple(v for v in variants if keep(v))


def newest_per_vendor(variants: Iterable[Variant]) -> tuple[Variant, ...]:
    """One variant per vendor, the one a newcomer wants: runtime flavor where the vendor has it, then the
    newest by sort_key (torch, stack, Python, OS): the variant that `latest-<vendor>` names."""
    best: dict[str, Variant] = {}
    for variant in sorted(variants, key=lambda v: (v.flavor != "runtime", v.sort_key())):
        best.setdefault(variant.vendor, variant)
    return tuple(sorted(best.values(), key=listing_order))


def select_or_explain(expansion: Expansion, filters: Mapping[str, str | None]) -> tuple[Variant, ...]:
    """Like select(), but an empty result is an error that says why (pruned, or not in the matrix)."""
    chosen = select(expansion.variants, filters)
    if chosen:
        return chosen
    given = " ".join(f"--{k} {v}" for k, v in filters.items() if v is not None)
    pruned = select_pruned(expansion.pruned, filters)
    if pruned:
        raise IncompatibleError(f"{given}: {pruned[0].describe()}")
    key, before, have = _first_empty_filter(expansion.variants, filters)
    scope = f" with {before}" if before else ""
    raise InputError(f"no variant in the matrix matches {given} ({key} values in the matrix{scope}:"
                     f" {', '.join(have) or 'none'})", field=f"--{key}")


def _first_empty_filter(variants: tuple[Variant, ...],
                        filters: Mapping[str, str | None]) -> tuple[str, str, list[str]]:
    """The filter that narrows the variants to nothing, the filters before it, and its possible values."""
    narrowed, before = variants, list[str]()
    for key, wanted in filters.items():
        if wanted is None:
            continue
        kept = select(narrowed, {key: wanted})
        if not kept:
            return key, " ".join(before), sorted({getattr(v, key) or "" for v in narrowed}, key=str)
        narrowed = kept
        before.append(f"--{key} {wanted}")
    return "vendor", "", []


def select_pruned(pruned: Iterable[Pruned], filters: Mapping[str, str | None]) -> tuple[Pruned, ...]:
    """The pruned combinations the filters speak of: `list --vendor gaudi --explain` explains gaudi's only."""
    return tuple(p for p in pruned if _pruned_matches(p, filters))


def _pruned_matches(p: Pruned, filters: Mapping[str, str | None]) -> bool:
    for key, wanted in filters.items():
        if wanted is None or key == "tag" or (key == "platform" and not p.platform):
            continue  # a combination pruned whatever the platform concerns every platform
        value = getattr(p, key) or ""
        if not (value == wanted or value.startswith(wanted + ".") or wanted.startswith(value + ".")):
            return False
    return True


def matrix_images(matrix_path: str | None, kb: KnowledgeBase) -> list[str]:
    """The base images the matrix's variants are built on (what must keep existing)."""
    expansion = expand(load_matrix(default_matrix() if matrix_path is None else matrix_path), kb)
    return sorted({v.base_image for v in expansion.variants})
