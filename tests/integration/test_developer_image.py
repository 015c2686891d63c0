"""The built CPU image as a developer uses it in the first five minutes (issue: a development image
a developer can live in): as the image's user and as an arbitrary `--user UID:GID`, with the network
off. Shares the session's real build of the published CPU variant with test_build_integration."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import containers
from conftest import SUITE_IMAGE as IMAGE, TEST_LABEL, TEST_RUN   # published_build: the session's real build

pytestmark = [pytest.mark.engine, pytest.mark.registry, pytest.mark.slow]

PROBE = """
import json, subprocess, sys, tempfile, zipfile
wheel = tempfile.mkdtemp() + "/hello_dev-1.0-py3-none-any.whl"
with zipfile.ZipFile(wheel, "w") as z:
    z.writestr("hello_dev.py", "X = 1\\n")
    z.writestr("hello_dev-1.0.dist-info/METADATA", "Metadata-Version: 2.1\\nName: hello-dev\\nVersion: 1.0\\n")
    z.writestr("hello_dev-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
    z.writestr("hello_dev-1.0.dist-info/RECORD", "")
pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", wheel], capture_output=True, text=True)
print(json.dumps({"rc": pip.returncode, "out": pip.stdout + pip.stderr}))
"""


def run(docker_client, command: list[str], **options: object) -> str:
    return containers.output(docker_client, IMAGE, command, network_disabled=True, stderr=True, **options)


@pytest.mark.parametrize("user,groups", [(None, None), ("4321:100", None), ("4321:4321", ["users"]), ("0:0", None)],
                         ids=["image-user", "uid-in-users", "group-add-users", "root"])
def test_pip_install_works_for_the_images_user_and_any_other_in_its_group(published_build: dict, docker_client,
                                                                          user: str | None,
                                                                          groups: list[str] | None) -> None:
    """The environment is the group `users`' (2775, as jupyter/docker-stacks' fix-permissions makes it): any
    UID with GID 100, or with `--group-add users`, installs into it, as docker-stacks documents."""
    options: dict[str, object] = {"user": user} if user else {}
    if groups:
        options["group_add"] = groups
    said = run(docker_client, ["python", "-c", PROBE], **options)
    last = said.strip().splitlines()[-1]
    assert '"rc": 0' in last, said
    assert "not writable" not in said and "WARNING" not in said, said


def test_a_user_outside_the_group_cannot_write_into_the_environment(published_build: dict, docker_client) -> None:
    """Not world-writable any more (it was 2777): another group's process cannot change what others import."""
    said = run(docker_client, ["python", "-c", PROBE], user="4321:4321")
    assert '"rc": 1' in said.strip().splitlines()[-1] and "Permission denied" in said, said


def test_an_arbitrary_user_has_a_home_and_writes_into_a_bind_mounted_workspace(published_build: dict,
                                                                            docker_client) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="workspace-", dir="/tmp"))
    try:
        os.chown(workspace, 4321, 4321)
        said = run(docker_client, ["bash", "-lc", 'echo "home=$HOME"; touch "$HOME/.probe" && echo home-ok;'
                                   ' pip --version >/dev/null && echo pip-ok; echo hi > /workspace/out.txt;'
                                   ' echo "name=$(whoami) group=$(id -gn)"'],
                   user="4321:4321", volumes={str(workspace): {"bind": "/workspace", "mode": "rw"}})
        assert "home=/home/dev" in said and "home-ok" in said and "pip-ok" in said, said
        assert "name=dev group=dev" in said and "cannot find name" not in said, said   # nss_wrapper, from the entry point
        assert "warning" not in said.lower(), said
        written = workspace / "out.txt"
        assert written.read_text() == "hi\n"
        assert (written.stat().st_uid, written.stat().st_gid) == (4321, 4321)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def test_numpy_and_torch_compile_work_offline(published_build: dict, docker_client) -> None:
    code = ("import warnings; warnings.filterwarnings('error', message='.*NumPy');"
            "import torch; x = torch.arange(4.0); assert (x.numpy() * 2 == (x * 2).numpy()).all();"
            "f = torch.compile(lambda t: torch.sin(t) + t * t); print('compiled', float(f(x).sum()))")
    said = run(docker_client, ["python", "-c", code])
    assert "compiled" in said, said


