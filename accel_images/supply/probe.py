"""Run inside an image (as `python -c <this file>`): print its packages as one JSON object.

Standard library only, because it runs under the image's own interpreter, not this package's.
The dpkg database is read from its status file rather than through dpkg-query, so an image
without the dpkg tools is still described; the Python side is the distributions that the
image's `python` (the virtual environment first on PATH) imports.
"""

from __future__ import annotations

import json
import platform
import re
import sys

DPKG_STATUS = "/var/lib/dpkg/status"
OS_RELEASE = "/etc/os-release"


def dpkg_packages(path: str = DPKG_STATUS) -> list[dict[str, str]]:
    """Installed packages as [{name, version, arch, source}], from dpkg's status file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return []
    found: list[dict[str, str]] = []
    for paragraph in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in paragraph.splitlines():
            if line[:1] in (" ", "\t") and key:
                continue  # continuation lines (descriptions, conffiles)
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            found.append({"name": fields["Package"], "version": fields.get("Version", ""),
                          "arch": fields.get("Architecture", ""),
                          "source": fields.get("Source", "").split(" ")[0]})
    return found


def os_release(path: str = OS_RELEASE) -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                key, sep, value = line.strip().partition("=")
                if sep:
                    values[key] = value.strip('"')
    except OSError:
        pass
    return {"id": values.get("ID", ""), "version_id": values.get("VERSION_ID", ""),
            "pretty_name": values.get("PRETTY_NAME", "")}


def python_packages() -> list[dict[str, str]]:
    """Importable distributions as [{name, version, location}], first on sys.path wins.

    Names are compared as PEP 503 normalises them (`typing_extensions` is `typing-extensions`),
    as `import` and pip do: a shadowed copy further down sys.path is not what the image runs,
    and listing it would put two versions of one package in the SBOM.
    """
    try:
        from importlib import metadata
    except ImportError:
        return []
    seen: set[str] = set()
    found: list[dict[str, str]] = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if not name:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        found.append({"name": name, "version": dist.version, "location": str(dist.locate_file(""))})
    return found


def main() -> None:
    print(json.dumps({"schema": 1, "os": os_release(), "dpkg": dpkg_packages(),
                      "python": {"version": platform.python_version(), "executable": sys.executable,
                                 "packages": python_packages()}}))


if __name__ == "__main__":
    main()
