"""Apt failures by their real cause: unreachable, 404, signature, no such package.

The transcripts are apt 2.6.1's own words, recorded in debian:bookworm-slim (the local stand-in) on
this machine: its sources pointed at a closed port (127.0.0.1:9), at an HTTP server without the
files (127.0.0.1:18931), and at deb.debian.org with the archive keyring removed.
"""

from __future__ import annotations

from accel_images.builder import failure
from accel_images.render.apt import AptMirror

STEP = ('Step 4/32 : RUN t0="$(($(date +%s) - 1))" && c0="x"     && for f in /etc/apt/sources.list; do :; done'
        "     && apt-get update     && { apt-get install -y --no-install-recommends python3 python3-venv; }")
DOCKER = "The command '/bin/sh -c t0=... apt-get install ...' returned a non-zero code: 100"

REFUSED = """Ign:1 http://127.0.0.1:9/debian/debian bookworm InRelease
Ign:2 http://127.0.0.1:9/debian/debian bookworm-updates InRelease
Ign:3 http://127.0.0.1:9/debian/debian-security bookworm-security InRelease
Err:1 http://127.0.0.1:9/debian/debian bookworm InRelease
  Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)
Err:2 http://127.0.0.1:9/debian/debian bookworm-updates InRelease
  Unable to connect to 127.0.0.1:9:
Err:3 http://127.0.0.1:9/debian/debian-security bookworm-security InRelease
  Unable to connect to 127.0.0.1:9:
Reading package lists...
W: Failed to fetch http://127.0.0.1:9/debian/debian/dists/bookworm/InRelease  Could not connect to 127.0.0.1:9 \
(127.0.0.1). - connect (111: Connection refused)
W: Failed to fetch http://127.0.0.1:9/debian/debian/dists/bookworm-updates/InRelease  Unable to connect to 127.0.0.1:9:
W: Failed to fetch http://127.0.0.1:9/debian/debian-security/dists/bookworm-security/InRelease  Unable to connect \
to 127.0.0.1:9:
W: Some index files failed to download. They have been ignored, or old ones used instead.
Reading package lists...
Building dependency tree...
E: Unable to locate package python3-venv""".splitlines()

NOT_FOUND = """Ign:1 http://127.0.0.1:18931/debian/debian bookworm InRelease
Err:4 http://127.0.0.1:18931/debian/debian bookworm Release
  404  File not found [IP: 127.0.0.1 18931]
Err:5 http://127.0.0.1:18931/debian/debian bookworm-updates Release
  404  File not found [IP: 127.0.0.1 18931]
Reading package lists...
E: The repository 'http://127.0.0.1:18931/debian/debian bookworm Release' does not have a Release file.
E: The repository 'http://127.0.0.1:18931/debian/debian bookworm-updates Release' does not have a Release file.
""".splitlines()

UNSIGNED = """Reading package lists...
W: GPG error: http://deb.debian.org/debian bookworm InRelease: The following signatures couldn't be verified \
because the public key is not available: NO_PUBKEY 6ED0E7B82643E131 NO_PUBKEY 78DBA3BC47EF2265
E: The repository 'http://deb.debian.org/debian bookworm InRelease' is not signed.""".splitlines()

MISSING = """Get:1 http://deb.debian.org/debian bookworm InRelease [151 kB]
Fetched 241 kB in 1s (387 kB/s)
Reading package lists...
Building dependency tree...
E: Unable to locate package pyton3""".splitlines()


def explain(tail: list[str], *mirrors: str) -> str:
    return str(failure.explain(DOCKER, STEP, [STEP, *tail], apt_mirrors=tuple(AptMirror.parse(m) for m in mirrors)))


def test_a_dead_mirror_is_unreachable_not_a_missing_package() -> None:
    said = explain(REFUSED, "deb.debian.org=http://127.0.0.1:9/debian")
    assert said.startswith("step 4/32 (apt-get install) failed: apt cannot reach the mirror 127.0.0.1:9"
                           " (connection refused): --apt-mirror deb.debian.org=http://127.0.0.1:9/debian points there")
    assert "no package" not in said


def test_an_unreachable_archive_without_a_mirror_says_how_to_reach_one() -> None:
    tail = [line.replace("127.0.0.1:9/debian/debian", "deb.debian.org/debian") for line in REFUSED]
    said = explain(tail)
    assert "apt cannot reach deb.debian.org/debian" not in said  # the host, not a path
    assert "--apt-mirror deb.debian.org=URL" in said and "no package" not in said


def test_a_404_through_a_mirror_says_which_part_of_the_url_was_kept() -> None:
    said = explain(NOT_FOUND, "deb.debian.org=http://127.0.0.1:18931/debian")
    assert "apt mirror 404 for http://127.0.0.1:18931/debian/debian" in said
    assert "keeps the path after the host (deb.debian.org/debian became http://127.0.0.1:18931/debian/debian)" in said
    assert said.endswith("did you mean deb.debian.org=http://127.0.0.1:18931?")


def test_a_404_without_a_mirror_names_the_repository() -> None:
    said = explain([line.replace("127.0.0.1:18931/debian/debian", "deb.debian.org/debian") for line in NOT_FOUND])
    assert "apt got 404 Not Found from http://deb.debian.org/debian" in said


def test_a_signature_apt_cannot_verify_is_said_as_such() -> None:
    said = explain(UNSIGNED)
    assert "apt cannot verify the signature of http://deb.debian.org/debian bookworm (NO_PUBKEY 6ED0E7B82643E131)" in said


def test_a_package_apt_really_lacks_is_still_a_missing_package() -> None:
    assert explain(MISSING).endswith("apt has no package pyton3")


def test_an_earlier_steps_output_is_not_this_steps_cause() -> None:
    earlier = ["Step 3/32 : RUN apt-get update", *REFUSED[:5], "Step 4/32 : RUN pip install x",
               "ERROR: No matching distribution found for x"]
    assert "no x in the package index" in str(failure.explain(DOCKER, "Step 4/32 : RUN pip install x", earlier))
