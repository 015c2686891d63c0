"""Security promises: images run as a non-root user, credentials given to the builder never land in
an image, a log or the output, and smoke containers run locked down.

Here: the tests that need the real engine or registry; the others are in tests/unit/test_security_unit.py.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import io
import ipaddress
import json
import re
import shutil
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

import docker
import pytest

from accel_images.builder.engine import Engine
from accel_images.smoke.launcher import PIDS_LIMIT, SMOKE_LABEL, container_options
from conftest import SUITE_IMAGE as IMAGE   # tests/conftest.py published_build's, named for this run alone
from test_security_unit import ROOT, RUN, SECRET, INDEX_URL, cli
SECRET_MATRIX = """schema: 1
image: accel-images-test/secret-RUN
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
""".replace("RUN", RUN)
APT_SECRET = f"apt-{SECRET}"
# Like the real templates: RUN steps before and after the pip step in the build stage (an ARG
# declared after FROM would be recorded in the history of every later RUN of the stage), and a
# final stage with RUN steps of its own, one of them the real templates' apt step (partials/apt.j2)
# through the apt mirror. The pip step writes the hash of the index URL it was given, so the test
# can tell that the credentials reached it; the hash is not the secret.
SECRET_TEMPLATE = """{% import "partials/apt.j2" as apt with context %}
{% import "partials/reproducible.j2" as repro with context %}
FROM {{ base_ref }} AS build
RUN echo before > /tmp/before
RUN echo {{ pip_source }} | sha256sum | cut -c1-64 > /tmp/seen
RUN cat /tmp/seen > /tmp/after
FROM {{ base_ref }}
{{ repro.arg() }}
RUN echo final-before > /opt/before
{{ apt.install("hello") }}
COPY --from=build /tmp/seen /opt/seen
LABEL {{ label_lines | join(" ") }}
RUN echo final
RUN mkdir -p /opt/accel-images && printf '%s' '{"schema": 1, "platform": {"os": "linux", "machine": "x86_64"},{# -#}
 "python": "3.11.2", "torch": {"version": "{{ v.torch }}+cpu", "public": "{{ v.torch }}", "local": "cpu"},{# -#}
 "backend": "cpu", "toolkit": {"cuda": null, "hip": null, "xpu": null, "cudnn": null, "nccl": null, "gaudi": null},{# -#}
 "archs": [], "ptx": [], "companions": { {%- for requirement in companions %}"{{ requirement.split("==")[0] }}":{# -#}
 "{{ requirement.split("==")[1] | replace(".*", "") }}.0"{{ ", " if not loop.last }}{% endfor -%} },{# -#}
 "distributions": {"torch": "{{ v.torch }}+cpu"}}' > /opt/accel-images/facts.json
"""
# The last step stands in for the facts step every real template ends with (partials/common.j2 finish()):
# a build checks the image's facts against the knowledge base (as tests/nightly_fixture's template does).
STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12,64})$", re.MULTILINE)


# ---- non-root -----------------------------------------------------------------------------------

@pytest.mark.engine
@pytest.mark.registry
def test_published_image_runs_as_a_non_root_user(published_build: dict, docker_client) -> None:
    user = docker_client.api.inspect_image(IMAGE)["Config"]["User"]
    uid = user.split(":")[0]
    assert uid not in ("", "0", "root"), user
    assert uid == "1000"


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


def build_with_secret(tmp_path: Path, registry: str, index_url: str, apt_mirror: str, state: Path,
                      *extra: str) -> str:
    templates = tmp_path / "templates" / "vendors"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "cpu.Dockerfile.j2").write_text(SECRET_TEMPLATE)
    shutil.copytree(ROOT / "templates" / "partials", tmp_path / "templates" / "partials", dirs_exist_ok=True)
    (tmp_path / "matrix.yaml").write_text(SECRET_MATRIX)
    result = cli("build", "--matrix", str(tmp_path / "matrix.yaml"), "--templates", str(tmp_path / "templates"),
                 "--registry-mirror", f"docker.io={registry}", "--pip-index-url", index_url,
                 "--apt-mirror", apt_mirror, "--no-smoke", "--state-dir", str(state), *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


class LoginMirror:
    """Debian's mirror behind a login, on the engine's bridge gateway (where build containers reach the
    host): answers 401 without one of `logins`, else passes the request on. Records every login seen."""

    def __init__(self, client: docker.DockerClient, *logins: tuple[str, str]) -> None:
        self.wanted = {"Basic " + base64.b64encode(f"{user}:{password}".encode()).decode() for user, password in logins}
        self.seen: list[str | None] = []
        mirror = self
        upstream = apt_upstream()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                mirror.seen.append(self.headers.get("Authorization"))
                if self.headers.get("Authorization") not in mirror.wanted:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                connection = http.client.HTTPConnection(upstream, timeout=120)
                connection.request("GET", self.path.removeprefix("/mirror"))
                answer = connection.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        [config] = client.networks.get("bridge").attrs["IPAM"]["Config"]
        gateway = config.get("Gateway") or str(ipaddress.ip_network(config["Subnet"])[1])  # the engine's default
        self._server = ThreadingHTTPServer((gateway, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{gateway}:{self._server.server_address[1]}/mirror"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def apt_upstream() -> str:
    """The host of the Debian mirror this machine's own apt sources name (its deb822 `URIs:` line)."""
    for sources in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:") and "/debian" in line:
                return urlsplit(line.split()[1]).netloc
    return "deb.debian.org"


def layer_members(client: docker.DockerClient, image_id: str) -> set[str]:
    """Every path any layer of the image holds (whiteouts included)."""
    names: set[str] = set()
    stream = io.BufferedReader(_Chunks(client.api.get_image(image_id)), buffer_size=1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            if member.isfile() and member.name.endswith("layer.tar"):
                with tarfile.open(fileobj=archive.extractfile(member), mode="r|") as layer:
                    names |= {entry.name for entry in layer}
    return names


@pytest.mark.engine
@pytest.mark.registry
def test_index_and_apt_mirror_credentials_reach_pip_and_apt_but_no_layer_history_cache_key_log_or_output(
        registry: str, base_images, docker_client, tmp_path: Path) -> None:
    image = f"accel-images-test/secret-{RUN}:2.13.0-cpu-py3.11-debian12"
    state = tmp_path / "state"
    mirror = LoginMirror(docker_client, ("mirror-user", APT_SECRET), ("mirror-user", "other-" + RUN))
    apt_mirror = f"deb.debian.org={mirror.url.replace('://', f'://mirror-user:{APT_SECRET}@')}"
    try:
        said = build_with_secret(tmp_path, registry, INDEX_URL, apt_mirror, state, "--no-cache")
        assert SECRET not in said and APT_SECRET not in said

        # The pip step was given the full URL, credentials included; apt logged in to the mirror.
        url = INDEX_URL.replace("{index}", "cpu")
        final_id = docker_client.api.inspect_image(image)["Id"]
        seen = saved_file(docker_client, final_id, "opt/seen").decode().strip()
        assert seen == hashlib.sha256(f"--index-url {url}\n".encode()).hexdigest()
        login = "Basic " + base64.b64encode(f"mirror-user:{APT_SECRET}".encode()).decode()
        assert mirror.seen and set(mirror.seen) == {login}   # apt sends the login file's login at once
        # The image's apt sources name the mirror, without its credentials; no layer holds apt's login file.
        sources = saved_file(docker_client, final_id, "etc/apt/sources.list.d/debian.sources").decode()
        assert f"URIs: {mirror.url}/debian" in sources and "mirror-user" not in sources, sources

        # Every image the build made, the build stage's intermediate images included ...
        [log] = state.rglob("*.log")
        built = images_of_the_build(docker_client, log.read_text(), final_id)
        build_stage = set(built) - set(parent_chain(docker_client, final_id))
        assert len(build_stage) >= 3, sorted(build_stage)  # one image (at least) per RUN of the build stage
        assert any("sha256sum" in json.dumps(built[i]["ContainerConfig"]) for i in build_stage)
        # ... has the secrets in no history entry (`docker history --no-trunc`), config or cache probe ...
        for image_id, info in built.items():
            history = docker_client.api.history(image_id)
            assert history and not [h for h in history if SECRET in json.dumps(h)], image_id  # APT_SECRET holds SECRET
            assert SECRET not in json.dumps(info), image_id  # Config and ContainerConfig: env, labels, cmd
        # ... and in no file of any layer: save each image no other one builds on (the others' layers are theirs).
        parents = {info.get("Parent") for info in built.values()}
        for leaf in (i for i in built if i not in parents):
            assert saved_files_holding(docker_client, leaf, SECRET.encode()) == [], leaf
        assert not [name for name in layer_members(docker_client, final_id) if "90accel-images-mirrors" in name]

        # Nothing the run wrote holds them: build context, Dockerfile, logs, reports, caches.
        for written in (p for p in state.rglob("*") if p.is_file()):
            assert SECRET.encode() not in written.read_bytes(), written

        # The cache key depends on neither: other credentials for the same index and mirror reuse every step.
        other = build_with_secret(tmp_path, registry, INDEX_URL.replace(SECRET, "other-" + RUN),
                                  apt_mirror.replace(APT_SECRET, "other-" + RUN), tmp_path / "state2", "--force")
        assert "other-" + RUN not in other
        [log] = (tmp_path / "state2").rglob("*.log")
        assert "Using cache" in step_of(log.read_text(), "sha256sum"), log.read_text()
        assert "Using cache" in step_of(log.read_text(), "install -y --no-install-recommends hello"), log.read_text()
    finally:
        mirror.close()
        docker_client.images.remove(image, force=True)


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
