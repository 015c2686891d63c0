"""`--pin` and `--lock`: base images resolved to digests, recorded, and rendered from the record.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_pin.py.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import registry_get
from lighttemplates import light_templates
from test_pin import CPU_MATRIX, cli
MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
TEST_MATRIX = """schema: 1
image: accel-images-test/pin
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
"""


def registry_digest(registry: str, repository: str, tag: str) -> str:
    """Straight from the registry: the digest is the sha256 of the manifest it serves."""
    return "sha256:" + hashlib.sha256(registry_get(registry, f"/v2/{repository}/manifests/{tag}",
                                                   accept=MANIFEST_V2)).hexdigest()


@pytest.mark.engine
@pytest.mark.registry
def test_render_pin_then_lock_reproduces_the_same_inputs(registry: str, base_images, tmp_path: Path) -> None:
    lock_path = tmp_path / "accel-images.lock"
    mirror = ["--registry-mirror", f"docker.io={registry}"]
    pinned = cli("render", "--matrix", str(CPU_MATRIX), *mirror, "--pin", "--lock", str(lock_path),
                 "--out", str(tmp_path / "pinned"))
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    expected = registry_digest(registry, base_images.slim_repository, base_images.slim_tag)
    lock = json.loads(lock_path.read_text())
    assert lock["bases"]["debian:bookworm-slim"]["digest"] == expected
    assert lock["created"].startswith(datetime.now(timezone.utc).strftime("%Y-%m-%d")[:4])
    [dockerfile] = (tmp_path / "pinned").rglob("Dockerfile")
    from_lines = [line for line in dockerfile.read_text().splitlines() if line.startswith("FROM ")]
    assert from_lines and all(f"{registry}/library/debian@{expected}" in line for line in from_lines)

    again = cli("render", "--matrix", str(CPU_MATRIX), *mirror, "--lock", str(lock_path),
                "--out", str(tmp_path / "again"))
    assert again.returncode == 0, again.stdout + again.stderr
    [second] = (tmp_path / "again").rglob("Dockerfile")
    assert second.read_bytes() == dockerfile.read_bytes()


@pytest.mark.engine
@pytest.mark.registry
def test_build_from_the_lock_uses_the_pinned_base(registry: str, base_images, docker_client, tmp_path: Path) -> None:
    light_templates(tmp_path / "templates", "FROM {{ base_ref }}\nRUN echo pinned > /pinned\n")
    (tmp_path / "matrix.yaml").write_text(TEST_MATRIX)
    common = ["--matrix", str(tmp_path / "matrix.yaml"), "--templates", str(tmp_path / "templates"),
              "--registry-mirror", f"docker.io={registry}", "--no-smoke", "--force", "--lock",
              str(tmp_path / "lock"), "--state-dir", str(tmp_path / "state")]
    try:
        first = cli("build", *common, "--pin")
        assert first.returncode == 0, first.stdout + first.stderr
        second = cli("build", *common)
        assert second.returncode == 0, second.stdout + second.stderr
        [record] = json.loads((tmp_path / "state" / "reports" / "build-latest" / "report.json").read_text())["variants"]
        expected = registry_digest(registry, base_images.slim_repository, base_images.slim_tag)
        assert record["base_digest"].endswith(expected)
        [dockerfile] = (tmp_path / "state" / "contexts").rglob("Dockerfile")
        assert f"FROM {registry}/library/debian@{expected}" in dockerfile.read_text()
    finally:
        for image in docker_client.images.list(name="accel-images-test/pin"):
            docker_client.images.remove(image.id, force=True)
