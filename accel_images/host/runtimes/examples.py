"""The README's "Running elsewhere" examples, made by the renderers: one per runtime and vendor.

Each example is `accel-images run --print --engine ENGINE IMAGE -- python train.py` for the vendor's
newest image in the matrix, published under ghcr.io/acme, as user 1000:1000 in /home/me/project, on
a node whose host description counts 8 of the vendor's devices. The device groups are the ids Ubuntu
gives video and render (44, 109), where a real run reads them from the host's device files.
`python -m accel_images.host.runtimes.examples` prints the section; tests/unit/test_readme.py holds
the README to it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from accel_images import vendors
from accel_images.host.launch import Launch, launch
from accel_images.host.runtimes import ENGINES, Rendered, render

REGISTRY = "ghcr.io/acme"
WORKSPACE = Path("/home/me/project")
USER = (1000, 1000)
DEVICE_GROUPS = ("44", "109")
COMMAND = ("python", "train.py")
DEVICES = 8
"""The host description's device count: what Slurm and Kubernetes forms ask their scheduler for."""
NO_HOST = Path("/nonexistent")
"""The device tree the examples read: none, so nothing of this machine shows."""
TITLES = {"docker": "Docker", "podman": "Podman", "apptainer": "Apptainer / Singularity",
          "enroot": "Enroot with Pyxis (Slurm)", "kubernetes": "Kubernetes", "compose": "Docker Compose"}
FILES = ("kubernetes", "compose")
"""Runtimes whose examples are documents, shown folded, one per vendor."""


def example(vendor: str, image: str) -> Launch:
    base = replace(launch(image, vendor, NO_HOST), user=USER, workspace=WORKSPACE, command=COMMAND,
                   interactive=True, home="/home/dev", device_count=DEVICES)
    if base.devices.devices:
        base = replace(base, devices=replace(base.devices, group_add=DEVICE_GROUPS))
    return base


def examples(tags: dict[str, str]) -> list[tuple[str, Launch]]:
    """(vendor, its example) for each vendor with a tag, in the vendors' listing order."""
    return [(vendor, example(vendor, f"{REGISTRY}/accel-images/pytorch:{tags[vendor]}"))
            for vendor in vendors.names() if vendor in tags]


def newest_tags() -> dict[str, str]:
    """Each vendor's newest image in the matrix (./matrix.yaml, else the packaged one), a runtime one where
    the vendor has any (Gaudi's images are all devel)."""
    from accel_images.host.choosing import load_expansion
    from accel_images.kb.compat import load_kb
    ordered = sorted(load_expansion(None, load_kb()).variants, key=lambda v: (v.flavor != "runtime", v.sort_key()))
    newest: dict[str, str] = {}
    for variant in ordered:
        newest.setdefault(variant.vendor, variant.tag)
    return newest


def markdown(tags: dict[str, str]) -> str:
    sections = []
    for engine in ENGINES:
        # A cluster's node has no copy of this directory: its Pod is the one `recommend` prints, with the command.
        rendered = [(vendor, render(engine, replace(launched, workspace=None) if engine == "kubernetes" else launched))
                    for vendor, launched in examples(tags)]
        body = _files(rendered) if engine in FILES else _lines(rendered)
        sections.append(f"### {TITLES[engine]}\n\n{body}")
    return "\n".join(sections)


def _lines(rendered: list[tuple[str, Rendered]]) -> str:
    lines = []
    for vendor, result in rendered:
        lines += [f"# {vendor}", result.text.rstrip("\n"), *(f"#   note: {note}" for note in result.notes)]
    return "```text\n" + "\n".join(lines) + "\n```\n"


def _files(rendered: list[tuple[str, Rendered]]) -> str:
    blocks = []
    for vendor, result in rendered:
        notes = "".join(f"# note: {note}\n" for note in result.notes)
        blocks.append(f"<details><summary>{vendor}</summary>\n\n```yaml\n{notes}{result.text}```\n\n</details>\n")
    return "\n".join(blocks)


if __name__ == "__main__":
    print(markdown(newest_tags()), end="")
