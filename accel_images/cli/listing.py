"""`accel-images list`: the variants the matrix expands to, as a table, JSON or the README's Markdown."""

from __future__ import annotations

import json
from typing import Any

import click

from accel_images import tags
from accel_images.cli.options import (chosen_variants, expected_failures, filter_options, matrix_option, print_line,
                                      print_table, variant_record)
from accel_images.variant import Expansion, Variant


COLUMNS = ("vendor", "stack", "torch", "python", "os", "flavor", "tag", "base image")


@click.command("list")
@matrix_option
@filter_options
@click.option("--json", "as_json", is_flag=True, help="An array of objects, one per variant.")
@click.option("--explain", is_flag=True, help="Also show the combinations the knowledge base pruned, and why.")
@click.option("--markdown", is_flag=True, help="The supported-images table of the README.")
@expected_failures
def list_command(matrix_path: str | None, as_json: bool, explain: bool, markdown: bool, **kwargs: Any) -> None:
    """Show the variants the matrix expands to."""
    expansion, variants = chosen_variants(matrix_path, kwargs)
    if markdown:
        click.echo(supported_images_markdown(expansion, variants), nl=False)
        return
    if as_json:
        rows = [variant_record(v, expansion.image) for v in variants]
        if explain:
            click.echo(json.dumps({"variants": rows, "pruned": [pruned_record(p) for p in expansion.pruned]},
                                  indent=2))
        else:
            click.echo(json.dumps(rows, indent=2))
        return
    print_table(COLUMNS, [variant_row(v) for v in variants])
    print_line(f"{len(variants)} variants, {len(expansion.pruned)} combinations pruned"
               + ("" if explain else " (--explain shows why)"))
    if explain:
        for pruned in expansion.pruned:
            print_line(f"  pruned (matrix line {pruned.line}): {pruned.describe()}")


def supported_images_markdown(expansion: Expansion, variants: tuple[Variant, ...]) -> str:
    """The README's table of published images, one row per variant, generated from the matrix."""
    aliases = tags.aliases(expansion.variants)
    lines = ["| vendor | stack | torch | python | os | flavor | tag | also tagged | base image |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v in variants:
        also = ", ".join(f"`{a}`" for a, w in sorted(aliases.items()) if w == v) or "-"
        lines.append(f"| {v.vendor} | {v.stack or '-'} | {v.torch} | {v.python} | {v.os} | {v.flavor} "
                     f"| `{v.tag}` | {also} | `{v.base_image}` |")
    return "\n".join(lines) + "\n"


def pruned_record(pruned: Any) -> dict[str, Any]:
    return {"vendor": pruned.vendor, "stack": pruned.stack, "torch": pruned.torch, "python": pruned.python,
            "os": pruned.os, "flavor": pruned.flavor, "reasons": list(pruned.reasons), "line": pruned.line}


def variant_row(v: Variant) -> tuple[str, ...]:
    return (v.vendor, v.stack or "-", v.torch, v.python, v.os, v.flavor, v.tag, v.base_image)
