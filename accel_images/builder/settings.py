"""What a build is asked to do, apart from the variant: settings, the image reference, build args.

Plain values with no engine behind them, so the commands that only describe builds (ci-matrix,
bake) use them without importing the Docker SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accel_images.render.contexts import RenderOptions
from accel_images.state import StateDir
from accel_images.plan.variants import Expansion
from accel_images.model.variant import Variant

PULL_POLICIES = ("missing", "always", "never")


@dataclass(frozen=True)
class BuildSettings:
    """How to build: everything that is not the variant itself."""

    options: RenderOptions = RenderOptions()
    state_dir: StateDir = field(default_factory=StateDir.at)
    force: bool = False
    smoke: bool = True
    require_accelerator: bool = False
    pull: str = "missing"
    network_mode: str | None = None
    jobs: int = 1
    smoke_timeout_s: float = 600
    smoke_nodes: int = 0
    """After the smoke test passed, run the N-node smoke test (accel_images.smoke.nodes) on the same image with
    this many nodes; 0 or 1: not at all. A failure fails the smoke verdict (builder.smoke_image)."""
    user_uid: int | None = None
    user_gid: int | None = None
    no_cache: bool = False
    """Build every step afresh, ignoring the engine's layer cache."""
    wheel_cache: Path | None = None
    """Where the wheels a host fetch downloads are kept between runs (accel_images.builder.wheels);
    None: the state directory's `cache/wheels/`."""
    wheel_cache_max: int | None = None
    """Prune the wheel cache to at most this many bytes after the run, least recently used first; None: never."""

    @property
    def wheel_cache_dir(self) -> Path:
        return self.wheel_cache or self.state_dir.wheel_cache


def image_ref(expansion: Expansion, variant: Variant) -> str:
    """The local name of the variant's image: its tag, or for a platform other than the default the
    tag with the platform (`<tag>-arm64`): an engine's image store holds one image per name."""
    return f"{expansion.image}:{variant.local_tag}"


def build_args(variant: Variant, expansion: Expansion, settings: BuildSettings) -> dict[str, str]:
    """Build args: the user IDs (overridable so a team can match its host's IDs)."""
    return {"USER_NAME": expansion.user.name,
            "USER_UID": str(settings.user_uid or expansion.user.uid),
            "USER_GID": str(settings.user_gid or expansion.user.gid)}
