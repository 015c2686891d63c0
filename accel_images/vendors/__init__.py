"""The vendors: one module each behind the `Vendor` protocol (vendors/base.py), collected here.

Built-in vendors are the modules named in BUILTIN. More can be added without touching the
package, each as a module defining `VENDOR` (with its template and knowledge-base section beside
it): from the directories in $ACCEL_IMAGES_VENDOR_PATH (separated like PATH), or from installed
distributions through the `accel_images.vendors` entry-point group. Order matters where the tool
lists vendors (tables, reports); host detection has its own order (`detect_rank`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import os
import sys
from importlib.machinery import PathFinder
from pathlib import Path
from typing import TYPE_CHECKING

from accel_images.errors import InputError
from accel_images.model.devices import DeviceOptions
from accel_images.vendors.base import Vendor as Vendor  # re-exported: callers name vendors.Vendor

if TYPE_CHECKING:
    from accel_images.model.hostinfo import HostInfo

BUILTIN = ("cpu", "cuda", "rocm", "xpu", "gaudi")
PATH_ENV = "ACCEL_IMAGES_VENDOR_PATH"
ENTRY_POINT_GROUP = "accel_images.vendors"


def registry() -> dict[str, Vendor]:
    """Every vendor, by name, in listing order: built-ins, then plug-ins."""
    return dict(_registry(os.environ.get(PATH_ENV, "")))


@functools.lru_cache(maxsize=8)
def _registry(search_path: str) -> tuple[tuple[str, Vendor], ...]:
    found: dict[str, Vendor] = {}
    for vendor in (*_builtin(), *_from_entry_points(), *_from_path(search_path)):
        if vendor.name in found:
            raise InputError(f"two vendors are named {vendor.name!r}", field=PATH_ENV)
        found[vendor.name] = vendor
    return tuple(found.items())


def _builtin() -> list[Vendor]:
    return [importlib.import_module(f"accel_images.vendors.{name}").VENDOR for name in BUILTIN]


def _from_entry_points() -> list[Vendor]:
    if not _may_declare_entry_points():
        return []
    from importlib import metadata  # a fifth of `accel-images list`'s start-up: only when a plug-in may exist
    return [entry.load() for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)]


def _may_declare_entry_points() -> bool:
    """False only when no distribution on sys.path can declare ENTRY_POINT_GROUP.

    A cheap look at the `*.dist-info` / `*.egg-info` directories importlib.metadata would read;
    anything it does not cover (a zip or egg on sys.path, another finder of distributions)
    answers True, so that importlib.metadata decides.
    """
    if any(hasattr(finder, "find_distributions") and finder is not PathFinder for finder in sys.meta_path):
        return True
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except NotADirectoryError:
            return True
        except OSError:
            continue
        if entry.endswith(".egg") or any(_declares(entry, name) for name in names):
            return True
    return False


def _declares(directory: str, name: str) -> bool:
    if not name.lower().endswith((".dist-info", ".egg-info")):
        return False
    try:
        with open(os.path.join(directory or ".", name, "entry_points.txt"), encoding="utf-8") as handle:
            return ENTRY_POINT_GROUP in handle.read()
    except UnicodeDecodeError:
        return True  # not ours to judge: importlib.metadata reads it as it always did
    except OSError:
        return False


def _from_path(search_path: str) -> list[Vendor]:
    vendors = []
    for directory in filter(None, search_path.split(os.pathsep)):
        for module_file in sorted(Path(directory).glob("*.py")):
            vendors.append(_load_module_vendor(module_file))
    return vendors


def _load_module_vendor(module_file: Path) -> Vendor:
    spec = importlib.util.spec_from_file_location(f"accel_images_vendor_{module_file.stem}", module_file)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot load vendor module {module_file}", field=PATH_ENV)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would: its classes name a module that can be found (its file)
    spec.loader.exec_module(module)
    vendor = getattr(module, "VENDOR", None)
    if not isinstance(vendor, Vendor):
        raise InputError(f"{module_file} defines no VENDOR implementing the Vendor protocol", field=PATH_ENV)
    return vendor


def names() -> tuple[str, ...]:
    return tuple(registry())


def get(name: str) -> Vendor:
    """The vendor called `name`; an unknown name is bad input, naming the known ones."""
    try:
        return registry()[name]
    except KeyError:
        raise unknown(name, field="vendor") from None


ALIASES = {"nvidia": "cuda", "amd": "rocm", "intel": "xpu", "habana": "gaudi"}
"""What people call a vendor (its company) -> the name this tool uses (its stack). The one table: every
`--vendor` and a recorded host's `vendor` suggest from it."""
CLOSE_ENOUGH = 0.7
"""Above difflib's default (0.6), which any three-letter name one letter off reaches: cpu and xpu are
0.67 apart, so 'tpu' would come back as xpu. At 0.7 'cdua', 'rcom' and 'guadi' still find theirs."""


