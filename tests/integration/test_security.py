"""Security promises: images run as a non-root user, credentials given to the builder never land in
an image, a log or the output, and smoke containers run locked down."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import IO
from collections.abc import Iterable, Iterator

import docker
import pytest

from accel_images.compat import load_kb
from accel_images.credentials import hide_credentials
from accel_images.devices import DeviceOptions
from accel_images.engine import Engine
from accel_images.render import CREDENTIALS_ARG, RenderOptions, Renderer
from accel_images.smoke.judge import Expectation
from accel_images.smoke.launcher import PIDS_LIMIT, SMOKE_LABEL, container_options, run_smoke
from accel_images.variant import Expansion, make_variant
from accel_images.matrix import User
from test_build_integration import IMAGE, published_build  # noqa: F401  (the published CPU image's fixture)

ROOT = Path(__file__).resolve().parents[1]
RUN = uuid.uuid4().hex[:10]
SECRET = f"s3cr3t-Pa55-{RUN}"
"""New for every run, so a layer or cache entry of an earlier run cannot pass for this one."""
INDEX_URL = f"https://builder:{SECRET}@127.0.0.1:9/simple/{{index}}"
SECRET_MATRIX = """schema: 1
image: accel-images-test/secret-RUN
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
""".replace("RUN", RUN)
# Like the real templates: RUN steps before and after the pip step in the build stage (an ARG
# declared after FROM would be recorded in the history of every later RUN of the stage), and a
# final stage with RUN steps of its own. The pip step writes the hash of the index URL it was
# given, so the test can tell that the credentials reached it; the hash is not the secret.
SECRET_TEMPLATE = """FROM {{ base_ref }} AS build
RUN echo before > /tmp/before
RUN echo {{ pip_source }} | sha256sum | cut -c1-64 > /tmp/seen
RUN cat /tmp/seen > /tmp/after
FROM {{ base_ref }}
RUN echo final-before > /opt/before
COPY --from=build /tmp/seen /opt/seen
LABEL {{ label_lines | join(" ") }}
RUN echo final
"""
STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12,64})$", re.MULTILINE)
"""The classic builder's line after each step: the image that step left (cached or new)."""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


# ---- non-root -----------------------------------------------------------------------------------

@pytest.mark.engine
@pytest.mark.registry
def test_published_image_runs_as_a_non_root_user(published_build: dict, docker_client) -> None:
    user = docker_client.api.inspect_image(IMAGE)["Config"]["User"]
    uid = user.split(":")[0]
    assert uid not in ("", "0", "root"), user
    assert uid == "1000"


# ---- credentials --------------------------------------------------------------------------------

def _cpu_context(options: RenderOptions):
    kb = load_kb()
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    expansion = Expansion((variant,), (), "accel-images/pytorch", User("dev", 1000, 1000))
    return Renderer(kb).context(variant, expansion, options)


def test_the_renderer_keeps_index_credentials_out_of_every_file_and_hands_them_to_the_build() -> None:
    context = _cpu_context(RenderOptions(pip_index_url=INDEX_URL))
    assert not [name for name, data in context.files.items() if SECRET.encode() in data]
    assert context.secret_args == {CREDENTIALS_ARG: f"builder:{SECRET}"}
    assert SECRET not in repr(context)
    dockerfile = context.files["Dockerfile"].decode()
    pip_steps = [step for step in dockerfile.split("\nRUN ")[1:] if "pip install" in step]
    assert len(pip_steps) == 1 and '--index-url "https://${FTP_PROXY}@127.0.0.1:9/simple/cpu"' in pip_steps[0]
    # Declared, the arg would be recorded in the history and cache key of every later RUN.
    assert not re.search(rf"^\s*ARG\s+{CREDENTIALS_ARG}\b", dockerfile, re.MULTILINE | re.IGNORECASE)
    assert dockerfile.count(CREDENTIALS_ARG) == 3  # the pip step, and the comment above it naming it twice


def test_an_index_without_credentials_or_a_wheelhouse_needs_no_secret(tmp_path: Path) -> None:
    plain = _cpu_context(RenderOptions(pip_index_url="https://127.0.0.1:9/simple/{index}"))
    assert plain.secret_args == {}
    assert b"--index-url https://127.0.0.1:9/simple/cpu " in plain.files["Dockerfile"]
    assert CREDENTIALS_ARG.encode() not in plain.files["Dockerfile"]
    offline = _cpu_context(RenderOptions(pip_index_url=INDEX_URL, pip_find_links=tmp_path))
    assert offline.secret_args == {} and CREDENTIALS_ARG.encode() not in offline.files["Dockerfile"]


