"""`accel-images recommend`, `pull`, `ci-matrix` and `bake`: thin commands over recommend and fanout.

`recommend` judges a host against the matrix and needs neither Docker nor the builder, so the engine
(for `pull`) and accel_images.fanout (for `ci-matrix` and `bake`: it takes its build arguments from
the builder, which imports the docker SDK) are imported by the commands that use them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from accel_images import compat, vendors
from accel_images.cli.options import (FILTER_KEYS, chosen_variants, expected_failures, filter_options, matrix_option,
                                      variant_record)
from accel_images.errors import AcceleratorUnusable, IncompatibleError, InputError
from accel_images.host import HostInfo, detect_host
from accel_images.recommend import Recommendation, default_vendor, describe_host, recommend, unusable_warning

FLAVORS = ("runtime", "devel")
CHOICE_FILTERS = ("vendor", "stack", "torch", "python", "os")
"""Filters that narrow what recommend and pull choose from; the flavor is a preference instead."""


def choice_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by recommend and pull."""
    for key in reversed(CHOICE_FILTERS):
        default_help = " (default: the host's)" if key == "vendor" else ""
        func = click.option(f"--{key}", key, default=None,
                            help=f"Only images with this {key}{default_help}.")(func)
    func = click.option("--host-json", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        default=None, hidden=True,
                        help="Judge this recorded host (HostInfo fields as JSON) instead of detecting one.")(func)
    func = click.option("--json", "as_json", is_flag=True, help="Print the recommendation as JSON.")(func)
    func = click.option("--flavor", type=click.Choice(FLAVORS), default="runtime", show_default=True,
                        help="Preferred flavor; another is chosen only when none of this one fits.")(func)
    func = click.option("--registry", default=None, metavar="REG",
                        help="Registry prefix of the images (e.g. ghcr.io/acme); default: the matrix image name.")(func)
    return matrix_option(func)


def load_host(host_json: Path | None) -> HostInfo:
    """The detected host, or the recorded one a test or a support request hands in."""
    if host_json is None:
        return detect_host()
    try:
        data = json.loads(host_json.read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read a host from {host_json}: {err}", field="--host-json") from None
    known = {field.name for field in dataclasses.fields(HostInfo)}
    if not isinstance(data, dict) or set(data) - known:
        unknown = ", ".join(sorted(set(data) - known)) if isinstance(data, dict) else "not an object"
        raise InputError(f"{host_json}: not a host description ({unknown})", field="--host-json",
                         hint=f"fields: {', '.join(sorted(known))}")
    if data.get("vendor", "cpu") not in vendors.names():
        raise InputError(f"{host_json}: unknown vendor {data['vendor']!r}", field="--host-json",
                         hint=f"one of {', '.join(vendors.names())}")
    values: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
    for key, value in values.items():
        if not _host_value_ok(key, value):
            raise InputError(f"{host_json}: {key} is {value!r}, not {_HOST_FIELD_KINDS[key][1]}", field="--host-json")
    return HostInfo(**values)


_HOST_FIELD_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "vendor": (lambda v: isinstance(v, str), "a vendor name"),
    "device_count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a count"),
    **{key: (lambda v: v is None or isinstance(v, str), "a string or null")
       for key in ("driver_version", "stack_version", "unusable")},
    **{key: (lambda v: isinstance(v, tuple) and all(isinstance(x, str) for x in v), "a list of strings")
       for key in ("gpu_names", "gpu_archs", "evidence")},
}
"""How each HostInfo field is spelled in JSON (a field missing here is taken as it comes)."""


def _host_value_ok(key: str, value: Any) -> bool:
    check = _HOST_FIELD_KINDS.get(key)
    return check is None or check[0](value)


def choose(matrix_path: str | None, registry: str | None, flavor: str, host_json: Path | None,
           kwargs: dict[str, Any]) -> tuple[HostInfo, Recommendation]:
    host = load_host(host_json)
    filters = {key: kwargs.get(key) for key in FILTER_KEYS}
    filters["vendor"] = filters["vendor"] or default_vendor(host)
    expansion, variants = chosen_variants(matrix_path, filters)
    recommendation = recommend(host, variants, compat.load_kb(), image=expansion.image,
                               registry=registry, prefer_flavor=flavor)
    return host, recommendation


def recommendation_record(host: HostInfo, rec: Recommendation) -> dict[str, Any]:
    return {"host": dataclasses.asdict(host), "image": rec.image,
            "variant": variant_record(rec.variant, _repository(rec.image)) if rec.variant and rec.image else None,
            "reasons": list(rec.reasons), "warnings": list(rec.warnings), "docker_run": rec.docker_run}


