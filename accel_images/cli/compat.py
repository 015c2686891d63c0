"""`accel-images compat`: ask the knowledge base whether a version combination exists."""

from __future__ import annotations

import json
import sys

import click

from accel_images import compat
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
    return verdict.unknown and any(isinstance(reason, compat.Unverified) for reason in verdict.reasons)


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
    shown = ", ".join(f"{k} {', '.join(v) if isinstance(v, list) else v}" for k, v in sorted(details.items())
                      if k not in ("source",) and v not in (None, [], ""))
    return f"compatible: {asked}\n  {shown}\n  source: {details.get('source', '')}"
