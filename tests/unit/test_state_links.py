"""A symbolic link planted below the state directory is refused with one line, never followed.

Every case makes a real link to a directory (or file) outside the state directory holding a file
accel-images did not write, runs the real code, and checks that the outside is byte for byte
what it was: no file deleted there, none written there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from accel_images.kb import compat
from accel_images.cli import main
from accel_images.cli.options import load_expansion
from accel_images.errors import InputError
from accel_images.lock import held
from accel_images.render.contexts import Renderer, RenderOptions, write_build_context
from accel_images.smoke.records import smoke_passed_before
from accel_images.state import StateDir, StateLinkError

MATRICES = Path(__file__).resolve().parents[1] / "matrices"
SMALL = MATRICES / "small.yaml"
TAG = "2.13.0-cpu-py3.11-debian12"


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory that is not state: the files in it must survive every case."""
    directory = tmp_path / "precious"
    directory.mkdir()
    (directory / "notes.txt").write_text("not written by accel-images\n")
    (directory / "Dockerfile").write_text("FROM scratch\n# mine\n")
    return directory


def a_context(state: StateDir):
    expansion = load_expansion(str(SMALL))
    variant = next(v for v in expansion.variants if v.vendor == "cpu")
    rendered = Renderer(compat.load_kb()).context(variant, expansion, RenderOptions())
    return variant, rendered


def test_a_context_directory_that_is_a_link_is_refused_and_the_target_untouched(tmp_path: Path,
                                                                               outside: Path) -> None:
    state = StateDir(tmp_path / "state")
    variant, rendered = a_context(state)
    link = tmp_path / "state" / "contexts" / variant.vendor / variant.tag
    link.parent.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    with pytest.raises(StateLinkError) as caught:
        write_build_context(state.context(variant.vendor, variant.tag), rendered, None)
    assert f"{link}: a symbolic link (to {outside}) inside the state directory" in caught.value.one_line()
    with pytest.raises(StateLinkError):   # the writer refuses it too, whoever named the path
        write_build_context(link, rendered, None)
    assert tree(outside) == before


def test_a_link_higher_up_is_refused_too(tmp_path: Path, outside: Path) -> None:
    state = StateDir(tmp_path / "state")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "contexts").symlink_to(outside, target_is_directory=True)
    with pytest.raises(StateLinkError) as caught:
        state.context("cpu", TAG)
    assert caught.value.one_line().startswith(f"{tmp_path / 'state' / 'contexts'}: a symbolic link")
    with pytest.raises(StateLinkError):
        state.refuse_links()


def test_a_wheels_directory_that_is_a_link_is_refused(tmp_path: Path, outside: Path) -> None:
    state = StateDir(tmp_path / "state")
    variant, rendered = a_context(state)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "torch-2.13.0-cp311-none-linux_x86_64.whl").write_bytes(b"wheel")
    dest = state.context(variant.vendor, variant.tag)
    dest.mkdir(parents=True)
    (dest / "wheels").symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    with pytest.raises(StateLinkError) as caught:
        write_build_context(dest, rendered, wheelhouse)
    assert caught.value.one_line().startswith(f"{dest / 'wheels'}: a symbolic link")
    assert tree(outside) == before


def test_links_in_place_of_files_are_replaced_not_written_through(tmp_path: Path, outside: Path) -> None:
    state = StateDir(tmp_path / "state")
    variant, rendered = a_context(state)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "torch-2.13.0-cp311-none-linux_x86_64.whl").write_bytes(b"wheel")
    dest = state.context(variant.vendor, variant.tag)
    (dest / "wheels").mkdir(parents=True)
    (dest / "Dockerfile").symlink_to(outside / "Dockerfile")
    (dest / "stray").symlink_to(outside, target_is_directory=True)
    (dest / "wheels" / "torch-2.13.0-cp311-none-linux_x86_64.whl").symlink_to(outside / "notes.txt")
    before = tree(outside)
    write_build_context(dest, rendered, wheelhouse)
    assert tree(outside) == before
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert (dest / "Dockerfile").read_bytes() == rendered.files["Dockerfile"]
    assert (dest / "wheels" / "torch-2.13.0-cp311-none-linux_x86_64.whl").read_bytes() == b"wheel"


def test_a_smoke_record_that_is_a_link_is_refused(tmp_path: Path, outside: Path) -> None:
    state = StateDir(tmp_path / "state")
    (tmp_path / "state" / "smoke").mkdir(parents=True)
    (tmp_path / "state" / "smoke" / "sha256_abc.json").symlink_to(outside / "notes.txt")
    with pytest.raises(StateLinkError):
        state.smoke_record("sha256:abc")


