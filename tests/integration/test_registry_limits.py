"""Registries that cannot do everything: one that refuses deletes, one that fails for a moment.

Each runs behind tests/faultproxy.py in front of the real local registry, answering as the
distribution registry does: 405 UNSUPPORTED to every manifest DELETE when its storage.delete
setting is off, 503 to a blob read under load. The registry's state afterwards is read over its
HTTP API directly (nightly_fixture.rawregistry), not through accel_images.registry.

- A registry that cannot delete: nothing is pointed at a tombstone first. Retention is not applied
  (one line), every dated tag still serves its image, and a candidate is left, not destroyed.
- A transient failure while the provenance or SBOM is read is not evidence: `verify` exits 4, and
  the nightly fails that variant instead of republishing it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from click.testing import CliRunner

from accel_images.cli.nightly import nightly_command
from accel_images.cli.verify import verify_command
from accel_images.errors import RegistryError
from accel_images.model import tags
from accel_images.registry import RegistryClient
from accel_images.supply import provenance
from accel_images.supply.attest import Attester
from faultproxy import NO_DELETE, Canned, FaultProxy
from nightly_fixture.cleanup import remove_local_names
from nightly_fixture.rawregistry import RawRegistry
from test_nightly import DEBIAN
from test_nightly_integration import Site, site  # noqa: F401  (site is a fixture)
from test_registry_hostile import ended_cleanly
from test_supply import NOW, ProbeEngine, green_smoke, inputs, probe_output, write_key


@pytest.fixture
def repo(registry: str) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}/pytorch"
    yield name
    RawRegistry(registry).delete_repository(name)


# ---- a registry that cannot delete -----------------------------------------------------------------

@pytest.mark.registry
def test_a_registry_that_cannot_delete_is_asked_before_any_tag_moves(registry: str, repo: str) -> None:
    raw = RawRegistry(registry)
    digest = raw.push_config_image(repo, "old-20200101", {"n": "1"})
    with FaultProxy(registry) as proxy:
        proxy.faults.canned.append(NO_DELETE)
        with pytest.raises(RegistryError) as caught:
            RegistryClient(proxy.host, credentials=lambda host: None).delete_tag(repo, "old-20200101")
    assert "answered 405" in caught.value.one_line() and "storage.delete.enabled" in caught.value.one_line()
    assert raw.digest(repo, "old-20200101") == digest                          # no tombstone
    assert [line for line in proxy.faults.seen if line.startswith(("PUT", "POST"))] == []


@pytest.mark.engine
@pytest.mark.registry
def test_retention_on_a_registry_that_cannot_delete_leaves_every_dated_tag_on_its_image(site: Site) -> None:
    first = CliRunner().invoke(nightly_command, [*site.cli_args(), "--os", "debian12"])
    assert first.exit_code == 0, first.output
    old = f"{DEBIAN}-20200101"
    old_digest = site.raw.push_config_image(site.repository, old, {"an": "older image"})
    with FaultProxy(site.registry) as proxy:
        proxy.faults.canned.append(NO_DELETE)
        result = CliRunner().invoke(nightly_command, [*site.cli_args(), "--os", "debian12", "--registry", proxy.host,
                                                      "--keep-dated", "1"])
        remove_local_names(docker.from_env(), f"{proxy.host}/{site.namespace}/")
    assert ended_cleanly(result), result.output
    assert result.exit_code == 0, result.output
    assert "retention: not applied: " in result.stderr and "does not allow deletes" in result.stderr
    assert site.raw.digest(site.repository, old) == old_digest
    report = json.loads((site.state / "reports" / "nightly-latest" / "report.json").read_text())
    assert "does not allow deletes" in report["meta"]["retention"]["error"]


# ---- a registry failing for a moment while artifacts are read: no evidence ----------------------

@pytest.mark.registry
def test_a_503_on_the_provenance_blob_is_exit_4_not_a_verdict(registry: str, repo: str, tmp_path: Path) -> None:
    key, pub = write_key(tmp_path)
    tag = tags.full_tag(inputs().variant)       # verify holds a tag to the signed variant's tags
    digest = RawRegistry(registry).push_config_image(repo, tag, {})
    client = RegistryClient(registry, credentials=lambda host: None)
    done = Attester(ProbeEngine(probe_output()), client, registry, repo, "r1", NOW,
                    provenance.load_signer(key), out_dir=tmp_path / "attestations")(
        "cand", digest, inputs(), green_smoke())
    clean = CliRunner().invoke(verify_command, [f"{registry}/{repo}:{tag}", "--key", str(pub)])
    assert clean.exit_code == 0, clean.output
    with FaultProxy(registry) as proxy:
        proxy.faults.canned.append(Canned("GET", f"/blobs/{done.provenance.blob_digest}", 503,
                                          b'{"errors":[{"code":"UNAVAILABLE","message":"try again"}]}'))
        result = CliRunner().invoke(verify_command, [f"{proxy.host}/{repo}:{tag}", "--key", str(pub)])
    assert ended_cleanly(result), result.output
    assert result.exit_code == 4, result.output
    [line] = result.output.splitlines()
    assert line.startswith("accel-images: error: registry ") and "answered 503" in line
