"""An image's facts, as its own build wrote them, and what the knowledge base claims about them.

At build time the image's torch is asked, with no device, what it holds (accel_images/smoke/facts.py,
run in the image's final stage); the answer is /opt/accel-images/facts.json, schema 1
(accel_images/smoke/facts.schema.json). The knowledge base predicts the same values for a variant;
`Claim` is one prediction next to what the image measured, with the knowledge-base row that made it,
so a contradiction names the row to fix (accel_images.kb.claims makes and judges them).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

FACTS_PATH = "/opt/accel-images/facts.json"
FACTS_SCHEMA = 1
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "smoke" / "facts.schema.json"
"""The JSON Schema of the facts file, shipped beside the script that writes it."""


PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
"""The directory holding the accel_images package: knowledge-base files are named relative to it."""
PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def kb_row(path: Path, *keys: str) -> str:
    """How a message names a knowledge-base row: `accel_images/data/vendors/cuda.yaml archs."2.15"."13.2"`."""
    try:
        shown = path.resolve().relative_to(PACKAGE_ROOT).as_posix()
    except ValueError:
        shown = str(path)
    return f"{shown} " + ".".join(key if PLAIN_KEY.match(key) else f'"{key}"' for key in keys)


class FactsError(ValueError):
    """A facts file that is not schema 1 facts: what is wrong, in one line."""


@dataclass(frozen=True)
class ImageFacts:
    """What an image's torch and Python environment said about themselves at build time."""

    torch: str                               # '2.15.0+cu132'
    public: str                              # '2.15.0'
    local: str | None                        # 'cu132'
    python: str                              # '3.12.3'
    backend: str                             # 'cuda' | 'rocm' | 'xpu' | 'hpu' | 'cpu'
    toolkit: Mapping[str, str | None]        # cuda, hip, xpu, cudnn, nccl, gaudi
    archs: tuple[str, ...] | None            # ('sm_75', ...); None: torch could not say
    ptx: tuple[str, ...] | None              # ('compute_120',) or ()
    companions: Mapping[str, str]            # torchvision, torchaudio, numpy as installed
    distributions: Mapping[str, str] = field(default_factory=dict)   # every one, by normalized name
    platform: Mapping[str, str] = field(default_factory=dict)        # os, machine
    cuda_compat: str | None = None
    """The CUDA forward-compatibility libcuda's version ('595.58.03'); '' when the build found none under
    /usr/local/cuda/compat; None when the facts do not say (written before the field was read)."""
    network: Mapping[str, Any] | None = None
    """What training across nodes can use (facts.schema.json `network`: ibverbs, ucx, mpi, collective); None
    when the facts do not say (written before the field was read)."""

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ImageFacts:
        """From a schema 1 document (raises FactsError, naming the first problem)."""
        problem = schema_problem(document)
        if problem:
            raise FactsError(problem)
        return cls(torch=document["torch"]["version"], public=document["torch"]["public"],
                   local=document["torch"]["local"], python=document["python"], backend=document["backend"],
                   toolkit=dict(document["toolkit"]), archs=_targets(document["archs"]), ptx=_targets(document["ptx"]),
                   companions=dict(document["companions"]), distributions=dict(document["distributions"]),
                   platform=dict(document["platform"]), cuda_compat=_measured(document, "cuda_compat"),
                   network=_network(document.get("network")))

    @classmethod
    def from_bytes(cls, data: bytes) -> ImageFacts:
        try:
            document = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise FactsError(f"not JSON ({error})") from None
        return cls.from_document(document)

    @classmethod
    def from_compact(cls, compact: Mapping[str, Any]) -> ImageFacts | None:
        """From what `compact` wrote (a smoke record, a report); None when it is not that."""
        try:
            return cls(torch=str(compact["torch"]), public=str(compact["torch"]).split("+", 1)[0],
                       local=str(compact["torch"]).partition("+")[2] or None, python=str(compact["python"]),
                       backend=str(compact["backend"]),
                       toolkit={str(k): (None if v is None else str(v)) for k, v in dict(compact["toolkit"]).items()},
                       archs=_targets(compact.get("archs")), ptx=_targets(compact.get("ptx")),
                       companions={str(k): str(v) for k, v in dict(compact["companions"]).items()},
                       platform={"machine": str(compact.get("machine") or "")},
                       cuda_compat=_measured(compact, "cuda_compat"), network=_network(compact.get("network")))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def compact(self) -> dict[str, Any]:
        """What travels with the image (smoke record, catalogue, reports): everything but the distributions;
        cuda_compat and network only where the facts said them."""
        compat: dict[str, Any] = {} if self.cuda_compat is None else {"cuda_compat": self.cuda_compat or None}
        if self.network is not None:
            compat["network"] = dict(self.network)
        return {"torch": self.torch, "python": self.python, "backend": self.backend,
                "machine": self.platform.get("machine") or None,
                "toolkit": {key: value for key, value in sorted(self.toolkit.items()) if value is not None},
                "archs": None if self.archs is None else list(self.archs),
                "ptx": None if self.ptx is None else list(self.ptx),
                "companions": dict(sorted(self.companions.items())), **compat}

    def summary(self) -> str:
        """One line for people: 'torch 2.15.0+cu132 · Python 3.12.3 · cuda 13.2 · … · sm_75 … sm_120 · …'."""
        parts = [f"torch {self.torch}", f"Python {self.python}"]
        parts += [f"{key} {value}" for key, value in self.toolkit.items() if value]   # the schema's own names
        if self.archs:
            parts.append(" ".join(self.archs))
        if self.ptx:
            parts.append("PTX " + " ".join(self.ptx))
        parts += [f"{name} {version}" for name, version in sorted(self.companions.items())]
        return " · ".join(parts + self.network_parts())

    def network_parts(self) -> list[str]:
        """'RDMA verbs 1.14.44.0', 'UCX 1.13.1', 'Open MPI 4.1.4': what the image carries for many nodes."""
        network = self.network or {}
        named = (("RDMA verbs ", network.get("ibverbs")), ("UCX ", network.get("ucx")), ("", network.get("mpi")))
        return [f"{label}{value}" for label, value in named if value]


