"""The registry failing during promote-on-green publishing (accel_images/publish/promote.py).

Pushes go through tests/faultproxy.py, a proxy in front of the real registry that refuses,
answers 401, answers 500 to chosen PUTs, or cuts an upload. Whatever happens, the real
registry (read directly over HTTP, not through project code) must never have a real tag
pointing at an image that was not pushed whole and smoke-tested.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel_images.kb.compat import load_kb
from accel_images.builder.engine import Engine, Pushed
from accel_images.errors import RegistryError
from accel_images.publish.promote import Publication, RetryPolicy, Target, publish
from accel_images.registry import RegistryClient
from accel_images.smoke.judge import SmokeResult
from accel_images.plan.variants import make_variant
from conftest import REGISTRY, registry_get
from faultproxy import FaultProxy, free_port

pytestmark = [pytest.mark.engine, pytest.mark.registry]

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
NO_WAIT = RetryPolicy(tries=3, first_delay_s=0, max_delay_s=0, sleep=lambda seconds: None)
GREEN = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=())
RED = SmokeResult(ok=False, ran_on="cpu", cpu_fallback=False, failures=("torch_version: wrong",), checks=())
VARIANT = make_variant(load_kb(), "cpu", None, "2.13", "3.11", "debian12", "runtime")
REAL_TAGS = (VARIANT.tag, "2.13-cpu")


class CountingEngine:
    """The real engine, counting pushes (to tell a retry from none)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.pushes: list[str] = []

    def tag(self, image: str, ref: str) -> None:
        self.engine.tag(image, ref)

    def push(self, ref: str) -> str:
        self.pushes.append(ref)
        return self.engine.push(ref)


    def push_image(self, ref: str) -> Pushed:
        return Pushed(self.push(ref))
    def remove_image(self, ref: str, force: bool = False) -> None:
        self.engine.remove_image(ref, force)


@pytest.fixture
def engine() -> Iterator[CountingEngine]:
    real = Engine.connect()
    yield CountingEngine(real)
    real.close()


@pytest.fixture
def image(docker_client, tmp_path: Path) -> Iterator[str]:
    """A tiny image with content of its own, so every push really uploads a blob."""
    (tmp_path / "payload").write_bytes(uuid.uuid4().bytes * 4096)
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY payload /payload\n")
    built = docker_client.images.build(path=str(tmp_path), tag=f"accel-images-test/faults:{uuid.uuid4().hex[:12]}",
                                       rm=True)[0]
    yield built.id
    docker_client.images.remove(built.id, force=True)


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    with FaultProxy(REGISTRY) as running:
        yield running


def repository() -> str:
    return f"accel-faults/{uuid.uuid4().hex[:12]}"


def tags_in_real_registry(repo: str) -> dict[str, str]:
    """tag -> manifest digest, read straight from the registry's HTTP API."""
    try:
        tags = json.loads(registry_get(REGISTRY, f"/v2/{repo}/tags/list")).get("tags") or []
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return {}
        raise
    return {tag: "sha256:" + hashlib.sha256(registry_get(REGISTRY, f"/v2/{repo}/manifests/{tag}",
                                                         accept=MANIFEST_V2)).hexdigest() for tag in tags}


def assert_no_real_tag_on_untested_image(repo: str, publication: Publication) -> dict[str, str]:
    found = tags_in_real_registry(repo)
    real = {tag: digest for tag, digest in found.items() if tag in REAL_TAGS}
    if real:
        assert publication.smoke is not None and publication.smoke.ok
        assert set(real.values()) == {publication.digest}
    return real


def run_publish(engine: CountingEngine, image: str, host: str, repo: str, smoke=GREEN) -> Publication:
    smoked: list[str] = []

    def smoke_runner(ref: str, variant) -> SmokeResult:
        smoked.append(ref)
        return smoke
    publication = publish(engine, RegistryClient(host), image, VARIANT, Target(host, repo), REAL_TAGS,
                          "r" + uuid.uuid4().hex[:8], smoke_runner, retry=NO_WAIT)
    assert smoked in ([], [publication.candidate])  # smoke ran on exactly the pushed candidate, if at all
    return publication


def test_unreachable_registry_is_retried_a_bounded_number_of_times_and_promotes_nothing(
        engine: CountingEngine, image: str) -> None:
    repo = repository()
    publication = run_publish(engine, image, f"127.0.0.1:{free_port()}", repo)
    assert not publication.ok
    assert "unreachable" in publication.error or "connection refused" in publication.error
    assert len(engine.pushes) == NO_WAIT.tries  # transient: retried, bounded
    assert publication.promoted == ()


