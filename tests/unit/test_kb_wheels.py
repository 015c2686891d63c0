"""The wheel tags a machine and glibc accept (accel_images.kb.wheels: the one list `kb wheel-tags` and the
run's host fetch use) and the arm64 torch path, as far as no engine is needed: the tags an aarch64 image installs, the
pins of the package index's aarch64 torch wheels, and the knowledge base's arm64 CUDA facts, against
metadata recorded from the index (tests/data/wheels, README there says how it was read).

The real arm64 torch is tests/integration/test_arm64_torch.py (marker `network`: it downloads the
3 GB closure and runs it under emulation).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

from accel_images.cli import main
from accel_images.kb import compat
from accel_images.errors import InputError
from accel_images.kb.wheels import machine_of, manylinux_tags, pip_platform_args, platform_tags

DATA = Path(__file__).resolve().parents[1] / "data" / "wheels"
WHEELS = json.loads((DATA / "torch-wheels.json").read_text())
NCCL = json.loads((DATA / "nvidia-nccl-cu13-files.json").read_text())
CLOSURE = [line.split()[1] for line in (DATA / "torch-2.15.0-aarch64-cp311-closure.txt").read_text().splitlines()]
NARROW = ("manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux2014_aarch64")
"""The --platform list a first attempt at the closure used: it misses NCCL's and cupti's tags."""


def installs(filename: str, platforms: tuple[str, ...], python: tuple[int, int] = (3, 11)) -> bool:
    """Whether pip on that platform and CPython accepts the wheel (packaging's own tag logic)."""
    accepted: set[Tag] = set(cpython_tags(python, platforms=platforms))
    accepted |= set(compatible_tags(python, platforms=(*platforms, "any")))
    return bool(parse_wheel_filename(filename)[3] & accepted)


def pins(requires: list[str]) -> dict[str, str]:
    """`name==version` requirements for Linux (extras' requirements left out)."""
    found = {}
    for requirement in requires:
        if "extra ==" in requirement:
            continue
        match = re.match(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?==([^;\s]+)", requirement)
        if match:
            found[match.group(1)] = match.group(3)
    return found


def test_the_tags_are_those_pip_accepts_on_that_machine_and_glibc_in_its_order() -> None:
    """packaging.tags (_manylinux.platform_tags, as pip 23.2 vendors it): manylinux_2_<minor> from the
    glibc's down to 2_5 on x86_64 (2_17 elsewhere), each legacy alias right after its manylinux_2_X
    (PEP 600), then linux_<machine>; tests/integration/test_infra.py too."""
    x86_64 = manylinux_tags("x86_64", "2.36")
    assert x86_64[:2] == ("manylinux_2_36_x86_64", "manylinux_2_35_x86_64") and len(x86_64) == 32 + 3 + 1
    assert x86_64[x86_64.index("manylinux_2_17_x86_64") + 1] == "manylinux2014_x86_64"
    assert x86_64[x86_64.index("manylinux_2_12_x86_64") + 1] == "manylinux2010_x86_64"
    assert x86_64[-3:] == ("manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64")
    assert "manylinux_2_4_x86_64" not in x86_64
    aarch64 = manylinux_tags("aarch64", "2.39")
    assert aarch64[0] == "manylinux_2_39_aarch64" and len(aarch64) == 23 + 1 + 1
    assert aarch64[-3:] == ("manylinux_2_17_aarch64", "manylinux2014_aarch64", "linux_aarch64")
    assert not [tag for tag in aarch64 if tag.startswith(("manylinux2010", "manylinux1_"))]  # x86 only (PEP 571, 513)
    for glibc in ("2", "x.36", "3.1"):
        with pytest.raises(InputError, match="glibc"):
            manylinux_tags("aarch64", glibc)


def test_debian12_on_aarch64_accepts_every_manylinux_tag_down_to_2014() -> None:
    tags = platform_tags(compat.load_kb(), "linux/arm64", "debian12")   # glibc 2.36
    assert tags == manylinux_tags("aarch64", "2.36")
    assert tags[0] == "manylinux_2_36_aarch64" and tags[-3:] == (
        "manylinux_2_17_aarch64", "manylinux2014_aarch64", "linux_aarch64")
    assert pip_platform_args(("manylinux_2_17_aarch64",)) == ["--platform", "manylinux_2_17_aarch64",
                                                                "--platform", "any"]


@pytest.mark.parametrize("architecture,machine", [("arm64", "aarch64"), ("amd64", "x86_64"), ("aarch64", "aarch64"),
                                                  ("ppc64le", "ppc64le")])
def test_an_images_architecture_is_the_machine_its_wheel_tags_name(architecture: str, machine: str) -> None:
    assert machine_of(compat.load_kb(), architecture) == machine


def test_the_whole_aarch64_closure_of_torch_2_15_installs_with_those_tags_and_not_with_the_narrow_list() -> None:
    """What pip downloaded for torch 2.15.0 on aarch64, CPython 3.11: every file installs on Debian 12
    with the knowledge base's tags; the narrow list misses exactly NCCL 2.30.7 (manylinux_2_18 only)
    and cupti 13.2.86 (manylinux_2_25 only), the two pip stopped at."""
    tags = platform_tags(compat.load_kb(), "linux/arm64", "debian12")
    assert len(CLOSURE) == 29 and all(installs(name, tags) for name in CLOSURE)
    missed = sorted(name for name in CLOSURE if not installs(name, NARROW))
    assert missed == ["nvidia_cuda_cupti-13.2.86-py3-none-manylinux_2_25_aarch64.whl",
                      "nvidia_nccl_cu13-2.30.7-py3-none-manylinux_2_18_aarch64.whl"]


def test_the_nccl_torch_2_15_pins_has_an_aarch64_wheel_of_one_tag_only() -> None:
    aarch64 = WHEELS["torch-2.15.0-cp311-cp311-manylinux_2_28_aarch64.whl"]
    pinned = pins(aarch64["Requires-Dist"])
    assert pinned["nvidia-nccl-cu13"] == "2.30.7" and pinned["cuda-toolkit"] == "13.2.2"
    [wheel] = [name for name in NCCL[pinned["nvidia-nccl-cu13"]] if "aarch64" in name]
    assert wheel.endswith("manylinux_2_18_aarch64.whl")
    assert installs(wheel, platform_tags(compat.load_kb(), "linux/arm64", "ubuntu24.04"), (3, 12))
    assert not installs(wheel, NARROW)


@pytest.mark.parametrize("version", ["2.13.0", "2.14.0", "2.14.1", "2.15.0"])
def test_aarch64_and_x86_64_wheels_pin_the_same_cuda_family(version: str) -> None:
    """The same Requires-Dist on both platforms: one toolkit per torch release, whatever the CPU."""
    arm, x86 = (WHEELS[f"torch-{version}-cp311-cp311-manylinux_2_28_{arch}.whl"] for arch in ("aarch64", "x86_64"))
    assert arm["Requires-Dist"] == x86["Requires-Dist"]
    assert pins(arm["Requires-Dist"])["cuda-toolkit"] == {"2.15.0": "13.2.2"}.get(version, "13.0.3")
    assert arm["Requires-Python"] == (">=3.11" if version.startswith("2.15") else ">=3.10")


@pytest.mark.parametrize("version", ["2.13.0", "2.14.0", "2.14.1", "2.15.0"])
def test_the_knowledge_bases_arm64_cuda_facts_are_the_wheels(version: str) -> None:
    """data/vendors/cuda.yaml's linux/arm64 builds and architectures are what the index's aarch64
    wheels hold: their CUDA (version.py) and their SASS list (no sm_75/sm_86, sm_110 added)."""
    kb = compat.load_kb()
    recorded = WHEELS[f"torch-{version}-cp311-cp311-manylinux_2_28_aarch64.whl"]
    cuda = recorded["version.py"]["cuda"]
    minor = ".".join(version.split(".")[:2])
    assert kb.why_not_on("linux/arm64", "cuda", cuda, minor, "3.12", "ubuntu24.04", "runtime") == []
    [listed] = recorded["arch_list"]
    expected = tuple(f"{int(sm[3:-1])}.{sm[-1]}" for sm in listed.split())
    facts = kb.facts("cuda")
    assert facts.archs_on("linux/arm64", minor, cuda) == expected == ("8.0", "9.0", "10.0", "11.0", "12.0")
    x86 = WHEELS[f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"]["arch_list"][0]
    assert "sm_75" in x86 and "sm_110" not in x86


def test_the_command_prints_the_pip_arguments_and_refuses_what_it_does_not_know() -> None:
    done = CliRunner().invoke(main, ["kb", "wheel-tags", "--platform", "linux/arm64", "--os", "debian12"])
    assert done.exit_code == 0 and done.stdout.split()[:2] == ["--platform", "manylinux_2_36_aarch64"]
    assert done.stdout.split()[-2:] == ["--platform", "any"]
    refused = CliRunner().invoke(main, ["kb", "wheel-tags", "--platform", "linux/s390x", "--os", "debian12"])
    assert refused.exit_code == 2 and "unknown platform 'linux/s390x'" in refused.stderr