def _measured(document: Mapping[str, Any], key: str) -> str | None:
    """An optional field as a Claim compares it: absent -> None (not measured), null -> '' (measured: none)."""
    if key not in document:
        return None
    return "" if document[key] is None else str(document[key])


def _network(value: Any) -> Mapping[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _targets(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(item) for item in value)


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema  # only the readers of a facts file pay for it
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def schema_problem(document: Any) -> str | None:
    """The first way `document` is not schema 1 facts, in one line ('toolkit: 'gaudi' is a required
    property'); None when it is."""
    if not isinstance(document, dict):
        return "not a JSON object"
    if document.get("schema") != FACTS_SCHEMA:
        return f"schema {document.get('schema')!r}, this accel-images reads schema {FACTS_SCHEMA}"
    import jsonschema
    error = jsonschema.exceptions.best_match(_validator().iter_errors(document))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


@dataclass(frozen=True)
class Claim:
    """One value the knowledge base predicts for a variant's image, beside what the image measured.

    `row` names the knowledge-base row that made the prediction, as a person finds it:
    `accel_images/data/vendors/cuda.yaml archs."2.15"."13.2"`. `measured` is None where the image's
    facts do not say (an older torch's API, a distribution that is not there): then nothing is
    checked. `compare` says how: 'equal' (as text; for lists, as sets), or 'release' (the measured
    version starts with the predicted release: 13.2 matches 13.2.2, 0.29 matches 0.29.2+cpu).
    """

    key: str                       # 'torch', 'python', 'backend', 'stack', 'toolkit', 'archs', 'companion:torchvision'
    row: str
    expected: str | tuple[str, ...]
    measured: str | tuple[str, ...] | None   # '': measured and absent (a companion not installed)
    compare: str = "equal"

    @property
    def contradicted(self) -> bool:
        if self.measured is None:
            return False
        if isinstance(self.expected, tuple) or isinstance(self.measured, tuple):
            return set(_as_tuple(self.expected)) != set(_as_tuple(self.measured))
        if self.compare == "release":
            return not _same_release(self.measured, self.expected)
        return self.measured != self.expected

    def line(self) -> str:
        """'accel_images/data/vendors/cuda.yaml archs."2.15"."13.2" says sm_75 sm_80; the image has sm_80'."""
        return f"{self.row} says {_shown(self.expected)}; the image has {_shown(self.measured)}"


def _as_tuple(value: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return value if isinstance(value, tuple) else (value,)


def _shown(value: str | tuple[str, ...] | None) -> str:
    if not value and not isinstance(value, tuple):
        return "nothing"
    if isinstance(value, tuple):
        return " ".join(value) if value else "none"
    return value


def _release(version: str) -> tuple[int, ...]:
    """'0.28.0+cpu' -> (0, 28, 0); '7.2.41134-abc' -> (7, 2, 41134); '' -> ()."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(part) for part in found.group(0).split(".")) if found else ()


def _same_release(measured: str, expected: str) -> bool:
    """The measured version's leading release numbers are the expected ones: '13.2.2' and '13.2' agree,
    '0.28.0+cpu' and '0.28' agree, '3.11.2' and '3.11' agree; '13.0.3' and '13.0.2' do not."""
    want, have = _release(expected), _release(measured)
    return bool(want) and have[: len(want)] == want
