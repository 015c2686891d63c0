"""The runtimes for real, with the CPU image the build tests make (no other image is built here).

- The guard under each runtime's defaults, with Docker standing in where the runtime is not installable
  here: a read-only root and an arbitrary UID with no passwd entry (Kubernetes' readOnlyRootFilesystem
  and OpenShift's random UIDs, Enroot's read-only default), the command a Pod or an srun line gives in
  place of the entry point, and Apptainer's host user with its own HOME bound.
- Podman, rootless, as a user of its own (.ci/setup-host.sh makes it): `run --engine podman`.
- The devcontainers CLI (npm's @devcontainers/cli, installed by .ci/setup-host.sh): `devcontainer up`
  runs the guard, whose refusal is in its output, and the container has the user's git identity.
- `run` as a user outside the docker group: the tool's one line and exit 3.
- `recommend --engine kubernetes --registry REG`: one Pod that passes the API's schema, by digest.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from accel_images.builder.engine import Engine, RunResult
from accel_images.cli import fanout, session as cli_session
from accel_images.host.launch import launch
from accel_images.host.runtimes import render
from accel_images.model.variant import ENTRYPOINT, GUARD_PATH
from accel_images.render.contexts import guard_script
from conftest import TEST_LABEL, TEST_RUN, unavailable
from test_catalogue_integration import Published, published  # noqa: F401  (the fixture)
from test_catalogue import CUDA
from test_guard import GUARD_EXIT
from test_guard_integration import cpu_image  # noqa: F401  (a fixture)
from test_runtimes import validate_pod

ROOT = Path(__file__).resolve().parents[2]
STRANGER = 4321
"""A user id in neither the host's nor the image's /etc/passwd."""


def run_in(docker_client, image: str, command: list[str], **options: object) -> RunResult:
    """A container's exit status and output, whatever it is (containers.output wants success)."""
    return Engine(docker_client, docker_client.api.base_url).run(image, command, options=options, timeout_s=300,
                                                                 labels={TEST_LABEL: TEST_RUN})


def guard_file(tmp_path: Path, vendor: str) -> dict[str, dict[str, str]]:
    """The guard of `vendor` as this checkout renders it, mounted over the image's own."""
    guard = tmp_path / f"guard-{vendor}.sh"
    guard.write_bytes(guard_script(vendor))
    guard.chmod(0o755)
    return {str(guard): {"bind": GUARD_PATH, "mode": "ro"}}


