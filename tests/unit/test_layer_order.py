"""The layer order every rendered image follows, read from the checked-in Dockerfiles of all vendors.

A security update must change one small layer, the last: the bulk OS packages come from the
release suites only, and the OS updates are upgraded in the final stage's top layer
(templates/partials/apt.j2). What the real engine makes of it is tests/test_os_updates_layer.py
and the republish benchmark.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

IMAGES = Path(__file__).resolve().parents[2] / "images"
DOCKERFILES = sorted(IMAGES.glob("*/*/Dockerfile"))
LAYER_MAKING = ("RUN", "COPY", "ADD")
"""Instructions that add a filesystem layer; LABEL, ENV, USER, WORKDIR, ENTRYPOINT, CMD only configure."""
RELEASE_ONLY = "/etc/apt/preferences.d/accel-images-release-only"
PIN = ("printf 'Package: *\\nPin: release a=*-security\\nPin-Priority: -1\\n\\n"
       "Package: *\\nPin: release a=*-updates\\nPin-Priority: -1\\n'")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(keyword, rest) per instruction, continuation lines joined; comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    text = re.sub(r"apt-get(?: -o \S+)+", "apt-get", text)  # apt's own directories: partials/apt.j2, not the order
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest))
    return found


def final_stage(dockerfile: Path) -> list[tuple[str, str]]:
    """The steps of the stage the image is made of: the last one, or where a stage per platform follows
    it (`FROM image AS image-<arch>` ... `FROM image-${TARGETARCH}`: labels and environment only), the
    stage they are built on."""
    steps = instructions(dockerfile)
    froms = [i for i, (keyword, _) in enumerate(steps) if keyword == "FROM"]
    named = [i for i in froms if steps[i][1].endswith(" AS image")]
    start = named[-1] if named else froms[-1]
    end = next((i for i in froms if i > start), len(steps))
    return steps[start + 1:end]


def is_updates(rest: str) -> bool:
    return "apt-get -s upgrade" in rest and "--only-upgrade" in rest


def test_every_vendor_has_rendered_images() -> None:
    assert {path.parts[-3] for path in DOCKERFILES} == {"cpu", "cuda", "rocm", "xpu", "gaudi"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_the_os_updates_are_the_final_stages_last_layer_and_run_as_root(dockerfile: Path) -> None:
    stage = final_stage(dockerfile)
    layers = [(keyword, rest) for keyword, rest in stage if keyword in LAYER_MAKING]
    assert is_updates(layers[-1][1]), f"the last layer of the final stage is not the OS updates: {layers[-1]}"
    assert sum(is_updates(rest) for _, rest in instructions(dockerfile)) == 1
    updates_at = next(i for i, (keyword, rest) in enumerate(stage) if keyword == "RUN" and is_updates(rest))
    users = [rest for keyword, rest in stage[:updates_at] if keyword == "USER"]
    assert users in ([], ["0:0"]), f"the updates step would not run as root: USER {users}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_every_other_apt_install_takes_nothing_from_the_update_suites(dockerfile: Path) -> None:
    installs = [rest for keyword, rest in instructions(dockerfile)
                if keyword == "RUN" and "apt-get install" in rest and not is_updates(rest)]
    for rest in installs:
        pin, install, removal = rest.find(PIN), rest.find("apt-get install"), rest.rfind(f"rm -f {RELEASE_ONLY}")
        assert -1 < pin < install < removal, f"an apt step without the release-only pin around it: {rest[:200]}"
        assert rest.find(f"> {RELEASE_ONLY}") > pin, "the pin is not written to the preferences file"


@pytest.mark.parametrize("dockerfile", [p for p in DOCKERFILES if p.parts[-3] != "gaudi"],
                         ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_the_environment_comes_before_the_os_packages(dockerfile: Path) -> None:
    layers = [rest for keyword, rest in final_stage(dockerfile) if keyword in LAYER_MAKING]
    assert layers[0] == "--from=build /stage/ /", layers[0]
    assert any("apt-get install" in rest for rest in layers[1:-1])


FACTS_STEP = "-I -B /opt/accel-images/facts.py --out /opt/accel-images/facts.json --constraints /opt/accel-images/constraints.txt"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_the_final_stage_asks_its_own_torch_what_it_holds_before_the_updates(dockerfile: Path) -> None:
    """The facts step runs in the final stage (the image's python, its torch as installed there), as
    root, after the image's files brought facts.py, and just below the OS updates, so a security
    update still changes only the top layer (accel_images/smoke/facts.py; partials/common.j2 finish())."""
    stage = final_stage(dockerfile)
    layers = [(keyword, rest) for keyword, rest in stage if keyword in LAYER_MAKING]
    facts, updates = layers[-2], layers[-1]
    assert facts[0] == "RUN" and FACTS_STEP in " ".join(facts[1].split()), facts
    python = "python3" if dockerfile.parts[-3] == "gaudi" else "/opt/venv/bin/python"
    assert f"&& {python} -I -B /opt/accel-images/facts.py" in facts[1]
    assert layers[-3] == ("COPY", "--from=files /files/ /")
    assert is_updates(updates[1])
    assert sum("facts.py --out" in rest for _, rest in instructions(dockerfile)) == 1
    assert not any("constraints.txt" in rest and "facts.py" not in rest for keyword, rest in instructions(dockerfile)
                   if keyword == "RUN"), "the constraints come from the facts step alone"


@pytest.mark.parametrize("dockerfile", [p for p in DOCKERFILES if p.parts[-3] != "gaudi"],
                         ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_the_environment_is_group_writable_with_setgid_directories_not_world_writable(dockerfile: Path) -> None:
    # jupyter/docker-stacks images/docker-stacks-foundation/fix-permissions: `chmod g+rwX` and setgid
    # (with setuid, +6000) on directories; never 2777
    build = next(" ".join(rest.split()) for keyword, rest in instructions(dockerfile)
                 if keyword == "RUN" and "-m venv /opt/venv" in rest)
    assert ('&& chown -R "${USER_UID}:100" /opt/venv && chmod -R g+rwX /opt/venv'
            ' && find /opt/venv -type d -exec chmod 2775 {} +') in build
    assert "2777" not in dockerfile.read_text()
