"""Which matrix values the knowledge base knows: a value it does not know is a typo, not a prune.

Expanding a group crosses its axes and prunes the combinations the knowledge base rules out
(`cuda 12.4` for torch 2.14, `debian12` for CUDA): those are facts, and `list --explain` shows
each with its reason. A value the knowledge base has never heard of (`debain12`, `devle`,
`torch 2.41`, `python 3.21`) would be pruned the same way, every combination it is part of
silently dropped, and the run would exit 0. So before expanding, every value of every group is
checked against what the knowledge base knows for its vendor; the first unknown one is an
InputError naming file, line and field, with the values it knows (and the closest one).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from accel_images import vendors
from accel_images.kb.compat import KnowledgeBase
from accel_images.errors import InputError
from accel_images.plan.matrix import AxisValue, Matrix
from accel_images.model.knowledge import minor_of, version_matches
from accel_images.versions import sort_versions


@dataclass(frozen=True)
class Known:
    """What the knowledge base knows of each axis, for one vendor."""

    stacks: tuple[str, ...]
    torch: tuple[str, ...]              # torch minors, oldest first
    torch_releases: frozenset[str]      # every released version of those minors
    python: tuple[str, ...]
    os: tuple[str, ...]
    flavors: tuple[str, ...]


def known_values(kb: KnowledgeBase, vendor: str) -> Known:
    """The values a matrix may use for `vendor`; some combinations of them are still pruned."""
    vendor_module = vendors.get(vendor)
    minors = kb.torch_minors()
    stacks = {build for minor in minors for build in vendor_module.stacks(kb, minor)}
    pythons = {p for row in kb.torch.values() for p in (*row.python, *row.python_experimental)}
    pythons |= {p for info in kb.os.values() for p in info.pythons()}
    flavors: list[str] = []
    for section in kb.sections.values():  # every flavor any vendor builds: `runtime` for gaudi is a prune
        flavors += [flavor for flavor in section.rules.flavors if flavor not in flavors]
    return Known(stacks=tuple(sort_versions(stacks)), torch=tuple(minors),
                 torch_releases=frozenset(v for row in kb.torch.values() for v in row.versions),
                 python=tuple(sort_versions(pythons)), os=tuple(kb.os), flavors=tuple(flavors))


def unknown_value(kb: KnowledgeBase, vendor: str, axis: str, value: str, known: Known | None = None) -> str | None:
    """Why the knowledge base does not know `value` on `axis` for `vendor`; None when it does."""
    known = known or known_values(kb, vendor)
    if axis == "torch":
        return _unknown_torch(kb, known, value)
    if axis == "platform":
        return None if value in kb.platforms else _message("platform", value, tuple(kb.platforms), guess=True)
    if axis == "stack":
        if any(version_matches(value, build) for build in known.stacks):
            return None
        name = vendors.get(vendor).stack_name
        return _message(f"{name} version", value, known.stacks, guess=False)
    choices = {"python": known.python, "os": known.os, "flavor": known.flavors}[axis]
    if value in choices:
        return None
    what = {"python": "Python version", "os": "OS", "flavor": "flavor"}[axis]
    return _message(what, value, choices, guess=axis != "python")


def _unknown_torch(kb: KnowledgeBase, known: Known, value: str) -> str | None:
    if value in known.torch or value in known.torch_releases:
        return None
    row = kb.torch.get(minor_of(value))
    if row is not None:
        return (f"unknown torch version '{value}' (the knowledge base knows torch {row.minor} releases:"
                f" {', '.join(row.versions)})")
    return _message("torch version", value, known.torch, guess=False)


def _message(what: str, value: str, choices: tuple[str, ...], *, guess: bool) -> str:
    """The value, what is known, and for names the closest known one (`debain12`: debian12).

    Versions get no guess: '2.41' is as close to 2.4 as to 2.14, and a wrong guess misleads.
    """
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6) if guess else []
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown {what} '{value}' (the knowledge base knows: {', '.join(choices)}){hint}"


def check_known(matrix: Matrix, kb: KnowledgeBase) -> None:
    """Raise InputError at the first value of the matrix the knowledge base does not know."""
    known: dict[str, Known] = {}
    for group in matrix.groups:
        if group.vendor not in known:
            known[group.vendor] = known_values(kb, group.vendor)
        for written in group.values:
            reason = unknown_value(kb, group.vendor, written.axis, written.value, known[group.vendor])
            if reason:
                raise _error(matrix, written, reason)


def _error(matrix: Matrix, written: AxisValue, reason: str) -> InputError:
    return InputError(reason, file=matrix.file, line=written.line or None, field=written.field)
