"""Security promises: images run as a non-root user, credentials given to the builder never land in
an image, a log or the output, and smoke containers run locked down."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from accel_images.build import CREDENTIALS_ARG, withhold_credentials
from accel_images.compat import load_kb
from accel_images.devices import DeviceOptions
from accel_images.engine import Engine
from accel_images.render import RenderOptions, Renderer
from accel_images.smoke.judge import Expectation
from accel_images.smoke.launcher import PIDS_LIMIT, SMOKE_LABEL, container_options, run_smoke
from accel_images.variant import Expansion, make_variant
from accel_images.matrix import User
from test_build_integration import IMAGE, published_build  # noqa: F401  (the published CPU image's fixture)

ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cr3t-Pa55"
INDEX_URL = f"https://builder:{SECRET}@127.0.0.1:9/simple/{{index}}"
SECRET_MATRIX = """schema: 1
image: accel-images-test/secret
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
"""
# The build stage proves the full URL reached it (by its hash: the template must not hold it);
# the final stage is what gets published.
SECRET_TEMPLATE = """FROM {{ base_ref }} AS build
RUN echo "{{ pip_source }}" | sha256sum | cut -c1-64 > /tmp/seen && test "$(cat /tmp/seen)" = "EXPECTED"
FROM {{ base_ref }}
COPY --from=build /tmp/seen /opt/seen
LABEL {{ label_lines | join(" ") }}
RUN echo final
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


# ---- non-root -----------------------------------------------------------------------------------

@pytest.mark.engine
@pytest.mark.registry
def test_published_image_runs_as_a_non_root_user(published_build: dict, docker_client) -> None:  # noqa: F811
    user = docker_client.api.inspect_image(IMAGE)["Config"]["User"]
    uid = user.split(":")[0]
    assert uid not in ("", "0", "root"), user
    assert uid == "1000"


# ---- credentials --------------------------------------------------------------------------------

def test_withheld_credentials_leave_the_dockerfile_and_go_to_the_pip_stage_only() -> None:
    kb = load_kb()
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    expansion = Expansion((variant,), (), "accel-images/pytorch", User("dev", 1000, 1000))
    context = Renderer(kb).context(variant, expansion, RenderOptions(pip_index_url=INDEX_URL))
    assert SECRET.encode() in context.files["Dockerfile"]  # what would have been baked in
    dockerfile = withhold_credentials(context, INDEX_URL).files["Dockerfile"].decode()
    assert SECRET not in dockerfile
    _, build_stage, final_stage = dockerfile.split("\nFROM ")
    assert f"ARG {CREDENTIALS_ARG}" in build_stage
    assert "${" + CREDENTIALS_ARG + "}@127.0.0.1:9/simple/cpu" in build_stage
    assert CREDENTIALS_ARG not in final_stage  # so no RUN there records it in the history
    assert withhold_credentials(context, "https://127.0.0.1:9/simple").files == context.files


@pytest.mark.engine
@pytest.mark.registry
def test_index_credentials_reach_pip_but_no_image_history_label_log_or_output(
        registry: str, base_images, docker_client, tmp_path: Path) -> None:
    expected = hashlib.sha256(f"--index-url {INDEX_URL.replace('{index}', 'cpu')}\n".encode()).hexdigest()
    templates = tmp_path / "templates" / "vendors"
    templates.mkdir(parents=True)
    (templates / "cpu.Dockerfile.j2").write_text(SECRET_TEMPLATE.replace("EXPECTED", expected))
    (tmp_path / "matrix.yaml").write_text(SECRET_MATRIX)
    state = tmp_path / "state"
    image = "accel-images-test/secret:2.13.0-cpu-py3.11-debian12"
    try:
        result = cli("build", "--matrix", str(tmp_path / "matrix.yaml"), "--templates", str(tmp_path / "templates"),
                     "--registry-mirror", f"docker.io={registry}", "--pip-index-url", INDEX_URL, "--no-smoke",
                     "--force", "--state-dir", str(state))
        assert result.returncode == 0, result.stdout + result.stderr  # the build stage saw the full URL
        assert SECRET not in result.stdout + result.stderr
        history = docker_client.api.history(image)
        assert history and not any(SECRET in (layer.get("CreatedBy") or "") for layer in history)
        config = docker_client.api.inspect_image(image)["Config"]
        assert SECRET not in json.dumps(config)  # labels, env, user, cmd
        for written in [*state.rglob("*.log"), *state.rglob("*.json"), *state.rglob("Dockerfile")]:
            assert SECRET not in written.read_text(errors="replace"), written
    finally:
        docker_client.images.remove(image, force=True)


def test_hide_credentials_masks_userinfo_only() -> None:
    from accel_images.build import hide_credentials

    assert hide_credentials(f"build --pip-index-url {INDEX_URL}") == \
        "build --pip-index-url https://***@127.0.0.1:9/simple/{index}"
    assert hide_credentials("https://example.org/a@b") == "https://example.org/a@b"


def test_render_writes_no_credentials_to_disk(tmp_path: Path) -> None:
    result = cli("render", "--matrix", str(ROOT / "tests" / "matrices" / "cpu-debian.yaml"),
                 "--pip-index-url", INDEX_URL, "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    [dockerfile] = (tmp_path / "out").rglob("Dockerfile")
    assert SECRET not in dockerfile.read_text() and f"ARG {CREDENTIALS_ARG}" in dockerfile.read_text()
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
