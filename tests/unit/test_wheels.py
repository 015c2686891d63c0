"""The run's wheelhouse (accel_images.builder.wheels): what pip on the host is asked, what is read back
from it, what a build context gets, what is kept and pruned. pip itself is a fake here; the real one
against a local index is tests/integration/test_wheel_fetch.py.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from accel_images.builder import wheels
from accel_images.builder.builder import Builder
from accel_images.builder.engine import ImageInfo
from accel_images.builder.pip_target import target_environment
from accel_images.builder.settings import BuildSettings
from accel_images.builder.wheels import RunWheelhouse, WheelRequest, fetched_files
from accel_images.cli import main
from accel_images.cli.options import load_expansion
from accel_images.errors import WheelFetchError
from accel_images.formatting import parse_size
from accel_images.kb import compat
from accel_images.kb.wheels import manylinux_tags
from accel_images.model.wheels import Wheel
from accel_images.plan.variants import Expansion
from accel_images.render.contexts import Renderer, RenderOptions, copies_wheels
from accel_images.state import StateDir
from fakes import FakeEngine, InMemoryRegistry, PushingEngine
from test_nightly import DEBIAN, TEMPLATES, UBUNTU, write_matrix

INDEX = "https://user:s3cret@mirror.example.com/whl/cpu"
PLATFORMS = manylinux_tags("x86_64", "2.36")
TORCH = ("torch==2.13.0", "torchvision==0.28.*", "numpy")


def request(python: str = "3.11", requirements: tuple[str, ...] = TORCH) -> WheelRequest:
    return WheelRequest(INDEX, requirements, ("setuptools",), python, "x86_64", PLATFORMS)


# ---- what pip is asked ------------------------------------------------------------------------------

def test_pip_is_asked_for_the_images_python_and_platform_and_never_sees_the_credentials_on_its_command_line(
        tmp_path: Path) -> None:
    command = wheels.pip_command(request("3.12"), tmp_path, TORCH, deps=True)
    assert command[1:6] == ["-m", "accel_images.builder.pip_target", "3.12", "x86_64", "download"]
    for pair in (["--python-version", "3.12"], ["--abi", "cp312"], ["--implementation", "cp"], ["--dest", str(tmp_path)]):
        assert pair[0] in command and command[command.index(pair[0]) + 1] == pair[1]
    assert command.count("--platform") == len(PLATFORMS) and "--only-binary=:all:" in command
    assert command[-3:] == list(TORCH) and "--no-deps" not in command and "--no-cache-dir" in command
    assert not any("s3cret" in word for word in command)
    assert "--no-deps" in wheels.pip_command(request(), tmp_path, ("setuptools",), deps=False)


def test_pips_environment_names_the_index_and_keeps_how_to_reach_it_but_no_other_source() -> None:
    env = wheels.pip_environment(INDEX, {"PATH": "/bin", "HTTPS_PROXY": "http://proxy:3128", "PIP_CERT": "/ca.pem",
                                         "PIP_FIND_LINKS": "/opt/wheels", "PIP_EXTRA_INDEX_URL": "file:///opt/pypi",
                                         "PIP_INDEX_URL": "https://elsewhere/simple", "PIP_NO_INDEX": "1"})
    assert env["PIP_INDEX_URL"] == INDEX and env["PIP_CONFIG_FILE"] == os.devnull
    assert env["PIP_CERT"] == "/ca.pem" and env["HTTPS_PROXY"] == "http://proxy:3128" and env["PATH"] == "/bin"
    assert not {"PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"} & set(env)


def test_markers_are_read_as_on_the_images_python_and_machine() -> None:
    # pip evaluates requirement markers against default_environment() (pip 23.2 and 26.3, req_install.py)
    env = target_environment({"python_version": "3.11", "sys_platform": "darwin", "platform_machine": "arm64",
                              "platform_release": "6.1"}, "3.13", "x86_64")
    assert env["python_version"] == "3.13" and env["python_full_version"] == "3.13.0"
    assert (env["sys_platform"], env["platform_system"], env["platform_machine"]) == ("linux", "Linux", "x86_64")
    assert env["platform_release"] == "6.1"  # a container's kernel is the host's


# ---- what is read back --------------------------------------------------------------------------------

PIP_OUTPUT = """Looking in indexes: http://127.0.0.1:8731/cpu
Collecting torch==2.13.0
  File was already downloaded /cache/idx/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
