"""`accel-images recommend`, `pull`, `ci-matrix` and `bake`: thin commands over recommend and fanout.

`recommend` judges a host against the matrix, or a registry's catalogue (accel_images.host.choosing), and
needs neither Docker nor the builder, so the engine
(for `pull`) and accel_images.builder.fanout (for `ci-matrix` and `bake`: it takes its build arguments from
the builder, which imports the docker SDK) are imported by the commands that use them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from accel_images.host.choosing import (Choice, build_first, choose, chosen_launch, load_host, nothing_fits,
                                        refuse_fallback, refuse_unobtainable)
from accel_images.cli.options import (choice_options, choice_request, chosen_variants, cluster_of_options,
                                      engine_option, expected_failures, filter_options, matrix_option,
                                      nodes_options, say, show_choice, show_rendered, variant_record)
from accel_images.errors import InputError
from accel_images.host.cluster import Cluster
from accel_images.host.runtimes import LOCAL, Rendered

def recommendation_record(choice: Choice, rendered: Rendered | None = None, build: str | None = None) -> dict[str, Any]:
    host, rec = choice.host, choice.recommendation
    record = {"host": dataclasses.asdict(host), "source": choice.source.record(), "image": rec.image,
              "digest": rec.digest,
              "variant": variant_record(rec.variant, _repository(rec.image)) if rec.variant and rec.image else None,
              "reasons": list(rec.reasons), "warnings": list(rec.warnings), "docker_run": rec.docker_run,
              "build_first": build.removeprefix("# ") if build else None}
    if rendered is not None:
        record["run"] = {"engine": rendered.engine, "text": rendered.text, "notes": list(rendered.notes)}
    return record


def rendered_for(choice: Choice, engine: str, cluster: Cluster | None = None) -> Rendered | None:
    """The chosen image's line or document for `engine`, on the `cluster`'s nodes where one is given; None when
    nothing was chosen."""
    from accel_images.host.runtimes import render
    if choice.recommendation.image is None:
        return None
    return render(engine, dataclasses.replace(chosen_launch(choice), cluster=cluster))


def _repository(ref: str) -> str:
    """`ghcr.io/acme/accel-images/pytorch:TAG` -> its repository part (a port colon comes earlier)."""
    return ref.rsplit(":", 1)[0]


def report(choice: Choice, as_json: bool, rendered: Rendered | None = None, build: str | None = None) -> str:
    """Print the recommendation and return the chosen image reference.

    Nothing fitting is an IncompatibleError, raised after the reasons were printed.
    """
    rec = choice.recommendation
    if as_json:
        click.echo(json.dumps(recommendation_record(choice, rendered, build), indent=2))
    else:
        show_choice(choice)
    if rec.image is None:
        raise nothing_fits(choice)
    return rec.image


def chosen(matrix_path: str | None, registry: str | None, image_name: str | None, from_matrix: bool, flavor: str,
           host_json: Path | None, kwargs: dict[str, Any]) -> Choice:
    request = choice_request(matrix_path, registry, image_name, from_matrix, flavor, kwargs)
    return choose(dataclasses.replace(request, host_described=host_json is not None), load_host(host_json))


@click.command("recommend")
@choice_options
@engine_option
@nodes_options
@click.option("--json", "as_json", is_flag=True, help="Print the recommendation as JSON.")
@expected_failures
def recommend_command(matrix_path: str | None, registry: str | None, image_name: str | None, from_matrix: bool,
                      flavor: str, host_json: Path | None, engine: str, nodes: str, rdma_resource: str | None,
                      k8s_kind: str, as_json: bool, **kwargs: Any) -> None:
    """Pick the newest image that fits this host and print how to run it (`docker run`, or --engine's form).

    \b
    Examples:
      accel-images recommend --registry ghcr.io/acme
      accel-images recommend --host-json host.json --engine kubernetes
      accel-images recommend --host-json node.json --engine enroot --nodes 4
    """
    cluster = cluster_of_options(nodes, rdma_resource, k8s_kind)  # a bad --nodes fails before the choice is made
    choice = chosen(matrix_path, registry, image_name, from_matrix, flavor, host_json, kwargs)
    rendered = rendered_for(choice, engine, cluster)
    build = build_first(choice, registry, matrix_path)
    report(choice, as_json, rendered, build)
    if not as_json and rendered is not None:
        if build:  # on the same stream as the line, before it: an image that exists nowhere is not runnable
            click.echo(build)
        show_rendered(rendered)
    refuse_fallback(choice, kwargs.get("vendor"))


@click.command("pull")
@choice_options
@click.option("--engine", type=click.Choice(LOCAL), default="docker", show_default=True,
              help="The engine whose store receives the image, and whose line is printed.")
@click.option("--json", "as_json", is_flag=True, help="Print the recommendation as JSON.")
@expected_failures
def pull_command(matrix_path: str | None, registry: str | None, image_name: str | None, from_matrix: bool,
                 flavor: str, host_json: Path | None, engine: str, as_json: bool, **kwargs: Any) -> None:
    """Like recommend, then pull the image and print the line that runs it (`docker run`, or `podman run`).

    \b
    Examples:
      accel-images pull --registry ghcr.io/acme --flavor devel
      accel-images pull --registry ghcr.io/acme --engine podman
    """
    choice = chosen(matrix_path, registry, image_name, from_matrix, flavor, host_json, kwargs)
    ref = report(choice, as_json)
    refuse_unobtainable(choice, matrix_path)
    variant = choice.recommendation.variant
    platform = variant.platform if variant else None  # the host's own image of the tag's index
    if choice.local:
        say(f"{ref} is a build of this host: nothing to pull", err=True)
    elif engine == "podman":
        pull_with_podman(ref, platform)
    else:
        pull_with_docker(ref, platform)
    if not as_json:
        rendered = rendered_for(choice, engine)
        say(rendered.text.rstrip("\n") if rendered is not None else "")
    refuse_fallback(choice, kwargs.get("vendor"))


def pull_with_docker(ref: str, platform: str | None) -> None:
    """Through the Docker Engine API, its progress on standard error."""
    from accel_images.builder.engine import Engine
    engine = Engine.connect()
    try:
        engine.pull(ref, on_line=lambda line: say(line, err=True), platform=platform)
    finally:
        engine.close()


def pull_with_podman(ref: str, platform: str | None) -> None:
    """`podman pull [--platform P] REF`, what it says on standard error (Podman has no API socket by default);
    a missing podman or a failed pull is one line."""
    import shutil
    import subprocess

    from accel_images.errors import EngineError
    from accel_images.host.runtimes import shell_join
    podman = shutil.which("podman")
    argv = ["podman", "pull", *(["--platform", platform] if platform else []), ref]
    if podman is None:
        raise EngineError("the podman command is not installed", hint=f"the line to run: {shell_join(argv)}")
    done = subprocess.run([podman, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        say(line, err=True)
    if done.returncode != 0:
        raise EngineError(f"podman pull {ref} failed (exit status {done.returncode})",
                          hint="its own message is above")


@click.command("ci-matrix")
@matrix_option
@filter_options
@expected_failures
def ci_matrix_command(matrix_path: str | None, **kwargs: Any) -> None:
    """Print the variants as a GitHub Actions job matrix: JSON on one line, for `fromJSON`.

    \b
    Example:
      accel-images ci-matrix --vendor rocm
    """
    from accel_images.builder.fanout import ci_matrix
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
    """Write a docker-bake.json with one target per variant, for `docker buildx bake`.

    \b
    Example:
      accel-images bake --vendor cuda --registry ghcr.io/acme --out docker-bake.json
    """
    from accel_images.builder.fanout import bake
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

