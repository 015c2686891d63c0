"""`accel-images build` and `smoke`: render, build and smoke-test images on this machine's engine.

The only commands (with nightly and pull) that talk to Docker: this module imports the engine,
the builder and rich's live progress, which the rest of the CLI never loads.
"""

from __future__ import annotations

import json
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

import click

from accel_images import vendors
from accel_images.kb import compat
from accel_images.builder import failure
from accel_images.builder.builder import Builder
from accel_images.builder.wheels import RunWheelhouse
from accel_images.credentials import hide_credentials
from accel_images.formatting import FittedTable, TableColumn, human_size, in_users_terms
from accel_images.builder.outcome import Outcome, outcome_record, smoke_text
from accel_images.builder.settings import PULL_POLICIES, BuildSettings, image_ref
from accel_images.state import StateDir
from accel_images.cli.options import (chosen_variants, expected_failures, filter_options, given_lock, json_option,
                                      lock_options, matrix_option, mirror_options, pinned_variants, print_outcome,
                                      note, render_options, say, smoke_nodes_option, templates_option, verbosity,
                                      verbosity_options, wheel_options, wheel_settings)
from accel_images.builder.engine import Engine
from accel_images.errors import InputError
from accel_images.builder.progress import progress_for
from accel_images.builder.leftovers import reclaim
from accel_images.lock import held
from accel_images.report.reports import compare, read_previous, write_reports
from accel_images.smoke.judge import Expectation
from accel_images.builder.fingerprint import FINGERPRINT_LABEL
from accel_images.smoke.launcher import run_smoke
from accel_images.smoke.integrity import Recorded
from accel_images.smoke.nodes import MAX_NODES, NodesPlan, collective_for, run_nodes
from accel_images.smoke.records import recorded_build
from accel_images.model.variant import LABEL_PREFIX, Variant
from accel_images.plan.variants import Expansion, newest_per_vendor


def resolve_vendor(kwargs: dict[str, Any]) -> None:
    """`--vendor auto` (what `make image` passes without VENDOR): the vendor this host has."""
    if kwargs.get("vendor") == "auto":
        from accel_images.host.detect import detect_host
        host = detect_host()
        kwargs["vendor"] = host.vendor
        note(f"host: {host.vendor} ({'; '.join(host.evidence) or 'no accelerator found'})")


@click.command("build")
@matrix_option
@filter_options
@mirror_options
@wheel_options
@templates_option
@lock_options
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(1, 64), help="Concurrent builds.")
@click.option("--force", is_flag=True, help="Rebuild even when an image with the same fingerprint exists.")
@click.option("--no-cache", is_flag=True, help="Run every step afresh, without the layer cache (implies --force).")
@click.option("--no-smoke", is_flag=True, help="Build only; do not run the smoke workload.")
@click.option("--newest", is_flag=True,
              help="Only one image per vendor: the newest torch with its newest Python and OS, runtime flavor where"
                   " there is one (what `latest-<vendor>` names). `make image` passes it; `make images` does not.")
@click.option("--require-accelerator", is_flag=True,
              help="Fail when the smoke test finds no accelerator (GPU runners).")
@smoke_nodes_option
@click.option("--pull", type=click.Choice(PULL_POLICIES), default="missing", show_default=True,
              help="When to pull base images.")
