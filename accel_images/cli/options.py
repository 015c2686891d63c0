"""What the commands share: option decorators, the matrix selection, failure handling, the consoles.

Every command module imports this one, and `accel-images compat` or `--help` must not pay for
what only some commands need. So this module imports nothing heavier than click at load time:
the matrix and knowledge-base readers, the renderer, the pinning code and rich are imported by
the helpers that use them, when they are called.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from accel_images.errors import AccelError, InputError
from accel_images.formatting import inert

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from accel_images.builder.pin import Lock
    from accel_images.formatting import FittedTable
    from accel_images.render.contexts import RenderOptions
    from accel_images.plan.variants import Expansion
    from accel_images.model.variant import Variant

FILTER_KEYS = ("vendor", "stack", "torch", "python", "os", "flavor", "platform")


# ---- consoles -------------------------------------------------------------------------------

PIPE_WIDTH = 250
"""How wide out() writes into a pipe or a file."""


@functools.cache
def out() -> Console:
    """Standard output for tables: as wide as the terminal, or PIPE_WIDTH columns into a pipe or file.

    Neither console reads markup or emoji codes: what they print quotes logs, registry answers and
    hints (`--registry-mirror HOST=HOST[/PATH]`), whose brackets rich would take for tags."""
    from rich.console import Console
    return Console(highlight=False, markup=False, emoji=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


@functools.cache
def err() -> Console:
    """Standard error for tables beside --json and for notes."""
    from rich.console import Console
    return Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)


def cell(text: str) -> Text:
    """Text rich shows as it is, on any console: outside text in a table is never markup, and never an
    escape sequence either (formatting.inert)."""
    from rich.text import Text
    return Text(inert(text))


def note(text: str) -> None:
    """A line on standard error through err(), shown as it is."""
    err().print(cell(text))


def table(columns: Sequence[str], rows: Sequence[Sequence[str]], keep: Sequence[int] | None = None) -> FittedTable:
    """A table as the commands print it: no borders, a bold header, the first column (the name) never
    cut; on a narrow page the others give way by `keep`, lowest first (default: the rightmost first;
    accel_images.formatting)."""
    from accel_images.formatting import FittedTable, TableColumn
    ranks = keep or [len(columns) - index for index in range(len(columns))]
    shown = FittedTable([TableColumn(column, keep=rank) for column, rank in zip(columns, ranks, strict=True)])
    for row in rows:
        shown.add_row(*row)   # FittedTable shows each cell as a rich Text: never markup
    return shown


def print_table(columns: Sequence[str], rows: Sequence[Sequence[str]], keep: Sequence[int] | None = None) -> None:
    """Print table(columns, rows) on out(); as plain text, without loading rich, where that is the same bytes."""
    rows = [[inert(text) for text in row] for row in rows]
    lines = plain_table(columns, rows) if plain_output() else None
    if lines is None:
        print_rendered(out(), table(columns, rows, keep))
    else:  # no padding after the last column: `| cut`, `| awk '{print $NF}'`, diffs read it as written
        click.echo("".join(f"{line.rstrip()}\n" for line in lines), nl=False)


def print_rendered(console: Console, renderable: Any) -> None:
    """console.print(renderable); into a file or a pipe without the trailing spaces rich pads lines with."""
    if console.is_terminal:
        console.print(renderable)
        return
    from accel_images.formatting import rstrip_lines
    with console.capture() as captured:
        console.print(renderable)
    console.file.write(rstrip_lines(captured.get()))
    console.file.flush()


def print_line(text: str) -> None:
    """out().print(text); as plain text, without loading rich, where that is the same bytes."""
    text = inert(text)
    if plain_output() and plain_line(text):
        click.echo(text)
    else:
        out().print(cell(text))


def say(text: str, *, err: bool = False) -> None:
    """click.echo of one line that may hold outside text (a registry's tag, a smoke record's device):
    made inert first (formatting.inert)."""
    click.echo(inert(text), err=err)


def plain_output() -> bool:
    """Whether out() writes no escape codes: not a terminal, and no variable that makes rich act as one."""
    return not sys.stdout.isatty() and not {"FORCE_COLOR", "TTY_COMPATIBLE"} & set(os.environ)


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str] | None:
    """The lines out() prints for table(columns, rows) into a pipe or file, when rich has nothing to do:
    every cell plain text, the table narrower than the page. None when rich has work to do."""
    cells = [list(columns), *(list(row) for row in rows)]
    if not all(_plain_text(cell) for row in cells for cell in row):
        return None
    widths = [max(len(row[index]) for row in cells) for index in range(len(columns))]
    if sum(width + 2 for width in widths) >= PIPE_WIDTH:
        return None
    return ["".join(f" {cell.ljust(width)} " for cell, width in zip(row, widths, strict=True)) for row in cells]


def plain_line(text: str) -> bool:
    """Whether out().print(text) into a pipe or file writes `text` and a newline: plain and not wrapped."""
    return _plain_text(text) and len(text) < PIPE_WIDTH


EMOJI_CODE = re.compile(r":\S*:")
"""What could be one of rich's `:emoji:` codes (it looks the name up; this does not)."""


