"""`accel-images kb check` / `kb update`: keep the knowledge base up with the releases it describes."""

from __future__ import annotations

import datetime
import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from accel_images.cli.options import expected_failures, say
from accel_images.credentials import hide_credentials
from accel_images.errors import InputError
from accel_images.kb.sources import SourceUnreachable


def source_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Where the knowledge base and its sources are: every URL can point at a mirror."""
    from accel_images.kb.sources import PYPI_URL, WHEEL_INDEX_URL
    options = [
        click.option("--kb-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="The knowledge base to check: a directory with kb.yaml and vendors/"
                          " (default: the package's)."),
        click.option("--matrix", "matrix_path", default=None,
                     help="The matrix whose base images must exist (default matrix.yaml)."),
        click.option("--pypi-url", default=PYPI_URL, show_default=True,
                     help="The package index's JSON API: <URL>/<package>/json."),
        click.option("--wheel-index-url", default=WHEEL_INDEX_URL, show_default=True,
                     help="PyTorch's wheel indexes: <URL>/<index>/torch/."),
        click.option("--registry-url", "registry_urls", multiple=True, metavar="REGISTRY=URL",
                     help="Ask URL for REGISTRY's tag lists (repeatable), e.g. docker.io=https://mirror.example.com."),
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
    ]
    return functools.reduce(lambda f, option: option(f), reversed(options), func)


def _report(kb_dir: Path | None, matrix_path: str | None, pypi_url: str, wheel_index_url: str,
            registry_urls: tuple[str, ...]) -> tuple[Any, Any]:
    from accel_images.kb import check as kbcheck, sources as kbsources
    from accel_images.plan.variants import matrix_images
    files = kbcheck.KbFiles(kb_dir) if kb_dir else kbcheck.KbFiles()
    if not files.kb_yaml.is_file():
        raise InputError(f"no {files.kb_yaml.name} in {files.root}", field="--kb-dir")
    for name, url in (("--pypi-url", pypi_url), ("--wheel-index-url", wheel_index_url)):
        if not url.startswith(("http://", "https://")):
            raise InputError(f"'{hide_credentials(url)}' is not an http(s) URL", field=name)
    urls = kbsources.SourceUrls(pypi_url, wheel_index_url, kbsources.parse_registry_overrides(registry_urls))
    images = matrix_images(matrix_path, files.load())
    return files, kbcheck.check(files, urls, images)


@click.group("kb")
def kb_group() -> None:
    """Compare the knowledge base with the package index, the wheel indexes and the registries.

    `kb check` lists what it lacks or has wrong (exit 0 up to date, 1 something new, 2 bad input,
    4 a source unreachable); `kb update` writes the new rows, marking what the sources cannot
    say for a person to fill.

    \b
    Example:
      accel-images kb check
    """


@kb_group.command("check")
@source_options
@expected_failures
def check_command(kb_dir: Path | None, matrix_path: str | None, pypi_url: str, wheel_index_url: str,
                  registry_urls: tuple[str, ...], as_json: bool) -> None:
    """List new releases, patch versions, wheel variants and companions, and base tags that went away.

    Exit 0 when the knowledge base is up to date, 1 when something is new, 2 on bad input, 4 when
    a source cannot be reached (named on stderr; what the others said is still listed).

    \b
    Example:
      accel-images kb check --json
    """
    from accel_images.kb import check as kbcheck
    _, report = _report(kb_dir, matrix_path, pypi_url, wheel_index_url, registry_urls)
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2, sort_keys=True))
    else:
        for line in kbcheck.describe(report):
            say(line)   # the findings quote package indexes and registries
    if report.unreachable:
        say(f"accel-images: error: {unreachable_line(report.unreachable)}", err=True)
    sys.exit(report.exit_code)


def unreachable_line(failures: Sequence[SourceUnreachable]) -> str:
    """One line for every source that could not be read: the first in full, the others by name."""
    first, others = failures[0], failures[1:]
    if not others:
        return first.one_line()
    names = sorted({f.source for f in others} - {first.source})
    more = f"; {len(others)} more request(s) failed" + (f" ({', '.join(names)})" if names else "")
    return f"{first.message}{more} (`kb check --json` lists each; every source URL can point at a mirror)"


@kb_group.command("update")
@source_options
@click.option("--date", "today", default=None, metavar="YYYY-MM-DD",
              help="The day the sources were read, for as_of and the notes (default: today, UTC).")
@expected_failures
def update_command(kb_dir: Path | None, matrix_path: str | None, pypi_url: str, wheel_index_url: str,
                   registry_urls: tuple[str, ...], as_json: bool, today: str | None) -> None:
    """Write what `kb check` finds into the knowledge base, keeping its comments and order.

    New rows carry their source and evidence grade; what the sources cannot say (a new torch's
    Python support, a new build's toolkit and GPU architectures) is marked unverified for a person
    to fill, and `compat` answers "unverified" until then. Exit 0 when written (or nothing was
    new), 2 on bad input, 4 when a source cannot be reached (then nothing is written).

    \b
    Example:
      accel-images kb update --date 2026-12-03
    """
    from accel_images.kb import check as kbcheck, update as kbupdate
    day = today or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    try:
        datetime.date.fromisoformat(day)
    except ValueError:
        raise InputError(f"'{day}' is not a date like 2026-12-03", field="--date") from None
    files, report = _report(kb_dir, matrix_path, pypi_url, wheel_index_url, registry_urls)
    changes = kbupdate.apply(report, files, day)
    left = [f for f in report.findings if f.kind not in kbupdate.WRITES]
    if as_json:
        click.echo(json.dumps({"changes": [{"file": c.file, "what": c.what} for c in changes],
                               "for_a_person": [f.as_json() for f in left]}, indent=2, sort_keys=True))
    else:
        for change in changes:
            click.echo(f"wrote {change.file}: {change.what}")
        for finding in left:
            say(f"for a person: {finding.kind}: {finding.subject}: {finding.message}")
        if not changes and not left:
            click.echo(kbcheck.describe(report)[0])
    sys.exit(0)


@kb_group.command("wheel-tags")
@click.option("--platform", "platform", required=True, metavar="OS/ARCH", help="The image's platform (linux/arm64).")
@click.option("--os", "os_name", required=True, metavar="OS", help="The image's base OS (debian12, ubuntu24.04).")
@expected_failures
def wheel_tags_command(platform: str, os_name: str) -> None:
    """Print the `pip download --platform` arguments for the wheels an image of PLATFORM on OS installs.

    Every manylinux tag its glibc accepts, down to manylinux2014 (the pinned CUDA wheels of one
    torch span several), then `any`: fill an offline wheelhouse for another platform with
    `pip download --only-binary=:all: --python-version X.Y $(accel-images kb wheel-tags ...) ...`.

    \b
    Example:
      accel-images kb wheel-tags --platform linux/arm64 --os debian12
    """
    from accel_images.kb import compat, wheels
    click.echo(" ".join(wheels.pip_platform_args(wheels.platform_tags(compat.load_kb(), platform, os_name))))


__all__ = ["check_command", "kb_group", "update_command", "wheel_tags_command"]