def kubelet_expanded(word: str, env: dict[str, str]) -> str:
    """A Pod's command word as the kubelet hands it to the runtime: `$$` is `$`, `$(VAR)` the container's
    VAR where the Pod defines it, else left as written (Kubernetes API, Container.command)."""
    return re.sub(r"\$\$|\$\((\w+)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), word)


def in_container_command(engine: str, image: str, command: tuple[str, ...]) -> list[str]:
    """What a Pod's `command:` or an srun line starts in the container, where no entry point runs."""
    rendered = render(engine, replace(launch(image, "cpu"), command=command))
    if engine == "kubernetes":
        container = yaml.safe_load(rendered.text)["spec"]["containers"][0]
        env = {item["name"]: str(item.get("value", "")) for item in container.get("env") or ()}
        return [kubelet_expanded(word, env) for word in container["command"]]
    words = shlex.split(rendered.text)
    return words[words.index(ENTRYPOINT[0]):]


# ---- the guard under each runtime's defaults ----------------------------------------------------------

@pytest.mark.engine
@pytest.mark.parametrize("engine", ["kubernetes", "enroot"])
def test_the_guard_starts_where_no_entry_point_runs_read_only_as_an_arbitrary_uid(
        engine: str, docker_client, cpu_image: str, tmp_path: Path) -> None:
    """The Pod's `command:` (or the srun line's command), read-only root, a UID with no name: the user is
    named (nss_wrapper's copies go to /dev/shm when /tmp is read-only) and the command runs."""
    command = in_container_command(engine, cpu_image, ("sh", "-c", "whoami; echo $HOME; python -c 'import torch'"))
    assert command[:len(ENTRYPOINT)] == list(ENTRYPOINT)
    result = run_in(docker_client, cpu_image, command[1:], entrypoint=[command[0]], read_only=True,
                    user=f"{STRANGER}:{STRANGER}", network_disabled=True, volumes=guard_file(tmp_path, "cpu"))
    assert (result.exit_code, result.stdout) == (0, "dev\n/home/dev\n"), result.stderr


@pytest.mark.engine
def test_a_refusal_is_the_commands_end_where_no_entry_point_runs(docker_client, cpu_image: str,
                                                                  tmp_path: Path) -> None:
    """A CUDA image's guard (mounted over the CPU image's) started by a Pod's `command:` on a host without the
    GPU it requires: exit 78 and the reason, nothing of the command."""
    command = in_container_command("kubernetes", cpu_image, ("python", "-c", "print('ran')"))
    result = run_in(docker_client, cpu_image, command[1:], entrypoint=[command[0]], read_only=True,
                    user=f"{STRANGER}:{STRANGER}", network_disabled=True,
                    environment={"ACCEL_IMAGES_REQUIRE_ACCELERATOR": "1"}, volumes=guard_file(tmp_path, "cuda"))
    assert result.exit_code == GUARD_EXIT and result.stdout == ""
    assert result.stderr.startswith("accel-images: error: no NVIDIA GPU visible in the container")


@pytest.mark.engine
def test_the_guard_keeps_a_home_bound_from_the_host(docker_client, cpu_image: str, tmp_path: Path) -> None:
    """Apptainer's defaults: the host user (listed in the /etc/passwd it binds), $HOME and /tmp bound from the
    host, the image read-only; `apptainer run` starts the entry point with the command."""
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, STRANGER, STRANGER)
    passwd = tmp_path / "passwd"
    image_passwd = run_in(docker_client, cpu_image, ["/etc/passwd"], entrypoint=["cat"]).stdout
    passwd.write_text(image_passwd + f"jane:x:{STRANGER}:{STRANGER}::/home/jane:/bin/bash\n")
    script = "echo $HOME; whoami; git config --global user.name Jane && git config user.name"
    result = run_in(docker_client, cpu_image, ["sh", "-c", script], read_only=True, user=f"{STRANGER}:{STRANGER}",
                    network_disabled=True, environment={"HOME": "/home/jane"},
                    volumes={**guard_file(tmp_path, "cpu"), str(home): {"bind": "/home/jane", "mode": "rw"},
                             str(passwd): {"bind": "/etc/passwd", "mode": "ro"},
                             str(tmp_path): {"bind": "/tmp", "mode": "rw"}})
    assert (result.exit_code, result.stdout) == (0, "/home/jane\njane\nJane\n"), result.stderr
    assert (home / ".gitconfig").stat().st_uid == STRANGER


# ---- run outside the docker group -------------------------------------------------------------------

def as_user(uid: int, gid: int, *, groups: str = "--clear-groups") -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", groups]


