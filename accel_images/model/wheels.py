"""A wheel a build installs, as the run fetched it: the file, its bytes' hash, the index it came from.

The run fetches each variant's wheels on the host (accel_images.builder.wheels) and records them
here, so the build's provenance can name what went into the image (accel_images.supply): each
wheel as a package URL (github.com/package-url/purl-spec, type `pypi`: the name lower-cased with
`_` as `-`, qualifiers `file_name` and `repository_url` for the exact file and its index), with
its sha256.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True)
class Wheel:
    filename: str      # torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    sha256: str        # hex digest of the file's bytes
    size: int
    index_url: str     # the package index it was resolved from, without credentials

    @property
    def name(self) -> str:
        """The project's name as a package URL spells it (PEP 427 escapes `-` in a wheel's name as `_`)."""
        return self.filename.split("-", 1)[0].lower().replace("_", "-")

    @property
    def version(self) -> str:
        return self.filename.split("-")[1]

    @property
    def purl(self) -> str:
        """`pkg:pypi/torch@2.13.0%2Bcpu?file_name=...&repository_url=...` (qualifiers sorted, values encoded)."""
        qualifiers = {"file_name": self.filename, "repository_url": self.index_url}
        query = "&".join(f"{key}={quote(value, safe='/:')}" for key, value in sorted(qualifiers.items()))
        return f"pkg:pypi/{quote(self.name)}@{quote(self.version, safe='')}?{query}"
