"""`accel-images run`, `devcontainer` and `catalogue`: from a published image to a shell in it.

`run` and `devcontainer` take an image, or choose one for this host as `recommend` does (from the
registry's catalogue with `--registry`, else from the matrix), and assemble the container's options
in accel_images.host.launch, rendered for `--engine` by accel_images.host.runtimes. `catalogue` lists
what a registry publishes and which images passed. Docker (or Podman) itself is needed only to run:
`--print`, `--json`, the other engines and `devcontainer` work without it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from accel_images import vendors
from accel_images.model import tags
from accel_images.host.choosing import (Choice, choose, host_devices, load_expansion, load_host, nothing_fits,
                                        refuse_unobtainable)
from accel_images.cli.options import (
    choice_options,
    choice_request,
    cluster_of_options,
    engine_option,
    expected_failures,
    matrix_option,
    nodes_options,
    print_table,
    say,
    show_choice,
    show_rendered,
)
from accel_images.errors import EngineError, InputError
from accel_images.host.launch import Extras, Mount, Port, git_identity, launch, parse_env
from accel_images.host.runtimes import render
from accel_images.host.session import DEVCONTAINER_FILE, devcontainer, devcontainer_text

COMMAND_KEY = "accel_images.command"


class CommandAfterDashes(click.Command):
    """`run [IMAGE] [-- CMD...]`: what follows `--` is the container's command, set apart before click
    parses the rest, so `run -- python -V` is a command and not an image named `python`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta[COMMAND_KEY] = tuple(args[cut + 1:])
            args = args[:cut]
        return super().parse_args(ctx, args)


RequestArgs = tuple[str | None, str | None, str | None, bool, str]
"""matrix_path, registry, image_name, from_matrix, flavor: the choice options, in choice_request's order."""


@dataclass(frozen=True)
class Target:
    """The image a session runs, and what is known of it: whose accelerator, whether it is this host's own
    build (never pulled), the image user's home, the choice that named it (None for an image given)."""

    ref: str
    vendor: str
    local: bool
    home: str
    choice: Choice | None


def target(image: str | None, request_args: RequestArgs, host_json: Path | None, as_json: bool,
           kwargs: dict[str, Any], *, pulls_what_it_lacks: bool = False) -> Target:
    """The image to run: IMAGE as given, or the one `recommend` would choose. Either way, one this project
    names without a registry runs only from the local store (accel_images.host.sources); a chosen one, and
    one given to a tool that `pulls_what_it_lacks` (a devcontainer's), only where this host built it:
    otherwise one line names both ways to have it, before an engine could ask Docker Hub for the name."""
    if image:
        from accel_images.kb import compat
        expansion = load_expansion(request_args[0], compat.load_kb())
        local = given_is_local(image, request_args[2] or expansion.image, kwargs.get("state_dir"),
                               refuse=pulls_what_it_lacks)
        return Target(image, image_vendor(image, kwargs.get("vendor")), local, f"/home/{expansion.user.name}", None)
    request = replace(choice_request(*request_args, kwargs), host_described=host_json is not None)
    choice = choose(request, load_host(host_json))
    if not as_json:
        show_choice(choice)
    rec = choice.recommendation
    if rec.image is None or rec.variant is None:
        raise nothing_fits(choice)
    refuse_unobtainable(choice, request_args[0])
    return Target(rec.image, rec.variant.vendor, choice.local, f"/home/{choice.user.name}", choice)


def given_is_local(image: str, repository: str, state_dir: Path | None, *, refuse: bool) -> bool:
    """Whether IMAGE is to run from the local store only, never pulled: a build this host recorded, or one of
    this project's names without a registry (`repository`, the matrix's image name), which every engine
    would look up on Docker Hub. `refuse`: such a name must be a recorded build or in the engine's store
    already (a devcontainer's tools pull what the store lacks, with no way to forbid it). Any other name
    is the user's to vouch for."""
    from accel_images.host.sources import has_registry_host, not_available, ours_unqualified
    from accel_images.smoke.records import built_images
    from accel_images.state import StateDir
    if has_registry_host(image):
        return False
    state = StateDir.at(state_dir)
    if image in built_images(state):
        return True
    if not ours_unqualified(image, repository):
        return False
    if refuse and not in_engine_store(image):
        raise not_available(image, state.root, None)
    return True