@pytest.mark.engine
def test_run_outside_the_docker_group_is_one_line_and_exit_3(tmp_path: Path) -> None:
    """As `build` and `pull` answer: the tool's line naming the way out, not docker's own error and 126."""
    if os.geteuid() != 0:   # CI runs as root: there this is a failure, not a skip
        pytest.skip("becoming a user outside the docker group needs root")   # a failure under CI (conftest)
    os.chown(tmp_path, STRANGER, STRANGER)
    image = "accel-images/pytorch:2.13.0-cpu-py3.11-debian12"  # its tag names the vendor: no engine asked
    result = subprocess.run([*as_user(STRANGER, STRANGER), sys.executable, "-m", "accel_images", "run", image,
                             "--", "true"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HOME": str(tmp_path)}, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert result.stderr.startswith("accel-images: error: Docker daemon not reachable at ")
    assert "(permission denied): add your user to the `docker` group (then log in again) or run as root" in result.stderr


# ---- rootless Podman ----------------------------------------------------------------------------------

PODMAN_USER = os.environ.get("ACCEL_TEST_PODMAN_USER", "accel-podman")
PODMAN_CONF = Path(os.environ.get("ACCEL_TEST_PODMAN_CONF", "/var/cache/accel-images/podman/containers.conf"))


def podman_env(home: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DOCKER_"))},
            "HOME": home, "USER": PODMAN_USER, "LOGNAME": PODMAN_USER, "CONTAINERS_CONF": str(PODMAN_CONF)}


@pytest.fixture(scope="session")
def rootless_podman(docker_client, cpu_image_for_podman: str) -> tuple[list[str], dict[str, str]]:
    """(the prefix that becomes the Podman user, its environment), with the CPU image in its storage."""
    import pwd
    if shutil.which("podman") is None or os.geteuid() != 0 or not PODMAN_CONF.is_file():
        unavailable("rootless podman is not set up (podman, root to switch users, its containers.conf)")
    try:
        user = pwd.getpwnam(PODMAN_USER)
    except KeyError:
        unavailable(f"no user {PODMAN_USER}")
    prefix = [*as_user(user.pw_uid, user.pw_gid, groups="--init-groups")]
    env = podman_env(user.pw_dir)
    image = cpu_image_for_podman
    wanted = docker_client.images.get(image).id.removeprefix("sha256:")
    have = subprocess.run([*prefix, "podman", "image", "inspect", "--format", "{{.Id}}", image], env=env,
                          capture_output=True, text=True, check=False, timeout=120).stdout.strip()
    if have != wanted:  # the built image, not whatever an earlier run loaded
        started = time.perf_counter()
        load_from_docker(docker_client, image, prefix, env)
        print(f"podman load of {image}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        # The image it replaces goes; the layers they share stay, so the next load of a rebuild (reproducible:
        # the same layers) copies little.
        subprocess.run([*prefix, "podman", "image", "prune", "--force"], env=env, capture_output=True, check=False,
                       timeout=300)
    return prefix, env


def load_from_docker(docker_client, image: str, prefix: list[str], env: dict[str, str]) -> None:
    """`docker save` into a file, `podman load -i` from it: through a pipe Podman first copies the stream to
    disk, and this took 163 s against 60 s from a file in /dev/shm (used when it has room) on this machine."""
    size = docker_client.images.get(image).attrs["Size"]
    shm = os.statvfs("/dev/shm")
    folder = "/dev/shm" if shm.f_bavail * shm.f_frsize > 2 * size else None
    with tempfile.TemporaryDirectory(dir=folder, prefix="accel-images-podman-") as scratch:
        archive = Path(scratch) / "image.tar"
        subprocess.run(["docker", "save", "-o", str(archive), image], check=True, timeout=900)
        os.chmod(scratch, 0o755)
        archive.chmod(0o644)
        loaded = subprocess.run([*prefix, "podman", "load", "-i", str(archive)], env=env, capture_output=True,
                                text=True, check=False, timeout=900)
    assert loaded.returncode == 0, loaded.stderr


@pytest.fixture(scope="session")
def cpu_image_for_podman(published_build: dict) -> str:
    """The suite's CPU image (tests/conftest.py published_build), under the name only this run gives it."""
    return str(published_build["image"])


@pytest.fixture
def podman_workspace(rootless_podman) -> Iterator[Path]:
    """A directory the Podman user owns (pytest's tmp_path is root's alone)."""
    prefix, _ = rootless_podman
    workspace = Path(tempfile.mkdtemp(prefix="accel-podman-"))
    uid, gid = (int(part.split("=")[1]) for part in prefix[1:3])
    os.chown(workspace, uid, gid)
    yield workspace
    shutil.rmtree(workspace, ignore_errors=True)


@pytest.mark.engine
def test_run_engine_podman_starts_the_image_rootless(rootless_podman, podman_workspace: Path,
                                                     cpu_image_for_podman: str) -> None:
    prefix, env = rootless_podman
    uid = int(prefix[1].split("=")[1])
    script = "import os, torch; open('made', 'w').write(torch.__version__); print(os.getuid())"
    result = subprocess.run([*prefix, sys.executable, "-m", "accel_images", "run", "--engine", "podman",
                             cpu_image_for_podman, "--", "python", "-c", script], cwd=podman_workspace, env=env,
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{uid}\n"                      # the user's own id inside, by --userns keep-id
    made = podman_workspace / "made"
    assert made.read_text().startswith("2.13.0") and made.stat().st_uid == uid  # the workspace file is theirs


@pytest.mark.engine
def test_run_engine_podman_mounts_a_workspace_whose_path_holds_a_colon_and_a_comma(
        rootless_podman, podman_workspace: Path, cpu_image_for_podman: str) -> None:
    """Podman 4.3.1's `-v PATH:/workspace` fails on `:v2` ("invalid option type"); `--mount` takes the path."""
    prefix, env = rootless_podman
    workspace = podman_workspace / "proj:v2, final"
    workspace.mkdir()
    (workspace / "marker").write_text("here\n")
    os.chown(workspace, *(int(part.split("=")[1]) for part in prefix[1:3]))
    result = subprocess.run([*prefix, sys.executable, "-m", "accel_images", "run", "--engine", "podman",
                             cpu_image_for_podman, "--", "cat", "/workspace/marker"], cwd=workspace, env=env,
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "here\n"


# ---- the devcontainers CLI ----------------------------------------------------------------------------

DEVCONTAINER_CLI = Path(os.environ.get("ACCEL_TEST_DEVCONTAINER_CLI",
                                       "/var/cache/accel-images/devcontainers-cli/node_modules/.bin/devcontainer"))


@pytest.fixture
def devcontainer_cli() -> Path:
    if not os.access(DEVCONTAINER_CLI, os.X_OK):
        unavailable(f"no devcontainers CLI at {DEVCONTAINER_CLI}")
    return DEVCONTAINER_CLI


def devcontainer_up(cli: Path, workspace: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`devcontainer up` in `workspace` as a user whose home is `home`."""
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    env.pop("GIT_CONFIG_GLOBAL", None)
    return subprocess.run([str(cli), "up", "--workspace-folder", str(workspace), "--id-label", id_label(workspace),
                           "--id-label", f"{TEST_LABEL}={TEST_RUN}"], env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def id_label(workspace: Path) -> str:
    return f"accel-images.test.devcontainer={workspace.name}"


@pytest.fixture
def dev_workspace(tmp_path: Path, docker_client) -> Iterator[Path]:
    """A project folder with a name of its own; afterwards its container goes, and the image the CLI derived
    for updateRemoteUserUID (`vsc-<folder>-<hash>-uid`)."""
    import docker.errors
    workspace = tmp_path / f"dc-{uuid.uuid4().hex[:10]}"
    yield workspace
    for container in docker_client.containers.list(all=True, filters={"label": id_label(workspace)}):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass  # gone already
    for image in docker_client.images.list():
        for tag in image.tags:
            if tag.startswith(f"vsc-{workspace.name}-"):
                docker_client.images.remove(tag, force=True)


def container_of(docker_client, workspace: Path):
    [container] = docker_client.containers.list(all=True, filters={"label": id_label(workspace)})
    return container


@pytest.mark.engine
def test_devcontainer_up_runs_the_guard_and_carries_the_git_identity(devcontainer_cli: Path, docker_client,
                                                                     cpu_image: str, dev_workspace: Path,
                                                                     tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Jane Doe\n\temail = jane@example.com\n")
    result = CliRunner().invoke(cli_session.devcontainer_command,
                                [cpu_image, "--out", str(dev_workspace / ".devcontainer" / "devcontainer.json")])
    assert result.exit_code == 0, result.output
    done = devcontainer_up(devcontainer_cli, dev_workspace, home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["outcome"] == "success"
    assert "Running the postStartCommand from devcontainer.json" in done.stderr + done.stdout
    identity = container_of(docker_client, dev_workspace).exec_run(["git", "config", "user.email"], user="dev")
    assert identity.output.decode() == "jane@example.com\n"


@pytest.mark.engine
def test_devcontainer_up_shows_the_guards_refusal(devcontainer_cli: Path, cpu_image: str, dev_workspace: Path,
                                                  tmp_path: Path) -> None:
    """A CUDA image's guard (mounted over the CPU image's) on this host without a GPU, accelerator required:
    `devcontainer up` fails, and its output says why."""
    home = tmp_path / "home"
    home.mkdir()
    config_file = dev_workspace / ".devcontainer" / "devcontainer.json"
    result = CliRunner().invoke(cli_session.devcontainer_command, [cpu_image, "--out", str(config_file)])
    assert result.exit_code == 0, result.output
    config = json.loads(config_file.read_text())
    guard = guard_file(tmp_path, "cuda")
    config["mounts"].append(f"source={next(iter(guard))},target={GUARD_PATH},type=bind,readonly")
    config["containerEnv"]["ACCEL_IMAGES_REQUIRE_ACCELERATOR"] = "1"
    config_file.write_text(json.dumps(config))
    done = devcontainer_up(devcontainer_cli, dev_workspace, home)
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert "accel-images: error: no NVIDIA GPU visible in the container" in said
    assert f"postStartCommand from devcontainer.json failed with exit code {GUARD_EXIT}" in said


# ---- recommend --engine kubernetes --registry REG -------------------------------------------------------

@pytest.mark.registry
def test_recommend_prints_one_pod_by_digest_for_the_detected_vendor(published: Published, tmp_path: Path) -> None:
    digest = published.add(CUDA)
    a100 = {"vendor": "cuda", "driver_version": "580.126.09", "stack_version": "13.0",
            "gpu_names": ["NVIDIA A100-SXM4-40GB"], "gpu_archs": ["8.0"], "device_count": 1}
    host = tmp_path / "host.json"
    host.write_text(json.dumps(a100))
    result = CliRunner().invoke(fanout.recommend_command,
                                published.args("--engine", "kubernetes", "--host-json", str(host),
                                               "--state-dir", str(tmp_path / "no-builds")))
    assert result.exit_code == 0, result.output
    validate_pod(result.stdout)
    container = yaml.safe_load(result.stdout)["spec"]["containers"][0]
    assert container["image"] == f"{published.registry}/{published.repository}@{digest}"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