def suggestion(name: str) -> str | None:
    """The vendor an unknown `name` most likely means: another case of a name, an alias's vendor, else the
    closest spelling; None for a known name or one like none, where guessing would mislead."""
    known = names()
    if name in known:
        return None
    lowered = name.lower()
    meant = lowered if lowered in known else ALIASES.get(lowered)
    if meant in known:
        return meant
    close = difflib.get_close_matches(lowered, known, n=1, cutoff=CLOSE_ENOUGH)
    return close[0] if close else None


def unknown(name: str, field: str, where: str = "") -> InputError:
    """The error for a vendor nobody is called: one line, with the name meant when one is close, else
    the names there are. `where` prefixes the message (the file a recorded host came from)."""
    meant = suggestion(name)
    if meant is not None:
        return InputError(f"{where}unknown vendor {name!r}: did you mean {meant!r}?", field=field)
    return InputError(f"{where}unknown vendor {name!r}", field=field, hint=f"one of {', '.join(names())}")


def checked(name: str, field: str = "--vendor") -> str:
    """`name` when a vendor is called that: options check it before the matrix is read, so a typo or a
    company's name is answered with the vendor meant, not with an empty selection."""
    if name not in names():
        raise unknown(name, field)
    return name


def rank(name: str) -> int:
    """Listing order: built-ins first as in BUILTIN, then plug-ins, unknown names last."""
    order = names()
    return order.index(name) if name in order else len(order)


def by_detection_order() -> list[Vendor]:
    return sorted(registry().values(), key=lambda vendor: vendor.detect_rank)


def fallback() -> str:
    """The vendor without an accelerator (CPU): what a host with none, or with a broken one, runs."""
    return next(vendor.name for vendor in by_detection_order() if not vendor.accelerator)


def title(name: str) -> str:
    """How reports name a vendor ('NVIDIA CUDA'); a name this installation does not know, as is."""
    vendor = registry().get(name)
    return vendor.title if vendor else name


def stack_label(name: str, stack: str | None) -> str:
    """'CUDA 13.2', 'oneAPI 2026.1'; '' without a stack."""
    vendor = registry().get(name)
    return f"{vendor.stack_name if vendor else name} {stack}" if stack else ""


def device_options(vendor: str, dev_root: Path = Path("/"), host: HostInfo | None = None) -> DeviceOptions:
    """The options `vendor` needs, with the host's group ids of its device files filled in, and what the
    description of the node they are for decides (`host`: detected, or recommend's --host-json).

    `dev_root` is the directory standing for `/` (a fake tree in tests).
    """
    if host is None:
        return get(vendor).device_options(dev_root)
    return get(vendor).host_device_options(host, dev_root)


def accelerator_present(vendor: str, dev_root: Path = Path("/")) -> bool:
    """Whether the host has the device nodes `vendor` needs; cheap file checks only."""
    return get(vendor).accelerator_present(dev_root)
