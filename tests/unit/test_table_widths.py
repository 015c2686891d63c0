"""Tables as a terminal of 80 and 120 columns shows them: the variant (a table's name column) is never
cut, at any width; the other columns give way, and a table written into a pipe or a file has no
trailing spaces.

The terminal is real: each width runs the tables' own printing path (accel_images.cli.options.out(),
the console the commands use) in a child process whose standard output is a pseudo-terminal of that
size, with COLUMNS set as a shell sets it.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LONG = "step 17/32 (apt-get update) failed: apt cannot reach 127.0.0.1:9 (connection refused) " * 2
KEYS = ("cpu/2.13.0-cpu-py3.11-debian12", "cpu/2.13.0-cpu-py3.12-ubuntu24.04-devel")

SCRIPT = f"""
from pathlib import Path
from accel_images.builder.outcome import Outcome
from accel_images.builder.progress import LiveProgress
from accel_images.cli.build import outcome_table
from accel_images.cli.nightly import nightly_table
from accel_images.cli.options import out, print_outcome, print_table
from accel_images.model.variant import Variant
from accel_images.publish.nightly import NightlyOutcome

def variant(python, os, flavor):
    return Variant(vendor="cpu", stack=None, torch="2.13.0", python=python, os=os, flavor=flavor,
                   base_image="debian:bookworm-slim")

variants = [variant("3.11", "debian12", "runtime"), variant("3.12", "ubuntu24.04", "devel")]
failed = Outcome(variants[0], "failed", "img", error={LONG!r})
built = Outcome(variants[1], "built", "img", "sha256:1", 10**9, 42.0)
nights = [NightlyOutcome(failed, "first publication"),
          NightlyOutcome(built, "fingerprint changed: template, build args", registry_digest="sha256:" + "d" * 64)]
print("== nightly", flush=True)
print_outcome(nightly_table(nights), Path("."), False)
print("== build", flush=True)
print_outcome(outcome_table([failed, built]), Path("."), False)
print("== list", flush=True)
print_table(("variant", "tag", "why"), [(v.key, v.tag, {LONG!r}) for v in variants])
print("== progress", flush=True)
live = LiveProgress(variants, console=out())
live.rows[variants[0]] = "FAILED: " + {LONG!r}
live.rows[variants[1]] = "building step 9/32 (install torch and its companions into /opt/venv)"
out().print(live._table())
"""


def on_a_terminal(columns: int) -> str:
    """SCRIPT's output on a pseudo-terminal `columns` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm-256color", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    child = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=follower, stdout=follower, stderr=follower,
                             cwd=ROOT, env=env, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert child.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode()).replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 120])
def test_no_table_cuts_the_variant_on_a_terminal(columns: int) -> None:
    shown = on_a_terminal(columns)
    sections = shown.split("== ")[1:]
    assert [section.split("\n", 1)[0] for section in sections] == ["nightly", "build", "list", "progress"], shown
    for section in sections:
        for key in KEYS:
            assert key in section, f"{columns} columns, table {section.splitlines()[0]}:\n{section}"
        assert all(len(line) <= columns for line in section.splitlines()), section
    nightly = sections[0]
    assert len([line for line in nightly.splitlines() if line.strip()]) <= 6, nightly  # no cause over seven lines


def test_a_page_narrower_than_the_name_folds_it_whole() -> None:
    from accel_images.cli.nightly import NIGHTLY_COLUMNS
    from accel_images.formatting import fit_widths
    widths = fit_widths([c.header for c in NIGHTLY_COLUMNS], [(KEYS[1], *["x" * 30] * 7)], 30,
                        [c.keep for c in NIGHTLY_COLUMNS])
    assert widths[0] == 28 and widths[1:] == [None] * 7


def test_columns_give_way_in_the_order_of_keep() -> None:
    from accel_images.formatting import TableColumn, fit_widths
    columns = (TableColumn("variant"), TableColumn("status", keep=9), TableColumn("why", keep=1),
               TableColumn("cause", keep=5))
    rows = [(KEYS[0], "failed", "fingerprint changed", LONG)]
    assert fit_widths([c.header for c in columns], rows, 1000, [c.keep for c in columns]) == \
        [len(KEYS[0]), 6, 19, len(LONG)]
    narrow = fit_widths([c.header for c in columns], rows, 60, [c.keep for c in columns])
    assert narrow[0] == len(KEYS[0]) and narrow[1] == 6 and narrow[2] is None and narrow[3] is not None
    assert sum(w + 2 for w in narrow if w is not None) <= 60


def test_a_table_in_a_pipe_has_no_trailing_spaces() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    for name in ("nightly", "build", "list"):  # progress is a table on a terminal only (PlainProgress otherwise)
        shown = table_text_of(done.stdout, name)
        assert [line for line in shown.splitlines() if line != line.rstrip()] == [], name
        assert all(key in shown for key in KEYS), shown


def table_text_of(output: str, name: str) -> str:
    return output.split(f"== {name}\n", 1)[1].split("== ", 1)[0]


def test_table_text_strips_what_rich_pads() -> None:
    from accel_images.formatting import FittedTable, TableColumn, table_text
    shown = FittedTable((TableColumn("variant"), TableColumn("status")))
    shown.add_row(KEYS[0], "built")
    shown.add_row(KEYS[1], "skipped, unchanged")
    text = table_text(shown, 200)
    assert all(line == line.rstrip() for line in text.splitlines()) and KEYS[1] in text


def test_hints_under_make_name_its_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from accel_images.formatting import VIA_MAKE_ENV, in_users_terms
    hint = ("base image ubuntu:24.04 not found in mirror 127.0.0.1:5000 (push it there, or drop that --registry-mirror;"
            " or choose a base the mirror may hold: --os debian12 (debian:bookworm-slim))")
    assert in_users_terms(hint) == hint
    monkeypatch.setenv(VIA_MAKE_ENV, "1")
    assert in_users_terms(hint).endswith("drop that REGISTRY_MIRROR=…; or choose a base the mirror may hold:"
                                         " OS=debian12 (debian:bookworm-slim))")
    assert in_users_terms("build offline with --registry-mirror and --pip-find-links, or --network host") == \
        "build offline with REGISTRY_MIRROR=… and WHEELHOUSE=…, or --network host"
    assert in_users_terms("--pip-find-links: no such directory") == "WHEELHOUSE: no such directory"
    assert in_users_terms("the --registry-mirror docker.io=127.0.0.1:5999 points there") == \
        "the REGISTRY_MIRROR=docker.io=127.0.0.1:5999 points there"