def in_engine_store(ref: str) -> bool:
    """Whether the local Docker engine holds `ref` now (so whatever starts it finds it there and pulls
    nothing); False where the engine cannot be asked."""
    from accel_images.builder.engine import Engine
    from accel_images.errors import AccelError
    try:
        engine = Engine.connect()
    except AccelError:
        return False
    try:
        return engine.inspect_image(ref) is not None
    except AccelError:
        return False
    finally:
        engine.close()


def image_vendor(image: str, asked: str | None) -> str:
    """Whose accelerator IMAGE is for: --vendor, else its full tag, else its labels (a local image)."""
    if asked:
        return vendors.checked(asked)
    name, _, tag = image.rpartition(":")
    found = tags.vendor_in_tag(tag) if name and "/" not in tag else None
    if found in vendors.names():
        return found
    from accel_images.builder.engine import Engine
    from accel_images.model.variant import LABEL_PREFIX
    engine = Engine.connect()
    try:
        info = engine.inspect_image(image)
    finally:
        engine.close()
    labelled = (info.labels if info else {}).get(f"{LABEL_PREFIX}.vendor")
    if labelled in vendors.names():
        return labelled
    raise InputError(f"cannot tell which accelerator {image} is for (no accel-images tag or labels)",
                     hint="pass --vendor")


@click.command("run", cls=CommandAfterDashes)
@click.argument("image", required=False)
@choice_options
@engine_option
@click.option("--workspace", type=click.Path(file_okay=False, exists=True, path_type=Path), default=Path("."),
              show_default=True, help="The directory mounted at /workspace.")
@click.option("-v", "--volume", "volumes", multiple=True, metavar="SRC:DST[:ro]",
              help="Also mount SRC (a dataset, a cache) at DST; repeatable.")
@click.option("-p", "--publish", "ports", multiple=True, metavar="[IP:][HOST:]PORT",
              help="Publish a container port (Jupyter, TensorBoard); repeatable.")
@click.option("-e", "--env", "env", multiple=True, metavar="NAME=VALUE", help="Set a variable; repeatable.")
@click.option("--name", default=None, help="Name the container (the pod, the Compose container).")
@click.option("--engine-arg", "engine_args", multiple=True, metavar="ARG",
              help="Pass ARG to the engine's command line as it is (e.g. --engine-arg=--network=host); repeatable.")
@nodes_options
@click.option("--print", "print_only", is_flag=True, help="Print the line (or document) instead of running it.")
@click.option("--json", "as_json", is_flag=True, help="Print the line and its arguments as JSON; run nothing.")
@expected_failures
def run_command(image: str | None, matrix_path: str | None, registry: str | None, image_name: str | None,
                from_matrix: bool, flavor: str, host_json: Path | None, engine: str, workspace: Path,
                volumes: tuple[str, ...], ports: tuple[str, ...], env: tuple[str, ...], name: str | None,
                engine_args: tuple[str, ...], nodes: str, rdma_resource: str | None, k8s_kind: str,
                print_only: bool, as_json: bool, **kwargs: Any) -> None:
    """Start a development container: device options, host UID:GID, this directory at /workspace.

    `accel-images run [IMAGE] [-- CMD...]`: without IMAGE, the image `recommend` would choose. The
    container's exit status is the command's. Docker and Podman start here; --engine apptainer, enroot,
    kubernetes and compose print what to run there.

    \b
    Examples:
      accel-images run -- python train.py
      accel-images run --print --engine podman -- python train.py
      accel-images run --print --nodes 2 --host-json node.json -- python train.py
    """
    command = click.get_current_context().meta.get(COMMAND_KEY, ())
    cluster = cluster_of_options(nodes, rdma_resource, k8s_kind)
    extras = Extras(tuple(Mount.parse(v) for v in volumes), tuple(Port.parse(p) for p in ports),
                    tuple(parse_env(e) for e in env), checked_name(name), engine_args)
    chosen = target(image, (matrix_path, registry, image_name, from_matrix, flavor), host_json, as_json, kwargs)
    choice = chosen.choice
    session = replace(launch(chosen.ref, chosen.vendor), user=(os.getuid(), os.getgid()),
                      workspace=workspace.resolve(), command=tuple(command), interactive=sys.stdin.isatty(),
                      extras=extras, identity=git_identity(workspace), rootless=os.geteuid() != 0,
                      local=chosen.local, home=chosen.home,
                      device_count=counted_devices(choice, host_json, engine, chosen.vendor, cluster is not None),
                      cluster=cluster)
    if choice is not None:
        session = replace(session, digest=choice.recommendation.digest,
                          image_user=(choice.user.uid, choice.user.gid))
    rendered = render(engine, session)
    if as_json:
        click.echo(json.dumps({"image": chosen.ref, "vendor": chosen.vendor, "engine": engine, "argv": rendered.argv,
                               "text": rendered.text, "notes": list(rendered.notes),
                               "docker_run": render("docker", session).text.rstrip("\n"),
                               "source": choice.source.record() if choice else None}, indent=2))
        return
    moved = podman_handover(chosen.ref, print_only or rendered.argv is None) if engine == "podman" else None
    if print_only or rendered.argv is None:
        show_rendered(replace(rendered, notes=(*rendered.notes, *([moved] if moved else []))))
        return
    for note in rendered.notes:
        say(f"  note: {note}", err=True)
    sys.exit(start(rendered.argv))


