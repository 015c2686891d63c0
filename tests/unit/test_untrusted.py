"""accel_images.untrusted: a file is read up to its limit plus one byte, never whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_images import untrusted


def test_an_endless_file_costs_a_bounded_read() -> None:
    with pytest.raises(untrusted.FileTooLarge) as caught:
        untrusted.read_limited("/dev/zero", 1024)
    assert caught.value.size == "more than 1024 bytes" and caught.value.strerror == "more than the 1024 bytes accepted"
    assert isinstance(caught.value, OSError) and caught.value.filename == "/dev/zero"


def test_a_large_file_is_named_with_its_size_and_a_small_one_read_whole(tmp_path: Path) -> None:
    large = tmp_path / "large"
    large.write_bytes(b"x" * 5000)
    with pytest.raises(untrusted.FileTooLarge) as caught:
        untrusted.read_limited(large, 4096)
    assert caught.value.size == "5000 bytes" and caught.value.strerror == "5000 bytes, more than the 4096 accepted"
    assert untrusted.read_limited(large, 5000) == b"x" * 5000