def test_pip_in_an_image_built_from_a_wheelhouse_names_no_index(published_build: dict, docker_client) -> None:
    """Built offline, the image points pip at no index (not pypi.org, which an air-gapped site waits on at
    every `pip install`), and the way README gives to name one at run time works."""
    said = run(docker_client, ["pip", "config", "list"])
    assert "global.no-index='true'" in said and "pypi.org" not in said, said
    probe = ["pip", "download", "--no-deps", "--dest", "/tmp/probe", "requests"]
    offline = containers.run_result(docker_client, IMAGE, probe, network_disabled=True)
    assert "Looking in indexes" not in offline and "requests" in offline, offline
    repointed = containers.run_result(docker_client, IMAGE, probe, network_disabled=True,
                                      environment={"PIP_NO_INDEX": "0", "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
                                                   "PIP_RETRIES": "0"})
    assert "Looking in indexes: http://127.0.0.1:9/simple" in repointed, repointed


def test_the_build_says_which_companion_was_left_out_on_purpose(published_build: dict, docker_client) -> None:
    """CI's wheelhouse holds no +cpu torchvision, so the build is told --without-companion torchvision: the
    image's label, the record and the build's output say so."""
    [record] = published_build["records"]
    assert record["without_companions"] == ["torchvision"]
    assert "torchvision 0.28 left out (--without-companion torchvision)" in record["notes"]
    assert "torchvision 0.28 left out" in published_build["stdout"] + published_build["stderr"]
    assert docker_client.images.get(IMAGE).labels["io.accel-images.without-companions"] == "torchvision"


PROJECT = """
import json, pathlib, subprocess, sys, tempfile
root = pathlib.Path(tempfile.mkdtemp())
(root / "pyproject.toml").write_text('[build-system]\\nrequires = ["setuptools>=61"]\\n'
                                     'build-backend = "setuptools.build_meta"\\n'
                                     '[project]\\nname = "hello-src"\\nversion = "1.0"\\n'
                                     '[tool.setuptools]\\npy-modules = ["hello_src"]\\n')
(root / "hello_src.py").write_text("X = 1\\n")
pip = subprocess.run([sys.executable, "-m", "pip", "install", "-e", str(root)], capture_output=True, text=True)
use = subprocess.run([sys.executable, "-c", "import hello_src; print(hello_src.X)"], capture_output=True,
                     text=True, cwd="/")
print(json.dumps({"rc": pip.returncode, "out": pip.stdout + pip.stderr, "import": use.stdout.strip()}))
"""


@pytest.mark.parametrize("user", [None, "4321:100"])
def test_pip_install_of_a_project_builds_it_without_a_network(published_build: dict, docker_client,
                                                              user: str | None) -> None:
    """`pip install -e .` as typed, build isolation on: pip finds no index (PIP_RETRIES=0 only spares
    the retries) and takes setuptools from the image's find-links."""
    options = {"user": user} if user else {}
    said = run(docker_client, ["python", "-c", PROJECT], environment={"PIP_RETRIES": "0"}, **options)
    report = json.loads(said.strip().splitlines()[-1])
    assert report["rc"] == 0 and report["import"] == "1", report["out"]


def test_a_jit_cpp_extension_builds_and_runs_for_an_arbitrary_user(published_build: dict, docker_client) -> None:
    """torch.utils.cpp_extension.load_inline: ninja, the compiler, torch's and Python's headers, and a
    writable cache under HOME (the developer's first C++ op)."""
    code = ("from torch.utils.cpp_extension import load_inline;"
            "m = load_inline('probe', cpp_sources='int add(int a, int b) { return a + b; }', functions=['add']);"
            "print('sum', m.add(2, 3))")
    said = run(docker_client, ["python", "-c", code], user="4321:4321")
    assert "sum 5" in said, said


def test_an_arbitrary_user_has_a_name_in_the_shell_and_in_python(published_build: dict, docker_client) -> None:
    """Without one, bash's prompt reads "I have no name!" and getpass/pwd lookups fail."""
    said = run(docker_client, ["bash", "-ic", 'echo "prompt=${PS1@P}"; python -c "import getpass, pwd, os;'
                               ' print(getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir)"'], user="4321:4321")
    assert "prompt=dev@" in said and "I have no name" not in said, said
    assert "dev /home/dev" in said, said


