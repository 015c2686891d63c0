"""The matrix reference, generated from the schema the matrix loader enforces (accel_images/plan/matrix.py).

A MkDocs hook (mkdocs.yml, `hooks:`): on docs/reference/matrix.md it replaces the marker below with
tables made from the loader's own field sets, value shapes and defaults, and the values the knowledge
base knows for each vendor (accel_images/plan/known.py). A field the loader accepts that this file
does not describe fails the build, so the reference cannot fall behind the schema.
"""

from __future__ import annotations

from typing import Any

from accel_images import vendors
from accel_images.kb.compat import load_kb
from accel_images.model.platforms import DEFAULT as DEFAULT_PLATFORM
from accel_images.plan import matrix
from accel_images.plan.known import known_values

MARKER = "<!-- matrix-reference -->"
PAGE = "reference/matrix.md"

TOP = {
    "schema": ("int", "yes", "", "The schema version; this builder reads `1`."),
    "image": ("str", "yes", "`IMAGE_RE`",
              "The image repository every tag is published under, like `accel-images/pytorch`."),
    "user": ("mapping", "no", "", "The image's non-root user: `name`, `uid`, `gid` (below)."),
    "platform": ("list of str", "no", "`PLATFORM_RE`",
                 "The platforms every group is built for unless it names its own; one tag is an image index of them."),
    "vendors": ("mapping", "yes", "", "Vendor name to a non-empty list of groups (below)."),
}
USER = {
    "name": ("str", "`USER_RE`", "The user's name."),
    "uid": ("int", "1 to 65534", "Its UID (0 would be root)."),
    "gid": ("int", "1 to 65534", "Its GID."),
}
GROUP = {
    "stack": ("`VERSION_RE`",
              "The vendor's stack versions (CUDA, ROCm, oneAPI, Gaudi software); not for a vendor without one (cpu)."),
    "torch": ("`VERSION_RE`", "PyTorch versions: a minor (`\"2.14\"`, its newest release) or a release."),
    "python": ("`VERSION_RE`", "Python versions."),
    "os": ("`NAME_RE`", "Base OS releases, like `ubuntu24.04`, `debian12`."),
    "flavor": ("`NAME_RE`", "`runtime` and/or `devel`."),
    "platform": ("`PLATFORM_RE`", "This group's platforms, in place of the top-level `platform`."),
    "experimental_python": ("bool", "`true` admits the Pythons the knowledge base lists as experimental for a torch"
                                    " release (default `false`)."),
}


def _described(fields: set[str], described: dict[str, Any], where: str) -> None:
    missing, stale = sorted(fields - set(described)), sorted(set(described) - fields)
    if missing or stale:
        raise ValueError(f"docs/hooks/matrix_reference.py: {where} fields not described {missing},"
                         f" described but gone {stale}")


def _shapes() -> str:
    rows = [f"| `{name}` | `{getattr(matrix, name).pattern}` |"
            for name in ("VERSION_RE", "NAME_RE", "IMAGE_RE", "USER_RE", "PLATFORM_RE")]
    return "\n".join(["| shape | regular expression |", "|---|---|", *rows])


def markdown() -> str:
    """The reference's tables, in the order the page shows them."""
    _described(matrix.TOP_KEYS, TOP, "top-level")
    _described({"name", "uid", "gid"}, USER, "user")
    _described(matrix.GROUP_KEYS, GROUP, "group")
    defaults = matrix.User()
    out = ["## Top-level fields", "", "| field | type | required | shape | meaning |", "|---|---|---|---|---|"]
    out += [f"| `{key}` | {kind} | {required} | {shape} | {text} |"
            for key, (kind, required, shape, text) in TOP.items()]
    out += ["", f"Without `platform`, every group is built for `{DEFAULT_PLATFORM}` only.", "",
            "## `user`", "", "| field | type | shape | default | meaning |", "|---|---|---|---|---|"]
    out += [f"| `{key}` | {kind} | {shape} | `{getattr(defaults, key)}` | {text} |"
            for key, (kind, shape, text) in USER.items()]
    out += ["", "## A vendor's group", "",
            f"`vendors` maps each vendor ({', '.join(f'`{v}`' for v in vendors.names())}) to a list of groups. "
            "A group is the cross product of its axes; every axis is a string or a list of strings, each "
            "quoted (`\"12.10\"`: unquoted, YAML reads 12.1), none listed twice. Every axis but `platform` "
            "is required (`stack` only where the vendor has one). A group naming exactly one combination is "
            "a request: pruning it is an error.", "",
            "| field | shape | meaning |", "|---|---|---|"]
    out += [f"| `{key}` | {shape} | {text} |" for key, (shape, text) in GROUP.items()]
    out += ["", "## Shapes", "", "Every value is matched whole (an unknown field, a wrong type or a value "
            "of the wrong shape is an error naming file, line and field).", "", _shapes(), "",
            "## Values the knowledge base knows", "",
            "A value of the right shape the knowledge base does not know (`debain12`, `devle`) is an error "
            "naming the values it knows; a known value it rules out for a combination is pruned.", "",
            "| vendor | stack | torch | python | os | flavor |", "|---|---|---|---|---|---|"]
    kb = load_kb()
    for name in vendors.names():
        known = known_values(kb, name)
        cells = [", ".join(values) or "-" for values in
                 (known.stacks, known.torch, known.python, known.os, known.flavors)]
        out.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def on_page_markdown(markdown_text: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown_text
    if MARKER not in markdown_text:
        raise ValueError(f"{PAGE} lost its marker {MARKER}")
    return markdown_text.replace(MARKER, markdown())
