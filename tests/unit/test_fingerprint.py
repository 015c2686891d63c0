"""The fingerprint changes exactly when what the daemon would build from changes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel_images.errors import InputError
from accel_images.builder.fingerprint import FINGERPRINT_LABEL, context_entries, fingerprint

BASE = "sha256:" + "ab" * 32
ARGS = {"TORCH_VERSION": "2.5.1", "PYTHON_VERSION": "3.11"}


def write_context(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


@pytest.fixture
def context(tmp_path: Path) -> Path:
    root = write_context(tmp_path / "ctx", {
        "Dockerfile": b"FROM scratch\nCOPY . /\n",
        "smoke.py": b"print('ok')\n",
        "wheels/numpy-2.0-any.whl": b"\x00\x01wheel bytes" * 1000,
    })
    (root / "entrypoint.sh").write_bytes(b"#!/bin/sh\nexec \"$@\"\n")
    (root / "entrypoint.sh").chmod(0o755)
    return root


def test_label_key_and_format(context: Path) -> None:
    assert FINGERPRINT_LABEL == "io.accel-images.fingerprint"
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", fingerprint(context, ARGS, BASE))


def test_stable_across_runs(context: Path) -> None:
    assert fingerprint(context, ARGS, BASE) == fingerprint(context, ARGS, BASE)


def test_stable_across_creation_order_and_location(tmp_path: Path) -> None:
    files = {"b/2": b"two", "a": b"one", "c/d/e": b"three"}
    forward = write_context(tmp_path / "forward", files)
    backward = write_context(tmp_path / "backward", dict(reversed(list(files.items()))))
    assert fingerprint(forward, ARGS, BASE) == fingerprint(backward, ARGS, BASE)


def test_build_arg_order_does_not_matter(context: Path) -> None:
    reordered = dict(reversed(list(ARGS.items())))
    assert fingerprint(context, ARGS, BASE) == fingerprint(context, reordered, BASE)


def test_mtime_alone_changes_nothing(context: Path) -> None:
    before = fingerprint(context, ARGS, BASE)
    for path in context.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
    assert fingerprint(context, ARGS, BASE) == before


def test_one_byte_changes_it(context: Path) -> None:
    before = fingerprint(context, ARGS, BASE)
    wheel = context / "wheels/numpy-2.0-any.whl"
    data = bytearray(wheel.read_bytes())
    data[5000] ^= 1
    wheel.write_bytes(bytes(data))
    assert fingerprint(context, ARGS, BASE) != before


def test_a_file_name_changes_it(context: Path) -> None:
    before = fingerprint(context, ARGS, BASE)
    (context / "smoke.py").rename(context / "smoke2.py")
    assert fingerprint(context, ARGS, BASE) != before


def test_the_exec_bit_changes_it(context: Path) -> None:
    before = fingerprint(context, ARGS, BASE)
    (context / "smoke.py").chmod(0o755)
    assert fingerprint(context, ARGS, BASE) != before


def test_other_mode_bits_do_not(context: Path) -> None:
    before = fingerprint(context, ARGS, BASE)
    (context / "smoke.py").chmod(0o600)
    assert fingerprint(context, ARGS, BASE) == before


def test_an_added_empty_directory_changes_it(context: Path) -> None:
    before = fingerprint(context, ARGS, BASE)
    (context / "empty").mkdir()
    assert fingerprint(context, ARGS, BASE) != before


def test_symlinks_count_by_target(context: Path) -> None:
    (context / "link").symlink_to("smoke.py")
    before = fingerprint(context, ARGS, BASE)
    (context / "link").unlink()
    (context / "link").symlink_to("entrypoint.sh")
    assert fingerprint(context, ARGS, BASE) != before


def test_a_dangling_symlink_is_fine(context: Path) -> None:
    (context / "dangling").symlink_to("does-not-exist")
    assert ["dangling", "l"] in [entry[:2] for entry in context_entries(context)]


@pytest.mark.parametrize("args", [
    {**ARGS, "TORCH_VERSION": "2.5.2"},
    {**ARGS, "EXTRA": ""},
    {"TORCH_VERSION": "2.5.1"},
])
def test_build_args_change_it(context: Path, args: dict[str, str]) -> None:
    assert fingerprint(context, args, BASE) != fingerprint(context, ARGS, BASE)


def test_base_image_changes_it(context: Path) -> None:
    other_base = "sha256:" + "cd" * 32
    assert fingerprint(context, ARGS, other_base) != fingerprint(context, ARGS, BASE)


def test_files_docker_would_not_send_do_not_count(context: Path) -> None:
    (context / ".dockerignore").write_text("# comment\n*.tmp\n")
    before = fingerprint(context, ARGS, BASE)
    (context / "scratch.tmp").write_text("ignored")
    assert fingerprint(context, ARGS, BASE) == before
    (context / "kept.txt").write_text("sent")
    assert fingerprint(context, ARGS, BASE) != before


def test_the_dockerignore_itself_counts(context: Path) -> None:
    (context / ".dockerignore").write_text("*.tmp\n")
    before = fingerprint(context, ARGS, BASE)
    (context / ".dockerignore").write_text("*.log\n")
    assert fingerprint(context, ARGS, BASE) != before


def test_a_missing_context_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        fingerprint(tmp_path / "nope", ARGS, BASE)


names = st.text(alphabet="abcdefgh", min_size=1, max_size=6)
contexts = st.dictionaries(names, st.binary(min_size=1, max_size=64), min_size=1, max_size=6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=contexts, data=st.data())
def test_any_context_is_order_free_and_byte_sensitive(tmp_path_factory: pytest.TempPathFactory,
                                                      files: dict[str, bytes],
                                                      data: st.DataObject) -> None:
    first = write_context(tmp_path_factory.mktemp("first"), files)
    second = write_context(tmp_path_factory.mktemp("second"), dict(sorted(files.items(), reverse=True)))
    assert fingerprint(first, {}, BASE) == fingerprint(second, {}, BASE)

    victim = data.draw(st.sampled_from(sorted(files)))
    content = bytearray(files[victim])
    content[data.draw(st.integers(0, len(content) - 1))] ^= 0xFF
    (second / victim).write_bytes(bytes(content))
    assert fingerprint(first, {}, BASE) != fingerprint(second, {}, BASE)
