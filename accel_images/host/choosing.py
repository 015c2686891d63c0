"""Which image this host should use, and from what: this host's builds, a registry's catalogue or the matrix.

Shared by `recommend`, `pull`, `run` and `devcontainer`. The images this host built, as its state
directory records them (accel_images.host.sources), come first: the one the user just built is the
one `run` starts. Then, with a registry, the images it publishes now and whose smoke test passed
(accel_images.publish.catalogue), with the facts their labels carry. The matrix says only what could
be built: it is used when no registry is named, or with `--from-matrix`, and the answer says which it
was; without a registry such a choice exists nowhere yet (Choice.obtainable is false), and only
`recommend` shows it, as the build to make. The judging itself is accel_images.host.recommend's, the
same for all three.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accel_images import untrusted
from accel_images import vendors
from accel_images.kb import compat
from accel_images.errors import AcceleratorUnusable, IncompatibleError, InputError
from accel_images.model.hostinfo import HostInfo
from accel_images.host.launch import Launch, launch
from accel_images.host.recommend import (Recommendation, default_vendor, docker_run_line, recommend,
                                         unusable_warning)
from accel_images.host.sources import REGISTRY_ENV, not_available, shown_config_path
from accel_images.state import StateDir

if TYPE_CHECKING:
    from collections.abc import Sequence

    from accel_images.plan.matrix import User
    from accel_images.publish.catalogue import Entry
    from accel_images.plan.variants import Expansion

CHOICE_FILTERS = ("vendor", "stack", "torch", "python", "os")
"""Filters that narrow what is chosen from; the flavor is a preference instead."""


@dataclass(frozen=True)
class Source:
    """Where the images chosen from were listed: `registry` (published and smoke-tested) or `matrix`."""

    kind: str
    where: str
    note: str

    def record(self) -> dict[str, str]:
        return {"kind": self.kind, "where": self.where, "note": self.note}


@dataclass(frozen=True)
class Choice:
    host: HostInfo
    recommendation: Recommendation
    source: Source
    user: User
    """The image's non-root user (the matrix's `user`): a devcontainer's remoteUser, a pod's runAsUser."""
    local: bool = False
    """The image is named by its local name, never pulled: a build of this host, or one still to build."""
    obtainable: bool = True
    """The image can be had: built here, or from a registry the user named. False for a choice from the
    matrix without a registry: it exists nowhere yet, and only the build it needs is shown."""
    state_root: Path | None = None
    """The state directory whose builds were looked at."""


@dataclass(frozen=True)
class Request:
    """What the user asked for: the options recommend, pull, run and devcontainer share."""

    matrix_path: str | None = None
    registry: str | None = None
    image: str | None = None
    from_matrix: bool = False
    flavor: str = "runtime"
    filters: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    state_dir: Path | None = None
    """Whose builds come first (`--state-dir`; default ./.accel-images)."""
    host_described: bool = False
    """The host is a description handed in (--host-json), not this machine: its platform is the one asked for."""


def choose(request: Request, host: HostInfo) -> Choice:
    """The recommendation for `host`; IncompatibleError (after nothing fitted) is the caller's to raise.

    In the order of accel_images.host.sources: a build of this host that fits, else the registry's
    catalogue, else the matrix (by the registry's name where one is named, else by the local name the
    build would give it, which nothing is pulled by)."""
    filters = {key: request.filters.get(key) for key in CHOICE_FILTERS}
    filters["vendor"] = filters["vendor"] or default_vendor(host)
    kb = compat.load_kb()
    expansion = load_expansion(request.matrix_path, kb)
    state = StateDir.at(request.state_dir)
    built = _from_builds(request, host, filters, kb, expansion, state)
    if built is not None:
        return built
    if request.registry and not request.from_matrix:
        return replace(_from_registry(request, host, filters, kb, request.image or expansion.image, expansion.user),
                       state_root=state.root)
    from accel_images.plan.variants import select_or_explain
    variants = select_or_explain(expansion, filters)
    image = request.image or expansion.image
    rec = recommend(host, variants, kb, image=image, registry=request.registry, prefer_flavor=request.flavor)
    where = request.matrix_path or ("./matrix.yaml" if Path("matrix.yaml").is_file()
                                    else "the matrix packaged with accel-images")
    note = (f"chosen from {where}: what can be built, not checked against a registry"
            + ("" if request.registry else f" (--registry REG, {REGISTRY_ENV} or `registry:` in {shown_config_path()}"
                                             " chooses among published, smoke-tested images)"))
    choice = Choice(host, rec, Source("matrix", where, note), expansion.user, state_root=state.root)
    if request.registry or rec.variant is None or rec.image is None:
        return choice
    # no registry: the image exists nowhere yet; its lines name it as the build will, never pulled
    ref = f"{image}:{rec.variant.local_tag}"
    rec = replace(rec, image=ref, docker_run=docker_run_line(rec.variant.vendor, ref, local=True))
    return replace(choice, recommendation=rec, local=True, obtainable=False)


def _from_builds(request: Request, host: HostInfo, filters: dict[str, str | None], kb: compat.KnowledgeBase,
                 expansion: Expansion, state: StateDir) -> Choice | None:
    """The newest fitting image this state directory recorded building, by its local name; None when none
    fits (or none was built), so the registry or the matrix is asked next."""
    from accel_images.plan.variants import select
    from accel_images.smoke.records import built_images
    built = built_images(state)
    image = request.image or expansion.image
    variants = [v for v in select(expansion.variants, filters) if f"{image}:{v.local_tag}" in built]
    if not variants:
        return None
    rec = recommend(host, variants, kb, image=image, prefer_flavor=request.flavor)
    if rec.variant is None:
        return None
    ref = f"{image}:{rec.variant.local_tag}"
    rec = replace(rec, image=ref, docker_run=docker_run_line(rec.variant.vendor, ref, local=True))
    note = (f"chosen from the images built here ({state.root}: {len(variants)} of them fit the filters), before any"
            " registry: it runs from the engine's own store, never pulled")
    return Choice(host, rec, Source("local", str(state.root), note), expansion.user, local=True, state_root=state.root)


def load_expansion(matrix_path: str | None, kb: compat.KnowledgeBase) -> Expansion:
    """The matrix given, else `./matrix.yaml`, else the one the package carries, expanded."""
    from accel_images.plan.matrix import load_matrix
    from accel_images.resources import default_matrix
    from accel_images.plan.variants import expand
    return expand(load_matrix(default_matrix() if matrix_path is None else matrix_path), kb)


def _from_registry(request: Request, host: HostInfo, filters: dict[str, str | None], kb: compat.KnowledgeBase,
                   image: str, user: User) -> Choice:
    from accel_images.publish.catalogue import read_catalogue, variant_of
    from accel_images.registry import Destination, RegistryClient
    from accel_images.plan.variants import select
    destination = Destination.parse(request.registry or "")
    catalogue = read_catalogue(RegistryClient.for_destination(destination), destination.repository(image))
    if not catalogue.entries:
        raise catalogue.nothing_published("check --registry and --image, or pass --from-matrix")
    by_variant = {variant: entry for entry in catalogue.offered() if (variant := variant_of(entry, kb)) is not None}
    variants = select(by_variant, filters)
    rec = recommend(host, variants, kb, image=catalogue.repository, registry=destination.host,
                    prefer_flavor=request.flavor)
    unoffered = [f"{entry.tag}: {entry.why_not}" for entry in catalogue.entries if not entry.offered]
    unoffered += [f"{line} (left out)" for line in catalogue.unreadable]
    warnings = list(rec.warnings)
    chosen = by_variant.get(rec.variant) if rec.variant else None
    if chosen is not None and chosen.smoke is not None and chosen.smoke.cpu_mode and rec.variant is not None:
        warnings.append(f"{chosen.tag} was smoke-tested in CPU mode only: no {rec.variant.vendor} runner ran it")
    digest = None
    if chosen is not None:
        digest = pinned_digest(chosen, request.host_described)
        warnings += index_warnings(chosen, catalogue.entries, digest)
    rec = replace(rec, reasons=(*rec.reasons, *unoffered), warnings=tuple(warnings), digest=digest)
    passed = f"{len(catalogue.offered())} passed their smoke test"
    note = f"chosen from registry {catalogue.where}: {len(catalogue.entries)} image(s) published, {passed}"
    if chosen is not None and chosen.smoke is not None:
        note += f"; {chosen.tag} {chosen.smoke.summary()}"
    return Choice(host, rec, Source("registry", catalogue.where, note), user)


def pinned_digest(chosen: Entry, host_described: bool) -> str:
    """The digest every rendered form names: the image index where the tag is one, so each node takes its own
    platform's image (a Pod written on an x86_64 workstation runs on an arm64 node); the platform's image
    itself only where that platform was asked for, by handing in the host (--host-json). Never the image
    of the machine running the command merely because it runs it."""
    if chosen.index is None or host_described:
        return chosen.digest
    return chosen.index


def index_warnings(chosen: Entry, entries: Sequence[Entry], digest: str) -> list[str]:
    """Where the index digest is named and another platform's image in it is not offered, say so: a node of
    that platform would run it."""
    if digest != chosen.index:
        return []
    return [f"{chosen.tag} is named by its index {digest[:19]}, whose {entry.platform} image is not offered"
            f" ({entry.why_not}): a {entry.platform} node would run it; pass --host-json of the node to name its"
            " own image" for entry in entries
            if entry.tag == chosen.tag and entry.platform != chosen.platform and not entry.offered]


# ---- the host ---------------------------------------------------------------------------------

MAX_HOST_JSON_BYTES = 1 << 20
"""A recorded host is a few hundred bytes."""


STDIN = Path("-")
"""`--host-json -`: the description on standard input, so `host describe | recommend --host-json -` works."""


def load_host(host_json: Path | None) -> HostInfo:
    """The detected host, or the recorded one (`host describe`'s output) a test or a support request hands in."""
    if host_json is None:
        from accel_images.host.detect import detect_host
        return detect_host()
    where = "standard input" if host_json == STDIN else str(host_json)
    try:
        data = untrusted.loads(_host_bytes(host_json))
    except OSError as err:
        raise InputError(f"cannot read a host from {where}: {err.strerror}", field="--host-json") from None
    except ValueError as err:
        raise InputError(f"cannot read a host from {where}: {err}", field="--host-json") from None
    known = {field.name for field in dataclasses.fields(HostInfo)}
    if not isinstance(data, dict) or set(data) - known:
        unknown = ", ".join(sorted(set(data) - known)) if isinstance(data, dict) else "not an object"
        raise InputError(f"{where}: not a host description ({unknown})", field="--host-json",
                         hint=f"fields: {', '.join(sorted(known))}")
    vendor = data.get("vendor", "cpu")
    if isinstance(vendor, str) and vendor not in vendors.names():  # any other type: _HOST_FIELD_KINDS says so
        raise vendors.unknown(vendor, field="--host-json", where=f"{where}: ")
    values: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
    for key, value in values.items():
        if not _host_value_ok(key, value):
            raise InputError(f"{where}: {key} is {value!r}, not {_HOST_FIELD_KINDS[key][1]}", field="--host-json")
    return HostInfo(**values)


def _host_bytes(host_json: Path) -> bytes:
    """The description's bytes, from the file or from standard input, read to a bound either way: a
    description is a few hundred bytes, and a pipe from the wrong command may never end."""
    if host_json == STDIN:
        if sys.stdin.isatty():  # nothing is piped in: reading would wait for a person to type JSON
            raise ValueError("standard input is a terminal: pipe `accel-images host describe` into it")
        data = sys.stdin.buffer.read(MAX_HOST_JSON_BYTES + 1)
        if len(data) > MAX_HOST_JSON_BYTES:
            raise untrusted.FileTooLarge("standard input", 0, MAX_HOST_JSON_BYTES)
        return data
    return untrusted.read_limited(host_json, MAX_HOST_JSON_BYTES)


_HOST_FIELD_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "vendor": (lambda v: isinstance(v, str), "a vendor name"),
    "device_count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a count"),
    **{key: (lambda v: v is None or isinstance(v, str), "a string or null")
       for key in ("driver_version", "stack_version", "unusable", "machine")},
    **{key: (lambda v: isinstance(v, tuple) and all(isinstance(x, str) for x in v), "a list of strings")
       for key in ("gpu_names", "gpu_archs", "evidence", "kernel_drivers")},
}
"""How each HostInfo field is spelled in JSON (a field missing here is taken as it comes)."""


