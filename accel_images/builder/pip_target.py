"""`python -m accel_images.builder.pip_target X.Y MACHINE PIP-ARGUMENTS...`: pip, reading environment
markers as CPython X.Y on Linux on MACHINE does.

`pip download --python-version X.Y --platform ...` chooses wheels for that Python and platform, but
pip evaluates the markers of every requirement (`triton; python_version < "3.13"`, `nvidia-...;
platform_system == "Linux"`) against the interpreter that runs pip (pip/_internal/req/
req_install.py, match_markers: `self.markers.evaluate({"extra": extra})`, which starts from
packaging's default_environment() [read in pip 23.2 and 26.3]). From this tool's interpreter, or
from a host that is not the image's platform, a closure could lack a dependency its build needs or
hold one it cannot install. So the marker environment pip sees is the image's; only the kernel's
release and version stay the host's, as a container's are.
"""

from __future__ import annotations

import sys
from typing import Any


def target_environment(real: dict[str, Any], python: str, machine: str) -> dict[str, Any]:
    """The marker environment of CPython `python` (X.Y) on Linux on `machine` (PEP 508's variables)."""
    return {**real, "python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
            "implementation_version": f"{python}.0", "platform_python_implementation": "CPython",
            "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": machine}


def main(argv: list[str]) -> int:
    python, machine, *arguments = argv
    from pip._internal.cli.main import main as pip_main
    from pip._vendor.packaging import markers

    real = markers.default_environment
    markers.default_environment = lambda: target_environment(dict(real()), python, machine)
    return int(pip_main(arguments))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
