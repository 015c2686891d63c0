"""The knowledge base's predictions for a variant, checked against what its built image holds.

The knowledge base says what a variant's image will hold before it is built (which torch, Python,
backend, companions, toolkit, GPU architectures), so the matrix can be pruned and `recommend
--from-matrix` can answer. Once built, the image's own torch says what it holds
(/opt/accel-images/facts.json, accel_images/smoke/facts.py): where the two disagree, the table is
wrong, and the build fails naming the row to fix, so a wrong table is caught at the first build and
not on a user's host. The rows every vendor shares are made here; each vendor adds its own
(`facts_claims`), replacing a shared one with the same key where its section decides it (Gaudi's
torch and Python come from its release row). One shared row is the vendor's module, not its section:
the collective library the image's facts name (`network.collective`) against the one the vendor
declares (`Vendor.collective`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from accel_images import vendors
from accel_images.kb.compat import DATA_FILE
from accel_images.model.imagefacts import Claim, ImageFacts, kb_row
from accel_images.model.knowledge import Knowledge
from accel_images.model.variant import Variant
from accel_images.vendors.base import Vendor

__all__ = ["claims", "collective_claims", "contradiction", "contradictions"]


def shared_claims(kb: Knowledge, variant: Variant, facts: ImageFacts, companions: Sequence[str]) -> list[Claim]:
    """torch (kb.yaml `torch`), Python (the OS row), backend (the vendor's wheel index), the machine
    (kb.yaml `platforms`: what `uname -m` says on the variant's platform) and each companion the build
    installed (kb.yaml `companions`)."""
    vendor = vendors.get(variant.vendor)
    row = kb.release(variant.torch)
    os_info = kb.os.get(variant.os)
    python_key = "python" if os_info is None or variant.python == os_info.python else "extra_python"
    index_row = ("rules", "index") if kb.section(variant.vendor).rules.index else ("builds", row.minor)
    found = [
        Claim("torch", kb_row(DATA_FILE, "torch", row.minor, "versions"), variant.torch, facts.public, "release"),
        Claim("python", kb_row(DATA_FILE, "os", variant.os, python_key), variant.python, facts.python, "release"),
        Claim("backend", kb_row(vendor.kb_file, *index_row), vendor.smoke_backend, facts.backend),
    ]
    found += collective_claims(vendor, facts)
    platform = kb.platforms.get(variant.platform)
    if platform is not None:
        # An image built for another platform than its variant's (a base pulled for the wrong
        # architecture, an emulated build gone astray) would pass every other claim, and a CUDA arch
        # check would be held to the wrong platform's row: its machine says which it is.
        found.append(Claim("machine", kb_row(DATA_FILE, "platforms", variant.platform, "machines"),
                           platform.machines[0], facts.platform.get("machine") or None))
    found += [Claim(f"companion:{name}", kb_row(DATA_FILE, "torch", row.minor, "companions", name),
                    row.companions[name], facts.companions.get(name, ""), "release")
              for name in companions if name in row.companions]
    return found


def collective_claims(vendor: Vendor, facts: ImageFacts) -> list[Claim]:
    """The collective library the vendor declares (`Vendor.collective.library`: rccl for ROCm) against the one the
    image's facts name; none for a vendor that declares none. The row is the vendor's own module, where a new vendor
    declares it: facts reach the collective through the vendor, not through a table of vendors."""
    if vendor.collective is None:
        return []
    network = facts.network or {}
    measured = network.get("collective") or {}
    row = kb_row(_module_file(vendor), "VENDOR", "collective", "library")
    return [Claim("collective", row, vendor.collective.library,
                  measured.get("name") if isinstance(measured, dict) else None)]


def _module_file(vendor: Vendor) -> Path:
    """The file of the module defining the vendor's class, where its `collective=` is written; the module's name
    where it has no file."""
    name = type(vendor).__module__
    file = getattr(sys.modules.get(name), "__file__", None)
    return Path(file) if file else Path(name)


def claims(kb: Knowledge, variant: Variant, facts: ImageFacts, companions: Sequence[str] = ()) -> list[Claim]:
    """Every prediction the knowledge base makes for the variant's image, beside what the image measured.

    `companions` are those the build installed (the render's plan, which leaves out what the user
    asked to leave out): only they are claimed.
    """
    own = vendors.get(variant.vendor).facts_claims(kb, variant, facts)
    replaced = {claim.key for claim in own}
    return [claim for claim in shared_claims(kb, variant, facts, companions) if claim.key not in replaced] + own


def contradictions(kb: Knowledge, variant: Variant, facts: ImageFacts, companions: Sequence[str] = ()) -> list[Claim]:
    return [claim for claim in claims(kb, variant, facts, companions) if claim.contradicted]


def contradiction(kb: Knowledge, variant: Variant, facts: ImageFacts, companions: Sequence[str] = ()) -> str | None:
    """One line naming the first knowledge-base row the image contradicts, and what the image has;
    None when the image holds what the knowledge base predicts."""
    found = contradictions(kb, variant, facts, companions)
    if not found:
        return None
    more = f" (and {len(found) - 1} more: {', '.join(claim.key for claim in found[1:])})" if len(found) > 1 else ""
    return f"the image's facts contradict the knowledge base: {found[0].line()}{more}"
