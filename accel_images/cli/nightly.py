"""`accel-images nightly`: rebuild what changed, push only what passed, report everything.

A thin command over accel_images.publish.nightly: parse options, take the state directory's lock, run,
write the reports (JSON, Markdown, HTML, JUnit) and exit 1 when any variant failed.
"""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from accel_images.kb import compat
from accel_images.builder import failure
from accel_images.cli.options import (chosen_variants, expected_failures, filter_options, json_option,
                                      matrix_option, mirror_options, print_outcome, render_options, say,
                                      smoke_nodes_option, templates_option, verbosity, verbosity_options, wheel_options,
                                      wheel_settings)
from accel_images.credentials import hide_credentials
from accel_images.errors import AccelError, InputError
from accel_images.formatting import FittedTable, TableColumn, human_size, in_users_terms
from accel_images.builder.pin import LOCK_FILE
from accel_images.publish.retention import (DEFAULT_KEEP_DATED, Pinned, Pruning, RetentionPolicy, prune, pruned_lines,
                                            stopped_pruning)
from accel_images.builder.engine import Engine
from accel_images.builder.wheels import RunWheelhouse
from accel_images.builder.leftovers import reclaim
from accel_images.lock import held
from accel_images.publish.nightly import (DEFAULT_MAX_AGE_DAYS, NightlyOptions, NightlyOutcome, nightly_record,
                                           run_nightly, shown_status, summary)
from accel_images.builder.outcome import Outcome, smoke_text
from accel_images.builder.progress import progress_for
from accel_images.publish.promote import Target
from accel_images.registry import Destination, RegistryClient
from accel_images.builder.settings import BuildSettings, image_ref
from accel_images.state import StateDir
from accel_images.supply.attest import Source
from accel_images.supply.provenance import load_signer
from accel_images.plan.variants import Expansion
from accel_images.model.variant import Variant
from accel_images.report.reports import REPORT_FILES, compare, read_previous, write_reports


@click.command("nightly")
@click.option("--registry", "registry_text", required=True, metavar="[http[s]://]HOST[:PORT][/NAMESPACE]",
              help="Where images are published; credentials come from `docker login`.")
@matrix_option
@filter_options
@mirror_options
@wheel_options
@templates_option
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(1, 64), help="Concurrent variants.")
@click.option("--max-age", "max_age_days", default=DEFAULT_MAX_AGE_DAYS, show_default=True,
              type=click.FloatRange(0), metavar="DAYS", help="Rebuild an unchanged image once it is this old.")
@click.option("--lock-wait", "lock_wait_s", default=0, show_default=True, type=click.FloatRange(0),
              metavar="SECONDS", help="How long to wait for another nightly on this host (0: refuse at once).")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the reports go (default <state>/reports/nightly-<UTC time>, linked from nightly-latest).")
@click.option("--network", "network_mode", default=None, help="Network mode for RUN steps (e.g. host, none).")
@click.option("--require-accelerator", is_flag=True,
              help="Fail when the smoke test finds no accelerator (GPU runners).")
@smoke_nodes_option
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where contexts, logs, reports and the lock go (default .accel-images/).")
@verbosity_options
@click.option("--keep-dated", "keep_dated", default=DEFAULT_KEEP_DATED, show_default=True, type=click.IntRange(0),
              metavar="N", help="Keep the N newest dated tags of each full tag; older ones are deleted.")
@click.option("--keep-days", "keep_days", default=None, type=click.FloatRange(0), metavar="DAYS",
              help="Also keep every dated tag younger than DAYS.")