@pytest.mark.parametrize("user", [None, "4321:4321"])
def test_git_works_in_a_bind_mounted_checkout_another_user_owns(published_build: dict, docker_client,
                                                                 user: str | None) -> None:
    """The host's checkout belongs to the host's user (here root): without safe.directory git stops
    with "detected dubious ownership". Committing, then the everyday tools, all as a developer."""
    workspace = Path(tempfile.mkdtemp(prefix="checkout-", dir="/tmp"))
    try:
        os.chmod(workspace, 0o777)
        script = ("git init -q && git add -A && git -c user.name=dev -c user.email=dev@localhost commit -q"
                  " --allow-empty -m first && git status --short && git log -1 --format=log=%s;"
                  " for tool in ssh curl less vi unzip ps top; do command -v $tool > /dev/null || echo missing=$tool; done;"
                  " TZ=Europe/Paris date +zone=%Z")
        options = {"user": user} if user else {}
        said = run(docker_client, ["bash", "-c", script], volumes={str(workspace): {"bind": "/workspace", "mode": "rw"}},
                   **options)
        assert "log=first" in said and "dubious ownership" not in said, said
        assert "missing=" not in said, said
        assert "zone=CET" in said or "zone=CEST" in said, said
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def test_ipython_and_make_are_there_for_the_images_user_and_any_other(published_build: dict, docker_client) -> None:
    """IPython from the same wheelhouse as torch (containers reach no package index), make in the
    runtime flavor too, with the network off."""
    for options in ({}, {"user": "4321:4321"}):
        said = run(docker_client, ["bash", "-c", "ipython --quick --no-banner -c 'print(6 * 7)' && make --version"],
                   **options)
        assert "42" in said and "GNU Make" in said, said


def test_an_interactive_shell_says_which_image_torch_and_device_and_a_command_stays_quiet(published_build: dict,
                                                                                           docker_client) -> None:
    interactive = run(docker_client, ["bash", "-ic", "true"])
    banner = [line for line in interactive.splitlines() if line.startswith("accel-images ")]
    assert len(banner) == 1, interactive
    assert re.fullmatch(r"accel-images 2\.13\.0-cpu-py3\.11-debian12: PyTorch 2\.13\.0\+cpu, Python 3\.11\.\d+,"
                        r" device: cpu", banner[0]), banner
    for quiet in (["bash", "-c", "true"], ["python", "-c", "pass"]):
        assert run(docker_client, quiet) == "", quiet


@pytest.mark.parametrize("command, tty", [(["sleep", "600"], False), (["/bin/bash"], True)])
def test_docker_stop_takes_under_2_s_and_exits_143(published_build: dict, docker_client, command: list[str],
                                                   tty: bool) -> None:
    """tini as PID 1 passes SIGTERM on (a command, and the interactive shell `docker run -it` starts):
    no 10 s wait for the kill, no 137."""
    container = docker_client.containers.run(IMAGE, command, detach=True, tty=tty, stdin_open=tty,
                                             network_disabled=True, labels={TEST_LABEL: TEST_RUN})

    def ready() -> bool:
        """Running; the shell past its start-up files (its banner printed), where there is a shell."""
        container.reload()
        return container.status == "running" and (not tty or "accel-images" in container.logs().decode())

    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert time.monotonic() < deadline, container.logs()
            time.sleep(0.2)
        started = time.monotonic()
        container.stop(timeout=10)
        stopped_in = time.monotonic() - started
        exit_code = container.wait(timeout=30)["StatusCode"]
    finally:
        container.remove(force=True)
    assert exit_code in (0, 143) and stopped_in < 2, (command, exit_code, f"{stopped_in:.1f} s")


def test_the_pip_conf_of_an_image_built_with_a_mirror_names_the_mirror_only(published_build: dict, docker_client,
                                                                            registry: str, tmp_path: Path) -> None:
    """`--pip-index-url`: the /etc/pip.conf its context puts in the image (the files stage copies it as is),
    read by the image's own pip, names the mirror and no pypi.org. No second image is built: the
    rendered file is mounted where the image keeps it (tests/unit/test_image_pip.py renders every case)."""
    import subprocess
    import sys
    from test_build_integration import PUBLISHED, ROOT
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "accel_images", "render", *PUBLISHED, "--registry-mirror",
                    f"docker.io={registry}", "--pip-index-url", "http://127.0.0.1:9/whl/{index}", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)
    [context] = list(out.glob("cpu/*"))
    assert "install -D -m 0644 /in/pip.conf /files/etc/pip.conf" in (context / "Dockerfile").read_text()
    said = run(docker_client, ["pip", "config", "list"],
               volumes={str(context / "pip.conf"): {"bind": "/etc/pip.conf", "mode": "ro"}})
    assert "global.index-url='http://127.0.0.1:9/whl/cpu'" in said and "pypi" not in said, said