@click.option("--network", "network_mode", default=None, help="Network mode for RUN steps (e.g. host).")
@click.option("--uid", type=click.IntRange(1, 65534), default=None, help="UID of the image's user.")
@click.option("--gid", type=click.IntRange(1, 65534), default=None, help="GID of the image's user.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where contexts, logs and reports go (default .accel-images/).")
@verbosity_options
@json_option
@expected_failures
def build_command(matrix_path: str | None, mirrors: tuple[str, ...], apt_mirrors: tuple[str, ...],
                  pip_index_url: str | None, pip_find_links: Path | None, pip_extra_index_url: str | None,
                  pip_fetch: str, cache_dir: Path | None,
                  cache_max_size: str | None, without_companions: tuple[str, ...], templates_dir: Path | None,
                  pin_bases: bool, lock_path: Path | None,
                  jobs: int, force: bool, no_cache: bool, no_smoke: bool, newest: bool,
                  require_accelerator: bool, smoke_nodes: int,
                  pull: str, network_mode: str | None, uid: int | None, gid: int | None,
                  state_dir: Path | None, quiet: bool, verbose: bool, as_json: bool, **kwargs: Any) -> None:
    """Render, build and smoke-test the chosen variants; `--vendor auto` picks this host's vendor.

    \b
    Example:
      accel-images build --vendor cpu --torch 2.13 --newest
    """
    level = verbosity(quiet, verbose)
    resolve_vendor(kwargs)
    every_platform = kwargs.get("platform") == ALL_PLATFORMS
    if every_platform:
        kwargs["platform"] = None
    host_fetch, wheel_cache, wheel_cache_max = wheel_settings(pip_fetch, cache_dir, cache_max_size)
    options = render_options(mirrors, pip_index_url, pip_find_links, apt_mirrors, without_companions, host_fetch,
                             pip_extra_index_url)
    expansion, every = chosen_variants(matrix_path, kwargs, options)
    lock = given_lock(pin_bases, lock_path)  # bad input refused before the state directory is made or locked
    native_only = kwargs.get("platform") is None and not every_platform
    settings = BuildSettings(options=options, state_dir=StateDir.at(state_dir), force=force or no_cache,
                             no_cache=no_cache, smoke=not no_smoke, require_accelerator=require_accelerator, pull=pull,
                             smoke_nodes=smoke_nodes,
                             network_mode=network_mode, jobs=jobs, user_uid=uid, user_gid=gid,
                             wheel_cache=wheel_cache, wheel_cache_max=wheel_cache_max)
    settings.state_dir.check()
    meta: dict[str, Any] = {"kind": "build", "started": datetime.now(timezone.utc), "host": socket.gethostname()}
    builder: Builder | None = None
    wheels = RunWheelhouse(settings.wheel_cache_dir)
    # The nightly's lock: a build rewrites the contexts a running nightly builds from.
    with held(settings.state_dir.nightly_lock, what="run of accel-images"):
        engine = Engine.connect()
        if native_only:
            every = engine_platform_only(every, engine.platform())
        variants = newest_per_vendor(every) if newest else every
        variants = pinned_variants(variants, pin_bases, lock_path, options, lock)
        reclaim(engine, meta["started"])
        try:
            with progress_for(variants, level) as progress:
                builder = Builder(engine, compat.load_kb(), expansion, settings, status=progress,
                                  templates_dir=templates_dir, wheels=wheels)
                outcomes = builder.run(variants)
        except KeyboardInterrupt:
            finished = builder.finished if builder is not None else []
            path = write_build_report(settings.state_dir, interrupted_outcomes(expansion, variants, finished),
                                      {**meta, "finished": datetime.now(timezone.utc), "partial": True})
            click.echo(f"accel-images: stopped; partial report: {path}", err=True)
            raise
        meta["wheels"] = wheels.record()
        report_path = write_build_report(settings.state_dir, outcomes, {**meta, "finished": datetime.now(timezone.utc)})
    print_outcome(outcome_table(outcomes), report_path.parent, as_json)
    failed = [o for o in outcomes if not o.ok]
    for line in failure.lines(failure.group(failure_of(o) for o in failed)):
        say(in_users_terms(line), err=True)
    fetched = wheels.tally.summary()
    click.echo(f"{counted(outcomes)}{'; ' + fetched if fetched else ''}; report: {report_path}", err=True)
    if newest and len(variants) < len(every):
        click.echo(in_users_terms(f"chose the newest of {len(every)} matching variants; without --newest (make images)"
                                  " all of them, or choose with --torch, --python, --os, --flavor"), err=True)
    sys.exit(failure.run_exit_code(o.exit_code or 1 for o in failed))


