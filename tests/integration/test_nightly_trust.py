"""Aliases move only onto a digest this tool smoke-tested, whatever labels the registry's image carries.

Against the real engine and the local registry (the `site` fixture of test_nightly.py): after a
good nightly, an image is pushed by hand under a variant's full tag, carrying the very labels
of the published image (fingerprint, build date) but none of its content: a config and no layer
at all, so no Python and no torch. A nightly that trusted the label would skip it as unchanged
and move floating aliases onto it. The registry is read over its HTTP API afterwards.

The same holds on the other paths that leave an image where it is or publish one without
building it: a rebuild for age whose layers equal a hand-pushed image's keeps nothing it did not
test, and a local image is published only when this state directory recorded building it.
"""

from __future__ import annotations

import json
from io import BytesIO
from pathlib import Path

import docker
import pytest
import requests

from accel_images.builder.builder import CREATED_LABEL
from accel_images.publish.nightly import describe, shown_status
from accel_images.state import StateDir
from test_nightly import DEBIAN, UBUNTU
from test_nightly_integration import Site, by_tag, nightly, push_base, site  # noqa: F401  (site is a fixture)


def forge(site: Site, tag: str) -> str:
    """Push a layer-less image under `tag` with the labels of the image there now; its digest."""
    labels = site.raw.labels(site.repository, tag)
    return site.raw.push_config_image(site.repository, tag, labels)


@pytest.mark.engine
@pytest.mark.registry
def test_a_hand_pushed_image_with_a_copied_label_is_rebuilt_and_gets_no_alias(site: Site) -> None:
    first = by_tag(nightly(site))
    assert {tag: night.status for tag, night in first.items()} == {DEBIAN: "built", UBUNTU: "built"}
    tested = first[DEBIAN].registry_digest
    forged = forge(site, DEBIAN)
    assert forged != tested and site.digests()[DEBIAN] == forged
    matrix = site.matrix.read_text()
    site.matrix.write_text(matrix[: matrix.index('    - torch: ["2.14"]')])   # DEBIAN now wins latest-cpu

    [night] = nightly(site)
    assert night.status == "built", night.outcome.error
    assert night.reason.startswith(f"{DEBIAN} points at {forged[:19]}, which this tool never smoke-tested")
    assert night.outcome.smoke is not None and night.outcome.smoke.ok
    after = site.digests()
    promoted = night.registry_digest
    assert promoted is not None and promoted != forged
    assert promoted in [entry.digest for entry in site.records()[DEBIAN].entries]
    for tag in (DEBIAN, "2.13-cpu", "latest-cpu"):
        assert after[tag] == promoted, tag
    assert forged not in after.values()


@pytest.mark.engine
@pytest.mark.registry
def test_a_forged_record_alone_does_not_make_a_digest_trusted(site: Site) -> None:
    """Tampering with the record (another digest, garbage) makes the next run rebuild, never trust."""
    nightly(site)
    site.raw.push_config_image(site.repository, f"{DEBIAN}-tested", {"io.accel-images.tested": "not json"})
    night = by_tag(nightly(site))[DEBIAN]
    assert night.status == "built" and "never smoke-tested" in night.reason
    assert site.digests()[DEBIAN] == night.registry_digest
    assert [e.digest for e in site.records()[DEBIAN].entries] == [night.registry_digest]


def only_debian(site: Site) -> None:
    matrix = site.matrix.read_text()
    site.matrix.write_text(matrix[: matrix.index('    - torch: ["2.14"]')])


def config_of(site: Site, tag: str) -> tuple[dict, dict]:
    """(manifest, config) of `tag`, read straight from the registry."""
    manifest = json.loads(site.raw.manifest(site.repository, tag))
    config = requests.get(f"{site.raw.url}/v2/{site.repository}/blobs/{manifest['config']['digest']}",
                          timeout=10).json()
    return manifest, config