def test_401_is_permanent_with_a_login_hint_and_no_retry(engine: CountingEngine, image: str,
                                                         proxy: FaultProxy) -> None:
    proxy.faults.unauthorized = True
    repo = repository()
    publication = run_publish(engine, image, proxy.host, repo)
    assert not publication.ok
    assert "docker login" in publication.error
    assert len(engine.pushes) == 1
    assert tags_in_real_registry(repo) == {}


def test_a_500_on_the_candidate_manifest_is_retried_then_promotion_succeeds(
        engine: CountingEngine, image: str, proxy: FaultProxy) -> None:
    proxy.faults.fail_put = {"manifest": {1}}
    repo = repository()
    publication = run_publish(engine, image, proxy.host, repo)
    assert publication.ok, publication.error
    assert len(engine.pushes) == 1 + 1 + len(REAL_TAGS)  # the retry, then one per real tag
    real = assert_no_real_tag_on_untested_image(repo, publication)
    assert set(real) == set(REAL_TAGS)
    assert not publication.candidate_left
    assert publication.candidate.rsplit(":", 1)[1] not in tags_in_real_registry(repo) or \
        tags_in_real_registry(repo)[publication.candidate.rsplit(":", 1)[1]] != publication.digest


def test_persistent_500_mid_push_reports_and_moves_no_real_tag(engine: CountingEngine, image: str,
                                                               proxy: FaultProxy) -> None:
    proxy.faults.fail_put = {"manifest": set(range(1, 50))}
    repo = repository()
    publication = run_publish(engine, image, proxy.host, repo)
    assert not publication.ok and "server error" in publication.error
    assert len(engine.pushes) == NO_WAIT.tries
    assert publication.smoke is None  # never smoke-tested, so never promoted
    assert tags_in_real_registry(repo) == {}


def test_500_during_promotion_leaves_real_tags_only_on_the_tested_digest(
        engine: CountingEngine, image: str, proxy: FaultProxy) -> None:
    proxy.faults.fail_put = {"manifest": {3, 4, 5}}  # 1: candidate, 2: first real tag, 3-5: the second, thrice
    repo = repository()
    publication = run_publish(engine, image, proxy.host, repo)
    assert not publication.ok
    assert publication.promoted == REAL_TAGS[:1]
    real = assert_no_real_tag_on_untested_image(repo, publication)
    assert set(real) == {REAL_TAGS[0]}


def test_connection_cut_mid_upload_never_promotes_a_partial_image(engine: CountingEngine, image: str,
                                                                  proxy: FaultProxy) -> None:
    proxy.faults.cut_upload = 1
    repo = repository()
    publication = run_publish(engine, image, proxy.host, repo)
    # The daemon retries a broken layer upload by itself; either way no partial image is tagged.
    assert_no_real_tag_on_untested_image(repo, publication)
    if publication.ok:
        blob_path = f"/v2/{repo}/manifests/{REAL_TAGS[0]}"
        manifest = json.loads(registry_get(REGISTRY, blob_path, accept=MANIFEST_V2))
        for layer in manifest["layers"]:
            registry_get(REGISTRY, f"/v2/{repo}/blobs/{layer['digest']}")  # every layer is really there


def test_red_smoke_promotes_nothing_and_removes_the_candidate(engine: CountingEngine, image: str,
                                                              proxy: FaultProxy) -> None:
    repo = repository()
    publication = run_publish(engine, image, proxy.host, repo, smoke=RED)
    assert not publication.ok and publication.promoted == ()
    found = tags_in_real_registry(repo)
    assert not set(found) & set(REAL_TAGS)
    assert publication.digest not in found.values()  # the candidate tag no longer serves the image


def test_an_error_event_in_a_successful_push_stream_is_a_transient_registry_error(
        engine: CountingEngine, image: str, proxy: FaultProxy) -> None:
    """The daemon answers the push call with 200 and reports the registry's 500 inside the stream."""
    proxy.faults.fail_put = {"manifest": {1}}
    ref = f"{proxy.host}/{repository()}:stream-error"
    engine.tag(image, ref)
    try:
        with pytest.raises(RegistryError) as raised:
            engine.push(ref)
        assert raised.value.transient
        assert "server error" in raised.value.one_line()
        assert engine.push(ref).startswith("sha256:")  # the next attempt goes through
    finally:
        engine.remove_image(ref)

