"""`accel-images verify IMAGE --key PUB`: does the registry hold a signed, green provenance for IMAGE?

A thin command over accel_images.supply.verify. Exit 0 with one `verified:` line, 1 with one
`not verified:` line and the reason, 2 for a bad image name or key, 4 when the registry
cannot be reached or refuses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from accel_images.cli.options import expected_failures, say


@click.command("verify")
@click.argument("image", metavar="HOST/PATH[:TAG|@DIGEST]")
@click.option("--key", "key_path", required=True, envvar="ACCEL_IMAGES_VERIFY_KEY", show_envvar=True,
              type=click.Path(dir_okay=False, path_type=Path), metavar="PUB",
              help="PEM public key the provenance must be signed with (the public half of nightly's --sign-key).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the verdict as JSON, alone on stdout (the line goes to stderr).")
@expected_failures
def verify_command(image: str, key_path: Path, as_json: bool) -> None:
    """Check that IMAGE's digest has a provenance signed by --key, about that digest, recording a passed smoke test.

    Only the registry is read (referrers API, or the sha256-<hex> referrers tag); the SBOM the
    provenance names must be attached too.

    \b
    Example:
      accel-images verify ghcr.io/acme/accel-images/pytorch:2.13.0-cpu-py3.11-debian12 --key sign.pub
    """
    from accel_images.registry import RegistryClient
    from accel_images.supply.provenance import load_public_key
    from accel_images.supply.verify import ImageName, verify_image

    name = ImageName.parse(image)
    key = load_public_key(key_path)
    verdict = verify_image(RegistryClient(name.host), name, key)
    say(verdict.line(str(name)), err=as_json)  # --json: one document on stdout, so `| jq` works
    if as_json:
        click.echo(json.dumps({"image": str(name), **verdict.record()}, indent=2))
    sys.exit(0 if verdict.ok else 1)
