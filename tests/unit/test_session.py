"""`accel-images run` and `devcontainer`: the generated arguments per vendor, and a real session.

The per-vendor lines are checked exactly, against a fake /dev tree whose device files belong to
groups 44 and 109 (as root; elsewhere the two groups the user is in). The real session runs the CPU
image that the build tests make, as a user id that exists neither on the host nor in the image.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_session_integration.py.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from accel_images.cli import session as cli_session
from accel_images.host.session import IDENTITY_DIR, IDENTITY_SCRIPT, Session, devcontainer, docker_run_argv
from frozen import MATRIX as FROZEN_MATRIX

ROOT = Path(__file__).resolve().parents[2]
TAIL = ["--user", "1234:5678", "--group-add", "100", "--mount", "type=bind,source=/src,target=/workspace", "-w", "/workspace", "img:tag",
        "python", "-V"]
NGC = ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]


def fake_dev(root: Path, video: int, render: int) -> Path:
    for path, gid in (("dev/kfd", render), ("dev/dri/card0", video), ("dev/dri/renderD128", render)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")
        os.chown(root / path, -1, gid)
    return root


@pytest.fixture(autouse=True)
def no_git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run` passes the user's git identity: here there is none, unless a test gives one."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def dev_root(tmp_path: Path) -> Path:
    if os.geteuid() == 0:
        return fake_dev(tmp_path, 44, 109)
    groups = sorted(gid for gid in os.getgroups() if gid != 0)
    if len(groups) < 2:
        pytest.skip("needs root or membership in two non-root groups to set file groups")
    return fake_dev(tmp_path, groups[0], groups[1])


def gids(dev_root: Path) -> list[str]:
    return sorted({str((dev_root / p).stat().st_gid) for p in ("dev/kfd", "dev/dri/card0")}, key=int)


@pytest.mark.parametrize("vendor, middle", [
    ("cpu", lambda g: ["--ipc", "host"]),
    ("cuda", lambda g: ["--gpus", "all", "--ipc", "host", *NGC]),
    ("rocm", lambda g: ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", g[0], "--group-add", g[1],
                        "--ipc", "host", "--security-opt", "seccomp=unconfined", "--cap-add", "SYS_PTRACE"]),
    ("xpu", lambda g: ["--device", "/dev/dri", "--group-add", g[0], "--group-add", g[1], "--ipc", "host"]),
    ("gaudi", lambda g: ["--runtime", "habana", "-e", "HABANA_VISIBLE_DEVICES=all",
                         "-e", "OMPI_MCA_btl_vader_single_copy_mechanism=none", "--cap-add", "SYS_NICE",
                         "--ipc", "host", "--network", "host", "--ulimit", "memlock=-1"]),
])
def test_each_vendor_s_session_line(vendor: str, middle, dev_root: Path) -> None:
    session = Session("img:tag", vendor, Path("/src"), 1234, 5678, ("python", "-V"), interactive=False)
    assert docker_run_argv(session, dev_root) == ["docker", "run", "--rm", "-i", *middle(gids(dev_root)), *TAIL]


@pytest.mark.parametrize(("workspace", "field"), [
    ("/home/me/proj:v2", "source=/home/me/proj:v2"),              # `-v` would read `:v2` as a mode
    ("/home/me/a,b", '"source=/home/me/a,b"'),                   # --mount's fields are CSV: quoted
    ('/home/me/say "hi", then', '"source=/home/me/say ""hi"", then"'),
])
def test_a_workspace_path_with_colons_commas_or_quotes_is_mounted_as_it_is(workspace: str, field: str) -> None:
    argv = docker_run_argv(Session("img:tag", "cpu", Path(workspace), 1, 1, interactive=False))
    mount = argv[argv.index("--mount") + 1]
    assert mount == f"type=bind,{field},target=/workspace" and "-v" not in argv
    [fields] = csv.reader([mount])                               # how docker reads it (opts/mount.go: encoding/csv)
    assert fields == ["type=bind", f"source={workspace}", "target=/workspace"]


def test_a_terminal_gets_a_tty() -> None:
    session = Session("img:tag", "cpu", Path("/src"), 1, 1, interactive=True)
    assert docker_run_argv(session)[:4] == ["docker", "run", "--rm", "-it"]


def test_devcontainer_has_the_same_container_options(dev_root: Path) -> None:
    config = devcontainer("reg/img:2.14.0-rocm7.14-py3.12-ubuntu24.04", "rocm", "dev", dev_root)
    session = Session("reg/img:t", "rocm", Path("/src"), 1, 1, interactive=False)
    assert config["runArgs"] == docker_run_argv(session, dev_root)[4:-9]
    assert config == {"name": "accel-images 2.14.0-rocm7.14-py3.12-ubuntu24.04",
                      "image": "reg/img:2.14.0-rocm7.14-py3.12-ubuntu24.04", "runArgs": config["runArgs"],
                      "remoteUser": "dev", "containerUser": "dev", "updateRemoteUserUID": True,
                      "workspaceMount": "source=${localWorkspaceFolder},target=/workspace,type=bind",
                      "workspaceFolder": "/workspace",
                      "postStartCommand": ["/opt/accel-images/guard.sh", "true"],
                      "initializeCommand": ["sh", "-c", IDENTITY_SCRIPT, "git-identity", IDENTITY_DIR],
                      "mounts": ["source=${localEnv:HOME}/.config/accel-images/devcontainer-git,"
                                 "target=/etc/accel-images/host-git,type=bind,readonly"],
                      "containerEnv": {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "include.path",
                                       "GIT_CONFIG_VALUE_0": "/etc/accel-images/host-git/config"}}



@pytest.mark.parametrize("identity", [{"user.name": "Jane Doe", "user.email": "jane@example.com"}, {}])
def test_the_initialize_command_writes_the_git_identity_and_nothing_else(tmp_path: Path, identity: dict[str, str]
                                                                         ) -> None:
    """devcontainer.json's initializeCommand, run as the devcontainers CLI runs it on the host: the name and
    e-mail alone reach the file (not the signing key); without an identity, an empty file and no failure."""
    import subprocess
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n" + "".join(f"\t{key.split('.')[1]} = {value}\n"
                                                           for key, value in identity.items())
                                     + "\tsigningkey = ABCDEF\n")
    command = devcontainer("reg/img:tag", "cpu", "dev", tmp_path)["initializeCommand"]
    done = subprocess.run(command, env={"HOME": str(home), "PATH": os.environ["PATH"]}, capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    written = home / IDENTITY_DIR / "config"
    listed = subprocess.run(["git", "config", "--file", str(written), "--list"], capture_output=True, text=True,
                            timeout=30, check=True).stdout
    assert listed.splitlines() == [f"{key}={value}" for key, value in identity.items()]


# ---- the commands -------------------------------------------------------------------------------

def host_json(tmp_path: Path, **fields: object) -> str:
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"vendor": "cpu", **fields}))
    return str(path)


def invoke(command, *args: str):
    return CliRunner().invoke(command, ["--matrix", str(FROZEN_MATRIX), *args])


REGISTRY = ("--registry", "ghcr.io/acme", "--from-matrix")
"""A registry named, choosing from the matrix: images by its name, nothing read from it."""


@pytest.mark.parametrize("uid, gid, groups", [
    (0, 0, ""),                        # root writes the environment anyway
    (1000, 1000, " --group-add 100"),  # a host user outside the environment's group `users` (100) joins it
    (1000, 100, ""),                   # one whose own group it is needs nothing
])
def test_run_print_chooses_like_recommend_and_takes_the_command_after_dashes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uid: int, gid: int, groups: str) -> None:
    monkeypatch.setattr(os, "getuid", lambda: uid)
    monkeypatch.setattr(os, "getgid", lambda: gid)
    result = invoke(cli_session.run_command, "--host-json", host_json(tmp_path), "--workspace", str(tmp_path),
                    *REGISTRY, "--print", "--", "python", "-c", "print(1)")
    assert result.exit_code == 0, result.output
    assert result.stdout == (f"docker run --rm -i --ipc host --user {uid}:{gid}{groups} --mount"
                             f" type=bind,source={tmp_path},target=/workspace -w /workspace"
                             " ghcr.io/acme/accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04 python -c 'print(1)'\n")
    assert "from: chosen from" in result.stderr and "not checked against a registry" in result.stderr


def test_run_passes_the_users_git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git-commit-tree(1): GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL."""
    config = tmp_path / "gitconfig"
    config.write_text("[user]\n\tname = Jane Doe\n\temail = jane@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    result = invoke(cli_session.run_command, "img:t", "--vendor", "cpu", "--workspace", str(tmp_path), "--print")
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("-w /workspace -e 'GIT_AUTHOR_NAME=Jane Doe' -e 'GIT_COMMITTER_NAME=Jane Doe'"
                                  " -e GIT_AUTHOR_EMAIL=jane@example.com -e GIT_COMMITTER_EMAIL=jane@example.com img:t\n")


def test_run_with_an_image_takes_its_vendor_from_the_tag(tmp_path: Path) -> None:
    image = "ghcr.io/acme/accel-images/pytorch:2.14.0-cuda13.0-py3.12-ubuntu24.04"
    result = invoke(cli_session.run_command, image, "--json", "--workspace", str(tmp_path))
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["vendor"] == "cuda" and plan["image"] == image and plan["source"] is None
    assert plan["argv"][4:12] == ["--gpus", "all", "--ipc", "host", *NGC]
    assert result.stderr == ""


def test_run_on_a_broken_gpu_host_starts_the_cpu_image_and_says_why(tmp_path: Path) -> None:
    broken = host_json(tmp_path, vendor="cuda", unusable="nvidia-smi: Driver/library version mismatch")
    result = invoke(cli_session.run_command, "--host-json", broken, *REGISTRY, "--print")
    assert result.exit_code == 0, result.output
    assert "--gpus" not in result.stdout and "2.15.0-cpu-py3.12-ubuntu24.04" in result.stdout
    assert "warning: accelerator present but unusable: nvidia-smi: Driver/library version mismatch" in result.stderr


def test_devcontainer_writes_the_file_once(tmp_path: Path) -> None:
    out = tmp_path / ".devcontainer" / "devcontainer.json"
    args = ("--host-json", host_json(tmp_path), "--out", str(out), *REGISTRY)
    first = invoke(cli_session.devcontainer_command, *args)
    assert first.exit_code == 0, first.output
    config = json.loads(out.read_text())
    assert config["image"] == "ghcr.io/acme/accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"
    assert config["remoteUser"] == "dev"
    assert config["runArgs"] == ["--ipc", "host"]
    again = invoke(cli_session.devcontainer_command, *args)
    assert again.exit_code == 2
    assert again.stderr.strip() == f"accel-images: error: --out: {out} exists (pass --force to replace it)"
    forced = invoke(cli_session.devcontainer_command, *args, "--force", "--vendor", "cpu", "--torch", "2.13")
    assert forced.exit_code == 0 and json.loads(out.read_text())["image"].endswith(":2.13.0-cpu-py3.12-ubuntu24.04")


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
@pytest.mark.parametrize("dangling", [True, False], ids=["dangling", "to-a-file"])
def test_devcontainer_refuses_a_link_in_place_of_the_file(tmp_path: Path, force: bool, dangling: bool) -> None:
    """Before: a dangling link made the file elsewhere (where the link pointed), and --force wrote over
    the link's target."""
    out = tmp_path / ".devcontainer" / "devcontainer.json"
    out.parent.mkdir()
    target = tmp_path / "elsewhere" / "victim.json"
    target.parent.mkdir()
    if not dangling:
        target.write_text("precious\n")
    out.symlink_to(target)
    result = invoke(cli_session.devcontainer_command, "--host-json", host_json(tmp_path), "--out", str(out),
                    *(["--force"] if force else []))
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (f"accel-images: error: --out: {out} is a symbolic link (to {target}); "
                                     "accel-images writes a plain file there, never through a link "
                                     "(remove the link, or pass another --out)")
    assert out.is_symlink() and os.readlink(out) == str(target)
    assert (not target.exists()) if dangling else target.read_text() == "precious\n"


def test_devcontainer_replaces_the_file_never_writes_into_it(tmp_path: Path) -> None:
    """--force puts a new file in place (written beside it, then renamed): a hard link elsewhere to the
    old file keeps what it held, and no reader ever sees half a document."""
    out = tmp_path / ".devcontainer" / "devcontainer.json"
    out.parent.mkdir()
    other = tmp_path / "other.json"
    other.write_text("precious\n")
    os.link(other, out)
    result = invoke(cli_session.devcontainer_command, "--host-json", host_json(tmp_path), "--out", str(out),
                    "--force", *REGISTRY)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["remoteUser"] == "dev"
    assert other.read_text() == "precious\n"
    assert sorted(path.name for path in out.parent.iterdir()) == ["devcontainer.json"]   # no temporary left


def test_devcontainer_print_is_only_the_document(tmp_path: Path) -> None:
    result = invoke(cli_session.devcontainer_command, "img:2.14.0-xpu2026.1-py3.12-ubuntu24.04", "--print")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runArgs"][:2] == ["--device", "/dev/dri"]


def test_an_image_whose_vendor_cannot_be_told_needs_vendor(tmp_path: Path) -> None:
    result = invoke(cli_session.run_command, "ubuntu:24.04", "--vendor", "tpu", "--print")
    assert result.exit_code == 2 and "--vendor: unknown vendor 'tpu'" in result.stderr
    ok = invoke(cli_session.run_command, "ubuntu:24.04", "--vendor", "cpu", "--print")
    assert ok.exit_code == 0 and ok.stdout.split()[-1] == "ubuntu:24.04"
"""A user id in neither the host's nor the image's /etc/passwd: the files must still be theirs."""


# ---- Podman (issue 41, 4) -----------------------------------------------------------------------------

def fake_engines(tmp_path: Path, podman_has: bool) -> Path:
    """`docker` and `podman` for PATH that log each call (and what `podman load` read) to $LOG: Docker's store
    holds every image, Podman's only when `podman_has`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "docker": ('echo "docker $*" >> "$LOG"\n'
                   'case "$1 $2" in "image inspect") echo 7;; "save -o") printf archive > "$3";; esac\nexit 0\n'),
        "podman": ('echo "podman $*" >> "$LOG"\n'
                   f'case "$1 $2" in "image exists") exit {0 if podman_has else 1};;'
                   ' "load -i") echo "podman load read $(wc -c < "$3" | tr -d " ") bytes" >> "$LOG";; esac\nexit 0\n'),
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_podman_session_home_is_the_image_users_home(tmp_path: Path) -> None:
    """Before: Podman gave the session HOME=/workspace; Docker's is the image user's home."""
    result = invoke(cli_session.run_command, "--host-json", host_json(tmp_path), *REGISTRY, "--engine", "podman",
                    "--workspace", str(tmp_path), "--print")
    assert result.exit_code == 0, result.output
    assert " -e HOME=/home/dev " in result.stdout
    mine = invoke(cli_session.run_command, "--host-json", host_json(tmp_path), *REGISTRY, "--engine", "podman",
                  "--workspace", str(tmp_path), "-e", "HOME=/tmp/mine", "--print")
    assert mine.stdout.index("HOME=/home/dev") < mine.stdout.index("HOME=/tmp/mine")   # the user's own -e wins


def test_run_with_podman_hands_over_an_image_only_docker_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: Podman, not seeing Docker's store, failed with "short-name ... did not resolve"."""
    image = "ghcr.io/acme/accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"   # pulled into Docker's store
    monkeypatch.setenv("PATH", f"{fake_engines(tmp_path, podman_has=False)}:/usr/bin:/bin")
    monkeypatch.setenv("LOG", str(tmp_path / "calls.log"))
    shown = invoke(cli_session.run_command, image, "--engine", "podman", "--workspace", str(tmp_path), "--print")
    assert shown.exit_code == 0, shown.output
    archive = "ghcr.io+acme+accel-images+pytorch+2.15.0-cpu-py3.12-ubuntu24.04.tar"
    assert (f"note: {image} is in Docker's image store only; hand it to Podman's first: docker save -o {archive}"
            f" {image} && podman load -i {archive}") in shown.stderr
    assert "podman load" not in (tmp_path / "calls.log").read_text()     # --print runs nothing
    ran = invoke(cli_session.run_command, image, "--engine", "podman", "--workspace", str(tmp_path), "--", "true")
    assert ran.exit_code == 0, ran.output
    assert f"note: {image} is in Docker's image store only: handing it to Podman's (docker save -o " in ran.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    saved = [line for line in calls if line.startswith("docker save -o ")]
    assert len(saved) == 1 and saved[0].endswith(f"/{archive} {image}")
    assert "podman load read 7 bytes" in calls                          # the file docker wrote, loaded
    assert calls[-1].startswith("podman run --rm -i ") and calls[-1].endswith(f" {image} true")


def test_run_with_podman_leaves_an_image_podman_has(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fake_engines(tmp_path, podman_has=True)}:/usr/bin:/bin")
    monkeypatch.setenv("LOG", str(tmp_path / "calls.log"))
    ran = invoke(cli_session.run_command, "ghcr.io/acme/x:2.15.0-cpu-py3.12-ubuntu24.04", "--engine", "podman",
                 "--workspace", str(tmp_path), "--", "true")
    assert ran.exit_code == 0, ran.output
    assert not any(line.startswith(("docker save", "podman load")) for line in
                   (tmp_path / "calls.log").read_text().splitlines())


def test_pull_into_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `pull` had no --engine: Podman users could not pull into Podman's store."""
    from accel_images.cli import fanout
    monkeypatch.setenv("PATH", f"{fake_engines(tmp_path, podman_has=False)}:/usr/bin:/bin")
    monkeypatch.setenv("LOG", str(tmp_path / "calls.log"))
    result = invoke(fanout.pull_command, "--host-json", host_json(tmp_path), *REGISTRY, "--engine", "podman")
    assert result.exit_code == 0, result.output
    image = "ghcr.io/acme/accel-images/pytorch:2.15.0-cpu-py3.12-ubuntu24.04"
    assert (tmp_path / "calls.log").read_text().splitlines() == [f"podman pull --platform linux/amd64 {image}"]
    assert result.stdout.startswith("podman run --rm -it ") and result.stdout.rstrip().endswith(image)
