"""The built CPU image as a developer uses it in the first five minutes (issue: a development image
a developer can live in): as the image's user and as an arbitrary `--user UID:GID`, with the network
off. Shares the session's real build of the published CPU variant with test_build_integration."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import containers
from test_build_integration import IMAGE, published_build  # noqa: F401  (the session's real build)

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


def test_pip_is_pointed_at_torchs_own_index_for_companions(published_build: dict, docker_client) -> None:
    """A later `pip install torchvision` takes the +cpu build: pip's index is torch's, PyPI the extra one."""
    said = run(docker_client, ["pip", "config", "list"])
    assert "global.index-url='https://download.pytorch.org/whl/cpu'" in said, said
    assert "global.extra-index-url='https://pypi.org/simple'" in said, said


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