def _plain_text(text: str) -> bool:
    """Text rich prints unchanged: printable ASCII, no markup tag, nothing like an :emoji: code."""
    return all(" " <= char <= "~" for char in text) and "[" not in text and not EMOJI_CODE.search(text)


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """`--json` of the commands that write a run report: that report's JSON is the document printed."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print the run's report.json alone on stdout (the table and notes go to stderr).")(func)


def print_outcome(table: FittedTable, report_dir: Path, as_json: bool) -> None:
    """A run's table on stdout, or with --json its report document there and the table on stderr
    (one JSON document and nothing else on stdout, so `| jq` works)."""
    if not as_json:
        print_rendered(out(), table)
        return
    print_rendered(err(), table)
    from accel_images.report.reports import REPORT_FILES
    click.echo((report_dir / REPORT_FILES["json"]).read_text(), nl=False)


# ---- failures and signals -------------------------------------------------------------------

def expected_failures(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn an AccelError into one line on stderr and its exit code."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AccelError as error:
            from accel_images.formatting import in_users_terms
            click.echo(in_users_terms(f"accel-images: error: {error.one_line()}"), err=True)
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


# ---- option decorators ----------------------------------------------------------------------

def matrix_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--matrix", "matrix_path", default=None, type=click.Path(dir_okay=False),
                        help="The matrix file to read (default: ./matrix.yaml, else the one installed"
                             " with accel-images).")(func)


def engine_option(func: Callable[..., Any]) -> Callable[..., Any]:
    from accel_images.host.runtimes import ENGINES, LOCAL
    return click.option("--engine", type=click.Choice(ENGINES), default="docker", show_default=True,
                        help=f"The container runtime to run or print for ({', '.join(LOCAL)} run here; the others"
                             " are printed: a command line, a Kubernetes Pod, a Compose file). "
                             + pod_security_help())(func)


def nodes_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--nodes, --rdma-resource, --k8s-kind: the many-node forms (accel_images.host.cluster); the command gets
    them as `nodes`, `rdma_resource`, `k8s_kind`, made one Cluster by `cluster_of_options`."""
    from accel_images.host.cluster import K8S_KINDS
    func = click.option("--k8s-kind", "k8s_kind", type=click.Choice(K8S_KINDS), default="job", show_default=True,
                        help="With --nodes and --engine kubernetes: an indexed Job and a headless Service, or the"
                             " Kubeflow training operator's PyTorchJob.")(func)
    func = click.option("--rdma-resource", default=None, metavar="DOMAIN/NAME",
                        help="With --nodes and --engine kubernetes: the RDMA device plugin's resource each Pod asks"
                             " for (e.g. rdma/hca_shared_devices_a); without it NCCL uses TCP.")(func)
    return click.option("--nodes", default="1", show_default=True, metavar="N",
                        help="Print how to train on N nodes: the line for each node (docker, podman), srun across N"
                             " nodes (enroot, apptainer), N Pods (kubernetes), N services rehearsing them on this"
                             " host (compose); each runs torchrun.")(func)


def cluster_of_options(nodes: str, rdma_resource: str | None, k8s_kind: str) -> Any:
    """The Cluster the options describe; None for one node, whose forms are the one-node ones."""
    from accel_images.errors import InputError
    from accel_images.host.cluster import Cluster
    cluster = Cluster.parse(nodes, rdma_resource, k8s_kind)
    for option, given in (("--rdma-resource", rdma_resource is not None), ("--k8s-kind", k8s_kind != "job")):
        if given and not cluster.many:  # said, not ignored: a one-node Pod would not carry it
            raise InputError("applies to several nodes only", field=option, hint="pass --nodes N, N 2 or more")
    return cluster if cluster.many else None


def pod_security_help() -> str:
    """Which vendors' Pods need more than the restricted Pod Security Standard, and why: from the renderer's
    own decision (accel_images.host.runtimes.kubernetes.pod_security_level), for a `run` session."""
    from accel_images import vendors
    from accel_images.host.launch import launch
    from accel_images.host.runtimes.kubernetes import vendor_levels
    needs = vendor_levels([(name, launch("", name, Path("/nonexistent"))) for name in vendors.names()])
    return ("Kubernetes Pods meet the restricted Pod Security Standard" + (f", except: {needs}" if needs else "")
            + "; --volume (hostPath) needs privileged.")


