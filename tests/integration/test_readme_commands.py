"""The README and the manual (docs/), executed from top to bottom where this machine can: every shell
block's commands, and the output shown after a `$ ` prompt compared with what the command prints now.

Each command is either run here (RUN_HERE) or named in ELSEWHERE with why it cannot run in the unit
tests (an engine, a remote registry) and which test covers it. A command the README or a page of the
manual gains or changes that is in neither fails the test, so the documents and the commands cannot
drift apart unnoticed.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = (README, *sorted((ROOT / "docs").rglob("*.md")))
"""Where documented commands live: the README's tour, then every page of the manual."""
HOSTS = {"# on an 8 x H100 host with driver 535.104.05": ROOT / "tests" / "data" / "readme" / "h100-535.json",
         "# on a GH200 host (aarch64) with driver 580.65.06": ROOT / "tests" / "data" / "readme" / "gh200-580.json"}
"""A `$ command  # on HOST` example is run against that recorded host (the --host-json option)."""

RUN_HERE = {"source .venv/bin/activate", "accel-images --version", "accel-images recommend",
            "accel-images host describe", "accel-images host describe | accel-images recommend --host-json -"}
ELSEWHERE = {
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'":
        "the suite runs in the environment it makes (tests/integration/test_installed_wheel.py installs the package afresh)",
    ".venv/bin/python -m pytest -q": "the suite itself (tests/unit/test_readme.py checks CI runs the same line)",
    ".venv/bin/python -m pytest -q -n 2 tests/unit": "the unit half of the suite this test runs in (`make test-fast`); "
        "tests/conftest.py refuses a test there that asks for the engine",
    "make image": "builds with the Docker engine (tests/unit/test_make_image.py)",
    "make image VENDOR=cpu TORCH=2.13 PYTHON=3.11": "builds with the Docker engine (tests/unit/test_make_image.py)",
    "make images VENDOR=cpu": "builds every CPU image with the Docker engine (tests/unit/test_makefile.py reads its plan)",
    "accel-images build --vendor rocm --torch 2.14": "builds ROCm images with the Docker engine",
    "export ACCEL_IMAGES_REGISTRY=ghcr.io/acme": "the block after it reads ghcr.io, out of reach here",
    "accel-images catalogue": "reads ghcr.io/acme (tests/unit/test_catalogue.py, against the local registry)",
    "mkdir -p ~/.config/accel-images && echo 'registry: registry.example.com/ml' > ~/.config/accel-images/config.yaml":
        "writes the user's configuration (tests/unit/test_sources.py reads such a file)",
    "accel-images run -- python train.py": "starts a container on an image from ghcr.io/acme",
    "accel-images devcontainer": "chooses from ghcr.io/acme (tests/unit/test_session.py)",
    "accel-images smoke --nodes 2 accel-images/pytorch:2.13.0-cpu-py3.11-debian12":
        "starts two containers with the Docker engine (tests/integration/test_smoke_nodes_integration.py)",
    "accel-images smoke --nodes 2 accel-images/pytorch:2.13.0-cpu-py3.11-debian12 --json | python -m json.tool":
        "starts two containers with the Docker engine (tests/integration/test_smoke_nodes_integration.py reads its --json)",
    "accel-images host describe > node.json":
        "writes a file from this host's description (`accel-images host describe` runs here, above)",
    "accel-images recommend --host-json node.json --engine enroot --nodes 4":
        "reads node.json from a cluster node (tests/unit/test_nodes.py prints the srun line from a recorded 8-GPU host)",
    "accel-images run --print --host-json node.json --nodes 2 --engine kubernetes"
    " --rdma-resource rdma/hca_shared_devices_a -- python train.py --epochs 3":
        "reads node.json from a cluster node (tests/unit/test_nodes.py validates the Job and Service offline)",
    "make device-check": "needs an accelerator and its tools (tests/unit/test_devicecheck.py runs the module against fake ones)",
    "accel-images build --vendor cpu --torch 2.13 --os debian12 --registry-mirror docker.io=127.0.0.1:5000"
    " --pip-find-links /var/cache/accel-images/wheelhouse --without-companion torchvision":
        "builds with the Docker engine from the local mirror (tests/integration/test_build_integration.py)",
    "accel-images run --registry ghcr.io/acme --print -- python -c 'import torch; print(torch.cuda.is_available())'":
        "reads ghcr.io/acme (tests/unit/test_session.py prints the same line from a recorded catalogue)",
    "accel-images recommend --engine kubernetes --registry ghcr.io/acme > pod.yaml":
        "reads ghcr.io/acme (tests/integration/test_runtimes_integration.py prints a Pod from the local registry)",
    "accel-images run --engine podman -- python train.py":
        "starts rootless Podman on an image from ghcr.io/acme (tests/integration/test_runtimes_integration.py)",
    "accel-images run --print --engine apptainer -- python train.py":
        "chooses from ghcr.io/acme (tests/unit/test_runtimes.py prints Apptainer lines)",
    "accel-images run -v /data:/data:ro -p 8888:8888 -e WANDB_MODE=offline --name nb -- jupyter lab --ip 0.0.0.0":
        "starts a container on an image from ghcr.io/acme (tests/unit/test_runtimes.py renders what is passed through)",
    "accel-images nightly --registry registry.example.com/ml --jobs 2 --max-age 7": "pushes to a registry",
    "bash .ci/setup-host.sh": "sets up this machine as root before the suite runs (.ci/run runs it first)",
    "make image VENDOR=cuda OS=debian12 TORCH=2.15 REGISTRY_MIRROR=docker.io=127.0.0.1:5000"
    " CACHE_DIR=/var/cache/accel-images/wheel-cache":
        "builds the CUDA Debian image, 3 GB of wheels (tests/integration/test_cuda_image.py builds it through the"
        " nightly with the same cache; tests/unit/test_make_image.py reads what make runs)",
    'keys="${XDG_CONFIG_HOME:-$HOME/.config}/accel-images" && mkdir -p -m 700 "$keys"':
        "makes the user's configuration directory (tests/unit/test_readme.py keeps the key out of the checkout)",
    '(umask 077 && openssl genpkey -algorithm ed25519 -out "$keys/sign.pem") && openssl pkey -in "$keys/sign.pem"'
    ' -pubout -out "$keys/sign.pub"':
        "the key for the nightly below (tests/unit/test_supply.py signs and verifies)",
    'accel-images nightly --registry 127.0.0.1:5000 --sign-key "$keys/sign.pem"':
        "builds and pushes (tests/unit/test_supply.py)",
    'accel-images verify 127.0.0.1:5000/accel-images/pytorch:2.13.0-cpu-py3.11-debian12 --key "$keys/sign.pub"':
        "needs what the nightly above published (tests/unit/test_supply.py)",
    "apt-get install -y qemu-user-static": "installs a package as root (.ci/setup-host.sh does, and registers its binfmt)",
    "accel-images build --vendor cpu --torch 2.13 --os debian12 --platform linux/arm64":
        "builds torch for arm64 under emulation, from Docker Hub and PyTorch's cpu index, out of reach here, and "
        "imports it with a QEMU newer than this machine's (tests/integration/test_platforms_integration.py builds a "
        "light image for both platforms; test_arm64_torch.py runs the real aarch64 wheels)",
    "docker run --rm --platform linux/arm64 accel-images/pytorch:2.13.0-cpu-py3.11-debian12-arm64 uname -m":
        "needs the image the build above makes (tests/integration/test_platforms_integration.py runs uname -m as aarch64)",
}


