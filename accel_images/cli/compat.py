"""`accel-images compat`: ask the knowledge base whether a version combination exists."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from accel_images import vendors
from accel_images.kb import compat
from accel_images.model.knowledge import Unverified
from accel_images.cli.options import expected_failures


@click.command("compat")
@click.argument("terms", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.option("--experimental-python", is_flag=True, help="Accept Python versions a release supports experimentally.")
@expected_failures
def compat_command(terms: tuple[str, ...], as_json: bool, experimental_python: bool) -> None:
    """Check a version combination: `compat torch==2.4.1 cuda==12.4 [python==3.11]`.

    With only torch, lists every stack with a build for it; with only a stack, the torch
    versions built for it. Exit 0 when compatible, 1 when not, 2 for a malformed query.

    \b
    Example:
      accel-images compat torch==2.4.1 cuda==12.4 python==3.11
    """
    query = compat.parse_query(terms)
    verdict = compat.load_kb().check(query, experimental_python=experimental_python)
    if as_json:
        click.echo(json.dumps({"query": dict(query), "compatible": verdict.ok, "unknown": verdict.unknown,
                               "unverified": unverified(verdict), "reasons": list(verdict.reasons), **verdict.details},
                              indent=2, sort_keys=True))
    else:
        click.echo(describe_verdict(verdict))
    sys.exit(verdict.exit_code)


def unverified(verdict: compat.Verdict) -> bool:
    """The answer rests on a fact the knowledge base marks for a person to fill (`kb update`)."""
    return verdict.unknown and any(isinstance(reason, Unverified) for reason in verdict.reasons)


def describe_verdict(verdict: compat.Verdict) -> str:
    asked = " ".join(f"{k}=={v}" if v else k for k, v in verdict.query.items())
    if verdict.unknown:
        return f"{'unverified' if unverified(verdict) else 'unknown'}: {asked}: {'; '.join(verdict.reasons)}"
    if not verdict.ok:
        alternatives = verdict.details.get("alternatives", {})
        hint = ""
        if alternatives.get("stacks"):
            hint = f" (builds for this torch: {', '.join(alternatives['stacks'])})"
        return f"incompatible: {asked}: {'; '.join(verdict.reasons)}{hint}"
    details = dict(verdict.details)
    if "builds" in details:
        builds = "; ".join(f"{vendor}: {', '.join(stacks) or 'none'}" for vendor, stacks in details["builds"].items())
        return (f"torch {details['torch']} (Python {details['python'][0]}-{details['python'][-1]}): {builds}\n"
                f"source: {details['source']}")
    if list(details) == ["torch"]:
        return f"{asked}: torch {', '.join(details['torch'])}"
    return "\n".join([f"compatible: {asked}", *detail_lines(details)])


FIELD_LABELS = {"torch": "torch", "python": "python", "oneapi": "oneAPI", "toolkit": "toolkit",
                "wheel_index": "wheel index", "driver_min": "minimum driver", "mvc_floor": "minor-version floor",
                "gpu_archs": "GPU architectures", "source": "source"}
"""How the text names each field of the JSON answer, in the order it shows them (a vendor's stack
field, `cuda`, is named by the vendor: `CUDA`, and shown after python)."""


def detail_labels() -> dict[str, str]:
    """FIELD_LABELS with every vendor's stack field in its place."""
    stacks = {v.name: v.stack_name for v in vendors.registry().values() if v.stack_name}
    return {"torch": "torch", "python": "python", **stacks, **FIELD_LABELS}


NOT_RECORDED = "not recorded in the knowledge base (its sources do not state them)"


def detail_lines(details: dict[str, Any]) -> list[str]:
    """Every field of the JSON answer, one labelled line each, so the text and `--json` say the same."""
    labels = detail_labels()
    order = [*(key for key in labels if key in details and key != "source"),
             *sorted(set(details) - set(labels)), *(["source"] if "source" in details else [])]
    width = max(len(labels.get(key, key)) for key in order)
    return [f"  {labels.get(key, key) + ':':<{width + 1}} {detail_text(details[key])}" for key in order]


def detail_text(value: Any) -> str:
    if value is None:
        return NOT_RECORDED
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