def _repository(ref: str) -> str:
    """`ghcr.io/acme/accel-images/pytorch:TAG` -> its repository part (a port colon comes earlier)."""
    return ref.rsplit(":", 1)[0]


def report(host: HostInfo, rec: Recommendation, as_json: bool) -> str:
    """Print the recommendation and return the chosen image reference.

    Nothing fitting is an IncompatibleError, raised after the reasons were printed.
    """
    if as_json:
        click.echo(json.dumps(recommendation_record(host, rec), indent=2))
    else:
        click.echo(f"host: {describe_host(host)}", err=True)
        for index, reason in enumerate(rec.reasons):
            click.echo(f"  {'why' if rec.ok and index == 0 else 'not'}: {reason}", err=True)
        for warning in rec.warnings:
            click.echo(f"  warning: {warning}", err=True)
    if rec.image is None:
        raise IncompatibleError(f"no image in the matrix fits this {host.vendor} host"
                                f" ({len(rec.reasons)} rejected; first: {rec.reasons[0]})")
    return rec.image


def refuse_fallback(host: HostInfo, rec: Recommendation, asked_vendor: str | None) -> None:
    """After the CPU image was printed (and pulled) in place of a broken accelerator's: exit 6, so a
    script notices; unless the user asked for that vendor's images (`--vendor cpu`)."""
    chosen = rec.variant.vendor if rec.variant else None
    if host.unusable and chosen not in (None, host.vendor, asked_vendor):
        raise AcceleratorUnusable(f"{unusable_warning(host)}; the {chosen} image was chosen instead",
                                  hint=f"fix the {vendors.title(host.vendor)} driver, or pass --vendor {chosen}")


@click.command("recommend")
@choice_options
@expected_failures
def recommend_command(matrix_path: str | None, registry: str | None, flavor: str, as_json: bool,
                      host_json: Path | None, **kwargs: Any) -> None:
    """Pick the newest image that fits this host and print the `docker run` line for it."""
    host, rec = choose(matrix_path, registry, flavor, host_json, kwargs)
    report(host, rec, as_json)
    if not as_json:
        click.echo(rec.docker_run)
    refuse_fallback(host, rec, kwargs.get("vendor"))


@click.command("pull")
@choice_options
@expected_failures
def pull_command(matrix_path: str | None, registry: str | None, flavor: str, as_json: bool,
                 host_json: Path | None, **kwargs: Any) -> None:
    """Like recommend, then pull the image and print the `docker run` line for it."""
    from accel_images.engine import Engine
    host, rec = choose(matrix_path, registry, flavor, host_json, kwargs)
    ref = report(host, rec, as_json)
    engine = Engine.connect()
    try:
        engine.pull(ref, on_line=lambda line: click.echo(line, err=True))
    finally:
        engine.close()
    if not as_json:
        click.echo(rec.docker_run)
    refuse_fallback(host, rec, kwargs.get("vendor"))


@click.command("ci-matrix")
@matrix_option
@filter_options
@expected_failures
def ci_matrix_command(matrix_path: str | None, **kwargs: Any) -> None:
    """Print the variants as a GitHub Actions job matrix: JSON on one line, for `fromJSON`."""
    from accel_images.fanout import ci_matrix
    expansion, variants = chosen_variants(matrix_path, kwargs)
    click.echo(json.dumps(ci_matrix(variants, expansion.image), separators=(",", ":")))


@click.command("bake")
@matrix_option
@filter_options
@click.option("--registry", default=None, metavar="REG", help="Registry prefix for the tags (e.g. ghcr.io/acme).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write docker-bake.json here instead of standard output.")
@expected_failures
def bake_command(matrix_path: str | None, registry: str | None, out_file: Path | None, **kwargs: Any) -> None:
    """Write a docker-bake.json with one target per variant, for `docker buildx bake`."""
    from accel_images.fanout import bake
    expansion, variants = chosen_variants(matrix_path, kwargs)
    text = json.dumps(bake(variants, expansion, registry), indent=2) + "\n"
    if out_file is None:
        click.echo(text, nl=False)
        return
    try:
        out_file.write_text(text)
    except OSError as err:
        raise InputError(f"cannot write {out_file}: {err.strerror}", field="--out") from None
    click.echo(f"wrote {out_file} ({len(variants)} targets)", err=True)

