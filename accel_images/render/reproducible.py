"""The one date every image layer carries, so two builds of the same inputs give the same layers.

A layer's digest is the hash of its tar stream, and the tar holds each file's modification
time. Docker's classic builder stamps whatever a step writes with the wall clock, so without a
fixed date every rebuild of unchanged inputs is a new layer: pushed again, stored again, pulled
again. The templates (templates/partials/reproducible.j2) set every path a step writes to this
date before the step is committed, the same rule reproducible-builds.org gives for
SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/). It is a constant,
not the build date or a commit date: a layer must depend on its content alone. It is also the
variable Python's py_compile reads to write hash-based byte code instead of byte code that
records source modification times (https://docs.python.org/3/library/py_compile.html).
"""

from __future__ import annotations

SOURCE_DATE_EPOCH = 1767225600
"""2026-01-01T00:00:00Z. Changing it changes every layer of every image: do it never."""
