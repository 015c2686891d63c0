"""Hostile registry content: whatever a registry serves, reading it gives an image or one RegistryError.

Images are pushed by hand into the real local registry (a config blob and a manifest, written
over HTTP by the test), shaped as no tool would write them: a config that is a string, Labels
as a list, a label that is a number, an index whose entries are not objects. The nightly on
top of it fails that variant alone, with one line, publishes the others and writes the report.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_registry_hostile_unit.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from accel_images.cli.nightly import nightly_command
from accel_images.errors import RegistryError
from accel_images.registry import RegistryClient
from nightly_fixture.rawregistry import CONFIG_TYPES, DOCKER_MANIFEST, RawRegistry
from test_nightly import DEBIAN, UBUNTU
from test_nightly_integration import Site, site  # noqa: F401  (site is a fixture)


@pytest.fixture
def repo(registry: str) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}/pytorch"
    yield name
    RawRegistry(registry).delete_repository(name)


def push_raw_config(raw: RawRegistry, repository: str, tag: str, config: Any) -> str:
    body = json.dumps(config).encode()
    digest = raw.upload_blob(repository, body)
    return raw.put_manifest(repository, tag, {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "layers": [],
                                              "config": {"mediaType": CONFIG_TYPES[DOCKER_MANIFEST],
                                                         "size": len(body), "digest": digest}}, DOCKER_MANIFEST)


HOSTILE_CONFIGS = [
    pytest.param({"config": "string"}, "the image config's 'config' is a string, not an object", id="config-string"),
    pytest.param({"config": {"Labels": ["a=b"]}}, "the image config's Labels is a list, not an object",
                 id="labels-list"),
    pytest.param({"config": {"Labels": {"io.accel-images.fingerprint": 7}}},
                 "the image config's label 'io.accel-images.fingerprint' is a number, not a string", id="label-number"),
    pytest.param(["not", "an", "object"], "the registry answered JSON that is not an object", id="config-list"),
]


@pytest.mark.registry
@pytest.mark.parametrize(("config", "problem"), HOSTILE_CONFIGS)
def test_a_malformed_config_is_one_permanent_registry_error(registry: str, repo: str, config: Any,
                                                           problem: str) -> None:
    raw = RawRegistry(registry)
    push_raw_config(raw, repo, "bad", config)
    with pytest.raises(RegistryError) as caught:
        RegistryClient(registry, credentials=lambda host: None).image(repo, "bad")
    assert problem in caught.value.one_line()
    assert caught.value.transient is False
    assert "\n" not in caught.value.one_line()


@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.parametrize(("config", "problem"), HOSTILE_CONFIGS[:2])
def test_a_malformed_image_fails_its_variant_alone_and_the_report_is_written(site: Site, config: Any,
                                                                            problem: str) -> None:
    push_raw_config(site.raw, site.repository, DEBIAN, config)
    result = CliRunner().invoke(nightly_command, site.cli_args())
    assert "Traceback" not in result.output
    assert result.exit_code == 4, result.output   # the only failure is a registry one
    [line] = [line for line in result.stderr.splitlines() if line.startswith("FAILED")]
    assert line.startswith(f"FAILED cpu/{DEBIAN}: ") and problem in line
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    assert {r["tag"]: r["status"] for r in report["variants"]} == {DEBIAN: "failed", UBUNTU: "built"}
    assert site.digests()["latest-cpu"] == site.digests()[UBUNTU]
