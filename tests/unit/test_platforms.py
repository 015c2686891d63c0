"""Platforms without an engine: which base a platform's build names, the index a tag serves and gets,
promoting an index, and which platforms a build builds.

The end-to-end run (both platforms built, arm64 under emulation, published as one index) is
tests/integration/test_platforms_integration.py.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from accel_images.builder.bases import platform_base
from accel_images.builder.builder import Builder
from accel_images.builder.engine import BuiltImage
from accel_images.builder.settings import BuildSettings
from accel_images.cli.build import engine_platform_only
from accel_images.cli.options import load_expansion
from accel_images.errors import EngineError, InputError, NotInRegistry, RegistryError
from accel_images.kb import compat
from accel_images.model import platforms
from accel_images.model.reference import Mirror
from accel_images.publish import index
from accel_images.publish.promote import RetryPolicy, Target, promote_index, stopped_index
from accel_images.registry import (OCI_INDEX, OCI_MANIFEST, IndexEntry, RemoteImage, index_entries, oci_index,
                                   platform_name, unreachable)
from accel_images.render.contexts import RenderOptions
from accel_images.state import StateDir
from fakes import FakeEngine
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
AMD64, ARM64 = "sha256:" + "a" * 64, "sha256:" + "b" * 64
NO_WAIT = RetryPolicy(sleep=lambda seconds: None)


def index_of(**digests: str) -> dict[str, Any]:
    return json.loads(oci_index([IndexEntry(f"linux/{arch}", digest, 100) for arch, digest in digests.items()]))


@dataclass
class Manifests:
    """A registry's manifests by tag and digest, and what it stores; images' configs name their platform."""

    host: str = "127.0.0.1:5000"
    by_reference: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    platforms: dict[str, str] = field(default_factory=dict)
    put: dict[str, bytes] = field(default_factory=dict)

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None:
        return self.by_reference.get(reference)

    def image(self, repository: str, tag: str, platform: str | None = None) -> RemoteImage | None:
        return RemoteImage(repository, tag, tag, {}, platform=self.platforms.get(tag, ""))

    def descriptor(self, repository: str, reference: str) -> dict[str, Any] | None:
        return {"mediaType": OCI_MANIFEST, "digest": reference, "size": 7}

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> tuple[str, bool]:
        self.put[reference] = data
        return "sha256:" + hashlib.sha256(data).hexdigest(), False


# ---- the base a platform's build names ------------------------------------------------------------

def test_a_platforms_base_is_its_manifest_in_the_bases_index() -> None:
    registry = Manifests(by_reference={"bookworm-slim": ("sha256:" + "1" * 64, index_of(amd64=AMD64, arm64=ARM64))})
    ref = "127.0.0.1:5000/library/debian:bookworm-slim"
    assert platform_base(registry, ref, "linux/arm64") == f"127.0.0.1:5000/library/debian@{ARM64}"
    assert platform_base(registry, ref, "linux/amd64") == f"127.0.0.1:5000/library/debian@{AMD64}"
    with pytest.raises(NotInRegistry, match=r"has no linux/riscv64 image \(its index lists: linux/amd64, linux/arm64\)"):
        platform_base(registry, ref, "linux/riscv64")


def test_a_single_image_base_serves_its_own_platform_only_and_a_locked_digest_is_read_as_is() -> None:
    registry = Manifests(by_reference={"bookworm-slim": (AMD64, {"mediaType": OCI_MANIFEST}),
                                       ARM64: (ARM64, {"mediaType": OCI_MANIFEST})},
                         platforms={AMD64: "linux/amd64", ARM64: "linux/arm64"})
    assert platform_base(registry, "127.0.0.1:5000/library/debian:bookworm-slim", "linux/amd64").endswith(AMD64)
    with pytest.raises(NotInRegistry, match="is a linux/amd64 image only, not linux/arm64"):
        platform_base(registry, "127.0.0.1:5000/library/debian:bookworm-slim", "linux/arm64")
    assert platform_base(registry, f"127.0.0.1:5000/library/debian@{ARM64}", "linux/arm64") == \
        f"127.0.0.1:5000/library/debian@{ARM64}"
    with pytest.raises(NotInRegistry, match="not found in registry"):
        platform_base(registry, "127.0.0.1:5000/library/debian:trixie", "linux/arm64")


MATRIX = """schema: 1
image: team/pytorch
platform: [linux/amd64, linux/arm64]
vendors:
  cpu:
    - torch: ["2.14"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
  cuda:
    - stack: ["13.0"]
      torch: ["2.14"]
      python: ["3.12"]
      os: [ubuntu24.04]
      flavor: [runtime]
"""


@pytest.fixture
def builder_for(tmp_path: Path):
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    expansion = load_expansion(str(tmp_path / "matrix.yaml"))
    registry = Manifests(by_reference={
        "bookworm-slim": ("sha256:" + "1" * 64, index_of(amd64=AMD64, arm64=ARM64)),
        "24.04": ("sha256:" + "2" * 64, index_of(amd64=AMD64, arm64=ARM64))})

    def make(engine: FakeEngine) -> Builder:
        settings = BuildSettings(options=RenderOptions(mirrors=(Mirror("docker.io", "127.0.0.1:5000"),)),
                                 state_dir=StateDir(tmp_path / "state"))
        return Builder(engine, compat.load_kb(), expansion, settings,  # type: ignore[arg-type]
                       registries=lambda host: registry)
    return expansion, make


def test_each_platform_builds_from_its_own_base_digest_under_its_own_names(builder_for) -> None:
    expansion, make = builder_for
    engine = FakeEngine()
    [amd64, arm64] = [v for v in expansion.variants if v.vendor == "cpu"]
    prepared = make(engine).prepare(arm64)
    dockerfile = (prepared.context_dir / "Dockerfile").read_text()
    assert f"FROM 127.0.0.1:5000/library/debian@{ARM64}" in dockerfile
    assert prepared.ref == "team/pytorch:2.14.1-cpu-py3.11-debian12-arm64"
    assert prepared.context_dir.name == "2.14.1-cpu-py3.11-debian12-arm64"
    assert prepared.base_digest == f"127.0.0.1:5000/library/debian@{ARM64}"
    assert ("pull", f"127.0.0.1:5000/library/debian@{ARM64} linux/arm64") in engine.calls
    assert "TARGETARCH" not in prepared.args  # the CPU Dockerfile is the same for every platform
    other = make(engine).prepare(amd64)
    assert other.ref == "team/pytorch:2.14.1-cpu-py3.11-debian12" and other.fingerprint != prepared.fingerprint
    assert f"FROM 127.0.0.1:5000/library/debian@{AMD64}" in (other.context_dir / "Dockerfile").read_text()


def test_a_dockerfile_with_platform_stages_gets_targetarch_and_the_build_its_platform(builder_for) -> None:
    expansion, make = builder_for
    engine = FakeEngine()
    [arm64] = [v for v in expansion.variants if v.vendor == "cuda" and v.platform == "linux/arm64"]
    builder = make(engine)
    prepared = builder.prepare(arm64)
    assert prepared.args["TARGETARCH"] == "arm64"
    assert "FROM image-${TARGETARCH}" in (prepared.context_dir / "Dockerfile").read_text()
    outcome = builder.build_prepared(prepared)
    assert outcome.ok and engine.built_platforms[outcome.image_id or ""] == "linux/arm64"


def test_a_base_or_an_image_of_another_platform_fails_the_build(builder_for) -> None:
    expansion, make = builder_for
    [arm64] = [v for v in expansion.variants if v.vendor == "cpu" and v.platform == "linux/arm64"]
    with pytest.raises(EngineError, match=r"base image .* is a linux/amd64 image, not linux/arm64"):
        make(FakeEngine(base_platform="linux/amd64")).prepare(arm64)
    engine = BuildsAmd64()
    builder = make(engine)
    prepared = builder.prepare(arm64)
    outcome = builder.build_prepared(prepared)
    assert not outcome.ok and "is a linux/amd64 image, not linux/arm64" in (outcome.error or "")


class BuildsAmd64(FakeEngine):
    """An engine whose build ignores the platform asked for (as the classic builder does with a local base)."""

    def build(self, context: Path, tag: str, **kwargs: object) -> BuiltImage:
        built = super().build(context, tag, **kwargs)
        self.built_platforms[built.id] = "linux/amd64"
        return built


def test_a_build_without_platform_is_of_the_engines_own_platform(builder_for) -> None:
    expansion, _ = builder_for
    assert {v.platform for v in engine_platform_only(expansion.variants, "linux/arm64")} == {"linux/arm64"}
    amd64_only = tuple(v for v in expansion.variants if v.platform == "linux/amd64")
    with pytest.raises(InputError, match="no chosen variant is built for this engine's platform linux/arm64"):
        engine_platform_only(amd64_only, "linux/arm64")


# ---- the index a tag serves, and the index a nightly puts there ---------------------------------------

def test_what_a_tag_serves_by_platform() -> None:
    top = "sha256:" + "9" * 64
    registry = Manifests(by_reference={"t": (top, index_of(amd64=AMD64, arm64=ARM64)),
                                       "old": (AMD64, {"mediaType": OCI_MANIFEST})}, platforms={AMD64: "linux/amd64"})
    served = index.served(registry, "r", "t")
    assert served is not None and served.is_index and served.digest == top
    assert {p: e.digest for p, e in served.images.items()} == {"linux/amd64": AMD64, "linux/arm64": ARM64}
    single = index.served(registry, "r", "old")   # a tag published before it had several platforms
    assert single is not None and not single.is_index and {p: e.digest for p, e in single.images.items()} == {
        "linux/amd64": AMD64}
    assert index.served(registry, "r", "absent") is None


def test_the_index_of_the_same_images_is_the_same_bytes_whatever_the_order() -> None:
    arm = IndexEntry("linux/arm64", ARM64, 5)
    amd = IndexEntry("linux/amd64", AMD64, 6)
    data, digest = index.assemble({"linux/arm64": arm, "linux/amd64": amd})
    assert (data, digest) == index.assemble({"linux/amd64": amd, "linux/arm64": arm})
    parsed = json.loads(data)
    assert parsed["mediaType"] == OCI_INDEX and [m["platform"] for m in parsed["manifests"]] == [
        {"os": "linux", "architecture": "amd64"}, {"os": "linux", "architecture": "arm64"}]
    assert index_entries(parsed, "r:t") == (amd, arm)


def test_buildkit_attestation_entries_are_no_platform() -> None:
    listed = index_of(amd64=AMD64)
    listed["manifests"].append({"mediaType": OCI_MANIFEST, "digest": ARM64, "size": 1,
                                "platform": {"os": "unknown", "architecture": "unknown"}})
    assert [entry.platform for entry in index_entries(listed, "r:t")] == ["linux/amd64"]


@dataclass
class Tags:
    """The tags an index promotion moves: what each serves, puts, deletes."""

    serving: dict[str, str | None] = field(default_factory=dict)
    answer: str | None = None
    interrupt_at: str | None = None

    def manifest_digest(self, repository: str, tag: str) -> str | None:
        return self.serving.get(tag)

    def delete_tag(self, repository: str, tag: str) -> bool:
        self.serving.pop(tag, None)
        return True

    def copy_tag(self, repository: str, source: str, tag: str) -> str:
        self.serving[tag] = source
        return source

    def image(self, repository: str, tag: str) -> RemoteImage | None:
        return None

    def put_manifest(self, repository: str, reference: str, data: bytes, media_type: str) -> tuple[str, bool]:
        if reference == self.interrupt_at:
            raise KeyboardInterrupt
        digest = self.answer or "sha256:" + hashlib.sha256(data).hexdigest()
        self.serving[reference] = digest
        return digest, False


def test_an_index_is_put_under_every_real_tag_and_checked() -> None:
    data, digest = index.assemble({"linux/amd64": IndexEntry("linux/amd64", AMD64, 1)})
    tags = Tags(answer=digest)
    promotion = promote_index(tags, Target("reg", "r"), ["full", "full-20261203", "latest-cpu"], data, digest,
                              OCI_INDEX, NO_WAIT)
    assert promotion.promoted == ("full", "full-20261203", "latest-cpu")
    assert tags.serving == {"full": digest, "full-20261203": digest, "latest-cpu": digest}
    with pytest.raises(RegistryError, match="not as the smoke-tested index"):
        promote_index(Tags(answer="sha256:" + "0" * 64), Target("reg", "r"), ["full"], data, digest, OCI_INDEX,
                      NO_WAIT)


def test_a_stopped_index_promotion_puts_every_moved_tag_back() -> None:
    data, digest = index.assemble({"linux/amd64": IndexEntry("linux/amd64", AMD64, 1)})
    tags = Tags(serving={"full": "sha256:" + "3" * 64}, answer=digest, interrupt_at="latest-cpu")
    with pytest.raises(KeyboardInterrupt) as caught:
        promote_index(tags, Target("reg", "r"), ["full", "full-20261203", "latest-cpu"], data, digest, OCI_INDEX,
                      NO_WAIT)
    stopped = stopped_index(caught.value)
    assert stopped is not None and stopped.promoted == ()
    assert tags.serving == {"full": "sha256:" + "3" * 64}  # the old image back, the new dated tag gone


def test_the_default_platform_sorts_first_and_local_names_say_the_rest() -> None:
    assert platforms.sort(["linux/arm64", "linux/amd64"]) == ("linux/amd64", "linux/arm64")
    assert (platforms.suffix("linux/amd64"), platforms.suffix("linux/arm64")) == ("", "-arm64")
    assert platform_name("linux", "arm64", "v8") == "linux/arm64"
    variant = load_expansion(str(FROZEN_MATRIX)).variants[0]
    assert replace(variant, platform="linux/arm64").key == f"cpu/{variant.tag}@linux/arm64"


def test_an_index_entry_a_config_and_the_engine_spell_arm64_v8_alike() -> None:
    """One spelling (accel_images.registry.platform_name) for every reader: `arm64/v8` is `linux/arm64`
    whether an index entry, an image config or the engine's inspect says it."""
    from accel_images.builder.engine import _platform_of
    from accel_images.registry import _config_platform
    listed = index_of(arm64=ARM64)
    listed["manifests"][0]["platform"]["variant"] = "v8"
    assert [entry.platform for entry in index_entries(listed, "r:t")] == ["linux/arm64"]
    assert _config_platform({"os": "linux", "architecture": "arm64", "variant": "v8"}) == "linux/arm64"
    assert _platform_of({"Os": "linux", "Architecture": "arm64", "Variant": "v8"}) == "linux/arm64"
    assert platform_name("linux", "arm", "v7") == "linux/arm/v7"


class Unreachable(Manifests):
    """A mirror nobody started: every read of a manifest is refused."""

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None:
        raise unreachable(self.host, f"reading {repository}:{reference}", ConnectionRefusedError("connection refused"))


def test_a_platforms_base_read_from_an_unreachable_mirror_names_the_mapping_as_the_pull_does(tmp_path: Path) -> None:
    """The read of the base's index comes before any pull: its failure must carry the pull's advice (the
    mapping that pointed there), not a bare "unreachable"."""
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    expansion = load_expansion(str(tmp_path / "matrix.yaml"))
    [arm64] = [v for v in expansion.variants if v.vendor == "cpu" and v.platform == "linux/arm64"]
    down = Unreachable(host="127.0.0.1:5999")
    settings = BuildSettings(options=RenderOptions(mirrors=(Mirror("docker.io", "127.0.0.1:5999"),)),
                             state_dir=StateDir(tmp_path / "state"))
    builder = Builder(FakeEngine(), compat.load_kb(), expansion, settings,  # type: ignore[arg-type]
                      registries=lambda host: down)
    with pytest.raises(RegistryError) as raised:
        builder.prepare(arm64)
    assert raised.value.one_line().endswith("(the --registry-mirror docker.io=127.0.0.1:5999 points there: start that"
                                            " mirror or correct the mapping)"), raised.value.one_line()
    assert raised.value.transient and raised.value.exit_code == 4


def test_a_platforms_base_read_from_an_unreachable_registry_suggests_a_mirror_as_the_pull_does(tmp_path: Path) -> None:
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    expansion = load_expansion(str(tmp_path / "matrix.yaml"))
    [arm64] = [v for v in expansion.variants if v.vendor == "cpu" and v.platform == "linux/arm64"]
    settings = BuildSettings(options=RenderOptions(), state_dir=StateDir(tmp_path / "state"))
    builder = Builder(FakeEngine(), compat.load_kb(), expansion, settings,  # type: ignore[arg-type]
                      registries=lambda host: Unreachable(host=host))
    with pytest.raises(RegistryError) as raised:
        builder.prepare(arm64)
    assert raised.value.one_line().endswith("(offline or behind a firewall? pull through a mirror: --registry-mirror"
                                            " docker.io=HOST[/PATH])"), raised.value.one_line()