Collecting numpy
  Downloading http://127.0.0.1:8731/cpu/files/numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl (16.9 MB)
Collecting filelock (from torch==2.13.0)
  File was already downloaded /cache/idx/filelock-4.3.2-py3-none-any.whl
Saved /cache/idx/numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl
Successfully downloaded torch numpy filelock
"""


def test_the_files_pip_took_are_read_from_its_own_lines() -> None:
    assert fetched_files(PIP_OUTPUT) == (("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                                          "filelock-4.3.2-py3-none-any.whl",
                                          "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl"),
                                         ("torch", "numpy", "filelock"))
    assert wheels.newly_saved(PIP_OUTPUT) == {"numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl"}


SHARED = ["bench_runtime-1.0-py3-none-any.whl"]
BACKEND = ["setuptools-80.0.0-py3-none-any.whl"]
PER_PYTHON = {python: [f"torch-2.13.0+cpu-cp{python.replace('.', '')}-cp{python.replace('.', '')}-linux_x86_64.whl",
                       *SHARED] for python in ("3.11", "3.12")}
TOOLS = ["ipython-9.18.1-py3-none-any.whl", "traitlets-5.16.1-py3-none-any.whl", "pip-26.3-py3-none-any.whl"]
"""IPython's closure and pip, which the builder asks the package index for on its own (accel_images.render.companions.TOOLS)."""