class _Chunks(io.RawIOBase):
    """A byte stream over the chunks docker-py yields, for tarfile's stream mode."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks, self._pending = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            self._pending = next(self._chunks, b"")
            if not self._pending:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size], self._pending = self._pending[:size], self._pending[size:]
        return size


def _holds(stream: IO[bytes], needle: bytes) -> bool:
    """Whether `needle` occurs in the stream, also across chunk boundaries."""
    carried = b""
    while chunk := stream.read(1 << 20):
        if needle in carried + chunk:
            return True
        carried = (carried + chunk)[-(len(needle) - 1):]
    return False


def _files_holding(archive: tarfile.TarFile, needle: bytes, where: str) -> Iterator[str]:
    """Members of a tar stream whose name, link target or content hold `needle`; layer tars recursively."""
    for member in archive:
        if needle in f"{member.name} {member.linkname}".encode():
            yield f"{where}{member.name}"
        if not member.isfile():
            continue
        content = archive.extractfile(member)
        assert content is not None
        if member.name.endswith("layer.tar"):
            with tarfile.open(fileobj=content, mode="r|") as layer:
                yield from _files_holding(layer, needle, f"{where}{member.name}:")
        elif _holds(content, needle):
            yield f"{where}{member.name}"


def saved_files_holding(client: docker.DockerClient, image_id: str, needle: bytes) -> list[str]:
    """Every file of `docker save IMAGE` (configs with the history, each layer's files) holding `needle`."""
    stream = io.BufferedReader(_Chunks(client.api.get_image(image_id)), buffer_size=1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        return list(_files_holding(archive, needle, ""))


def saved_file(client: docker.DockerClient, image_id: str, path: str) -> bytes:
    """One file of an image, read from its layers (the topmost layer holding it wins)."""
    found = b""
    stream = io.BufferedReader(_Chunks(client.api.get_image(image_id)), buffer_size=1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if member.isfile() and member.name.endswith("layer.tar"):
                with tarfile.open(fileobj=archive.extractfile(member), mode="r|") as layer:
                    for entry in layer:
                        if entry.isfile() and entry.name == path:
                            found = layer.extractfile(entry).read()
    return found


def parent_chain(client: docker.DockerClient, image_id: str) -> dict[str, dict]:
    """The image and its parents (the final stage's intermediate images), by full ID, inspected."""
    found: dict[str, dict] = {}
    current: str | None = image_id
    while current:
        info = client.api.inspect_image(current)
        found[info["Id"]] = info
        current = info.get("Parent") or None
    return found


def images_of_the_build(client: docker.DockerClient, log: str, final: str) -> dict[str, dict]:
    """Every image the build made, inspected: the one each logged step left (both stages: the
    classic builder keeps each as an intermediate image) and the final image's parent chain."""
    found = parent_chain(client, final)
    for short in STEP_IMAGE.findall(log):
        info = client.api.inspect_image(short)
        found[info["Id"]] = info
    return found


def step_of(log: str, text: str) -> str:
    """The log of the one build step whose instruction contains `text`."""
    [step] = [block for block in re.split(r"^(?=Step \d+/\d+ : )", log, flags=re.MULTILINE)
              if block.startswith("Step ") and text in block.splitlines()[0]]
    return step


def build_with_secret(tmp_path: Path, registry: str, index_url: str, state: Path, *extra: str) -> str:
    templates = tmp_path / "templates" / "vendors"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "cpu.Dockerfile.j2").write_text(SECRET_TEMPLATE)
    (tmp_path / "matrix.yaml").write_text(SECRET_MATRIX)
    result = cli("build", "--matrix", str(tmp_path / "matrix.yaml"), "--templates", str(tmp_path / "templates"),
                 "--registry-mirror", f"docker.io={registry}", "--pip-index-url", index_url, "--no-smoke",
                 "--state-dir", str(state), *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


@pytest.mark.engine
@pytest.mark.registry
def test_index_credentials_reach_pip_but_no_layer_history_config_cache_key_log_or_output(
        registry: str, base_images, docker_client, tmp_path: Path) -> None:
    image = f"accel-images-test/secret-{RUN}:2.13.0-cpu-py3.11-debian12"
    state = tmp_path / "state"
    try:
        said = build_with_secret(tmp_path, registry, INDEX_URL, state, "--no-cache")
        assert SECRET not in said

        # The pip step was given the full URL, credentials included.
        url = INDEX_URL.replace("{index}", "cpu")
        final_id = docker_client.api.inspect_image(image)["Id"]
        seen = saved_file(docker_client, final_id, "opt/seen").decode().strip()
        assert seen == hashlib.sha256(f"--index-url {url}\n".encode()).hexdigest()

        # Every image the build made, the build stage's intermediate images included ...
        [log] = state.rglob("*.log")
        built = images_of_the_build(docker_client, log.read_text(), final_id)
        build_stage = set(built) - set(parent_chain(docker_client, final_id))
        assert len(build_stage) >= 3, sorted(build_stage)  # one image (at least) per RUN of the build stage
        assert any("sha256sum" in json.dumps(built[i]["ContainerConfig"]) for i in build_stage)
        # ... has the secret in no history entry (`docker history --no-trunc`), config or cache probe ...
        for image_id, info in built.items():
            history = docker_client.api.history(image_id)
            assert history and not [h for h in history if SECRET in json.dumps(h)], image_id
            assert SECRET not in json.dumps(info), image_id  # Config and ContainerConfig: env, labels, cmd
        # ... and in no file of any layer: save each image no other one builds on (the others' layers are theirs).
        parents = {info.get("Parent") for info in built.values()}
        for leaf in (i for i in built if i not in parents):
            assert saved_files_holding(docker_client, leaf, SECRET.encode()) == [], leaf

        # Nothing the run wrote holds it: build context, Dockerfile, logs, reports, caches.
        for written in (p for p in state.rglob("*") if p.is_file()):
            assert SECRET.encode() not in written.read_bytes(), written

        # The cache key does not depend on it either: other credentials for the same index reuse every step.
        other = build_with_secret(tmp_path, registry, INDEX_URL.replace(SECRET, "other-" + RUN),
                                  tmp_path / "state2", "--force")
        assert "other-" + RUN not in other
        [log] = (tmp_path / "state2").rglob("*.log")
        assert "Using cache" in step_of(log.read_text(), "sha256sum"), log.read_text()
    finally:
        docker_client.images.remove(image, force=True)


def test_hide_credentials_masks_userinfo_only() -> None:
    assert hide_credentials(f"build --pip-index-url {INDEX_URL}") == \
        "build --pip-index-url https://***@127.0.0.1:9/simple/{index}"
    assert hide_credentials("https://example.org/a@b") == "https://example.org/a@b"


def test_render_writes_no_credentials_to_disk(tmp_path: Path) -> None:
    result = cli("render", "--matrix", str(ROOT / "tests" / "matrices" / "cpu-debian.yaml"),
                 "--pip-index-url", INDEX_URL, "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]
    [dockerfile] = (tmp_path / "out").rglob("Dockerfile")
    assert "${" + CREDENTIALS_ARG + "}@127.0.0.1:9/simple/cpu" in dockerfile.read_text()
    assert SECRET not in result.stdout + result.stderr


# ---- smoke containment --------------------------------------------------------------------------

def test_smoke_options_drop_everything_the_device_does_not_need() -> None:
    plain = container_options(None, mem_limit="2g")
    assert plain["network_disabled"] is True
    assert plain["cap_drop"] == ["ALL"] and plain["cap_add"] == []
    assert "no-new-privileges" in plain["security_opt"]
    assert plain["mem_limit"] == "2g" and plain["pids_limit"] == PIDS_LIMIT
    device = container_options(DeviceOptions("gaudi", devices=("/dev/accel0",), cap_add=("SYS_NICE",)),
                               mem_limit="2g")
    assert device["cap_drop"] == ["ALL"] and device["cap_add"] == ["SYS_NICE"]
    assert device["network_disabled"] is True and device["devices"] == ["/dev/accel0:/dev/accel0:rwm"]


class RecordingRunner:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def run(self, image, command, *, options=None, timeout_s, labels=None):
        self.calls.append({"image": image, "options": options, "labels": labels})

        class Out:
            exit_code, stdout, stderr, timed_out = 1, "", "", False
        return Out()


def test_run_smoke_applies_the_locked_down_options_and_its_label() -> None:
    runner = RecordingRunner()
    run_smoke(runner, "img", Expectation(vendor="cpu", torch="2.13.0", stack=None, python="3.11"),
              vendor_options=None, require_accelerator=False, mem_limit="3g")
    [call] = runner.calls
    assert call["options"] == container_options(None, mem_limit="3g")
    assert call["labels"][SMOKE_LABEL] == "true"


PROBE = """
import socket
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print("caps", status["CapEff"].strip(), "nnp", status["NoNewPrivs"].strip())
def first(*paths):
    for path in paths:
        try:
            return open(path).read().strip()
        except OSError:
            pass
    return "?"
print("pids", first("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"))
print("mem", first("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"))
try:
    socket.create_connection(("203.0.113.80", 80), timeout=3)
    print("net open")
except OSError as error:
    print("net closed", error.errno)
"""


@pytest.mark.engine
def test_a_real_smoke_container_has_no_network_caps_or_unbounded_resources(base_images) -> None:
    engine = Engine.connect()
    try:
        result = engine.run(base_images.python, ["python3", "-c", PROBE],
                            options=container_options(None, mem_limit="256m"), timeout_s=120,
                            labels={SMOKE_LABEL: "true"})
    finally:
        engine.close()
    assert result.exit_code == 0, result.stderr
    said = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert said["caps"].split()[0] == "0000000000000000" and said["caps"].split()[2] == "1"
    assert said["pids"] == str(PIDS_LIMIT)
    assert said["mem"] == str(256 * 1024 * 1024)
    assert said["net"].startswith("closed")