def show_rendered(rendered: Any) -> None:
    """A runtime's line or document on standard output; what it cannot express, as notes on standard error.
    The image's name may come from a registry: every line is inert (formatting.inert)."""
    for note in rendered.notes:
        say(f"  note: {note}", err=True)
    click.echo("\n".join(inert(line) for line in rendered.text.split("\n")), nl=False)


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
    func = click.option("--pip-extra-index-url", default=None, metavar="URL",
                        help="The package index for what torch's index lacks (IPython), and pip's extra index"
                             " in the image (default: pypi.org; with --pip-index-url alone, that mirror).")(func)
    func = click.option("--pip-index-url", default=None,
                        help="Package index for every pip install; '{index}' becomes cu130, rocm7.2, xpu or cpu.")(func)
    func = click.option("--registry-mirror", "mirrors", multiple=True, metavar="REGISTRY=HOST[/PATH]",
                        help="Pull base images of REGISTRY through a mirror (repeatable).")(func)
    func = click.option("--apt-mirror", "apt_mirrors", multiple=True, metavar="HOST=URL",
                        help="Fetch OS packages of HOST (the base's own archive or an extra repository, e.g."
                             " deb.debian.org=http://mirror.example.com) from URL, which replaces http(s)://HOST;"
                             " the path after HOST is kept (repeatable).")(func)
    func = click.option("--without-companion", "without_companions", multiple=True, metavar="NAME",
                        help="Build without this companion of torch (torchvision, torchaudio), which is otherwise"
                             " installed, and a wheelhouse that lacks it an error; the image, its reports and the"
                             " catalogue say it is left out (repeatable).")(func)
    return func


PIP_FETCH = ("host", "build")


def wheel_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Where `build` and `nightly` fetch wheels, and the cache that keeps them (accel_images.builder.wheels)."""
    func = click.option("--cache-max-size", "cache_max_size", default=None, metavar="SIZE",
                        help="After the run, prune the wheel cache to SIZE (e.g. 50G), least recently used first"
                             " (default: never prune).")(func)
    func = click.option("--cache-dir", "cache_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="Keep the wheels fetched on this host here, between runs and state directories"
                             " (default: <state dir>/cache/wheels).")(func)
    func = click.option("--pip-fetch", "pip_fetch", type=click.Choice(PIP_FETCH), default="host", show_default=True,
                        help="host: this machine fetches each wheel once from the variant's index and every build"
                             " installs from that copy; build: each build's pip fetches from the index itself."
                             " Without effect with --pip-find-links.")(func)
    return func


def wheel_settings(pip_fetch: str, cache_dir: Path | None, cache_max_size: str | None) -> tuple[bool, Path | None,
                                                                                                int | None]:
    """(host fetch, cache directory, cache limit in bytes) from wheel_options' values."""
    from accel_images.formatting import parse_size
    try:
        limit = parse_size(cache_max_size) if cache_max_size is not None else None
    except ValueError as error:
        raise InputError(str(error), field="--cache-max-size") from None
    return pip_fetch == "host", cache_dir, limit


def verbosity_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """-q / -v: the progress shown while building (accel_images.builder.progress); the summary is always printed."""
    func = click.option("-v", "--verbose", "verbose", is_flag=True,
                        help="Stream every build log line (they are always in the log files).")(func)
    func = click.option("-q", "--quiet", "quiet", is_flag=True, help="Show only each variant's outcome.")(func)
    return func


def verbosity(quiet: bool, verbose: bool) -> int:
    if quiet and verbose:
        raise InputError("-q and -v contradict each other; give one", field="--quiet")
    return -1 if quiet else 1 if verbose else 0


