"""`accel-images render`: write (or, with --check, compare) images/<vendor>/<tag>/ for every variant."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from accel_images.kb import compat
from accel_images.cli.options import (FILTER_KEYS, chosen_variants, expected_failures, filter_options, lock_options,
                                      matrix_option, mirror_options, pinned_variants, render_options,
                                      templates_option)
from accel_images.render.contexts import Renderer, stale_paths, whole_tree, write_tree
from accel_images.resources import IMAGES_DIR


@click.command("render")
@matrix_option
@filter_options
@mirror_options
@templates_option
@lock_options
@click.option("--check", is_flag=True, help="Write nothing; exit 1 and list what is stale under images/.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=IMAGES_DIR,
              show_default=True, help="Where to write images/<vendor>/<tag>/.")
@expected_failures
def render_command(matrix_path: str | None, mirrors: tuple[str, ...], apt_mirrors: tuple[str, ...],
                   pip_index_url: str | None, pip_find_links: Path | None, pip_extra_index_url: str | None,
                   without_companions: tuple[str, ...], templates_dir: Path | None,
                   pin_bases: bool, lock_path: Path | None,
                   check: bool, out_dir: Path, **kwargs: Any) -> None:
    """Write images/<vendor>/<tag>/ (Dockerfile and the files it copies) for every variant.

    \b
    Example:
      accel-images render --vendor cpu --check
    """
    options = render_options(mirrors, pip_index_url, pip_find_links, apt_mirrors, without_companions,
                             pip_extra_index_url=pip_extra_index_url)
    expansion, variants = chosen_variants(matrix_path, kwargs, options)
    pinned = pin_bases or lock_path is not None
    whole = whole_tree(out_dir, filtered=any(kwargs.get(k) for k in FILTER_KEYS),
                       upstream=options.is_default and not templates_dir and not pinned)
    variants = pinned_variants(variants, pin_bases, lock_path, options)
    renderer = Renderer(compat.load_kb(), templates_dir) if templates_dir else Renderer(compat.load_kb())
    contexts = renderer.render_all(expansion, variants, options)
    if check:
        stale = stale_paths(out_dir, contexts, whole)
        if stale:
            for path in stale:
                click.echo(f"stale: {out_dir / path}", err=True)
            click.echo(f"accel-images: error: {len(stale)} file(s) under {out_dir} are stale: "
                       "run `accel-images render`", err=True)
            sys.exit(1)
        click.echo(f"{out_dir} is up to date ({len(contexts)} variants)", err=True)  # a status, not data
        return
    changed = write_tree(out_dir, contexts, whole)
    click.echo(f"rendered {len(contexts)} variants into {out_dir} ({len(changed)} file(s) changed)", err=True)