@dataclass(frozen=True)
class Command:
    line: str              # continuation lines joined, the comment and the `$ ` prompt removed
    comment: str           # what followed `#` on the line
    shown: tuple[str, ...]  # the output the README shows after a `$ ` prompt (empty without one)


def commands(text: str) -> list[Command]:
    """Every command of every ```sh block, in order."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        lines = block.splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            while line.endswith("\\") and index + 1 < len(lines):
                index += 1
                line = line[:-1].rstrip() + " " + lines[index].strip()
            index += 1
            prompted = line.startswith("$ ")
            command, _, comment = line.removeprefix("$ ").partition("  #")
            if not command.strip() or command.lstrip().startswith("#"):
                continue
            shown: list[str] = []
            while prompted and index < len(lines) and not lines[index].startswith("$ "):
                shown.append(lines[index])
                index += 1
            found.append(Command(" ".join(command.split()), comment.strip() and "# " + comment.strip(), tuple(shown)))
    return found


def matches(shown: tuple[str, ...], printed: list[str]) -> bool:
    """The shown lines in order; `  ...` stands for any lines, a line ending in ` ...` for its prefix."""
    position = 0
    for index, expected in enumerate(shown):
        if expected.strip() == "...":
            rest = shown[index + 1:]
            return any(matches(rest, printed[start:]) for start in range(position, len(printed) + 1))
        if position >= len(printed):
            return False
        line = printed[position]
        if not (line == expected or (expected.endswith(" ...") and line.startswith(expected[:-4]))):
            return False
        position += 1
    return position == len(printed)


README_COMMANDS = [c for document in DOCUMENTS for c in commands(document.read_text(encoding="utf-8"))]


def test_every_readme_command_is_run_here_or_says_where_it_is_covered() -> None:
    unknown = [c.line for c in README_COMMANDS if c.line not in RUN_HERE and c.line not in ELSEWHERE]
    assert unknown == [], "documented commands neither run by this test nor listed in ELSEWHERE"
    stale = sorted((set(ELSEWHERE) | RUN_HERE) - {c.line for c in README_COMMANDS})
    assert stale == [], "commands this test knows that neither the README nor the manual has any longer"


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_IMAGES_")}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.mark.parametrize("command", [c for c in README_COMMANDS if c.line in RUN_HERE], ids=lambda c: c.line)
def test_the_readme_command_runs_and_prints_what_the_readme_shows(command: Command) -> None:
    """Run in bash after the Quick start's `source .venv/bin/activate`, as a reader would."""
    host = HOSTS.get(command.comment)
    line = command.line + (f" --host-json {host}" if host else "")
    script = f"source .venv/bin/activate && {line}"
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=_environment())
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    if command.shown:
        printed = (done.stderr + done.stdout).splitlines()  # notes on stderr first, then the docker line
        assert matches(command.shown, printed), "\n".join(["documented:", *command.shown, "printed:", *printed])


@pytest.mark.parametrize("shown, printed, ok", [
    (("a", "  ...", "d"), ["a", "b", "c", "d"], True),
    (("a", "b ..."), ["a", "b and more"], True),
    (("a", "b"), ["a", "c"], False),
    (("a",), ["a", "extra"], False),
])
def test_shown_output_matching(shown: tuple[str, ...], printed: list[str], ok: bool) -> None:
    assert matches(shown, printed) is ok