def smoke_nodes_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--smoke-nodes N (`build`, `nightly`): the N-node smoke test after the smoke test, on the same image."""
    from accel_images.smoke.nodes import MAX_NODES   # the standard library's and the smoke package's own modules
    return click.option("--smoke-nodes", "smoke_nodes", default=0, show_default=True,
                        type=click.IntRange(0, MAX_NODES), metavar="N",
                        help=f"After each image's smoke test passed, run it on N containers joined by torchrun"
                             f" (as `smoke --nodes N`: an exact all-reduce and its bandwidth); a failure fails the"
                             f" image's smoke test. 0 or 1: not run; at most {MAX_NODES}.")(func)


def lock_options(func: Callable[..., Any]) -> Callable[..., Any]:
    from accel_images.builder import pin  # the commands that take these render anyway; pin imports the renderer
    func = click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help=f"Render base images as repository@digest from this lock file (default with --pin:"
                             f" {pin.LOCK_FILE}).")(func)
    func = click.option("--pin", "pin_bases", is_flag=True,
                        help="Resolve every base image to its digest now and record it in the lock file.")(func)
    return func


# ---- what the options select ----------------------------------------------------------------

WHEELHOUSE_HINT = ("a wheelhouse holds torch for the image's Python, its dependencies, numpy, IPython and the"
                   " companions: README, Mirrors and offline builds; `make engine` makes the one CI uses")

def render_options(mirrors: tuple[str, ...], pip_index_url: str | None,
                   pip_find_links: Path | None, apt_mirrors: tuple[str, ...] = (),
                   without_companions: tuple[str, ...] = (), host_fetch: bool = False,
                   pip_extra_index_url: str | None = None) -> RenderOptions:
    from accel_images.render.apt import AptMirror
    from accel_images.model.reference import Mirror
    from accel_images.render.contexts import RenderOptions
    if pip_find_links is not None and not pip_find_links.is_dir():
        raise InputError(f"wheelhouse directory {pip_find_links} does not exist", field="--pip-find-links",
                         hint=WHEELHOUSE_HINT)
    return RenderOptions(tuple(Mirror.parse(m) for m in mirrors), pip_index_url, pip_find_links,
                         tuple(AptMirror.parse(m) for m in apt_mirrors), checked_companions(without_companions),
                         host_fetch=host_fetch, pip_extra_index_url=pip_extra_index_url)


def checked_companions(names: tuple[str, ...]) -> tuple[str, ...]:
    """--without-companion values: each must be a companion some torch release is paired with."""
    if not names:
        return ()
    from accel_images.kb import compat
    from accel_images.render.companions import WITHOUT_OPTION, known_names
    known = known_names(row.companions for row in compat.load_kb().torch.values())
    for name in names:
        if name not in known:
            raise InputError(f"{name!r} is not a companion of torch (companions: {', '.join(known)})",
                             field=WITHOUT_OPTION)
    return tuple(sorted(set(names)))


def given_lock(pin_bases: bool, lock_path: Path | None) -> Lock | None:
    """The lock file a command will read (--lock; the one --pin merges into, where it exists), read now:
    bad input is refused before a command writes anything (a build takes the state directory's lock
    first, which creates it). None where no lock is read."""
    if not pin_bases and lock_path is None:
        return None
    from accel_images.builder import pin
    path = lock_path or pin.LOCK_FILE
    if pin_bases and not path.exists():
        return None
    return pin.read_lock(path)


def pinned_variants(variants: tuple[Variant, ...], pin_bases: bool, lock_path: Path | None,
                    options: RenderOptions, given: Lock | None = None) -> tuple[Variant, ...]:
    """The variants with bases from the lock (refreshed first with --pin); unchanged without either.
    `given`: the lock file already read (given_lock), not read again."""
    if not pin_bases and lock_path is None:
        return variants
    from accel_images.builder import pin
    path = lock_path or pin.LOCK_FILE
    if pin_bases:
        from accel_images.builder.engine import Engine
        lock = pin.pin(Engine.connect(), variants, options.mirrors, path)
        note(f"pinned {len(lock.bases)} base image(s) in {path}")
    else:
        lock = given or pin.read_lock(path)
    return pin.apply(lock, variants, path)


def load_expansion(matrix_path: str | None) -> Expansion:
    from accel_images.kb import compat
    from accel_images.plan.matrix import load_matrix
    from accel_images.resources import default_matrix
    from accel_images.plan.variants import expand
    return expand(load_matrix(default_matrix() if matrix_path is None else matrix_path), compat.load_kb())


def filters_of(kwargs: dict[str, Any]) -> dict[str, str | None]:
    return {key: kwargs.get(key) for key in FILTER_KEYS}


def chosen_variants(matrix_path: str | None, kwargs: dict[str, Any],
                    options: RenderOptions | None = None) -> tuple[Expansion, tuple[Variant, ...]]:
    """The matrix and the variants the filters choose; `options`' mirrors checked against the matrix."""
    from accel_images.plan.variants import select_or_explain
    expansion = load_expansion(matrix_path)
    if options is not None and options.mirrors:
        from accel_images.builder.mirror_check import check_mirrors
        check_mirrors(options.mirrors, expansion.variants)
    filters = filters_of(kwargs)
    _check_filter_values(filters)
    return expansion, select_or_explain(expansion, filters)