ALL_PLATFORMS = "all"
"""`--platform all`: every platform of the chosen variants, those of other architectures under emulation."""


def engine_platform_only(variants: tuple[Variant, ...], native: str) -> tuple[Variant, ...]:
    """Without --platform, a build is of the images this engine runs natively: the image to use here
    (`make image`), not the other platforms of its tag's index, which build slowly under emulation or not
    at all (`--platform linux/arm64` or `--platform all` asks for them)."""
    mine = tuple(variant for variant in variants if variant.platform == native)
    if variants and not mine:
        others = ", ".join(dict.fromkeys(variant.platform for variant in variants))
        raise InputError(f"no chosen variant is built for this engine's platform {native} (they are for {others})",
                         field="--platform", hint=f"pass --platform {variants[0].platform} to build it under emulation")
    return mine


def counted(outcomes: list[Outcome]) -> str:
    """'2 built, 1 skipped, 0 failed': the statuses the table and the report use, in their words."""
    counts = {status: 0 for status in ("built", "skipped", "failed")}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    return ", ".join(f"{count} {status}" for status, count in counts.items())


def failure_of(outcome: Outcome) -> failure.Failure:
    return failure.Failure(outcome.variant.key, outcome.error or "failed",
                           str(outcome.log_path) if outcome.log_path else None)


OUTCOME_COLUMNS = (TableColumn("variant"), TableColumn("status", keep=9), TableColumn("size", keep=3),
                   TableColumn("build", keep=4), TableColumn("smoke", keep=8))


def outcome_table(outcomes: list[Outcome]) -> FittedTable:
    """One row per variant, named as everywhere else (`vendor/tag`); a failure's cause in its own
    column (cut to the page; printed whole below the table), so the status column reads alike for
    every row."""
    failed = any(not o.ok for o in outcomes)
    table = FittedTable((*OUTCOME_COLUMNS, *((TableColumn("cause", keep=7),) if failed else ())))
    for o in outcomes:
        smoke = smoke_text(o)
        build_s = f"{o.build_s:.0f} s" if o.build_s is not None else "-"
        cause = [o.error or "-" if not o.ok else ""] if failed else []
        table.add_row(o.variant.key, o.status, human_size(o.size), build_s, smoke, *cause)
    return table


def interrupted_outcomes(expansion: Expansion, variants: tuple[Variant, ...],
                         finished: list[Outcome]) -> list[Outcome]:
    """What finished, then every other variant as `interrupted`, in the order asked."""
    done = {outcome.variant: outcome for outcome in finished}
    return [done.get(v) or Outcome(v, "interrupted", image_ref(expansion, v), error="interrupted") for v in variants]


def write_build_report(state_dir: StateDir, outcomes: list[Outcome], meta: dict[str, Any] | None = None) -> Path:
    """reports/build-<time>/ (and the build-latest link): report.json (its `variants` are the outcome
    records), Markdown, HTML grid, JUnit. The page's path is returned: what a person opens."""
    records = [outcome_record(o) for o in outcomes]
    meta = {"command": hide_credentials(" ".join(sys.argv)), **(meta or {})}
    given = meta.get("started")
    started = given if isinstance(given, datetime) else datetime.now(timezone.utc)
    previous = read_previous(state_dir.latest_reports("build"))
    meta["changes"] = compare(records, previous)
    paths = write_reports(records, state_dir.run_reports("build", started), meta)
    state_dir.link_latest("build", paths["html"].parent)
    return paths["html"]


@click.command("smoke")
@click.argument("image")
@click.option("--require-accelerator", is_flag=True, help="Fail when the accelerator is missing.")
@click.option("--timeout", "timeout_s", default=600, show_default=True, type=click.IntRange(10, 7200))
@click.option("--json", "as_json", is_flag=True,
              help="Print the workload's JSON report (alone on stdout; the verdict goes to stderr).")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where `build` kept its records (default: .accel-images): the image must hold the files "
                   "its build recorded there; an image with no build record is refused.")