def checked_name(name: str | None) -> str | None:
    """--name, refused in one line where Docker and Podman would refuse it ("Invalid container name"): their
    rule, `[a-zA-Z0-9][a-zA-Z0-9_.-]*`. A Pod's name is stricter still (the kubernetes renderer checks it)."""
    if name is not None and not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", name):
        raise InputError(f"{name!r} is not a container name: letters, digits, '_', '.' and '-', starting with a letter"
                         " or digit", field="--name")
    return name


def counted_devices(choice: Choice | None, host_json: Path | None, engine: str, vendor: str,
                    many_nodes: bool = False) -> int | None:
    """How many of `vendor`'s devices the host description counts, for the forms that ask a scheduler for them
    (Slurm, Kubernetes) and for every form on many nodes (torchrun's processes per node): from the choice's host,
    else the description given or detected; None when it counts none (another vendor's host, a broken driver).
    One node under another engine takes every device and needs no count."""
    if engine not in ("enroot", "kubernetes") and not many_nodes:
        return None
    host = choice.host if choice is not None else load_host(host_json)
    return host_devices(host, vendor)


def podman_handover(ref: str, print_only: bool) -> str | None:
    """An image only Docker's store holds, handed to Podman's, which does not share it: done (and said) before
    `run`, or with --print the exact commands named (a note). None when there is nothing to hand over
    (Podman has it, or Docker does not, or either command is missing: Podman then says itself what it
    cannot find)."""
    from accel_images.host.handover import archive_name, docker_only_size, handover_command, move_to_podman
    size = docker_only_size(ref)
    if size is None:
        return None
    if print_only:
        return (f"{ref} is in Docker's image store only; hand it to Podman's first:"
                f" {handover_command(ref, archive_name(ref))}")
    move_to_podman(ref, size, lambda line: say(f"  note: {ref} is in Docker's image store only: handing it to"
                                                f" Podman's ({line})", err=True))
    return None


def start(argv: tuple[str, ...]) -> int:
    """Run a local engine's line; an engine that is missing or refuses this user is one line and exit 3, as for
    `build` and `pull`, before the engine's own error."""
    program = argv[0]
    if shutil.which(program) is None:
        raise EngineError(f"the {program} command is not installed", hint=f"the line to run: {shlex.join(argv)}")
    if program == "docker":
        from accel_images.builder.engine import Engine
        Engine.connect().close()
    return subprocess.run(argv, check=False).returncode


@click.command("devcontainer")
@click.argument("image", required=False)
@choice_options
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=DEVCONTAINER_FILE,
              show_default=True, help="Where to write it.")