def _host_value_ok(key: str, value: Any) -> bool:
    check = _HOST_FIELD_KINDS.get(key)
    return check is None or check[0](value)


# ---- what follows a choice ----------------------------------------------------------------------

def nothing_fits(choice: Choice) -> IncompatibleError:
    rec, host = choice.recommendation, choice.host
    where = "in the matrix" if choice.source.kind == "matrix" else f"published in {choice.source.where}"
    return IncompatibleError(f"no image {where} fits this {host.vendor} host"
                             f" ({len(rec.reasons)} rejected; first: {rec.reasons[0]})")


def refuse_fallback(choice: Choice, asked_vendor: str | None) -> None:
    """After the CPU image was printed (and pulled) in place of a broken accelerator's: exit 6, so a
    script notices; unless the user asked for that vendor's images (`--vendor cpu`)."""
    host, rec = choice.host, choice.recommendation
    chosen = rec.variant.vendor if rec.variant else None
    if host.unusable and chosen not in (None, host.vendor, asked_vendor):
        raise AcceleratorUnusable(f"{unusable_warning(host)}; the {chosen} image was chosen instead",
                                  hint=f"fix the {vendors.title(host.vendor)} driver, or pass --vendor {chosen}")


def chosen_launch(choice: Choice, dev_root: Path = Path("/")) -> Launch:
    """recommend's Launch for what `choice` chose: the image (by digest where the catalogue said it), its
    vendor's devices as the chosen-for host describes them and its session settings (as `run` has them), the
    image's own user, the host's device count; no host user, workspace or identity."""
    rec = choice.recommendation
    if rec.image is None or rec.variant is None:
        raise nothing_fits(choice)
    return replace(launch(rec.image, rec.variant.vendor, dev_root, host=choice.host), digest=rec.digest,
                   image_user=(choice.user.uid, choice.user.gid), rootless=os.geteuid() != 0, local=choice.local,
                   device_count=host_devices(choice.host, rec.variant.vendor))


