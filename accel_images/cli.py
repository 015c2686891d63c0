"""The `accel-images` command: a thin layer over the pipeline stages.

Each command parses its options, calls one stage, and prints. Expected failures (AccelError)
become one line on stderr and their exit code; nothing else is caught here.
"""

from __future__ import annotations

import functools
import json
import signal
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import click
from rich.console import Console
from rich.table import Table

from accel_images import compat, devices, pin, tags
from accel_images.build import Builder
from accel_images.credentials import hide_credentials
from accel_images.engine import Engine
from accel_images.formatting import human_size
from accel_images.outcome import Outcome, outcome_record
from accel_images.progress import progress_for
from accel_images.report import write_reports
from accel_images.smoke.judge import Expectation
from accel_images.smoke.launcher import run_smoke
from accel_images.errors import AccelError, InputError
from accel_images.matrix import load_matrix
from accel_images.resources import IMAGES_DIR, default_matrix
from accel_images.render import Mirror, Renderer, RenderOptions, stale_paths, write_tree
from accel_images.settings import PULL_POLICIES, BuildSettings, image_ref
from accel_images.state import StateDir
from accel_images.variant import LABEL_PREFIX, Expansion, Variant, expand, select_or_explain

FILTER_KEYS = ("vendor", "stack", "torch", "python", "os", "flavor")

