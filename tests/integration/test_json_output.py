"""`--json` on every command: one JSON document on stdout and nothing else, so `| jq` works.

Each command runs as a separate process, as a pipe would run it, and its whole standard output
goes through json.loads. A command with a `--json` option missing from these tests fails the last
test, so a new one cannot slip by.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_json_output_unit.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from accel_images.smoke.launcher import NO_RECORD
from nightly_fixture.rawregistry import RawRegistry
from test_json_output_unit import cli, cpu_host, only_json  # noqa: F401  (cpu_host is a fixture)

from conftest import SUITE_IMAGE as CPU_IMAGE   # published_build's, a name only this run gives it


@pytest.fixture
def catalogue_registry(registry: str) -> Iterator[str]:
    """A repository of its own holding one published, smoke-tested CPU image (layer-less)."""
    from test_catalogue import CPU_OLD, VARIANTS

    from accel_images.publish.catalogue import write_record
    from accel_images.registry import RegistryClient
    from accel_images.smoke.judge import SmokeResult
    namespace = f"test-{uuid.uuid4().hex[:12]}"
    digest = RawRegistry(registry).push_config_image(f"{namespace}/pytorch", CPU_OLD, VARIANTS[CPU_OLD].labels())
    write_record(RegistryClient(registry), f"{namespace}/pytorch", digest,
                 SmokeResult(True, "cpu", False, (), ()), "test")
    yield f"{registry}/{namespace}"
    RawRegistry(registry).delete_repository(f"{namespace}/pytorch")


@pytest.mark.registry
def test_catalogue_and_recommend_from_a_registry(catalogue_registry: str, cpu_host: str) -> None:
    listed = only_json(cli("catalogue", "--registry", catalogue_registry, "--image", "pytorch", "--json"))
    assert [image["tag"] for image in listed["images"]] == ["2.13.0-cpu-py3.11-debian12"]  # type: ignore[index]
    chosen = only_json(cli("recommend", "--registry", catalogue_registry, "--image", "pytorch", "--host-json",
                           cpu_host, "--json"))
    assert chosen["source"]["kind"] == "registry"  # type: ignore[index]


@pytest.mark.registry
def test_verify_even_when_not_verified(catalogue_registry: str, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    pub = tmp_path / "sign.pub"
    pub.write_bytes(Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    result = cli("verify", f"{catalogue_registry}/pytorch:2.13.0-cpu-py3.11-debian12", "--key", str(pub), "--json")
    assert result.returncode == 1, result.stderr          # no provenance was attached to this image
    assert json.loads(result.stdout)["ok"] is False
    assert result.stderr.startswith("not verified")


@pytest.mark.engine
@pytest.mark.registry
def test_pull(catalogue_registry: str, cpu_host: str, docker_client) -> None:
    result = cli("pull", "--registry", catalogue_registry, "--image", "pytorch", "--host-json", cpu_host, "--json")
    try:
        assert only_json(result)["image"].startswith(catalogue_registry)  # type: ignore[index]
    finally:
        docker_client.images.remove(f"{catalogue_registry}/pytorch:2.13.0-cpu-py3.11-debian12", force=True)


@pytest.mark.engine
def test_smoke(docker_client, tmp_path: Path, published_build: dict) -> None:
    """A refused image (a state directory with no build record of it) still prints one document; the
    passing case is test_build_integration.py::test_smoke_command_reports_the_workload_json."""
    result = cli("smoke", CPU_IMAGE, "--json", "--state-dir", str(tmp_path / "empty"))
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)  # raises on anything before or after the document
    assert document["ok"] is False and document["failures"][-1] == f"refused before the run: {NO_RECORD}"
    assert result.stderr.strip().splitlines()[-1].startswith(f"{CPU_IMAGE}: smoke failed on unknown device: ")