def test_a_lock_that_is_a_link_is_refused(tmp_path: Path, outside: Path) -> None:
    lock = tmp_path / "nightly.lock"
    lock.symlink_to(outside / "notes.txt")
    before = tree(outside)
    with pytest.raises(InputError, match="cannot open the lock file"), held(lock):
        pass
    assert tree(outside) == before


@pytest.mark.parametrize("record", ["[]", "null", '"ok"', '{"ok": "yes"}'])
def test_a_malformed_smoke_record_is_no_pass(tmp_path: Path, record: str) -> None:
    state = StateDir(tmp_path)
    state.smoke_record("sha256:abc").parent.mkdir(parents=True)
    state.smoke_record("sha256:abc").write_text(record)
    assert smoke_passed_before(state, "sha256:abc") is False


@pytest.mark.parametrize("command", ["build", "nightly"])
def test_the_commands_refuse_a_planted_link_with_one_line_before_writing(tmp_path: Path, outside: Path,
                                                                        command: str) -> None:
    state = tmp_path / "state"
    link = state / "contexts" / "cpu" / TAG
    link.parent.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    args = [command, "--matrix", str(SMALL), "--vendor", "cpu", "--state-dir", str(state)]
    if command == "nightly":
        args += ["--registry", "127.0.0.1:1"]
    # An engine that is not there: the refusal must come before anything talks to Docker.
    result = CliRunner(env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}).invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines == [f"accel-images: error: {link}: a symbolic link (to {outside}) inside the state directory "
                     f"{state}; accel-images never follows links out of its state directory (remove the link, "
                     "or point --state-dir at the real directory)"]
    assert "Traceback" not in result.output
    assert tree(outside) == before
    assert not (state / "nightly.lock").exists()


def test_a_state_root_that_is_a_link_is_the_users_choice(tmp_path: Path) -> None:
    real = tmp_path / "real-state"
    (real / "contexts").mkdir(parents=True)
    os.symlink(real, tmp_path / "state")
    state = StateDir(tmp_path / "state")
    state.refuse_links()
    assert state.context("cpu", TAG) == tmp_path / "state" / "contexts" / "cpu" / TAG


# ---- a state directory a run could not use: one line, exit 2, before anything is written ----------

def a_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("in the way\n")


def a_directory(path: Path) -> None:
    path.mkdir(parents=True)


@pytest.mark.parametrize(("command", "plant", "where", "message"), [
    ("build", lambda s: a_file(s / "reports"), "reports", "is a file where the state directory keeps a directory"),
    ("nightly", lambda s: a_file(s / "reports"), "reports", "is a file where the state directory keeps a directory"),
    ("build", lambda s: a_file(s / "contexts"), "contexts", "is a file where the state directory keeps a directory"),
    ("nightly", lambda s: a_directory(s / "nightly.lock"), "nightly.lock", "is not a plain file"),
    ("build", lambda s: a_directory(s / "cache" / "digests.json"), "cache/digests.json", "is not a plain file"),
    ("nightly", lambda s: a_file(s), "", "is a file."),
], ids=["build-reports-file", "nightly-reports-file", "contexts-file", "lock-directory", "cache-directory",
        "state-is-a-file"])
def test_an_unusable_state_directory_is_one_line_and_exit_2(tmp_path: Path, command: str, plant, where: str,
                                                           message: str) -> None:
    state = tmp_path / "state"
    plant(state)
    args = [command, "--matrix", str(SMALL), "--vendor", "cpu", "--state-dir", str(state)]
    if command == "nightly":
        args += ["--registry", "127.0.0.1:1"]
    result = CliRunner(env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}).invoke(main, args)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("accel-images: error: ") and message in line, line
    assert "Traceback" not in result.output
    if where:
        assert f"{state / where}:" in line


def test_a_build_context_that_cannot_be_written_is_one_error(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    variant, rendered = a_context(state)
    blocked = state.context(variant.vendor, variant.tag)
    a_file(blocked.parent)           # contexts/cpu is a file: the context cannot be made below it
    with pytest.raises(InputError) as caught:
        write_build_context(blocked, rendered, None)
    assert "cannot write the build context" in caught.value.one_line()


def test_reports_that_cannot_be_written_are_one_error(tmp_path: Path) -> None:
    from accel_images.report.reports import write_reports
    a_file(tmp_path / "reports")
    with pytest.raises(InputError) as caught:
        write_reports([], tmp_path / "reports" / "build", {"kind": "build"})
    assert caught.value.one_line().startswith(f"{tmp_path / 'reports'}")
