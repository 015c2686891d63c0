"""The smoke stage of the nightly's end-to-end tests: the fixture image's own stub workload.

The fixture images (templates/vendors/cpu.Dockerfile.j2) hold no torch, so the launcher's
checks from outside (accel_images/smoke/integrity.py) rightly refuse them. These tests are about
what the nightly does around the smoke test (rebuild, candidate, promote, records, interrupts),
so they replace that one stage: the image's stub workload runs through the real engine (the
same locked-down container, labels and clean-up) and its report goes through the real judge,
nonce included. The launcher itself is tested on the real CPU image (tests/integration/
test_build_integration.py, test_faults_smoke.py, test_launcher_integration.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accel_images.builder import builder as build
from accel_images.publish import nightly
from accel_images.builder.engine import Engine
from accel_images.builder.settings import BuildSettings
from accel_images.smoke import launcher
from accel_images.smoke.judge import Expectation, SmokeResult, judge
from accel_images.model.variant import Variant

STUB_WORKLOAD = "/opt/accel-images/smoke.py"


def stub_smoke_image(engine: Engine, image: str, variant: Variant, settings: BuildSettings,
                     status: Callable[[str], None] | None = None) -> SmokeResult:
    """build.smoke_image for the fixture images (its signature too): their own smoke.py, the real run and judge."""
    expectation = Expectation.of(variant)
    launch = launcher.Launch.draw()
    if status is not None:
        status("running the fixture's stub workload")
    command = ["python", STUB_WORKLOAD, *expectation.workload_args(), "--nonce", launch.nonce]
    outcome = engine.run(image, command, options=launcher.container_options(None, mem_limit="512m"),
                         timeout_s=settings.smoke_timeout_s,
                         labels={launcher.SMOKE_LABEL: "true", f"{launcher.SMOKE_LABEL}.image": image})
    return judge(expectation, outcome.stdout, outcome.exit_code, settings.require_accelerator,
                 stderr=outcome.stderr, timed_out_after_s=settings.smoke_timeout_s if outcome.timed_out else None,
                 nonce=launch.nonce)


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route the builder's and the nightly's smoke stage to the stub, for one test."""
    monkeypatch.setattr(build, "smoke_image", stub_smoke_image)
    monkeypatch.setattr(nightly, "smoke_image", stub_smoke_image)
