"""Where an image to run comes from: a build of this host, a registry the user named, nothing else.

`run`, `pull`, `recommend` and `devcontainer` name an image by a reference a container engine will
resolve. A reference without a registry host (`accel-images/pytorch:TAG`) is a Docker Hub name to
every engine: when the image is not in the local store, Docker pulls `docker.io/accel-images/pytorch`,
a namespace this project does not own, and whoever registers it there is pulled and run. So an image
is taken, in this order, from:

1. a build of this host: the state directory records every image `build` made (`builds/images/`,
   accel_images.smoke.records.remember_image), and a recorded image runs from the engine's store,
   never pulled (`--pull never`, and each runtime's equivalent: accel_images.host.runtimes);
2. a registry the user configured: `--registry`, else ACCEL_IMAGES_REGISTRY, else the `registry` key
   of CONFIG_NAME under the user's configuration directory (XDG_CONFIG_HOME, default ~/.config);
3. nowhere: the command stops with one line naming both ways (build it, or name a registry).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from accel_images.errors import InputError

REGISTRY_ENV = "ACCEL_IMAGES_REGISTRY"
"""Where `--registry` comes from when it is not given: a team sets it once for everyone."""
CONFIG_NAME = Path("accel-images") / "config.yaml"
"""Under the user's configuration directory: `registry: ghcr.io/acme` (README, "Where images come from")."""
CONFIG_KEYS = ("registry",)
MAX_CONFIG_BYTES = 64 * 1024
"""A configuration file is a few lines; a larger one is not one."""


def config_path() -> Path:
    """$XDG_CONFIG_HOME/accel-images/config.yaml, ~/.config/... when the variable is unset or relative
    (the XDG Base Directory specification ignores a relative value)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / CONFIG_NAME


def configured_registry(given: str | None) -> str | None:
    """The registry the user configured: `given` (the option, which click fills from ACCEL_IMAGES_REGISTRY),
    else the configuration file's; None when neither names one."""
    if given:
        return given
    value = read_config().get("registry")
    return value if isinstance(value, str) and value else None


def read_config() -> dict[str, Any]:
    """The configuration file as a mapping; {} when there is none. A file that is not one (unreadable,
    not YAML, an unknown key, a value that is not text) is one line: a typo must not silently send
    the tool back to a default."""
    path = config_path()
    if not path.exists():
        return {}
    import yaml

    from accel_images import untrusted
    try:
        data = yaml.safe_load(untrusted.read_limited(path, MAX_CONFIG_BYTES)) or {}
    except OSError as err:
        raise InputError(f"cannot read it: {err.strerror or err}", file=str(path)) from None
    except yaml.YAMLError as err:
        raise InputError(f"not YAML: {' '.join(str(err).split())}", file=str(path)) from None
    if not isinstance(data, dict) or set(data) - set(CONFIG_KEYS):
        unknown = ", ".join(sorted(map(str, set(data) - set(CONFIG_KEYS)))) if isinstance(data, dict) else "a list"
        raise InputError(f"unknown setting(s): {unknown}", file=str(path), hint=f"keys: {', '.join(CONFIG_KEYS)}")
    for key, value in data.items():
        if not isinstance(value, str):
            raise InputError(f"{key} is {value!r}, not text", file=str(path))
    return data


def has_registry_host(ref: str) -> bool:
    """Whether `ref` names its registry (`ghcr.io/x`, `127.0.0.1:5000/x`, `localhost/x`): the engines'
    own rule (distribution/reference: a first component with a dot or a colon, or `localhost`)."""
    first, slash, _ = ref.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def ours_unqualified(ref: str, repository: str) -> bool:
    """Whether `ref` is one of this project's images named without a registry (`accel-images/pytorch:TAG`):
    a name only a local build can answer, since the engines would look it up on Docker Hub."""
    if has_registry_host(ref):
        return False
    name = ref.split("@", 1)[0]
    name = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return name == repository


def ways_to_get(ref: str, build: str | None) -> str:
    """The hint of every stop: the two ways to an image (build it here, or name the registry that has it)."""
    built = f"build it here with `{build}`" if build else "build it here with `accel-images build`"
    return (f"{built}, or name the registry that publishes it: --registry REG, {REGISTRY_ENV}=REG, or"
            f" `registry: REG` in {shown_config_path()}")


def shown_config_path() -> str:
    """config_path() with the home directory as ~, as a person would type it."""
    path, home = config_path(), Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def not_available(ref: str, state_root: Path, build: str | None) -> InputError:
    """The one line when an image is neither built here nor in a configured registry."""
    return InputError(f"{ref} is not built here (no record in {state_root}) and no registry is configured;"
                      " accel-images never pulls it by that name, which Docker Hub would answer",
                      hint=ways_to_get(ref, build))