@click.option("--nodes", default=1, show_default=True, type=click.IntRange(1, MAX_NODES),
              help="With 2 or more: that many containers of IMAGE on a network made for the run, joined by "
                   "torchrun, check an all-reduce and its bandwidth (gloo on the CPU, the vendor's backend "
                   "on its accelerator).")
@expected_failures
def smoke_command(image: str, require_accelerator: bool, timeout_s: int, as_json: bool,
                  state_dir: Path | None, nodes: int) -> None:
    """Run the smoke workload in IMAGE and check it against what the image's labels promise.

    \b
    Example:
      accel-images smoke accel-images/pytorch:2.13.0-cpu-py3.11-debian12 --json
      accel-images smoke --nodes 2 accel-images/pytorch:2.13.0-cpu-py3.11-debian12
    """
    engine = Engine.connect()
    info = engine.inspect_image(image)
    if info is None:
        raise InputError(f"image {image} is not present locally (build or pull it first)")
    expectation = expectation_from_labels(image, info.labels)
    present = vendors.accelerator_present(expectation.vendor)
    recorded = recorded_build(StateDir.at(state_dir), info.labels.get(FINGERPRINT_LABEL))
    if nodes > 1:
        smoke_nodes(engine, image, expectation, recorded, present, require_accelerator=require_accelerator,
                    nodes=nodes, timeout_s=timeout_s, as_json=as_json)
    result = run_smoke(engine, image, expectation, recorded=recorded,
                       vendor_options=vendors.device_options(expectation.vendor) if present else None,
                       require_accelerator=require_accelerator, timeout_s=timeout_s,
                       status=lambda text: click.echo(f"{image}: {text}", err=True))
    if as_json:  # one JSON document on stdout, nothing else: `| jq` must work
        click.echo(json.dumps(result.raw if result.raw is not None else
                              {"ok": False, "failures": list(result.failures)}, indent=2))
    say(f"{image}: {result.summary()}", err=as_json)   # the failures may quote the image's own output
    sys.exit(0 if result.ok else 1)


def smoke_nodes(engine: Engine, image: str, expectation: Expectation, recorded: Recorded | None, present: bool, *,
                require_accelerator: bool, nodes: int, timeout_s: int, as_json: bool) -> NoReturn:
    """`smoke --nodes N`: one line per node and the verdict (the verdict alone on stderr with --json, whose
    record is alone on stdout); exit 0 only when every node passed."""
    vendor = vendors.get(expectation.vendor)
    if require_accelerator and vendor.accelerator and not present:
        raise InputError(f"no {vendor.title} accelerator on this host (--require-accelerator)")
    plan = NodesPlan(collective_for(vendor, present), nodes=nodes, timeout_s=timeout_s)
    result = run_nodes(engine, image, plan, python=expectation.python, recorded=recorded,
                       vendor_options=vendors.device_options(expectation.vendor) if plan.collective.accelerated
                       else None, status=lambda text: click.echo(f"{image}: {text}", err=True))
    if as_json:
        click.echo(json.dumps({"image": image, **result.record()}, indent=2))
    for node in result.per_node:
        say(node.line(), err=as_json)
    say(f"{image}: {result.verdict()}", err=as_json)
    sys.exit(0 if result.ok else 1)


def expectation_from_labels(image: str, labels: dict[str, str]) -> Expectation:
    def label(name: str) -> str:
        return labels.get(f"{LABEL_PREFIX}.{name}", "")
    if not label("vendor") or not label("torch"):
        raise InputError(f"{image} has no {LABEL_PREFIX}.* labels: not an accel-images image")
    return Expectation(vendor=label("vendor"), torch=label("torch"), stack=label("stack") or None,
                       python=label("python"), companions=tuple(filter(None, label("companions").split(","))))
