"""accel_images.publish.promote: candidate -> smoke -> promotion, with the order, retries and cleanup checked
against fakes, and the whole flow once against the real engine and local registry.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_publish.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import docker
import pytest

from accel_images.model import tags
from accel_images.builder.engine import Engine
from accel_images.publish.promote import Target, publish
from accel_images.model.variant import Variant
from accel_images.registry import RegistryClient
from nightly_fixture.cleanup import remove_local_names
from nightly_fixture.rawregistry import RawRegistry
from test_publish import DAY, RED, Smoke
from test_publish import variants  # noqa: F401  (a fixture)


# ---- against the real engine and registry -----------------------------------------------------

@pytest.fixture
def repo(registry: str, docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}/pytorch"
    yield name
    RawRegistry(registry).delete_repository(name)
    remove_local_names(docker_client, f"{registry}/{name}:", f"{registry}/{name}@")


@pytest.mark.engine
@pytest.mark.registry
def test_promotion_in_a_real_registry_and_a_red_smoke_after_it(registry: str, repo: str, base_images,
                                                              variants: tuple[Variant, ...]) -> None:
    engine, client, raw = Engine.connect(), RegistryClient(registry), RawRegistry(registry)
    target, newest = Target(registry, repo), variants[0]
    real = tags.all_tags(newest, variants, DAY)
    good_image = engine.inspect_image(base_images.slim)
    other_image = engine.inspect_image(base_images.python)
    assert good_image is not None and other_image is not None

    smoke = Smoke()
    good = publish(engine, client, good_image.id, newest, target, real, "r1", smoke)
    assert good.ok, good.error
    assert smoke.seen == [target.ref(f"{newest.tag}-candidate-r1")]
    assert raw.tags(repo) == sorted(real)                       # the candidate is gone
    assert {raw.digest(repo, tag) for tag in real} == {good.digest}

    red = publish(engine, client, other_image.id, newest, target, real, "r2", Smoke(RED))
    assert not red.ok and red.digest not in (None, good.digest)
    assert raw.tags(repo) == sorted(real)
    assert {raw.digest(repo, tag) for tag in real} == {good.digest}   # the last good image stays