class FakePip:
    """pip download, as far as the wheelhouse sees it: the closure of the Python asked for (the build
    backend alone with --no-deps) into --dest, and its lines on stdout."""

    def __init__(self, per_python: Mapping[str, list[str]] = PER_PYTHON, fail: str = "", delay_s: float = 0) -> None:
        self.per_python = per_python
        self.fail = fail
        self.delay_s = delay_s
        self.calls: list[list[str]] = []
        self.running = 0
        self.overlapped = False

    def __call__(self, command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(command)
        self.running += 1
        self.overlapped |= self.running > 1
        time.sleep(self.delay_s)
        self.running -= 1
        if self.fail:
            return subprocess.CompletedProcess(command, 1, "Collecting torch==2.13.0\n", self.fail)
        dest = Path(command[command.index("--dest") + 1])
        files = BACKEND if "--no-deps" in command else TOOLS if "ipython" in command else \
            self.per_python[command[command.index("--python-version") + 1]]
        files = [name.replace("x86_64", command[4]) for name in files]  # the machine pip_target was given
        lines = []
        for name in files:
            if (dest / name).exists():
                lines.append(f"  File was already downloaded {dest / name}")
            else:
                (dest / name).write_bytes(name.encode() * 1000)
                lines.append(f"Saved {dest / name}")
        lines.append("Successfully downloaded " + " ".join(name.split("-")[0] for name in files))
        return subprocess.CompletedProcess(command, 0, "\n".join(lines) + "\n", "")


def test_each_wheel_is_fetched_once_per_run_and_a_request_resolves_once(tmp_path: Path) -> None:
    fake = FakePip()
    house = RunWheelhouse(tmp_path / "cache", runner=fake)
    first = house.closure(request("3.11"))
    assert house.closure(request("3.11")) is first
    second = house.closure(request("3.12"))
    assert len(fake.calls) == 4  # two requests, each: the closure, then the build backend alone
    assert [w.filename for w in first.wheels] == [*PER_PYTHON["3.11"], *BACKEND]
    assert {p.name for p in second.paths} == {*PER_PYTHON["3.12"], *BACKEND}
    assert house.tally.fetched_files == 4 and house.tally.reused_files == 2  # the shared wheel and setuptools
    assert second.fetched_bytes == sum(w.size for w in second.wheels if w.filename.startswith("torch-"))
    assert all(w.index_url == "https://mirror.example.com/whl/cpu" for w in first.wheels)  # no credentials recorded
    assert all(p.parent == first.paths[0].parent and p.is_file() for p in first.paths + second.paths)
    assert first.wheels[0].sha256 == __import__("hashlib").sha256(first.paths[0].read_bytes()).hexdigest()
    fresh = RunWheelhouse(tmp_path / "cache", runner=fake)
    assert fresh.closure(request("3.11")).fetched_bytes == 0 and fresh.tally.fetched_files == 0  # the next run


def test_concurrent_variants_fetch_one_at_a_time(tmp_path: Path) -> None:
    fake = FakePip(delay_s=0.05)
    house = RunWheelhouse(tmp_path / "cache", runner=fake)
    threads = [threading.Thread(target=house.closure, args=(request(p),)) for p in ("3.11", "3.12", "3.11", "3.12")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not fake.overlapped and len(fake.calls) == 4 and house.tally.fetched_files == 4


def test_a_variant_whose_closure_is_known_does_not_wait_for_another_variants_fetch(tmp_path: Path) -> None:
    fake, release = FakePip(), threading.Event()
    house = RunWheelhouse(tmp_path / "cache", runner=fake)
    known = house.closure(request("3.11"))

    def slow(command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        release.wait(10)
        return fake(command, env)
    house.runner = slow
    other = threading.Thread(target=house.closure, args=(request("3.12"),))
    other.start()
    started = time.monotonic()
    assert house.closure(request("3.11")) is known and time.monotonic() - started < 5
    release.set()
    other.join()
    assert len(fake.calls) == 4


def test_a_failed_fetch_is_one_line_with_pips_reason_and_the_index_without_credentials(tmp_path: Path) -> None:
    fake = FakePip(fail="ERROR: Could not find a version that satisfies the requirement torch==2.13.0\n"
                                  "ERROR: No matching distribution found for torch==2.13.0\n")
    with pytest.raises(WheelFetchError) as raised:
        RunWheelhouse(tmp_path, runner=fake).closure(request())
    line = raised.value.one_line()
    assert "No matching distribution found for torch==2.13.0" in line and "mirror.example.com/whl/cpu" in line
    assert "s3cret" not in line and "--pip-fetch build" in line


def test_output_that_does_not_name_every_project_is_refused(tmp_path: Path) -> None:
    def runner(command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 0, "Successfully downloaded torch numpy\n", "")
    with pytest.raises(WheelFetchError, match="cannot tell which wheels"):
        RunWheelhouse(tmp_path, runner=runner).closure(request())


def test_a_file_pip_names_but_the_cache_lacks_is_an_expected_failure(tmp_path: Path) -> None:
    def runner(command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 0, f"Saved {tmp_path}/elsewhere/torch-2.13.0-py3-none-any.whl\n"
                                                       "Successfully downloaded torch\n", "")
    with pytest.raises(WheelFetchError, match=r"pip said it fetched torch-2\.13\.0-py3-none-any\.whl, which is not in"):
        RunWheelhouse(tmp_path / "cache", runner=runner).closure(request())


# ---- what the cache holds is what was fetched -------------------------------------------------------------

def cached(house: RunWheelhouse, name: str) -> Path:
    return house.root / wheels.partition_name("https://mirror.example.com/whl/cpu") / name


def test_a_wheel_replaced_in_the_cache_is_fetched_again_and_said(tmp_path: Path) -> None:
    """Same name, other bytes, and an index that gives no hashes (pip takes the file as it lies): the run
    checks it against the sha256 recorded when it entered the cache, fetches it again and says so."""
    fake = FakePip()
    first = RunWheelhouse(tmp_path / "cache", runner=fake).closure(request())
    genuine = {w.filename: w.sha256 for w in first.wheels}
    torch = PER_PYTHON["3.11"][0]
    house = RunWheelhouse(tmp_path / "cache", runner=fake)
    cached(house, torch).unlink()
    cached(house, torch).write_bytes(b"not the wheel the index served")
    said: list[str] = []
    again = house.closure(request(), status=said.append)
    assert {w.filename: w.sha256 for w in again.wheels} == genuine      # the recorded hash is the genuine one
    assert cached(house, torch).read_bytes() == torch.encode() * 1000   # and so are the bytes the build gets
    assert house.tally.fetched_files == 1 and again.fetched_bytes == len(torch.encode() * 1000)
    [note] = again.notes
    assert note.startswith(f"{torch} in the wheel cache is not the file fetched into it (sha256 ") and \
        note.endswith("): fetched again") and genuine[torch][:12] in note
    assert note in said


def test_a_wheel_the_cache_never_recorded_is_fetched_again(tmp_path: Path) -> None:
    """A file under a wheel's name that no fetch put there (planted, or left by an older version): not trusted."""
    fake = FakePip()
    house = RunWheelhouse(tmp_path / "cache", runner=fake)
    torch = PER_PYTHON["3.11"][0]
    cached(house, torch).parent.mkdir(parents=True)
    cached(house, torch).write_bytes(b"planted")
    closure = house.closure(request())
    assert cached(house, torch).read_bytes() == torch.encode() * 1000
    assert [w.sha256 for w in closure.wheels if w.filename == torch] == [
        __import__("hashlib").sha256(torch.encode() * 1000).hexdigest()]
    assert any(note.startswith(f"{torch} in the wheel cache was not recorded") for note in closure.notes)


def test_a_file_that_stays_wrong_after_the_refetch_is_one_line(tmp_path: Path) -> None:
    """pip keeps naming a file found in place although the run removed it: refused, never built in."""
    fake = FakePip()
    RunWheelhouse(tmp_path / "cache", runner=fake).closure(request())
    house = RunWheelhouse(tmp_path / "cache", runner=fake)
    torch = PER_PYTHON["3.11"][0]

    def stubborn(command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        dest = Path(command[command.index("--dest") + 1])
        if not (dest / torch).exists():
            (dest / torch).write_bytes(b"forged")
            return subprocess.CompletedProcess(command, 0, f"  File was already downloaded {dest / torch}\n"
                                                           "Successfully downloaded torch\n", "")
        return fake(command, env)
    house.runner = stubborn
    cached(house, torch).unlink()
    cached(house, torch).write_bytes(b"forged")
    with pytest.raises(WheelFetchError) as raised:
        house.closure(request(requirements=("torch==2.13.0",)))
    line = raised.value.one_line()
    assert "\n" not in line and f": {torch} in the wheel cache is not the file fetched into it" in line
    assert line.endswith("instead of fetching it from the index: not used")


# ---- a full disk -----------------------------------------------------------------------------------------

PIP_ENOSPC = """ERROR: Exception:
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/pip/_internal/operations/prepare.py", line 684, in save_linked_requirement
    shutil.copy(req.local_file_path, download_location)
OSError: [Errno 28] No space left on device
"""


def test_a_full_disk_is_one_line_naming_the_directory_and_leaves_no_truncated_wheel(tmp_path: Path) -> None:
    """pip copies a download into --dest and fails half-way: the error says so with the cache's directory,
    and the half file never sits under a wheel's name in the cache, so the next run fetches it whole."""
    torch = PER_PYTHON["3.11"][0]
    seen_tmpdir: list[str] = []

    def full(command: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        seen_tmpdir.append(env.get("TMPDIR", ""))
        dest = Path(command[command.index("--dest") + 1])
        (dest / torch).write_bytes(b"PK\x03\x04 the first half")
        return subprocess.CompletedProcess(command, 2, f"Collecting torch==2.13.0\n  Downloading {torch}\n",
                                           PIP_ENOSPC)
    house = RunWheelhouse(tmp_path / "cache", runner=full)
    with pytest.raises(WheelFetchError) as raised:
        house.closure(request())
    line = raised.value.one_line()
    partition = cached(house, torch).parent
    assert "\n" not in line and "Exception:" not in line
    assert f"No space left on device in {partition}" in line and "--cache-dir" in line
    assert not cached(house, torch).exists()
    assert [p.name for p in partition.iterdir() if not p.name.startswith(".")] == []
    assert seen_tmpdir[0].startswith(str(partition))   # pip's own temporary files: on the cache's disk too
    fake = FakePip()
    house.runner = fake
    closure = RunWheelhouse(tmp_path / "cache", runner=fake).closure(request())
    assert cached(house, torch).read_bytes() == torch.encode() * 1000 and closure.notes == ()


def test_a_traceback_from_pip_is_reported_by_its_last_line() -> None:
    done = subprocess.CompletedProcess([], 2, "", "ERROR: Exception:\nTraceback (most recent call last):\n"
                                                  "  File \"x.py\", line 1\nValueError: bad wheel name\n")
    assert wheels.pip_error(done) == "ValueError: bad wheel name"


# ---- kept and pruned ------------------------------------------------------------------------------------

def test_pruning_removes_the_least_recently_used_wheels_first(tmp_path: Path) -> None:
    index = tmp_path / "cache" / "idx"
    index.mkdir(parents=True)
    for age, name in enumerate(["new.whl", "middle.whl", "old.whl"]):
        (index / name).write_bytes(b"x" * 100)
        os.utime(index / name, (1_000_000 - age * 1000, 1_000_000))
    wheels.touch([index / "old.whl"], now=2_000_000)  # used by this run: newest now
    pruned = wheels.prune(tmp_path / "cache", 200)
    assert pruned.removed == ("idx/middle.whl",) and pruned.freed_bytes == 100 and pruned.kept_bytes == 200
    assert sorted(p.name for p in index.iterdir()) == ["new.whl", "old.whl"]
    assert RunWheelhouse(tmp_path / "cache").prune(None).removed == ()


@pytest.mark.parametrize("text,size", [("50G", 50 * 10**9), ("50GB", 50 * 10**9), ("1.5GiB", int(1.5 * 2**30)),
                                       ("500m", 500 * 10**6), ("123", 123), ("2T", 2 * 10**12)])
def test_sizes_read_as_people_write_them(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_a_bad_cache_size_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["build", "--vendor", "cpu", "--cache-max-size", "lots",
                                       "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip() == ("accel-images: error: --cache-max-size: 'lots' is not a size"
                                     " (a number with K, M, G or T, e.g. 50G)")


# ---- what the render and the build context get -----------------------------------------------------------

@pytest.fixture(scope="module")
def published() -> tuple[Renderer, Expansion]:
    from accel_images.resources import default_matrix
    return Renderer(compat.load_kb()), load_expansion(str(default_matrix()))


def test_a_host_fetch_renders_the_wheelhouse_route_with_the_index_routes_companions(published) -> None:
    renderer, expansion = published
    [variant] = [v for v in expansion.variants if v.key == "cpu/2.13.0-cpu-py3.11-debian12"]  # the amd64 image
    fetched = renderer.context(variant, expansion, RenderOptions(pip_index_url=INDEX, host_fetch=True))
    text = fetched.files["Dockerfile"].decode()
    assert "COPY wheels/ /tmp/wheels/" in text and copies_wheels(text)
    assert '--no-index --find-links /tmp/wheels "torch==2.13.0" "torchvision==0.28.*" numpy' in text
    assert fetched.pip_requirements == TORCH and fetched.secret_args == {} and "s3cret" not in text
    assert fetched.files["pip.conf"] == renderer.context(variant, expansion, RenderOptions(pip_index_url=INDEX)
                                                         ).files["pip.conf"]  # the image's pip keeps the index
    index_route = renderer.context(variant, expansion, RenderOptions()).files["Dockerfile"].decode()
    assert not copies_wheels(index_route)


def test_a_template_that_copies_no_wheels_is_rendered_for_the_index_route(published, tmp_path: Path) -> None:
    _, expansion = published
    (tmp_path / "vendors").mkdir()
    (tmp_path / "vendors" / "cpu.Dockerfile.j2").write_text("FROM {{ base_ref }}\nRUN echo {{ pip_source }}\n")
    [variant] = [v for v in expansion.variants if v.key == "cpu/2.13.0-cpu-py3.11-debian12"]  # the amd64 image
    rendered = Renderer(compat.load_kb(), tmp_path).context(variant, expansion,
                                                           RenderOptions(pip_index_url=INDEX, host_fetch=True))
    assert 'RUN echo --index-url "https://${FTP_PROXY}@mirror.example.com/whl/cpu"' in rendered.files["Dockerfile"].decode()
    assert rendered.secret_args == {"FTP_PROXY": "user:s3cret"} and not rendered.copies_wheels


@pytest.mark.parametrize("dockerfile,copies", [
    ("FROM a\nCOPY wheels/ /tmp/wheels/\n", True),
    ("FROM a\nCOPY --chown=1:1 ./wheels /tmp/w\n", True),
    ("FROM a\nADD wheels/torch.whl /tmp/\n", True),
    ("FROM a\nCOPY --from=build wheels/ /tmp/wheels/\n", False),
    ("FROM a\nCOPY smoke.py \\\n     wheels.txt /in/\n", False),
    ("FROM a\nRUN echo COPY wheels/ /x\n", False),
])
def test_a_context_gets_wheels_only_when_its_dockerfile_copies_them(dockerfile: str, copies: bool) -> None:
    assert copies_wheels(dockerfile) is copies


def builder(tmp_path: Path, fake: FakePip, templates: Path | None = None) -> tuple[Builder, Expansion]:
    expansion = load_expansion(str(write_matrix(tmp_path, "team/pytorch")))
    settings = BuildSettings(options=RenderOptions(pip_index_url=INDEX, host_fetch=True),
                             state_dir=StateDir(tmp_path / "state"))
    house = RunWheelhouse(settings.wheel_cache_dir, runner=fake)
    return Builder(FakeEngine(), compat.load_kb(), expansion, settings, templates_dir=templates,  # type: ignore[arg-type]
                   wheels=house), expansion


def test_the_build_context_holds_exactly_the_variants_closure_and_the_provenance_its_wheels(tmp_path: Path) -> None:
    fake = FakePip()
    build, expansion = builder(tmp_path, fake)
    variants = {v.tag: v for v in expansion.variants}
    debian, ubuntu = variants[DEBIAN], variants[UBUNTU]
    one, two = build.prepare(debian), build.prepare(ubuntu)
    assert sorted(p.name for p in (one.context_dir / "wheels").iterdir()) == sorted(
        [*PER_PYTHON["3.11"], *BACKEND, *TOOLS])
    assert sorted(p.name for p in (two.context_dir / "wheels").iterdir()) == sorted(
        [*PER_PYTHON["3.12"], *BACKEND, *TOOLS])
    shared = [one.context_dir / "wheels" / SHARED[0], two.context_dir / "wheels" / SHARED[0]]
    assert os.path.samefile(*shared)  # hard links to the one copy in the cache
    assert {w.filename for w in one.wheels} == {p.name for p in (one.context_dir / "wheels").iterdir()}
    assert fake.calls[0][-3:] == list(TORCH)  # what the Dockerfile installs, in that order
    assert fake.calls[2][-2:] == ["ipython", "pip"]   # a request of its own, to the package index the build was given
    assert fake.calls[3][-3:] == ["torch==2.14.1", "torchvision==0.29.*", "numpy"]
    assert fake.calls[3][fake.calls[3].index("--python-version") + 1] == "3.12"
    before = one.fingerprint
    (build.wheels.root / wheels.partition_name("https://mirror.example.com/whl/cpu") / SHARED[0]).unlink()
    again = Builder(build.engine, build.renderer.kb, build.expansion, build.settings,
                    wheels=RunWheelhouse(build.wheels.root, runner=fake)).prepare(debian)
    assert again.fingerprint == before  # the same bytes fetched again: the same image inputs


def test_a_wheel_replaced_in_the_cache_is_noted_in_the_build_and_its_context_gets_the_genuine_one(
        tmp_path: Path) -> None:
    fake = FakePip()
    build, expansion = builder(tmp_path, fake)
    debian = {v.tag: v for v in expansion.variants}[DEBIAN]
    before = build.prepare(debian)
    torch = cached(build.wheels, PER_PYTHON["3.11"][0])
    torch.unlink()
    torch.write_bytes(b"not the wheel the index served")
    again = Builder(build.engine, build.renderer.kb, build.expansion, build.settings,
                    wheels=RunWheelhouse(build.wheels.root, runner=fake)).prepare(debian)
    assert again.fingerprint == before.fingerprint and again.wheels == before.wheels
    assert [note for note in again.notes if torch.name in note] == [
        next(note for note in again.notes if note.endswith(": fetched again"))]


def test_a_template_that_copies_no_wheels_gets_none_and_nothing_is_fetched(tmp_path: Path) -> None:
    fake = FakePip()
    build, expansion = builder(tmp_path, fake, templates=TEMPLATES)  # the nightly fixture's stub template
    prepared = build.prepare(expansion.variants[0])
    assert fake.calls == [] and prepared.wheels == () and not (prepared.context_dir / "wheels").exists()


def test_provenance_names_each_wheel_by_package_url_with_its_index_and_sha256() -> None:
    from datetime import datetime, timezone

    from accel_images.supply import provenance
    wheel = Wheel("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "ab" * 32, 191_794_682,
                  "https://download.pytorch.org/whl/cpu")
    assert wheel.purl == ("pkg:pypi/torch@2.13.0%2Bcpu?file_name=torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64"
                          ".whl&repository_url=https://download.pytorch.org/whl/cpu")
    assert Wheel("typing_extensions-4.16.0-py3-none-any.whl", "", 0, "").name == "typing-extensions"
    moment = datetime(2026, 12, 5, tzinfo=timezone.utc)
    facts = provenance.BuildFacts("reg/img", "sha256:" + "1" * 64, "t", {}, "sha256:f", "base@sha256:" + "2" * 64,
                                  {}, None, {}, "b", "i", moment, moment,
                                  provenance.SmokeFacts(True, "cpu", False, "2.13.0+cpu", "3.11"), wheels=(wheel,))
    dependencies = provenance.statement(facts)["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert dependencies[-1] == {"uri": wheel.purl, "name": wheel.filename, "digest": {"sha256": "ab" * 32},
                                "annotations": {"index": "https://download.pytorch.org/whl/cpu", "size": 191_794_682}}


# ---- an arm64 image's wheels ----------------------------------------------------------------------------

ARM64_MATRIX = """schema: 1
image: team/pytorch
platform: [linux/amd64, linux/arm64]
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
"""


def aarch64_fetches(fake: FakePip) -> list[list[str]]:
    """The pip downloads asked for aarch64 wheels, each checked to name aarch64 platform tags alone: every
    manylinux tag from Debian 12's glibc 2.36 down to 2_17 with manylinux2014 (NCCL's aarch64 wheels are
    manylinux_2_18 only, cupti's manylinux_2_25 only: tests/unit/test_kb_wheels.py)."""
    fetches = [command for command in fake.calls if command[4] == "aarch64"]
    for command in fetches:
        tags = tuple(command[i + 1] for i, word in enumerate(command) if word == "--platform")
        assert tags == manylinux_tags("aarch64", "2.36")
        assert {"manylinux_2_25_aarch64", "manylinux_2_18_aarch64", "manylinux2014_aarch64"} <= set(tags)
    return fetches


def platform_bases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The base's index names an amd64 and an arm64 image (tests/unit/test_platforms.py's registry)."""
    from test_platforms import AMD64, ARM64, Manifests, index_of
    registry = Manifests(by_reference={"bookworm-slim": ("sha256:" + "1" * 64, index_of(amd64=AMD64, arm64=ARM64))})
    monkeypatch.setattr("accel_images.builder.builder._registry_client", lambda host: registry)


class ReportsArchitecture(FakeEngine):
    """An engine that says what a pulled base's architecture is, as Docker's inspect does."""

    def pull(self, ref: str, on_line: object = None, platform: str | None = None) -> ImageInfo:
        from dataclasses import replace
        pulled = super().pull(ref, on_line, platform)
        return replace(pulled, architecture=(platform or "linux/amd64").split("/")[1])


@pytest.mark.parametrize("engine", [FakeEngine, ReportsArchitecture])
def test_an_arm64_images_closure_is_fetched_for_aarch64_and_the_amd64_images_for_x86_64(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: type[FakeEngine]) -> None:
    """The machine is the base's architecture as the engine reports it, else the variant's platform's."""
    platform_bases(monkeypatch)
    (tmp_path / "matrix.yaml").write_text(ARM64_MATRIX)
    expansion = load_expansion(str(tmp_path / "matrix.yaml"))
    settings = BuildSettings(options=RenderOptions(pip_index_url=INDEX, host_fetch=True),
                             state_dir=StateDir(tmp_path / "state"))
    fake = FakePip()
    build = Builder(engine(), compat.load_kb(), expansion, settings,  # type: ignore[arg-type]
                    wheels=RunWheelhouse(settings.wheel_cache_dir, runner=fake))
    amd64, arm64 = expansion.variants
    assert (amd64.platform, arm64.platform) == ("linux/amd64", "linux/arm64")
    arm64_wheels = sorted(p.name for p in (build.prepare(arm64).context_dir / "wheels").iterdir())
    assert len(aarch64_fetches(fake)) == len(fake.calls) == 3  # the closure, the build backend alone, the tools
    assert "torch-2.13.0+cpu-cp311-cp311-linux_aarch64.whl" in arm64_wheels
    build.prepare(amd64)
    assert [command[4] for command in fake.calls[3:]] == ["x86_64"] * 3
    assert fake.calls[3][fake.calls[3].index("--platform") + 1] == "manylinux_2_36_x86_64"


def test_build_pip_fetch_host_for_arm64_fetches_aarch64_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`accel-images build --platform linux/arm64 --pip-fetch host`, the engine and pip faked."""
    from accel_images.cli import build as cli_build
    platform_bases(monkeypatch)
    fake, engine = FakePip(), FakeEngine()
    monkeypatch.setattr(cli_build, "RunWheelhouse", lambda root: RunWheelhouse(root, runner=fake))
    monkeypatch.setattr("accel_images.cli.build.Engine.connect", classmethod(lambda cls: engine))
    monkeypatch.setattr(cli_build, "reclaim", lambda engine, started: [])
    (tmp_path / "matrix.yaml").write_text(ARM64_MATRIX)
    result = CliRunner().invoke(main, ["build", "--matrix", str(tmp_path / "matrix.yaml"), "--platform", "linux/arm64",
                                       "--pip-fetch", "host", "--pip-index-url", INDEX, "--no-smoke",
                                       "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    assert len(aarch64_fetches(fake)) == len(fake.calls) == 3
    assert "fetched " in result.stderr and engine.built_platforms and set(engine.built_platforms.values()) == {
        "linux/arm64"}


def test_a_nightly_of_both_platforms_fetches_each_images_wheels_for_its_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A nightly (every platform of the tag's index) with the run's wheelhouse: one fetch per machine."""
    from accel_images.publish.nightly import NightlyOptions, run_nightly
    from accel_images.publish.promote import RetryPolicy, Target
    from test_nightly import GREEN
    platform_bases(monkeypatch)
    (tmp_path / "matrix.yaml").write_text(ARM64_MATRIX)
    expansion = load_expansion(str(tmp_path / "matrix.yaml"))
    fake = FakePip()
    settings = BuildSettings(options=RenderOptions(pip_index_url=INDEX, host_fetch=True),
                             state_dir=StateDir(tmp_path / "state"), pull="always", smoke=False)
    registry = InMemoryRegistry()
    options = NightlyOptions(Target(registry.host, "team/pytorch"), retry=RetryPolicy(sleep=lambda seconds: None),
                             attest=False)
    nights = run_nightly(PushingEngine(registry), compat.load_kb(), expansion, expansion.variants,  # type: ignore[arg-type]
                         registry, settings, options, smoke=lambda image, variant: GREEN,
                         wheels=RunWheelhouse(settings.wheel_cache_dir, runner=fake))
    assert [(n.outcome.variant.platform, n.status) for n in nights] == [("linux/amd64", "built"),
                                                                        ("linux/arm64", "built")]
    assert len(aarch64_fetches(fake)) == 3
    assert sorted(command[4] for command in fake.calls) == ["aarch64"] * 3 + ["x86_64"] * 3
    [tag] = {n.outcome.variant.tag for n in nights}
    assert [platform for platform, _ in registry.index_of(tag)] == ["linux/amd64", "linux/arm64"]
