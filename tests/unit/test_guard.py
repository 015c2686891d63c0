"""The in-image entry point guard (accel_images/smoke/guard.sh), run with the host's POSIX shells.

Its inputs are faked: PATH holds only the tools it needs plus, where a test wants one, a fake
`nvidia-smi` answering from recorded output (tests/data/host); ACCEL_IMAGES_DEV_ROOT points its
/dev checks at a device tree in tmp_path. The image facts (minimum driver, GPU architectures)
are read from a rendered CUDA Dockerfile, so the guard is tested with what an image really sets.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_guard_integration.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from accel_images.render.contexts import GUARD_SOURCE, guard_script
from dockerfile_env import rendered_env

ROOT = Path(__file__).resolve().parents[2]
HOST_DATA = Path(__file__).resolve().parents[1] / "data" / "host"
GUARD_EXIT = 78  # EX_CONFIG: the host, not the image, is wrong
TOOLS = ("sort", "head", "cut", "tr", "id", "stat", "cat", "printf", "sh", "dirname", "true", "mkdir")
SHELLS = [shell for shell in ("sh", "dash", "bash") if shutil.which(shell)]
ECHO_ARGS = ["sh", "-c", 'printf "%s|" "$@"; exit 7', "argv0", "a b", "$(id)", "`id`", ""]


def image_facts(stack: str, arch: str = "amd64") -> dict[str, str]:
    """The ACCEL_IMAGES_* environment the first rendered CUDA image of this stack sets on one
    architecture (tests/dockerfile_env.py), its vendor included."""
    tag = sorted(path.parent.name for path in (ROOT / "images" / "cuda").glob(f"*-cuda{stack}-*/Dockerfile"))[0]
    return {**rendered_env("cuda", tag, f"linux/{arch}"), "ACCEL_IMAGES_VENDOR": "cuda"}


CUDA13 = image_facts("13.0")
CUDA13_ARM64 = image_facts("13.0", "arm64")


def recorded_gpus(name: str, header: str | None = None) -> str:
    """A recorded `nvidia-smi --query-gpu` CSV; `header` names the columns of a noheader file."""
    text = (HOST_DATA / name).read_text()
    return (header + "\n" + text) if header else text


A100_580 = recorded_gpus("nvidia-smi-query-a100-580.csv", "driver_version, compute_cap, name")
TITAN_V_570 = recorded_gpus("nvidia-smi-query-triton.csv")  # a Volta (7.0) first, driver 570.86.15


FAKE_NVIDIA_SMI = """#!/bin/sh
# Answers `--query-gpu=A,B --format=csv,noheader` from a recorded CSV whose first line names the columns.
# awk, not Python: the guard asks several times a test, and a shell starts in a millisecond.
for arg; do case $arg in --query-gpu=*) asked=${{arg#--query-gpu=}};; esac; done
exec {awk} -v asked="$asked" '
    BEGIN {{ FS = ", *"; fields = split(asked, field, ",") }}
    !NF {{ next }}
    !header++ {{
        for (i = 1; i <= NF; i++) column[$i] = i
        for (f = 1; f <= fields; f++) if (!(field[f] in column)) {{
            printf "Field \\"%s\\" is not a valid field to query.\\n", field[f]; exit 2 }}
        next
    }}
    {{ line = ""; for (f = 1; f <= fields; f++) line = line (f > 1 ? ", " : "") $column[field[f]]; print line }}
' {record}
"""

BROKEN_NVIDIA_SMI = """#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
exit 9
"""


class Host:
    """A fake host: a bin directory for PATH, a device tree for ACCEL_IMAGES_DEV_ROOT and a TMPDIR."""

    def __init__(self, root: Path, shell: str) -> None:
        self.shell = shutil.which(shell) or shell  # PATH below holds only the fake bin directory
        self.bin = root / "bin"
        self.dev_root = root / "host"
        self.tmp = root / "tmp"
        self.bin.mkdir()
        self.tmp.mkdir()
        (self.dev_root / "dev").mkdir(parents=True)
        for tool in TOOLS:
            found = shutil.which(tool)
            if found:
                (self.bin / tool).symlink_to(found)

    def nvidia_smi(self, recorded: str | None = None, script: str | None = None) -> None:
        if recorded is not None:
            record = self.bin.parent / "gpus.csv"
            record.write_text(recorded)
            script = FAKE_NVIDIA_SMI.format(awk=shutil.which("awk"), record=shlex.quote(str(record)))
        path = self.bin / "nvidia-smi"
        path.write_text(script or "")
        path.chmod(0o755)

    def device(self, relative: str, directory: bool = False) -> Path:
        path = self.dev_root / "dev" / relative
        if directory:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        return path

    def run(self, vendor: str, args: list[str] | None = None, /, **env: str) -> subprocess.CompletedProcess[str]:
        """The guard a `vendor` image carries, run as its entry point."""
        guard = self.bin.parent / f"guard-{vendor}.sh"
        guard.write_bytes(guard_script(vendor))
        # HABANA_LOGS in the host's own tree: the default /var/log/habana_logs is writable by root only;
        # TMPDIR too, so that nothing the guard makes lands in the machine's /tmp
        environment = {"PATH": str(self.bin), "ACCEL_IMAGES_DEV_ROOT": str(self.dev_root), "LC_ALL": "C",
                       "HABANA_LOGS": str(self.bin.parent / "habana_logs"), "TMPDIR": str(self.tmp), **env}
        return subprocess.run([self.shell, str(guard), *(args or ECHO_ARGS)], env=environment,
                              capture_output=True, text=True, timeout=60)


@pytest.fixture(params=SHELLS)
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Host:
    return Host(tmp_path, request.param)


def assert_ran(result: subprocess.CompletedProcess[str]) -> None:
    """The command ran with its arguments untouched and its exit code passed through."""
    assert result.stdout == "a b|$(id)|`id`||", result.stderr
    assert result.returncode == 7, result.stderr


def assert_refused(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode == GUARD_EXIT, result.stderr
    assert result.stdout == "", "the command must not run"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("accel-images: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def assert_warned(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert_ran(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-images: warning: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def guard_env(facts: dict[str, str], **extra: str) -> dict[str, str]:
    """An image's ACCEL_IMAGES_* environment as the guard reads it (the vendor is in the script)."""
    return {key: value for key, value in facts.items() if key != "ACCEL_IMAGES_VENDOR"} | extra


def cuda13(**extra: str) -> dict[str, str]:
    return guard_env(CUDA13, **extra)


def test_the_image_facts_are_what_the_tests_assume() -> None:
    """The recorded hosts are too old / new enough for a CUDA 13.0 image, as the tests below need."""
    assert CUDA13["ACCEL_IMAGES_VENDOR"] == "cuda"
    assert CUDA13["ACCEL_IMAGES_MIN_DRIVER"].split(".")[0] == "580"
    assert CUDA13["ACCEL_IMAGES_DRIVER_FLOOR"] == "580"
    assert CUDA13["ACCEL_IMAGES_GPU_ARCHS"].split(",")[0] == "7.5"


# ---- pass-through ------------------------------------------------------------------------------

def test_cpu_image_runs_the_command_with_its_arguments_and_exit_code(host: Host) -> None:
    result = host.run("cpu")
    assert_ran(result)
    assert result.stderr == ""


def test_the_command_replaces_the_guard(host: Host) -> None:
    """exec: the command is the container's main process (signals reach it), not a child of the guard."""
    result = host.run("cpu", ["sh", "-c", 'echo "$PPID"'])
    assert result.returncode == 0
    assert result.stdout.strip() == str(os.getpid())


# ---- NVIDIA -----------------------------------------------------------------------------------

def test_driver_below_the_floor_is_refused_naming_the_floor_and_an_image_that_works(host: Host) -> None:
    host.nvidia_smi(TITAN_V_570)
    line = assert_refused(host.run("cuda", **cuda13()), "570.86.15", "580", "CUDA 13.x floor",
                          CUDA13["ACCEL_IMAGES_TAG"], "or use ", "-cuda12.6-")
    assert "ACCEL_IMAGES_GUARD=off" in line


def test_driver_between_floor_and_toolkit_driver_starts_with_one_warning(host: Host) -> None:
    """535.104.05 on a CUDA 12.6 image: minor-version compatibility (floor 525.60.13) serves it."""
    host.nvidia_smi("driver_version, compute_cap, name\n535.104.05, 9.0, NVIDIA H100 80GB HBM3\n")
    result = host.run("cuda", **guard_env(image_facts("12.6")))
    assert_warned(result, "535.104.05", "12.6.3 toolkit driver 560.35.05", "minor-version compatibility", "PTX JIT")
    assert "running on the CPU" not in result.stderr


def test_gpu_older_than_the_oldest_compiled_architecture_is_refused(host: Host) -> None:
    host.nvidia_smi("driver_version, compute_cap, name\n590.44.01, 7.0, Tesla V100-SXM2-32GB\n")
    line = assert_refused(host.run("cuda", **cuda13()), "7.0", "7.5", "older than every architecture")
    assert "compute capability" in line and re.search(r"; use \S+-cuda12\.6-\S+ instead", line)


def test_a_host_with_one_unserved_gpu_starts_with_a_warning_naming_it(host: Host) -> None:
    host.nvidia_smi(TITAN_V_570)  # a Volta 7.0 and an Ada 8.9: the 7.5+ build serves the second
    assert_warned(host.run("cuda", **cuda13(ACCEL_IMAGES_DRIVER_FLOOR="570", ACCEL_IMAGES_MIN_DRIVER="570")),
                  "compute capability 7.0", "only those of 8.9")


def test_blackwell_on_a_wheel_without_its_kernels_or_ptx_is_refused_naming_a_newer_image(host: Host) -> None:
    """cu126 stops at sm_90 with no PTX (RELEASE.md CUDA support matrix): a B200 (10.0) gets nothing."""
    host.nvidia_smi("driver_version, compute_cap, name\n610.43.02, 10.0, NVIDIA B200\n")
    assert_refused(host.run("cuda", **guard_env(image_facts("12.6"))), "compute capability 10.0",
                   "5.0,6.0,7.0,7.5,8.0,8.6,9.0", "; use ", "-cuda13.2-", " instead")


@pytest.mark.parametrize("capability", ["12.0", "12.1", "10.3", "8.9"])
def test_newer_minors_run_same_major_sass_and_ptx_reaches_newer_gpus(host: Host, capability: str) -> None:
    host.nvidia_smi(f"driver_version, compute_cap, name\n610.43.02, {capability}, NVIDIA GPU\n")
    result = host.run("cuda", **cuda13())
    assert_ran(result)
    assert result.stderr == ""


def test_one_served_gpu_is_enough(host: Host) -> None:
    host.nvidia_smi("driver_version, compute_cap, name\n590.44.01, 7.0, Tesla V100\n590.44.01, 9.0, H100\n")
    assert_ran(host.run("cuda", **cuda13()))


def test_a_fine_nvidia_host_runs_the_command_silently(host: Host) -> None:
    # the 13.0 wheels carry toolkit 13.0.3 (their Requires-Dist pins cuda-toolkit==13.0.3), whose driver is
    # 580.126.20: a driver at it runs the image without a word
    host.nvidia_smi("driver_version, compute_cap, name\n580.126.20, 8.0, NVIDIA A100-SXM4-40GB\n")
    result = host.run("cuda", **cuda13())
    assert_ran(result)
    assert result.stderr == ""


def test_a_driver_below_the_wheels_own_toolkit_is_warned_of(host: Host) -> None:
    """580.126.09 meets 13.0.2's driver (580.95.05), which the knowledge base once claimed for the
    13.0 wheels; their toolkit is 13.0.3 (580.126.20), so the host runs them under minor-version
    compatibility and is told so."""
    host.nvidia_smi(A100_580)
    assert_warned(host.run("cuda", **cuda13()), "580.126.09", "580.126.20")


# ---- linux/arm64: the SBSA builds -------------------------------------------------------------------

GH200_580 = "driver_version, compute_cap, name\n580.126.20, 9.0, NVIDIA GH200 480GB\n"
ORIN_580 = "driver_version, compute_cap, name\n580.95.05, 8.7, Orin\n"


def test_the_arm64_image_carries_the_sbsa_architectures_and_the_jetson_facts() -> None:
    """The arm64 stage of a CUDA 13.0 image: no sm_75 or sm_86, sm_110 added (data/vendors/cuda.yaml)."""
    assert CUDA13_ARM64["ACCEL_IMAGES_GPU_ARCHS"] == "8.0,9.0,10.0,11.0,12.0"
    assert CUDA13_ARM64["ACCEL_IMAGES_GPU_NOT_SERVED"] == "7.2:Jetson Xavier,8.7:Jetson Orin"
    assert "ACCEL_IMAGES_GPU_NOT_SERVED" not in CUDA13  # the x86_64 image knows nothing of Jetson


def test_a_grace_hopper_runs_the_arm64_image_silently(host: Host) -> None:
    host.nvidia_smi(GH200_580)
    result = host.run("cuda", **guard_env(CUDA13_ARM64))
    assert_ran(result)
    assert result.stderr == ""


def test_a_jetson_orin_is_refused_by_the_arm64_image_with_where_to_go(host: Host) -> None:
    """Orin is compute capability 8.7, which the 8.0 SASS would serve by the arch rules alone; the
    SBSA builds do not run on Jetson, so the guard says so and names the L4T/JetPack containers."""
    host.nvidia_smi(ORIN_580)
    assert_refused(host.run("cuda", **guard_env(CUDA13_ARM64)), "8.7", "Jetson Orin", "SBSA", "l4t-pytorch")


def test_an_old_nvidia_smi_without_compute_cap_still_gets_the_driver_check(host: Host) -> None:
    host.nvidia_smi("driver_version, name\n535.129.03, NVIDIA H100 80GB HBM3\n")
    assert_refused(host.run("cuda", **cuda13()), "535.129.03", "580")
    host.nvidia_smi("driver_version, name\n590.44.01, NVIDIA H100 80GB HBM3\n")
    assert_ran(host.run("cuda", **cuda13()))


def test_no_nvidia_smi_warns_and_runs_on_the_cpu(host: Host) -> None:
    assert_warned(host.run("cuda", **cuda13()), "--gpus all", "running on the CPU")


def test_no_nvidia_smi_with_an_accelerator_required_is_refused(host: Host) -> None:
    assert_refused(host.run("cuda", **cuda13(ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")), "--gpus all")


def test_a_failing_nvidia_smi_is_reported_not_parsed_as_a_version(host: Host) -> None:
    host.nvidia_smi(script=BROKEN_NVIDIA_SMI)
    assert_warned(host.run("cuda", **cuda13()), "cannot reach the NVIDIA driver", "NVIDIA-SMI has failed")
    required = assert_refused(host.run("cuda", **cuda13(ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")), "NVIDIA-SMI")
    assert "older than" not in required


# ---- AMD, Intel, Gaudi: device nodes ----------------------------------------------------------

@pytest.mark.parametrize("vendor, nodes, hint", [
    ("rocm", ["kfd", "dri/renderD128"], "--device /dev/kfd"),
    ("xpu", ["dri/renderD128"], "--device /dev/dri"),
    ("gaudi", ["accel/accel0"], "--runtime=habana"),
    ("gaudi", ["hl0"], "--runtime=habana"),
])
def test_device_nodes(host: Host, vendor: str, nodes: list[str], hint: str) -> None:
    missing = host.run(vendor)
    assert_warned(missing, hint, "running on the CPU")
    assert_refused(host.run(vendor, ACCEL_IMAGES_REQUIRE_ACCELERATOR="1"), hint)
    for node in nodes:
        host.device(node)
    present = host.run(vendor, ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")
    assert_ran(present)
    assert present.stderr == ""


def test_xpu_with_dri_but_no_render_node_warns(host: Host) -> None:
    host.device("dri/card0")
    assert_warned(host.run("xpu"), "render node")


RENDER_GID, VIDEO_GID = 109, 44  # ROCm-docker's render GID and Ubuntu's video; any numbers would do


@pytest.fixture
def shared_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """A Host another user can read (pytest's tmp_path is private to root), for runs as uid 1000."""
    root = Path(tempfile.mkdtemp(prefix="guard-", dir="/tmp"))
    root.chmod(0o755)
    host = Host(root, "sh")
    yield host
    shutil.rmtree(root, ignore_errors=True)


def node(host: Host, relative: str, gid: int) -> None:
    path = host.device(relative)
    os.chown(path, 0, gid)
    path.chmod(0o660)  # root:render 0660, as current hosts create them (ROCm/ROCm-docker#116)


def as_user(host: Host, vendor: str, groups: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The vendor's guard run as uid/gid 1000 with the given supplementary groups."""
    guard = host.bin.parent / f"guard-{vendor}.sh"
    guard.write_bytes(guard_script(vendor))
    guard.chmod(0o755)
    for directory in (host.bin.parent, host.dev_root, host.dev_root / "dev", host.dev_root / "dev" / "dri"):
        if directory.is_dir():
            directory.chmod(0o755)
    environment = {"PATH": str(host.bin), "ACCEL_IMAGES_DEV_ROOT": str(host.dev_root), "LC_ALL": "C", **env}
    command = [shutil.which("setpriv") or "setpriv", "--reuid=1000", "--regid=1000", f"--groups={groups}" if groups else "--clear-groups",
               host.shell, str(guard), *ECHO_ARGS]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="changing user and file groups needs root and setpriv")


@needs_root
@pytest.mark.parametrize("vendor, nodes", [
    ("rocm", [("kfd", RENDER_GID), ("dri/renderD128", RENDER_GID), ("dri/card0", VIDEO_GID)]),
    ("xpu", [("dri/renderD128", RENDER_GID), ("dri/card0", VIDEO_GID)]),
])
def test_unopenable_device_nodes_are_refused_with_the_exact_group_add(shared_host: Host, vendor: str,
                                                                       nodes: list[tuple[str, int]]) -> None:
    for relative, gid in nodes:
        node(shared_host, relative, gid)
    line = assert_refused(as_user(shared_host, vendor, ""), "user 1000 cannot open", f"--group-add {RENDER_GID}")
    assert f"--group-add {VIDEO_GID}" not in line, "card0 is not a node the compute runtime opens"
    assert_ran(as_user(shared_host, vendor, str(RENDER_GID)))


def test_guard_reads_real_dev_without_the_override(host: Host) -> None:
    """Default: no prefix, so the image checks the container's own /dev."""
    assert re.search(r'^dev="\$\{ACCEL_IMAGES_DEV_ROOT:-\}/dev"$', GUARD_SOURCE.read_text(), re.MULTILINE)


# ---- switched off -----------------------------------------------------------------------------

@pytest.mark.parametrize("vendor", ["cuda", "rocm", "xpu", "gaudi"])
def test_guard_off_runs_the_command_whatever_the_host(host: Host, vendor: str) -> None:
    host.nvidia_smi(TITAN_V_570)
    result = host.run(vendor, **cuda13(ACCEL_IMAGES_GUARD="off", ACCEL_IMAGES_REQUIRE_ACCELERATOR="1"))
    assert_ran(result)
    assert result.stderr == ""


# ---- every image carries it -------------------------------------------------------------------

def test_every_rendered_image_copies_its_vendors_guard_and_starts_with_it() -> None:
    contexts = sorted((ROOT / "images").glob("*/*/Dockerfile"))
    assert contexts
    for dockerfile in contexts:
        vendor = dockerfile.parent.parent.name
        assert (dockerfile.parent / "guard.sh").read_bytes() == guard_script(vendor), dockerfile
        assert 'ENTRYPOINT ["/usr/bin/tini", "-s", "-g", "--", "/opt/accel-images/guard.sh"]' in dockerfile.read_text(), \
            dockerfile


def test_the_guard_is_posix_sh() -> None:
    """dash (Debian's /bin/sh) parses it; bash-only syntax would break minimal images."""
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("dash is not installed")
    for vendor in ("cpu", "cuda", "rocm", "xpu", "gaudi"):
        script = guard_script(vendor)
        assert subprocess.run([dash, "-n"], input=script, capture_output=True).returncode == 0, vendor
        assert script.startswith(b"#!/bin/sh\n")
        assert b"check_vendor() {" in script and b"@VENDOR_CHECK@" not in script, vendor


def test_gaudi_moves_an_unwritable_habana_logs_instead_of_aborting(host: Host) -> None:
    """opendatahub-io/opendatahub-tests#2301: the runtime SIGABRTs on an unwritable $HABANA_LOGS; the
    guard gives it one under TMPDIR (read-only roots: tests/unit/test_guard_hosts.py)."""
    host.device("accel/accel0")
    assert_ran(host.run("gaudi", HABANA_LOGS=str(host.bin.parent / "not-yet" )))  # created by the runtime
    logs = host.bin.parent / "habana_logs"
    logs.mkdir()
    assert_ran(host.run("gaudi", HABANA_LOGS=str(logs)))
    blocked = host.bin.parent / "not-a-dir"
    blocked.write_text("")
    assert_warned(host.run("gaudi", HABANA_LOGS=str(blocked / "logs")), "HABANA_LOGS", "not writable",
                  str(host.tmp / "habana_logs-"))


# ---- what the banner of an interactive shell says about the device ------------------------------

SHOW_DEVICE = ["sh", "-c", 'printf "%s" "$ACCEL_IMAGES_DEVICE"']


def test_the_guard_tells_the_command_what_device_it_found(host: Host) -> None:
    """ACCEL_IMAGES_DEVICE, for the banner (accel_images/smoke/banner.sh): the vendor when its check
    passed, `CPU only (why)` when it warned, `not checked` with the guard off."""
    cpu = host.run("cpu", SHOW_DEVICE, ACCEL_IMAGES_VENDOR="cpu")
    assert cpu.stdout == "cpu", cpu.stderr
    missing = host.run("cuda", SHOW_DEVICE, **CUDA13)
    assert missing.stdout.startswith("CPU only (no NVIDIA GPU visible in the container"), missing.stderr
    host.nvidia_smi(A100_580)
    found = host.run("cuda", SHOW_DEVICE, **CUDA13)
    assert found.stdout == "cuda", found.stderr
    off = host.run("cuda", SHOW_DEVICE, ACCEL_IMAGES_VENDOR="cuda", ACCEL_IMAGES_GUARD="off")
    assert off.stdout == "not checked (ACCEL_IMAGES_GUARD=off)"


BANNER = ROOT / "accel_images" / "smoke" / "banner.sh"
PYTHON_FIRST = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
"""PATH with this environment's `python` first, as an image's venv is (a host may have only python3)."""


def shell_with_banner(script: str, interactive: bool, **env: str) -> str:
    """`script` run by bash after sourcing the banner, as /etc/bash.bashrc does; PS1 set as an interactive
    shell has it."""
    prompt = "PS1='$ '; " if interactive else ""
    bash = shutil.which("bash") or "bash"   # the test's PATH may not hold it
    environment = {"PATH": PYTHON_FIRST, "ACCEL_IMAGES_TAG": "2.13.0-cpu-py3.11-debian12", "ACCEL_IMAGES_DEVICE": "cpu",
                   **env}
    done = subprocess.run([bash, "--norc", "--noprofile", "-c", f"{prompt}. {BANNER}; {script}"], capture_output=True,
                          text=True, timeout=60, env=environment)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_banner_speaks_once_and_only_to_an_interactive_shell() -> None:
    said = shell_with_banner(". " + str(BANNER), interactive=True)  # twice: a nested shell inherits the mark
    assert said.count("accel-images 2.13.0-cpu-py3.11-debian12: PyTorch ") == 1, said
    assert re.search(r"PyTorch \S+, Python 3\.\d+\.\d+, device: cpu\n", said), said
    assert shell_with_banner("true", interactive=False) == ""   # `bash -c`, scripts, `docker run IMAGE CMD`


def test_the_banner_says_so_when_no_python_is_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sed").symlink_to(shutil.which("sed") or "sed")
    said = shell_with_banner("true", interactive=True, PATH=str(bin_dir))
    assert said == "accel-images 2.13.0-cpu-py3.11-debian12: PyTorch unknown, no python on PATH, device: cpu\n"


# ---- what the environment changes: said in a production image ---------------------------------
# Pyxis passes the submitting user's environment into the container, the image's own variables taking
# precedence over the job's ("the environment variables in the container have precedence over the
# environment variables from the job", NVIDIA/pyxis#124): what a login node exported and the image does
# not set reaches the guard. A production image runs its guard as /opt/accel-images/guard.sh (the
# ENTRYPOINT); the tests here run copies elsewhere, where the fake host tree is the point.
PRODUCTION_GUARD = "/opt/accel-images/guard.sh"


def as_production(host: Host, vendor: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The guard sourced with $0 set to where a production image holds it, its command ECHO_ARGS."""
    guard = host.bin.parent / f"guard-{vendor}.sh"
    guard.write_bytes(guard_script(vendor))
    environment = {"PATH": str(host.bin), "LC_ALL": "C", "TMPDIR": str(host.tmp), "GUARD_COPY": str(guard), **env}
    return subprocess.run([host.shell, "-c", '. "$GUARD_COPY"', PRODUCTION_GUARD, *ECHO_ARGS],
                          env=environment, capture_output=True, text=True, timeout=60)


def test_a_production_guard_names_the_overrides_in_effect_in_one_line(host: Host) -> None:
    result = as_production(host, "cpu", ACCEL_IMAGES_VENDOR="cpu", ACCEL_IMAGES_OWN_ENV="ACCEL_IMAGES_OWN_ENV ACCEL_IMAGES_VENDOR",
                           ACCEL_IMAGES_REQUIRE_ACCELERATOR="1", HSA_OVERRIDE_GFX_VERSION="10.3.0",
                           ACCEL_IMAGES_COMPAT_BRANCHES="535")
    assert_ran(result)
    [line] = result.stderr.splitlines()
    assert line.startswith("accel-images: note: set in the environment, not by the image: ")
    for name in ("ACCEL_IMAGES_REQUIRE_ACCELERATOR=1", "HSA_OVERRIDE_GFX_VERSION=10.3.0",
                 "ACCEL_IMAGES_COMPAT_BRANCHES=535"):
        assert name in line
    assert "ACCEL_IMAGES_VENDOR" not in line


def test_a_refusal_carries_the_overrides_on_its_one_line(host: Host) -> None:
    result = as_production(host, "cuda", ACCEL_IMAGES_REQUIRE_ACCELERATOR="1")
    line = assert_refused(result, "no NVIDIA GPU visible in the container")
    assert line.endswith("; set in the environment, not by the image: ACCEL_IMAGES_REQUIRE_ACCELERATOR=1")


def test_the_dev_root_test_hook_is_said_in_a_production_image(host: Host) -> None:
    result = as_production(host, "cpu", ACCEL_IMAGES_DEV_ROOT=str(host.dev_root))
    assert_ran(result)
    [line] = result.stderr.splitlines()
    assert f"ACCEL_IMAGES_DEV_ROOT={host.dev_root} (a test hook: devices and driver tools are read under it)" in line


def test_the_production_path_is_the_images_entry_point() -> None:
    from accel_images.model.variant import GUARD_PATH
    assert GUARD_PATH == PRODUCTION_GUARD and f'[ "$0" = {GUARD_PATH} ]'.encode() in guard_script("cpu")


@pytest.mark.parametrize("dockerfile", sorted((ROOT / "images").glob("*/*/Dockerfile")), ids=lambda p: p.parent.name)
def test_every_image_names_the_accel_images_variables_it_sets(dockerfile: Path) -> None:
    """ACCEL_IMAGES_OWN_ENV, per platform: exactly the ACCEL_IMAGES_* names the image's ENV sets there."""
    vendor, tag = dockerfile.parent.parent.name, dockerfile.parent.name
    for platform in ("linux/amd64", "linux/arm64"):   # a one-platform Dockerfile has one ENV for both
        env = rendered_env(vendor, tag, platform)
        assert set(env["ACCEL_IMAGES_OWN_ENV"].split()) == {*env, "ACCEL_IMAGES_VENDOR"}, platform


def test_a_production_guard_with_nothing_overridden_says_nothing(host: Host) -> None:
    result = as_production(host, "cpu", ACCEL_IMAGES_VENDOR="cpu", ACCEL_IMAGES_OWN_ENV="ACCEL_IMAGES_OWN_ENV ACCEL_IMAGES_VENDOR")
    assert_ran(result)
    assert result.stderr == ""


def test_an_override_value_stays_on_its_line(host: Host) -> None:
    result = as_production(host, "cpu", HSA_OVERRIDE_GFX_VERSION="10.3.0\naccel-images: error: forged")
    assert_ran(result)
    assert len(result.stderr.splitlines()) == 1


def test_every_fact_the_guard_reads_is_used() -> None:
    """The facts reader assigns facts_<name> for each field; a field no check reads is not read."""
    source = GUARD_SOURCE.read_text()
    fields = re.findall(r'field\("(\w+)"', source)
    checks = b"".join(guard_script(vendor) for vendor in ("cuda", "rocm", "xpu", "gaudi", "cpu")).decode()
    unused = [name for name in fields if not re.search(rf"\$\{{?facts_{name}\b", checks)]
    assert fields and unused == []
