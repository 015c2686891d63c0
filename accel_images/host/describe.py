"""The host description: what `accel-images host describe` prints and `--host-json` reads.

A description captured on one node (a GPU server, a cluster's compute node) lets `recommend`, `pull`,
`run` and `devcontainer` judge images for that node from anywhere: a laptop, a CI job, a support
request. So it is exactly the detected HostInfo, every field, in the JSON that
accel_images.host.choosing.load_host reads back; host.schema.json beside this module documents it.

This module imports nothing beyond the standard library and the HostInfo record at load time: the
option help of every choosing command names SCHEMA_FILE, and `--help` must stay cheap.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from accel_images.model.hostinfo import HostInfo

SCHEMA_FILE = Path(__file__).resolve().parent / "host.schema.json"
"""The JSON Schema of a host description, in the installed package: where `--help` sends a reader."""
SCHEMA_NAME = "accel_images/host/host.schema.json"
"""SCHEMA_FILE as help text names it: the same in every installation, and never split at a hyphen."""


def host_record(host: HostInfo) -> dict[str, Any]:
    """The host as JSON values: every field, tuples as lists, so nothing is left for a reader to guess."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in dataclasses.asdict(host).items()}


def description(host: HostInfo) -> str:
    """The document `host describe` prints: indented for a person to read and edit, one newline at the end."""
    return json.dumps(host_record(host), indent=2) + "\n"


def schema_text() -> str:
    """The schema as the package carries it: `host schema` prints it for a reader without the package's path."""
    return SCHEMA_FILE.read_text(encoding="utf-8")


def describe_this_host() -> str:
    """This node's description, from the same detection `recommend` runs when given no --host-json."""
    from accel_images.host.detect import detect_host
    return description(detect_host())