def host_devices(host: HostInfo, vendor: str) -> int | None:
    """How many of `vendor`'s accelerators `host` counts, where it has a usable one; None otherwise (a
    scheduler is then asked for one, and the form says so)."""
    if host.vendor != vendor or host.unusable or host.device_count <= 0 or not vendors.get(vendor).accelerator:
        return None
    return host.device_count


def refuse_unobtainable(choice: Choice, matrix_path: str | None = None) -> None:
    """Stop, with the one line naming both ways to an image, when the choice exists nowhere: what `run`,
    `pull` and `devcontainer` would otherwise hand an engine is a name Docker Hub answers."""
    rec = choice.recommendation
    if choice.obtainable or rec.image is None:
        return
    raise not_available(rec.image, choice.state_root or StateDir.at().root, build_command(choice, matrix_path))


def build_command(choice: Choice, matrix_path: str | None = None) -> str | None:
    """`accel-images build ...` naming the chosen variant exactly, so it builds that image and no other."""
    variant = choice.recommendation.variant
    if variant is None:
        return None
    filters = {"vendor": variant.vendor, "stack": variant.stack, "torch": variant.torch, "python": variant.python,
               "os": variant.os, "flavor": variant.flavor}
    matrix = f" --matrix {shlex.quote(matrix_path)}" if matrix_path else ""
    return "accel-images build" + matrix + "".join(f" --{key} {value}" for key, value in filters.items() if value)


def build_first(choice: Choice, registry: str | None, matrix_path: str | None = None) -> str | None:
    """For an image chosen from the matrix, a shell comment with the command that builds it, for the same
    stream as the `docker run` line (None for an image built here or chosen from a registry's catalogue):
    an image that exists nowhere must not look runnable. Without a registry it names the other way too."""
    command = build_command(choice, matrix_path)
    if choice.source.kind != "matrix" or command is None:
        return None
    if registry:
        local = (choice.recommendation.image or "").removeprefix(registry.split("://", 1)[-1].rstrip("/") + "/")
        return (f"# chosen from the matrix, not checked against {registry}: if it does not publish this image, build"
                f" it first with `{command}` (named {local} here)")
    from accel_images.host.sources import ways_to_get
    return f"# not built here, and no registry is configured: {ways_to_get(choice.recommendation.image or '', command)}"