@pytest.mark.engine
@pytest.mark.registry
def test_an_aged_hand_pushed_image_whose_layers_equal_a_rebuild_is_not_kept(
        site: Site, docker_client: docker.DockerClient) -> None:
    """An unsigned, untested image under the full tag: the published image's layers (a rebuild gives the
    same ones), its labels with an old build date, its entry point replaced. The age calls for a
    rebuild, which comes out identical: before, the nightly kept the hand-pushed digest ("rebuilt,
    identical content, kept") and reported it green. Now it is smoke-tested and published anew."""
    only_debian(site)
    [first] = nightly(site)
    assert first.status == "built", first.outcome.error
    # The published image becomes the base and the template adds no layer: a rebuild's layers are the base's.
    push_base(docker_client, f"{site.repository}:{DEBIAN}", site.base("debian:bookworm-slim"))
    (site.templates / "vendors" / "cpu.Dockerfile.j2").write_text(
        '{{ header }}\nFROM {{ base_ref }}\nLABEL {{ label_lines | join(" ") }}\n')
    [second] = nightly(site)
    assert second.status == "built" and second.reason.startswith("base image changed"), second.reason
    tested = second.registry_digest

    manifest, config = config_of(site, DEBIAN)
    config["created"] = "2026-01-02T03:04:05Z"
    config["config"]["Labels"][CREATED_LABEL] = "2026-01-02T03:04:05Z"
    config["config"]["Entrypoint"] = ["/bin/sh", "-c", "echo the hand-pushed entry point ran"]
    body = json.dumps(config).encode()
    manifest["config"] = {**manifest["config"], "digest": site.raw.upload_blob(site.repository, body),
                          "size": len(body)}
    forged = site.raw.put_manifest(site.repository, DEBIAN, manifest, manifest["mediaType"])
    assert forged != tested and site.digests()[DEBIAN] == forged

    [night] = nightly(site)
    assert not night.kept, describe(night)
    assert night.status == "built", night.outcome.error
    assert night.reason.startswith(f"{DEBIAN} points at {forged[:19]}, which this tool never smoke-tested")
    assert night.outcome.smoke is not None and night.outcome.smoke.ok
    promoted = night.registry_digest
    assert promoted not in (None, forged)
    assert promoted in [entry.digest for entry in site.records()[DEBIAN].entries]
    after = site.digests()
    assert after[DEBIAN] == after["2.13-cpu"] == after["latest-cpu"] == promoted
    assert forged not in after.values()


@pytest.mark.engine
@pytest.mark.registry
def test_a_derived_local_image_with_the_fingerprint_label_is_not_published(
        site: Site, docker_client: docker.DockerClient, tmp_path: Path) -> None:
    """A local image derived from the nightly's own build (a file added), which inherits its name, its
    fingerprint label and its fresh build date: before, the next nightly published and signed it as
    the "reused local build". Now only the build this state directory recorded is published."""
    only_debian(site)
    [first] = nightly(site)
    assert first.status == "built", first.outcome.error
    local = f"{site.repository}:{DEBIAN}"
    derived, _ = docker_client.images.build(
        fileobj=BytesIO(f"FROM {local}\nRUN echo replaced > /opt/accel-images/verdict.forged\n".encode()),
        rm=True, network_mode="none")
    derived.tag(*local.rsplit(":", 1))
    site.raw.delete_repository(site.repository)            # the registry lost the image: it must be published again

    [night] = nightly(site)
    assert night.status == "built", night.outcome.error
    assert night.outcome.image_id != derived.id and night.outcome.build_s is not None   # built, not reused
    assert shown_status(night) == "published"  # built here and pushed: not "reused local build"
    manifest, _ = config_of(site, DEBIAN)
    assert manifest["config"]["digest"] == night.outcome.image_id != derived.id
    record = json.loads(StateDir(site.state).build_record(night.outcome.fingerprint or "").read_text())
    assert record["image_id"] == night.outcome.image_id
