"""`accel-images host describe` and `host schema`: this node's host description, the JSON `--host-json`
reads, and that JSON's format."""

from __future__ import annotations

import click

from accel_images.cli.options import expected_failures


@click.group("host")
def host_group() -> None:
    """Describe this host as `--host-json` reads it, to judge images for it from anywhere.

    \b
    Example:
      accel-images host describe > host.json
    """


@host_group.command("describe")
@expected_failures
def describe_command() -> None:
    """Print this host as JSON: every vendor's detection, the CPU architecture and the drivers read.

    The document is what `recommend`, `pull`, `run` and `devcontainer` read with `--host-json FILE`
    (or `--host-json -` from standard input), so a description captured on a GPU node judges images
    for that node anywhere. Its format: `accel-images host schema`.

    \b
    Examples:
      accel-images host describe > host.json
      accel-images host describe | accel-images recommend --host-json -
    """
    from accel_images.host.describe import describe_this_host
    click.echo(describe_this_host(), nl=False)


@host_group.command("schema")
@expected_failures
def schema_command() -> None:
    """Print the JSON Schema of a host description: what `host describe` prints and `--host-json` reads.

    \b
    Example:
      accel-images host schema > host.schema.json
    """
    from accel_images.host.describe import schema_text
    click.echo(schema_text(), nl=False)