def _check_filter_values(filters: dict[str, str | None]) -> None:
    for key, value in filters.items():
        if value is not None and (not value or any(c.isspace() or c in ";|&$`'\"\\<>" for c in value)):
            raise InputError(f"{value!r} is not a valid {key}", field=f"--{key}")
    if filters.get("vendor") is not None:
        from accel_images import vendors
        vendors.checked(filters["vendor"] or "")


def variant_record(variant: Variant, image: str) -> dict[str, Any]:
    """One variant as `list --json` and `recommend --json` print it."""
    return {"vendor": variant.vendor, "stack": variant.stack, "torch": variant.torch, "python": variant.python,
            "os": variant.os, "flavor": variant.flavor, "tag": variant.tag, "image": f"{image}:{variant.tag}",
            "base_image": variant.base_image, "wheel_index": variant.wheel_index,
            "min_driver": variant.min_driver, "gpu_archs": list(variant.gpu_archs),
            "platform": variant.platform, "platforms": list(variant.platforms)}


# ---- choosing an image for this host (recommend, pull, run, devcontainer) ---------------------

CHOICE_KEYS = ("vendor", "stack", "torch", "python", "os")
"""Filters that narrow what is chosen from (accel_images.host.choosing.CHOICE_FILTERS); the flavor is a preference."""
FLAVORS = ("runtime", "devel")


def choice_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by recommend, pull, run and devcontainer; the command gets `request` and `host_json`."""
    for key in reversed(CHOICE_KEYS):
        default_help = " (default: the host's)" if key == "vendor" else ""
        func = click.option(f"--{key}", key, default=None,
                            help=f"Only images with this {key}{default_help}.")(func)
    func = click.option("--host-json", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
                        default=None, metavar="FILE|-", help=host_json_help())(func)
    func = click.option("--flavor", type=click.Choice(FLAVORS), default="runtime", show_default=True,
                        help="Preferred flavor; another is chosen only when none of this one fits.")(func)
    func = click.option("--from-matrix", is_flag=True,
                        help="With --registry: choose from the matrix (what can be built) instead of the"
                             " registry's catalogue; nothing is checked against the registry.")(func)
    func = click.option("--image", "image_name", default=None, metavar="NAME",
                        help="Repository name under the registry (default: the matrix's image name).")(func)
    func = click.option("--registry", default=None, metavar="[http[s]://]HOST[:PORT][/NAMESPACE]",
                        envvar="ACCEL_IMAGES_REGISTRY", show_envvar=True, help=registry_help())(func)
    func = click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="The state directory whose builds come first (default: ./.accel-images).")(func)
    return matrix_option(func)


def registry_help() -> str:
    """--registry's help: where an image comes from when this host did not build it, and the other two ways
    to name the registry (accel_images.host.sources)."""
    from accel_images.host.sources import shown_config_path
    return ("Where images this host did not build come from: choose among those this registry publishes and whose"
            " smoke test passed (its catalogue). Also `registry: REG` in"
            f" {shown_config_path()}. Without any, only images built here run: nothing is pulled by a name"
            " without a registry.")


def host_json_help() -> str:
    """--host-json's help: the option is how a node's description reaches a machine without its GPUs, so
    its help says where a description comes from and where its format is written down."""
    from accel_images.host.describe import SCHEMA_NAME
    return ("Judge this recorded host instead of detecting one: the JSON `accel-images host describe` prints on"
            " the node ('-' reads standard input). Its format, every field optional: the JSON Schema"
            f" {SCHEMA_NAME} in the installed package, which `accel-images host schema` prints.")


def choice_request(matrix_path: str | None, registry: str | None, image_name: str | None, from_matrix: bool,
                   flavor: str, kwargs: dict[str, Any]) -> Any:
    """The accel_images.host.choosing.Request the choice options describe, the filter values checked."""
    from accel_images.host.choosing import Request
    from accel_images.host.sources import configured_registry
    filters = {key: kwargs.get(key) for key in CHOICE_KEYS}
    _check_filter_values(filters)
    return Request(matrix_path, configured_registry(registry), image_name, from_matrix, flavor, filters,
                   kwargs.get("state_dir"))


def show_choice(choice: Any) -> None:
    """The host, where the images came from, why this one and not the others: on stderr, for people."""
    from accel_images.host.recommend import describe_host
    rec = choice.recommendation
    say(f"host: {describe_host(choice.host)}", err=True)
    say(f"  from: {choice.source.note}", err=True)
    for index, reason in enumerate(rec.reasons):
        say(f"  {'why' if rec.ok and index == 0 else 'not'}: {reason}", err=True)
    for warning in rec.warnings:
        say(f"  warning: {warning}", err=True)