@click.option("--keep-pinned", "pinned_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="A lock file whose digests and dated tags are never pruned (repeatable;"
                                   " default accel-images.lock when present).")
@click.option("--prune-dry-run", is_flag=True, help="List the dated tags the policy would delete; delete none.")
@click.option("--sign-key", "sign_key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              envvar="ACCEL_IMAGES_SIGN_KEY", show_envvar=True, metavar="PEM",
              help="Sign each provenance with this PEM private key; registry images must then verify with it"
                   " to be skipped or to get aliases.")
@click.option("--no-attest", "no_attest", is_flag=True,
              help="Publish without attaching an SBOM and a provenance statement"
                   " (registries that refuse OCI artifacts).")
@json_option
@expected_failures
def nightly_command(registry_text: str, matrix_path: str | None, mirrors: tuple[str, ...],
                    apt_mirrors: tuple[str, ...], pip_index_url: str | None,
                    pip_find_links: Path | None, pip_extra_index_url: str | None, pip_fetch: str,
                    cache_dir: Path | None, cache_max_size: str | None,
                    without_companions: tuple[str, ...], templates_dir: Path | None, jobs: int, max_age_days: float,
                    lock_wait_s: float,
                    report_dir: Path | None, network_mode: str | None, require_accelerator: bool,
                    smoke_nodes: int, state_dir: Path | None, quiet: bool, verbose: bool, keep_dated: int,
                    keep_days: float | None,
                    pinned_files: tuple[Path, ...], prune_dry_run: bool, sign_key: Path | None, no_attest: bool,
                    as_json: bool, **kwargs: Any) -> None:
    """Rebuild every variant whose inputs changed, smoke-test it, and promote only what passed.

    Unchanged images younger than --max-age are skipped; a rebuild whose layers equal the
    published ones pushes nothing and keeps the published digest. Every published image gets an
    SBOM and a provenance statement (signed with --sign-key) attached to its digest. Dated tags
    past the retention policy are deleted afterwards (only listed with --prune-dry-run). A failing
    variant never stops the others, and never moves a published tag. Exit 0 when nothing
    failed, 1 otherwise.

    \b
    Example:
      accel-images nightly --registry registry.example.com/ml --jobs 2 --max-age 7
    """
    level = verbosity(quiet, verbose)
    if kwargs.get("platform") == "all":  # every platform of each tag's index: what a nightly does by default
        kwargs["platform"] = None
    destination = Destination.parse(registry_text)
    host_fetch, wheel_cache, wheel_cache_max = wheel_settings(pip_fetch, cache_dir, cache_max_size)
    options = render_options(mirrors, pip_index_url, pip_find_links, apt_mirrors, without_companions, host_fetch,
                             pip_extra_index_url)
    expansion, variants = chosen_variants(matrix_path, kwargs, options)
    signer = load_signer(sign_key) if sign_key else None   # every input is read before anything is written
    retention = Retention(RetentionPolicy(keep_dated, keep_days), pinned_of(pinned_files), prune_dry_run)
    state = StateDir.at(state_dir)
    refuse_earlier_reports(report_dir, state)
    state.check()
    settings = BuildSettings(options=options, state_dir=state, pull="always", smoke=False, jobs=jobs,
                             network_mode=network_mode, require_accelerator=require_accelerator,
                             smoke_nodes=smoke_nodes, wheel_cache=wheel_cache, wheel_cache_max=wheel_cache_max)
    nightly = NightlyOptions(Target(destination.host, destination.repository(expansion.image)),
                             max_age_days=max_age_days, signer=signer,
                             source=Source.of(matrix_file(matrix_path)), attest=not no_attest)
    wheels = RunWheelhouse(settings.wheel_cache_dir)
    with held(state.nightly_lock, lock_wait_s):
        # Chosen under the lock: a run that waited for another one started in the same second must not
        # pick the directory that one is about to write (StateDir.run_reports numbers the second).
        reports = report_dir or state.run_reports("nightly", nightly.now)
        nightly = replace(nightly, attestation_dir=reports / "attestations")
        nights, pruning, paths = run_and_report(RegistryClient.for_destination(destination), expansion, variants,
                                                settings, nightly, templates_dir, reports, level, retention, wheels)
    print_outcome(nightly_table(nights), paths["json"].parent, as_json)
    failed = [night for night in nights if not night.ok]
    grouped = failure.group(failure.Failure(n.outcome.variant.key, n.outcome.error or "failed",
                                            str(n.outcome.log_path) if n.outcome.log_path else None) for n in failed)
    for line in failure.lines(grouped):
        say(in_users_terms(line), err=True)
    for line in pruning_lines(pruning):
        say(line, err=True)
    counts = summary(nights)
    uploaded = sum(night.uploaded_bytes for night in nights)
    fetched = wheels.tally.summary()
    click.echo(f"{counts['built']} published, {counts['kept']} kept, {counts['skipped']} skipped,"
               f" {counts['failed']} failed; uploaded {human_size(uploaded)}{'; ' + fetched if fetched else ''};"
               f" report: {paths['html']}", err=True)
    sys.exit(failure.run_exit_code(n.outcome.exit_code or 1 for n in failed))


@dataclass(frozen=True)
class Retention:
    """The retention options of one run."""

    policy: RetentionPolicy
    pinned: Pinned
    dry_run: bool


def refuse_earlier_reports(report_dir: Path | None, state: StateDir) -> None:
    """Refuse a --report-dir that is an earlier run's reports in the state directory: `reports/nightly-latest`
    (a link to the last run's directory) or one of those directories. Writing there would overwrite what
    a person still has to read, and linking `nightly-latest` to itself would lose the way to it."""
    if report_dir is None:
        return
    target = report_dir.resolve()
    if target.parent == state.reports.resolve() and (report_dir.is_symlink()
                                                      or (target / REPORT_FILES["json"]).exists()):
        raise InputError(f"{report_dir} is an earlier run's reports ({target.name})", field="--report-dir",
                         hint="each run writes a directory of its own: leave --report-dir out, or name a new one")


def pinned_of(files: tuple[Path, ...]) -> Pinned:
    """The lock files given, else the project's pin lock when there is one."""
    return Pinned.from_files(files or tuple(path for path in (LOCK_FILE,) if path.is_file()))


def pruning_lines(pruning: Pruning | str) -> list[str]:
    if isinstance(pruning, str):
        return [f"retention: not applied: {pruning}"]
    stopped = ["retention: stopped before it ended"] if pruning.interrupted else []
    return [*pruned_lines(pruning), *(f"retention: could not delete {error}" for error in pruning.errors), *stopped]


def apply_retention(registry: RegistryClient, nightly: NightlyOptions, variants: tuple[Variant, ...],
                    retention: Retention) -> Pruning | str:
    """Prune the dated tags of this run's variants; a registry failure is reported, not raised.

    The builds and pushes are done by now, and their report must still be written.
    """
    scope = {variant.tag for variant in variants}
    try:
        return prune(registry, nightly.target.repository, retention.policy, nightly.day, pinned=retention.pinned,
                     dry_run=retention.dry_run, only=scope.__contains__)
    except AccelError as error:
        return error.one_line()


def pruning_meta(pruning: Pruning | str) -> dict[str, Any]:
    if isinstance(pruning, str):
        return {"retention": {"error": pruning}}
    return {"retention": {"dry_run": pruning.dry_run, "pruned": list(pruning.pruned), "errors": list(pruning.errors),
                          "kept": [d.tag for d in pruning.decisions if not d.prune],
                          "interrupted": pruning.interrupted}}


def matrix_file(matrix_path: str | None) -> Path | None:
    """The matrix file the variants came from, for the provenance's digest of it."""
    from accel_images.resources import default_matrix
    return Path(matrix_path) if matrix_path else default_matrix()


def run_and_report(registry: RegistryClient, expansion: Expansion, variants: tuple[Variant, ...],
                   settings: BuildSettings, nightly: NightlyOptions, templates_dir: Path | None,
                   reports: Path, level: int = 0, retention: Retention | None = None,
                   wheels: RunWheelhouse | None = None) -> tuple[list[NightlyOutcome], Pruning | str, dict[str, Path]]:
    """The run and its reports; after Ctrl-C a partial report, then the interrupt goes on up."""
    wheels = wheels or RunWheelhouse(settings.wheel_cache_dir)
    meta = {"kind": "nightly", "command": hide_credentials(" ".join(sys.argv)), "started": nightly.now,
            "host": socket.gethostname(), "registry": f"{nightly.target.host}/{nightly.target.repository}",
            "run_id": nightly.run_id, "max_age_days": nightly.max_age_days}
    finished: list[NightlyOutcome] = []
    engine = Engine.connect()
    reclaim(engine, nightly.now)
    try:
        with progress_for(variants, level) as progress:
            nights = run_nightly(engine, compat.load_kb(), expansion, variants, registry, settings, nightly,
                                 status=progress, templates_dir=templates_dir, on_done=finished.append, wheels=wheels)
    except KeyboardInterrupt:
        records = interrupted_records(expansion, variants, finished, nightly.target)
        paths = write_reports(records, reports, {**meta, "finished": datetime.now(timezone.utc), "partial": True})
        click.echo(f"accel-images: stopped; partial report: {paths['html']}", err=True)
        raise
    meta["wheels"] = wheels.record()
    try:
        pruning = apply_retention(registry, nightly, variants,
                                  retention or Retention(RetentionPolicy(), Pinned(), False))
    except KeyboardInterrupt as interrupt:  # every variant is done: the report is whole but for retention
        paths = report_run(nights, stopped_pruning(interrupt), settings, nightly, reports, meta)
        click.echo(f"accel-images: stopped during retention; report: {paths['html']}", err=True)
        raise
    return nights, pruning, report_run(nights, pruning, settings, nightly, reports, meta)


def report_run(nights: list[NightlyOutcome], pruning: Pruning | str, settings: BuildSettings,
               nightly: NightlyOptions, reports: Path, meta: dict[str, Any]) -> dict[str, Path]:
    """Write the reports of a run whose variants all ended, compared with the previous run's; link them
    from `nightly-latest` when they are in the state directory."""
    records = [nightly_record(night, nightly.target) for night in nights]
    previous = read_previous(settings.state_dir.latest_reports("nightly"))
    meta = {**meta, **pruning_meta(pruning), "uploaded_bytes": sum(night.uploaded_bytes for night in nights),
            "changes": compare(records, previous)}
    paths = write_reports(records, reports, {**meta, "finished": datetime.now(timezone.utc)})
    if reports.parent == settings.state_dir.reports:
        settings.state_dir.link_latest("nightly", reports)
    return paths


def interrupted_records(expansion: Expansion, variants: tuple[Variant, ...], finished: list[NightlyOutcome],
                        target: Target) -> list[dict[str, Any]]:
    """What finished, then every other variant as `interrupted`, in the order asked."""
    done = {night.outcome.variant: night for night in finished}
    return [nightly_record(done.get(variant) or NightlyOutcome(
        Outcome(variant, "interrupted", image_ref(expansion, variant), error="interrupted"), "interrupted"), target)
        for variant in variants]


NIGHTLY_COLUMNS = (TableColumn("variant"), TableColumn("status", keep=9), TableColumn("smoke", keep=8),
                   TableColumn("why", keep=5), TableColumn("tags", keep=2), TableColumn("digest", keep=3),
                   TableColumn("uploaded", keep=4), TableColumn("provenance", keep=1))
"""The nightly's table; on a narrow page the variant stays whole and the columns with the lowest `keep` go."""


def nightly_table(nights: list[NightlyOutcome]) -> FittedTable:
    """One row per variant. A failure's cause has a column of its own (cut to the page; printed whole
    below the table), so the status column reads alike for every row, as in `build`'s table."""
    failed = any(not night.ok for night in nights)
    table = FittedTable((*NIGHTLY_COLUMNS, *((TableColumn("cause", keep=7),) if failed else ())))
    for night in nights:
        moved = night.publication.promoted if night.publication else night.realigned
        tags = ", ".join(moved) or "-"
        status = shown_status(night) if night.ok else "failed"
        digest = (night.registry_digest or "-")[:19]
        cause = [night.outcome.error or "failed" if not night.ok else ""] if failed else []
        table.add_row(night.outcome.variant.key, status, smoke_text(night.outcome), night.reason, tags, digest,
                      human_size(night.uploaded_bytes), provenance_cell(night), *cause)
    return table


def provenance_cell(night: NightlyOutcome) -> str:
    """'signed sha256:…', 'unsigned sha256:…', 'verified', 'NOT verified: why' or '-'."""
    attestation = night.publication.attestation if night.publication else None
    if attestation is not None:
        return f"{'signed' if attestation.signed else 'unsigned'} {attestation.provenance.manifest_digest[:19]}"
    if night.verdict is not None:
        return "verified" if night.verdict.ok else f"NOT verified: {night.verdict.reason}"
    return "-"