@click.option("--force", is_flag=True, help="Replace an existing file.")
@click.option("--print", "print_only", is_flag=True, help="Print the JSON document instead of writing it.")
@expected_failures
def devcontainer_command(image: str | None, matrix_path: str | None, registry: str | None, image_name: str | None,
                         from_matrix: bool, flavor: str, host_json: Path | None, out_file: Path, force: bool,
                         print_only: bool, **kwargs: Any) -> None:
    """Write .devcontainer/devcontainer.json for IMAGE, or for the image `recommend` would choose.

    \b
    Example:
      accel-images devcontainer --registry ghcr.io/acme
    """
    if not print_only:
        refuse_existing(out_file, force)
    chosen = target(image, (matrix_path, registry, image_name, from_matrix, flavor), host_json, print_only, kwargs,
                    pulls_what_it_lacks=True)
    ref, vendor = chosen.ref, chosen.vendor
    text = devcontainer_text(devcontainer(ref, vendor, chosen.home.rsplit("/", 1)[-1]))
    if print_only:
        click.echo(text, nl=False)
        return
    from accel_images.report.reports import atomic_write
    try:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out_file, text)   # a new file renamed into place: never written into, or through a link
    except OSError as err:
        raise InputError(f"cannot write {out_file}: {err.strerror}", field="--out") from None
    click.echo(f"wrote {out_file} for {ref}", err=True)


def refuse_existing(out_file: Path, force: bool) -> None:
    """A link at --out is refused, --force or not (a dangling one would make the file elsewhere, one to a
    file would have it overwritten); an existing file needs --force."""
    if out_file.is_symlink():
        raise InputError(f"{out_file} is a symbolic link (to {os.readlink(out_file)}); accel-images writes a plain "
                         "file there, never through a link", field="--out",
                         hint="remove the link, or pass another --out")
    if out_file.exists() and not force:
        raise InputError(f"{out_file} exists", field="--out", hint="pass --force to replace it")


@click.command("catalogue")
@click.option("--registry", default=None, envvar="ACCEL_IMAGES_REGISTRY", show_envvar=True,
              metavar="[http[s]://]HOST[:PORT][/NAMESPACE]",
              help="The registry whose images to list (default: `registry:` in ~/.config/accel-images/config.yaml).")
@click.option("--image", "image_name", default=None, metavar="NAME",
              help="Repository name under the registry (default: the matrix's image name).")
@matrix_option
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
@expected_failures
def catalogue_command(registry: str | None, image_name: str | None, matrix_path: str | None, as_json: bool) -> None:
    """List what a registry publishes: each image's labels, its smoke result and where it passed.

    \b
    Example:
      accel-images catalogue --registry ghcr.io/acme --json
    """
    from accel_images.kb import compat
    from accel_images.publish.catalogue import CATALOGUE_COLUMNS, read_catalogue, table_row
    from accel_images.host.sources import REGISTRY_ENV, configured_registry, shown_config_path
    from accel_images.registry import Destination, RegistryClient
    registry = configured_registry(registry)
    if registry is None:
        raise InputError("no registry to list", field="--registry",
                         hint=f"pass --registry REG, set {REGISTRY_ENV}=REG, or write `registry: REG` in"
                              f" {shown_config_path()}")
    destination = Destination.parse(registry)
    image = image_name or load_expansion(matrix_path, compat.load_kb()).image
    started = time.perf_counter()
    catalogue = read_catalogue(RegistryClient.for_destination(destination), destination.repository(image))
    elapsed = time.perf_counter() - started
    if as_json:
        click.echo(json.dumps({"registry": catalogue.host, "repository": catalogue.repository,
                               "images": [entry.record() for entry in catalogue.entries],
                               "left_out": list(catalogue.unreadable), "read_s": round(elapsed, 3)}, indent=2))
        for line in catalogue.unreadable:
            click.echo(f"left out {line}", err=True)
        return
    if not catalogue.entries and not catalogue.unreadable:
        raise catalogue.nothing_published("check --registry and --image")
    if catalogue.entries:
        print_table(tuple(name for name, _ in CATALOGUE_COLUMNS), [table_row(entry) for entry in catalogue.entries],
                    keep=tuple(rank for _, rank in CATALOGUE_COLUMNS))
    for line in catalogue.unreadable:
        click.echo(f"left out {line}", err=True)
    click.echo(f"{catalogue.where}: {len(catalogue.entries)} image(s), {len(catalogue.offered())} offered"
               f" (read in {elapsed:.2f} s)", err=True)
