"""`--pin` and `--lock`: base images resolved to digests, recorded, and rendered from the record.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_pin_integration.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from accel_images.builder import pin
from accel_images.kb.compat import load_kb
from accel_images.errors import InputError, RegistryError
from accel_images.model.reference import Mirror
from accel_images.plan.variants import make_variant

ROOT = Path(__file__).resolve().parents[2]
CPU_MATRIX = ROOT / "tests" / "matrices" / "cpu-debian.yaml"
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


@dataclass(frozen=True)
class Pulled:
    repo_digests: tuple[str, ...]


class FakePuller:
    def __init__(self, digests: dict[str, tuple[str, ...]]) -> None:
        self.digests = digests
        self.pulled: list[str] = []

    def pull(self, ref: str) -> Pulled:
        self.pulled.append(ref)
        return Pulled(self.digests[ref])


def cpu_variant():
    return make_variant(load_kb(), "cpu", None, "2.13", "3.11", "debian12", "runtime")


def test_repository_and_pinned_reference() -> None:
    assert pin.repository_of("debian:bookworm-slim") == "debian"
    assert pin.repository_of("127.0.0.1:5000/library/debian:bookworm-slim") == "127.0.0.1:5000/library/debian"
    assert pin.repository_of("localhost:5000/x") == "localhost:5000/x"
    assert pin.pinned_ref("nvidia/cuda:13.0.3-runtime-ubuntu24.04", DIGEST) == f"nvidia/cuda@{DIGEST}"


def test_resolve_goes_through_the_mirror_and_keys_by_upstream_ref(tmp_path: Path) -> None:
    mirror = Mirror("docker.io", "127.0.0.1:5000")
    puller = FakePuller({"127.0.0.1:5000/library/debian:bookworm-slim":
                         ("elsewhere/debian@" + OTHER, f"127.0.0.1:5000/library/debian@{DIGEST}")})
    lock = pin.resolve(puller, ["debian:bookworm-slim", "debian:bookworm-slim"], [mirror],
                       now=datetime(2026, 5, 1, tzinfo=timezone.utc))
    assert puller.pulled == ["127.0.0.1:5000/library/debian:bookworm-slim"]
    assert lock.digest_of("debian:bookworm-slim") == DIGEST
    assert lock.created == "2026-05-01T00:00:00Z"
    path = pin.write_lock(lock, tmp_path / "accel-images.lock")
    assert pin.read_lock(path) == lock
    assert json.loads(path.read_text())["bases"]["debian:bookworm-slim"]["digest"] == DIGEST


def test_an_image_without_a_registry_digest_cannot_be_pinned() -> None:
    with pytest.raises(RegistryError, match="no registry digest"):
        pin.resolve(FakePuller({"local/x:1": ()}), ["local/x:1"])


def test_apply_renders_bases_by_digest_and_refuses_an_unknown_base(tmp_path: Path) -> None:
    variant = cpu_variant()
    lock = pin.Lock("2026-05-01T00:00:00Z", (pin.PinnedBase(variant.base_image, DIGEST, variant.base_image),))
    [pinned] = pin.apply(lock, [variant])
    assert pinned.base_image == f"debian@{DIGEST}"
    assert pinned.tag == variant.tag
    with pytest.raises(InputError, match="not in the lock"):
        pin.apply(pin.Lock("x", ()), [variant], tmp_path / "l")


def test_pinning_a_few_variants_keeps_the_rest_of_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "accel-images.lock"
    pin.write_lock(pin.Lock("old", (pin.PinnedBase("nvidia/cuda:1", OTHER, "nvidia/cuda:1"),)), path)
    pin.pin(FakePuller({"debian:bookworm-slim": (f"debian@{DIGEST}",)}), [cpu_variant()], [], path)
    lock = pin.read_lock(path)
    assert lock.digest_of("nvidia/cuda:1") == OTHER and lock.digest_of("debian:bookworm-slim") == DIGEST


@pytest.mark.parametrize("text", ["not json", '{"schema": 1}', '{"schema": 1, "bases": {"x": {"digest": "md5:1"}}}'])
def test_a_bad_lock_file_is_an_input_error_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.lock"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        pin.read_lock(path)
    assert str(path) in raised.value.one_line()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_lock_missing_is_one_line_exit_2(tmp_path: Path) -> None:
    result = cli("render", "--matrix", str(CPU_MATRIX), "--lock", str(tmp_path / "none.lock"),
                 "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "--pin" in result.stderr
