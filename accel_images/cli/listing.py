"""`accel-images list`: the variants the matrix expands to, as a table, JSON or the README's Markdown."""

from __future__ import annotations

import json
from typing import Any

import click

from accel_images.model import tags
from accel_images.cli.options import (chosen_variants, expected_failures, filter_options, filters_of, matrix_option,
                                      print_line, print_table, variant_record)
from accel_images.errors import InputError
from accel_images.model import platforms as platform_names
from accel_images.plan.variants import Expansion, Pruned, by_tag, one_per_tag, select_pruned
from accel_images.model.variant import Variant


COLUMNS = ("vendor", "stack", "torch", "python", "os", "flavor", "platforms", "tag", "base image")


@click.command("list")
@matrix_option
@filter_options
@click.option("--json", "as_json", is_flag=True,
              help='One object: {"variants": [...], "pruned": [...]}, with or without --explain.')
@click.option("--explain", is_flag=True, help="Also show the combinations the knowledge base pruned, and why.")
@click.option("--markdown", is_flag=True, help="The manual's supported-images table (docs/using/supported-images.md).")
@click.option("--tags", "tags_only", is_flag=True, help="Only the tags, one per line (for scripts).")
@expected_failures
def list_command(matrix_path: str | None, as_json: bool, explain: bool, markdown: bool, tags_only: bool,
                 **kwargs: Any) -> None:
    """Show the variants the matrix expands to.

    \b
    Example:
      accel-images list --vendor cuda --explain
    """
    if sum((as_json, markdown, tags_only)) > 1:
        raise InputError("--json, --markdown and --tags are different outputs; give one", field="--tags")
    expansion, variants = chosen_variants(matrix_path, kwargs)
    pruned = select_pruned(expansion.pruned, filters_of(kwargs))
    if markdown:
        click.echo(supported_images_markdown(expansion, variants), nl=False)
        return
    if tags_only:
        click.echo("".join(f"{v.tag}\n" for v in one_per_tag(variants)), nl=False)
        return
    if as_json:
        click.echo(json.dumps(list_document(expansion, variants, pruned), indent=2))
        return
    groups = by_tag(variants)
    print_table(COLUMNS, [variant_row(group) for group in groups])
    images = f" ({plural(len(variants), 'platform image')})" if len(variants) != len(groups) else ""
    print_line(f"{plural(len(groups), 'variant')}{images}, {plural(len(pruned), 'combination')} pruned"
               + ("" if explain or not pruned else " (--explain shows why)"))
    if explain:
        for one in pruned:
            print_line(f"  pruned (matrix line {one.line}): {one.describe()}")
        print_line(f"  {NO_CLUSTER_FLAVOR}")


NO_CLUSTER_FLAVOR = ("no cluster flavor: every GPU image carries the multi-node stack (RDMA verbs, UCX, Open MPI;"
                     " templates/partials/cluster.j2), about 1% of a CUDA image, under the 5% above which it would be"
                     " a flavor of its own (benchmarks/RESULTS.md, cuda_image)")
"""Why the matrix has no `cluster` flavor: said by `list --explain`, with what the pruning explains."""


def list_document(expansion: Expansion, variants: tuple[Variant, ...], pruned: tuple[Pruned, ...]) -> dict[str, Any]:
    """What `list --json` prints, with or without --explain: one shape, so a script reads both alike.
    One entry per platform image (`platform`), each naming every platform of its tag (`platforms`)."""
    return {"variants": [variant_record(v, expansion.image) for v in variants],
            "pruned": [pruned_record(p) for p in pruned]}


def plural(count: int, word: str) -> str:
    """'1 variant', '2 variants'."""
    return f"{count} {word}" + ("" if count == 1 else "s")


def supported_images_markdown(expansion: Expansion, variants: tuple[Variant, ...]) -> str:
    """The README's table of published images, one row per variant, generated from the matrix."""
    aliases = tags.aliases(expansion.variants)
    lines = ["| vendor | stack | torch | python | os | flavor | platforms | tag | also tagged | base image |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in one_per_tag(variants):
        also = ", ".join(f"`{a}`" for a, w in sorted(aliases.items()) if w.tag == v.tag) or "-"
        lines.append(f"| {v.vendor} | {v.stack or '-'} | {v.torch} | {v.python} | {v.os} | {v.flavor} "
                     f"| {platform_names.short(v.platforms)} | `{v.tag}` | {also} | `{v.base_image}` |")
    return "\n".join(lines) + "\n"


def pruned_record(pruned: Pruned) -> dict[str, Any]:
    return {"vendor": pruned.vendor, "stack": pruned.stack, "torch": pruned.torch, "python": pruned.python,
            "os": pruned.os, "flavor": pruned.flavor, "platform": pruned.platform or None,
            "reasons": list(pruned.reasons), "line": pruned.line}


def variant_row(group: tuple[Variant, ...]) -> tuple[str, ...]:
    """One table row per tag, with the platforms its index holds."""
    v = group[0]
    return (v.vendor, v.stack or "-", v.torch, v.python, v.os, v.flavor,
            platform_names.short([g.platform for g in group]), v.tag, v.base_image)
