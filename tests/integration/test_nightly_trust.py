"""Aliases move only onto a digest this tool smoke-tested, whatever labels the registry's image carries.

Against the real engine and the local registry (the `site` fixture of test_nightly.py): after a
good nightly, an image is pushed by hand under a variant's full tag, carrying the very labels
of the published image (fingerprint, build date) but none of its content: a config and no layer
at all, so no Python and no torch. A nightly that trusted the label would skip it as unchanged
and move floating aliases onto it. The registry is read over its HTTP API afterwards.
"""

from __future__ import annotations

import pytest

from test_nightly import DEBIAN, UBUNTU
from test_nightly_integration import Site, by_tag, nightly, site  # noqa: F401  (site is a fixture)


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