out = Console(highlight=False, width=None if sys.stdout.isatty() else 250)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def expected_failures(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn an AccelError into one line on stderr and its exit code."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AccelError as error:
            click.echo(f"accel-images: error: {error.one_line()}", err=True)
            sys.exit(error.exit_code)
        except KeyboardInterrupt as interrupt:
            click.echo("accel-images: interrupted", err=True)
            sys.exit(getattr(interrupt, "exit_code", 130))
    return wrapper


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken down the same cleanup path as Ctrl-C; exits 143 (128 + SIGTERM)."""

    exit_code = 128 + signal.SIGTERM


def _terminate(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during cleanup ends it at once
    raise Terminated()


def handle_sigterm() -> None:
    """Make SIGTERM (CI cancelling a job, `docker stop`, systemd) clean up like Ctrl-C."""
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _terminate)


def matrix_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--matrix", "matrix_path", default=None, type=click.Path(dir_okay=False),
                        help="The matrix file to read (default: ./matrix.yaml, else the one installed"
                             " with accel-images).")(func)


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for key in reversed(FILTER_KEYS):
        func = click.option(f"--{key}", key, default=None, help=f"Only variants with this {key}.")(func)
    return func


def templates_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--templates", "templates_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
                        default=None, help="Template directory (default: the project's templates/).")(func)


def mirror_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--pip-find-links", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="A wheelhouse directory copied into each build context; pip uses only it.")(func)
    func = click.option("--pip-index-url", default=None,
                        help="Package index for every pip install; '{index}' becomes cu130, rocm7.2, xpu or cpu.")(func)
    func = click.option("--registry-mirror", "mirrors", multiple=True, metavar="REGISTRY=HOST[/PATH]",
                        help="Pull base images of REGISTRY through a mirror (repeatable).")(func)
    return func


def lock_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help=f"Render base images as repository@digest from this lock file (default with --pin:"
                             f" {pin.LOCK_FILE}).")(func)
    func = click.option("--pin", "pin_bases", is_flag=True,
                        help="Resolve every base image to its digest now and record it in the lock file.")(func)
    return func


def pinned_variants(variants: tuple[Variant, ...], pin_bases: bool, lock_path: Path | None,
                    options: RenderOptions) -> tuple[Variant, ...]:
    """The variants with bases from the lock (refreshed first with --pin); unchanged without either."""
    if not pin_bases and lock_path is None:
        return variants
    path = lock_path or pin.LOCK_FILE
    if pin_bases:
        lock = pin.pin(Engine.connect(), variants, options.mirrors, path)
        err.print(f"pinned {len(lock.bases)} base image(s) in {path}")
    else:
        lock = pin.read_lock(path)
    return pin.apply(lock, variants, path)


def render_options(mirrors: tuple[str, ...], pip_index_url: str | None,
                   pip_find_links: Path | None) -> RenderOptions:
    return RenderOptions(tuple(Mirror.parse(m) for m in mirrors), pip_index_url, pip_find_links)


def load_expansion(matrix_path: str | None) -> Expansion:
    return expand(load_matrix(default_matrix() if matrix_path is None else matrix_path), compat.load_kb())


def filters_of(kwargs: dict[str, Any]) -> dict[str, str | None]:
    return {key: kwargs.get(key) for key in FILTER_KEYS}


def chosen_variants(matrix_path: str | None, kwargs: dict[str, Any]) -> tuple[Expansion, tuple[Variant, ...]]:
    expansion = load_expansion(matrix_path)
    filters = filters_of(kwargs)
    _check_filter_values(filters)
    return expansion, select_or_explain(expansion, filters)


def _check_filter_values(filters: dict[str, str | None]) -> None:
    for key, value in filters.items():
        if value is not None and (not value or any(c.isspace() or c in ";|&$`'\"\\<>" for c in value)):
            raise InputError(f"{value!r} is not a valid {key}", field=f"--{key}")


class OneLineUsageErrors(click.Group):
    """Click's own errors (unknown option or command, a value out of range) as one line, like AccelError."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            result = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as error:  # bare `accel-images`: the help, as click shows it
            error.show()
            sys.exit(error.exit_code)
        except click.ClickException as error:
            ctx = getattr(error, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            click.echo(f"accel-images: error: {' '.join(error.format_message().split())}{hint}", err=True)
            sys.exit(error.exit_code)
        except click.Abort as error:
            click.echo("accel-images: interrupted", err=True)
            sys.exit(getattr(error.__cause__, "exit_code", 130))
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=OneLineUsageErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="accel-images")
def main() -> None:
    """PyTorch development images for NVIDIA CUDA, AMD ROCm, Intel XPU, Intel Gaudi and CPU."""
    handle_sigterm()


# ---- compat ---------------------------------------------------------------------------------

@main.command("compat")
@click.argument("terms", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.option("--experimental-python", is_flag=True, help="Accept Python versions a release supports experimentally.")
@expected_failures
def compat_command(terms: tuple[str, ...], as_json: bool, experimental_python: bool) -> None:
    """Check a version combination: `compat torch==2.4.1 cuda==12.4 [python==3.11]`.

    With only torch, lists every stack with a build for it; with only a stack, the torch
    versions built for it. Exit 0 when compatible, 1 when not, 2 for a malformed query.
    """
    query = compat.parse_query(terms)
    verdict = compat.load_kb().check(query, experimental_python=experimental_python)
    if as_json:
        click.echo(json.dumps({"query": dict(query), "compatible": verdict.ok, "unknown": verdict.unknown,
                               "reasons": list(verdict.reasons), **verdict.details}, indent=2, sort_keys=True))
    else:
        click.echo(describe_verdict(verdict))
    sys.exit(verdict.exit_code)


def describe_verdict(verdict: compat.Verdict) -> str:
    asked = " ".join(f"{k}=={v}" if v else k for k, v in verdict.query.items())
    if verdict.unknown:
        return f"unknown: {asked}: {'; '.join(verdict.reasons)}"
    if not verdict.ok:
        alternatives = verdict.details.get("alternatives", {})
        hint = ""
        if alternatives.get("stacks"):
            hint = f" (builds for this torch: {', '.join(alternatives['stacks'])})"
        return f"incompatible: {asked}: {'; '.join(verdict.reasons)}{hint}"
    details = dict(verdict.details)
    if "builds" in details:
        builds = "; ".join(f"{vendor}: {', '.join(stacks) or 'none'}" for vendor, stacks in details["builds"].items())
        return (f"torch {details['torch']} (Python {details['python'][0]}-{details['python'][-1]}): {builds}\n"
                f"source: {details['source']}")
    if list(details) == ["torch"]:
        return f"{asked}: torch {', '.join(details['torch'])}"
    shown = ", ".join(f"{k} {', '.join(v) if isinstance(v, list) else v}" for k, v in sorted(details.items())
                      if k not in ("source",) and v not in (None, [], ""))
    return f"compatible: {asked}\n  {shown}\n  source: {details.get('source', '')}"


# ---- list -----------------------------------------------------------------------------------

@main.command("list")
@matrix_option
@filter_options
@click.option("--json", "as_json", is_flag=True, help="An array of objects, one per variant.")
@click.option("--explain", is_flag=True, help="Also show the combinations the knowledge base pruned, and why.")
@click.option("--markdown", is_flag=True, help="The supported-images table of the README.")
@expected_failures
def list_command(matrix_path: str | None, as_json: bool, explain: bool, markdown: bool, **kwargs: Any) -> None:
    """Show the variants the matrix expands to."""
    expansion, variants = chosen_variants(matrix_path, kwargs)
    if markdown:
        click.echo(supported_images_markdown(expansion, variants), nl=False)
        return
    if as_json:
        rows = [variant_record(v, expansion.image) for v in variants]
        if explain:
            click.echo(json.dumps({"variants": rows, "pruned": [pruned_record(p) for p in expansion.pruned]},
                                  indent=2))
        else:
            click.echo(json.dumps(rows, indent=2))
        return
    out.print(variant_table(variants))
    out.print(f"{len(variants)} variants, {len(expansion.pruned)} combinations pruned"
              + ("" if explain else " (--explain shows why)"))
    if explain:
        for pruned in expansion.pruned:
            out.print(f"  pruned (matrix line {pruned.line}): {pruned.describe()}")


def supported_images_markdown(expansion: Expansion, variants: tuple[Variant, ...]) -> str:
    """The README's table of published images, one row per variant, generated from the matrix."""
    aliases = tags.aliases(expansion.variants)
    lines = ["| vendor | stack | torch | python | os | flavor | tag | also tagged | base image |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v in variants:
        also = ", ".join(f"`{a}`" for a, w in sorted(aliases.items()) if w == v) or "-"
        lines.append(f"| {v.vendor} | {v.stack or '-'} | {v.torch} | {v.python} | {v.os} | {v.flavor} "
                     f"| `{v.tag}` | {also} | `{v.base_image}` |")
    return "\n".join(lines) + "\n"


def variant_record(variant: Variant, image: str) -> dict[str, Any]:
    return {"vendor": variant.vendor, "stack": variant.stack, "torch": variant.torch, "python": variant.python,
            "os": variant.os, "flavor": variant.flavor, "tag": variant.tag, "image": f"{image}:{variant.tag}",
            "base_image": variant.base_image, "wheel_index": variant.wheel_index,
            "min_driver": variant.min_driver, "gpu_archs": list(variant.gpu_archs)}


def pruned_record(pruned: Any) -> dict[str, Any]:
    return {"vendor": pruned.vendor, "stack": pruned.stack, "torch": pruned.torch, "python": pruned.python,
            "os": pruned.os, "flavor": pruned.flavor, "reasons": list(pruned.reasons), "line": pruned.line}


def variant_table(variants: tuple[Variant, ...]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("vendor", "stack", "torch", "python", "os", "flavor", "tag", "base image"):
        table.add_column(column)
    for v in variants:
        table.add_row(v.vendor, v.stack or "-", v.torch, v.python, v.os, v.flavor, v.tag, v.base_image)
    return table


# ---- render ---------------------------------------------------------------------------------

@main.command("render")
@matrix_option
@filter_options
@mirror_options
@templates_option
@lock_options
@click.option("--check", is_flag=True, help="Write nothing; exit 1 and list what is stale under images/.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=IMAGES_DIR,
              show_default=True, help="Where to write images/<vendor>/<tag>/.")
@expected_failures
def render_command(matrix_path: str | None, mirrors: tuple[str, ...], pip_index_url: str | None,
                   pip_find_links: Path | None, templates_dir: Path | None, pin_bases: bool, lock_path: Path | None,
                   check: bool, out_dir: Path, **kwargs: Any) -> None:
    """Write images/<vendor>/<tag>/ (Dockerfile and the files it copies) for every variant."""
    options = render_options(mirrors, pip_index_url, pip_find_links)
    expansion, variants = chosen_variants(matrix_path, kwargs)
    partial = any(kwargs.get(k) for k in FILTER_KEYS)
    pinned = pin_bases or lock_path is not None
    if (partial or not options.is_default or templates_dir or pinned) and out_dir == IMAGES_DIR:
        raise InputError("images/ always holds the full matrix with upstream sources; "
                         "use --out DIR for a filtered, mirrored or pinned render", field="--out")
    variants = pinned_variants(variants, pin_bases, lock_path, options)
    renderer = Renderer(compat.load_kb(), templates_dir) if templates_dir else Renderer(compat.load_kb())
    contexts = renderer.render_all(expansion, variants, options)
    if check:
        stale = stale_paths(out_dir, contexts)
        if stale:
            for path in stale:
                click.echo(f"stale: {out_dir / path}", err=True)
            click.echo(f"accel-images: error: {len(stale)} file(s) under {out_dir} are stale: "
                       "run `accel-images render`", err=True)
            sys.exit(1)
        click.echo(f"{out_dir} is up to date ({len(contexts)} variants)")
        return
    changed = write_tree(out_dir, contexts)
    click.echo(f"rendered {len(contexts)} variants into {out_dir} ({len(changed)} file(s) changed)")


# ---- build and smoke --------------------------------------------------------------------------

def resolve_vendor(kwargs: dict[str, Any]) -> None:
    """`--vendor auto` (what `make image` passes without VENDOR): the vendor this host has."""
    if kwargs.get("vendor") == "auto":
        from accel_images.host import detect_host
        host = detect_host()
        kwargs["vendor"] = host.vendor
        err.print(f"host: {host.vendor} ({'; '.join(host.evidence) or 'no accelerator found'})")


@main.command("build")
@matrix_option
@filter_options
@mirror_options
@templates_option
@lock_options
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(1, 64), help="Concurrent builds.")
@click.option("--force", is_flag=True, help="Rebuild even when an image with the same fingerprint exists.")
@click.option("--no-cache", is_flag=True, help="Run every step afresh, without the layer cache (implies --force).")
@click.option("--no-smoke", is_flag=True, help="Build only; do not run the smoke workload.")
@click.option("--require-accelerator", is_flag=True, help="Fail when the smoke test finds no accelerator (GPU runners).")
@click.option("--pull", type=click.Choice(PULL_POLICIES), default="missing", show_default=True,
              help="When to pull base images.")
@click.option("--network", "network_mode", default=None, help="Network mode for RUN steps (e.g. host).")
@click.option("--uid", type=click.IntRange(1, 65534), default=None, help="UID of the image's user.")
@click.option("--gid", type=click.IntRange(1, 65534), default=None, help="GID of the image's user.")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where contexts, logs and reports go (default .accel-images/).")
@expected_failures
def build_command(matrix_path: str | None, mirrors: tuple[str, ...], pip_index_url: str | None,
                  pip_find_links: Path | None, templates_dir: Path | None, pin_bases: bool, lock_path: Path | None,
                  jobs: int, force: bool, no_cache: bool, no_smoke: bool, require_accelerator: bool,
                  pull: str, network_mode: str | None, uid: int | None, gid: int | None,
                  state_dir: Path | None, **kwargs: Any) -> None:
    """Render, build and smoke-test the chosen variants; `--vendor auto` picks this host's vendor."""
    resolve_vendor(kwargs)
    options = render_options(mirrors, pip_index_url, pip_find_links)
    expansion, variants = chosen_variants(matrix_path, kwargs)
    variants = pinned_variants(variants, pin_bases, lock_path, options)
    settings = BuildSettings(options=options, state_dir=StateDir.at(state_dir), force=force or no_cache,
                             no_cache=no_cache, smoke=not no_smoke, require_accelerator=require_accelerator, pull=pull,
                             network_mode=network_mode, jobs=jobs, user_uid=uid, user_gid=gid)
    engine = Engine.connect()
    meta = {"started": datetime.now(timezone.utc), "host": socket.gethostname()}
    builder: Builder | None = None
    try:
        with progress_for(variants) as progress:
            builder = Builder(engine, compat.load_kb(), expansion, settings, status=progress,
                              templates_dir=templates_dir)
            outcomes = builder.run(variants)
    except KeyboardInterrupt:
        finished = builder.finished if builder is not None else []
        path = write_build_report(settings.state_dir, interrupted_outcomes(expansion, variants, finished),
                                  {**meta, "finished": datetime.now(timezone.utc), "partial": True})
        click.echo(f"accel-images: stopped; partial report: {path}", err=True)
        raise
    report_path = write_build_report(settings.state_dir, outcomes, {**meta, "finished": datetime.now(timezone.utc)})
    out.print(outcome_table(outcomes))
    failed = [o for o in outcomes if not o.ok]
    for outcome in failed:
        click.echo(f"FAILED {outcome.variant.key}: {outcome.error}", err=True)
    click.echo(f"{len(outcomes) - len(failed)} ok, {len(failed)} failed; report: {report_path}")
    sys.exit(1 if failed else 0)


def outcome_table(outcomes: list[Outcome]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("image", "status", "size", "build", "smoke"):
        table.add_column(column)
    for o in outcomes:
        smoke = "-" if o.smoke is None else o.smoke.summary()
        build_s = f"{o.build_s:.0f} s" if o.build_s is not None else "-"
        status = o.status if o.ok else f"failed: {o.error}"
        table.add_row(o.image, status, human_size(o.size), build_s, smoke)
    return table


def interrupted_outcomes(expansion: Expansion, variants: tuple[Variant, ...],
                         finished: list[Outcome]) -> list[Outcome]:
    """What finished, then every other variant as `interrupted`, in the order asked."""
    done = {outcome.variant: outcome for outcome in finished}
    return [done.get(v) or Outcome(v, "interrupted", image_ref(expansion, v), error="interrupted") for v in variants]


def write_build_report(state_dir: StateDir, outcomes: list[Outcome], meta: dict[str, Any] | None = None) -> Path:
    """reports/build/: report.json (its `variants` are the outcome records), Markdown, HTML grid, JUnit."""
    records = [outcome_record(o) for o in outcomes]
    meta = {"command": hide_credentials(" ".join(sys.argv)), **(meta or {})}
    paths = write_reports(records, state_dir.build_reports, meta)
    return paths["html"]


@main.command("smoke")
@click.argument("image")
@click.option("--require-accelerator", is_flag=True, help="Fail when the accelerator is missing.")
@click.option("--timeout", "timeout_s", default=600, show_default=True, type=click.IntRange(10, 7200))
@click.option("--json", "as_json", is_flag=True, help="Print the workload's JSON report.")
@expected_failures
def smoke_command(image: str, require_accelerator: bool, timeout_s: int, as_json: bool) -> None:
    """Run the smoke workload in IMAGE and check it against what the image's labels promise."""
    engine = Engine.connect()
    info = engine.inspect_image(image)
    if info is None:
        raise InputError(f"image {image} is not present locally (build or pull it first)")
    expectation = expectation_from_labels(image, info.labels)
    present = devices.accelerator_present(expectation.vendor)
    result = run_smoke(engine, image, expectation,
                       vendor_options=devices.device_options(expectation.vendor) if present else None,
                       require_accelerator=require_accelerator, timeout_s=timeout_s)
    if as_json and result.raw is not None:
        click.echo(json.dumps(result.raw, indent=2))
    click.echo(f"{image}: {result.summary()}")
    sys.exit(0 if result.ok else 1)


def expectation_from_labels(image: str, labels: dict[str, str]) -> Expectation:
    def label(name: str) -> str:
        return labels.get(f"{LABEL_PREFIX}.{name}", "")
    if not label("vendor") or not label("torch"):
        raise InputError(f"{image} has no {LABEL_PREFIX}.* labels: not an accel-images image")
    return Expectation(vendor=label("vendor"), torch=label("torch"), stack=label("stack") or None,
                       python=label("python"))


# The commands of the later stages live in their own modules (they import this module's options).
from accel_images.cli_fanout import COMMANDS as _FANOUT_COMMANDS  # noqa: E402
from accel_images.cli_nightly import nightly_command  # noqa: E402

for _command in (nightly_command, *_FANOUT_COMMANDS):
    main.add_command(_command)


if __name__ == "__main__":
    main()
