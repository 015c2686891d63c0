"""ci-matrix and bake over the real matrix.yaml and the rendered images/ tree."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from accel_images.builder import fanout
from accel_images.cli import fanout as cli_fanout, options
from accel_images.errors import InputError
from accel_images.plan.variants import select

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.live_data   # the repository's matrix.yaml and images/ tree
MATRIX = str(ROOT / "matrix.yaml")


@pytest.fixture(scope="module")
def expansion():
    return options.load_expansion(MATRIX)


def invoke(command, *args: str):
    return CliRunner().invoke(command, ["--matrix", MATRIX, *args])


# ---------------------------------------------------------------------------------------------
# ci-matrix
# ---------------------------------------------------------------------------------------------

def test_one_matrix_entry_per_variant(expansion):
    matrix = fanout.ci_matrix(expansion.variants, expansion.image)
    assert list(matrix) == ["include"]
    assert [e["variant"] for e in matrix["include"]] == [v.key for v in expansion.variants]
    first = matrix["include"][0]
    assert first["image"] == f"accel-images/pytorch:{first['tag']}"
    assert first["context"] == f"images/{first['vendor']}/{first['tag']}"


@pytest.mark.parametrize("vendor, runner, gpu_runner", [
    ("cpu", ["ubuntu-latest"], []),
    ("cuda", ["self-hosted", "linux", "x64", "gpu-nvidia"], ["self-hosted", "linux", "x64", "gpu-nvidia"]),
    ("rocm", ["self-hosted", "linux", "x64", "gpu-amd"], ["self-hosted", "linux", "x64", "gpu-amd"]),
    ("xpu", ["self-hosted", "linux", "x64", "gpu-intel"], ["self-hosted", "linux", "x64", "gpu-intel"]),
    ("gaudi", ["self-hosted", "linux", "x64", "gaudi"], ["self-hosted", "linux", "x64", "gaudi"]),
])
def test_runner_labels_per_vendor(expansion, vendor, runner, gpu_runner):
    chosen = select(expansion.variants, {"vendor": vendor, "platform": "linux/amd64"})
    entries = fanout.ci_matrix(chosen, expansion.image)["include"]
    assert entries
    for entry in entries:
        assert (entry["runner"], entry["gpu_runner"], entry["accelerator"]) == (runner, gpu_runner, bool(gpu_runner))


@pytest.mark.parametrize("vendor, runner, accelerator", [
    ("cpu", ["ubuntu-24.04-arm"], False),                                   # GitHub's hosted arm64 runner
    ("cuda", ["self-hosted", "linux", "ARM64", "gpu-nvidia"], True),        # a Grace machine's GPU runner
])
def test_arm64_jobs_run_on_an_arm64_runner_and_smoke_on_its_gpu(expansion, vendor, runner, accelerator):
    entries = fanout.ci_matrix(select(expansion.variants, {"vendor": vendor, "platform": "linux/arm64"}),
                               expansion.image)["include"]
    assert entries
    for entry in entries:
        assert (entry["runner"], entry["accelerator"], entry["platform"]) == (runner, accelerator, "linux/arm64")
        assert entry["gpu_runner"] == (runner if accelerator else [])
        assert "--platform linux/arm64" in entry["filters"] and entry["job"] == entry["tag"] + "-arm64"


def test_vendors_without_arm64_builds_have_no_arm64_jobs(expansion):
    entries = fanout.ci_matrix(expansion.variants, expansion.image)["include"]
    assert {entry["vendor"] for entry in entries if entry["platform"] == "linux/arm64"} == {"cpu", "cuda"}


def test_every_context_is_a_rendered_directory(expansion):
    for entry in fanout.ci_matrix(expansion.variants, expansion.image)["include"]:
        assert (ROOT / entry["context"] / "Dockerfile").is_file(), entry["context"]


def test_filters_select_exactly_their_variant(expansion):
    for entry in fanout.ci_matrix(expansion.variants, expansion.image)["include"]:
        words = shlex.split(entry["filters"])
        filters = dict(zip((w.removeprefix("--") for w in words[::2]), words[1::2], strict=True))
        chosen = select(expansion.variants, filters)
        assert [v.key for v in chosen] == [entry["variant"]], entry["filters"]


def test_cpu_filters_carry_no_stack(expansion):
    cpu = select(expansion.variants, {"vendor": "cpu"})[0]
    assert "--stack" not in fanout.cli_filters(cpu)


def test_more_than_github_allows_is_an_input_error(expansion):
    many = [dataclasses.replace(expansion.variants[0], python=f"3.{i}") for i in range(fanout.MAX_MATRIX_JOBS + 1)]
    with pytest.raises(InputError, match="257 variants exceed"):
        fanout.ci_matrix(many, expansion.image)
    assert len(fanout.ci_matrix(many[:-1], expansion.image)["include"]) == fanout.MAX_MATRIX_JOBS


def test_ci_matrix_command_prints_one_line_of_json(expansion):
    result = invoke(cli_fanout.ci_matrix_command)
    assert result.exit_code == 0, result.output
    assert result.output.count("\n") == 1 and result.output.endswith("\n")
    assert json.loads(result.output) == fanout.ci_matrix(expansion.variants, expansion.image)


def test_ci_matrix_command_filters():
    result = invoke(cli_fanout.ci_matrix_command, "--vendor", "rocm", "--torch", "2.14")
    assert result.exit_code == 0, result.output
    assert [e["tag"] for e in json.loads(result.output)["include"]] == [
        "2.14.1-rocm7.14-py3.12-ubuntu24.04", "2.14.1-rocm7.14-py3.12-ubuntu24.04-devel"]


def test_ci_matrix_command_explains_an_empty_selection():
    result = invoke(cli_fanout.ci_matrix_command, "--vendor", "tpu")
    assert result.exit_code == 2
    assert result.output.startswith("accel-images: error:") and "--vendor" in result.output


# ---------------------------------------------------------------------------------------------
# bake
# ---------------------------------------------------------------------------------------------

def test_bake_targets_and_groups(expansion):
    definition = fanout.bake(expansion.variants, expansion, "ghcr.io/acme")
    targets = definition["target"]
    assert definition["group"]["default"]["targets"] == list(targets)
    assert len(targets) == len({v.tag for v in expansion.variants})  # one target per tag, whatever its platforms
    for name in targets:
        assert re.fullmatch(r"[a-zA-Z0-9_-]+", name), name
    by_vendor = {vendor: group["targets"] for vendor, group in definition["group"].items() if vendor != "default"}
    assert set(by_vendor) == {"cpu", "cuda", "rocm", "xpu", "gaudi"}
    assert sorted(n for names in by_vendor.values() for n in names) == sorted(targets)


def test_bake_target_contents(expansion):
    variant = select(expansion.variants, {"vendor": "cuda", "stack": "13.2", "torch": "2.14", "flavor": "runtime"})[0]
    target = fanout.bake([variant], expansion, "ghcr.io/acme")["target"]["2_14_1-cuda13_2-py3_12-ubuntu24_04"]
    assert target["context"] == "images/cuda/2.14.1-cuda13.2-py3.12-ubuntu24.04"
    assert target["dockerfile"] == "Dockerfile"
    assert (ROOT / target["context"] / target["dockerfile"]).is_file()
    assert target["tags"][0] == "ghcr.io/acme/accel-images/pytorch:2.14.1-cuda13.2-py3.12-ubuntu24.04"
    assert set(target["tags"][1:]) == {f"ghcr.io/acme/accel-images/pytorch:{alias}"
                                       for alias in ("2.14-cuda", "2.14-cuda13.2")}  # latest-cuda is 2.15's
    assert target["labels"] == variant.labels()
    assert target["labels"]["io.accel-images.min-driver"] == "595.58.03"
    assert target["args"] == {"USER_NAME": "dev", "USER_UID": "1000", "USER_GID": "1000"}
    assert target["platforms"] == ["linux/amd64"]  # CUDA 13.2 aarch64 wheels of torch 2.14 are unverified


def test_a_multi_platform_target_builds_one_index_from_one_dockerfile(expansion):
    """The platforms of the tag's index, and only the labels every platform shares: the GPU
    architectures differ (the Dockerfile's platform stages set them; BuildKit sets TARGETARCH)."""
    variants = select(expansion.variants, {"vendor": "cuda", "stack": "13.0", "torch": "2.14", "flavor": "runtime",
                                           "python": "3.12"})
    assert {v.platform for v in variants} == {"linux/amd64", "linux/arm64"}
    target = fanout.bake(variants, expansion)["target"]["2_14_1-cuda13_0-py3_12-ubuntu24_04"]
    assert target["platforms"] == ["linux/amd64", "linux/arm64"]
    assert "io.accel-images.gpu-archs" not in target["labels"]
    assert target["labels"]["io.accel-images.stack"] == "13.0"
    assert "TARGETARCH" not in target["args"]
    dockerfile = (ROOT / target["context"] / "Dockerfile").read_text()
    assert "FROM image-${TARGETARCH}" in dockerfile and 'gpu-archs="8.0,9.0,10.0,11.0,12.0"' in dockerfile


def test_aliases_come_from_the_whole_matrix_not_the_selection(expansion):
    older = select(expansion.variants, {"vendor": "cuda", "torch": "2.13", "stack": "13.2", "flavor": "runtime"})
    tags = fanout.bake(older, expansion)["target"]["2_13_0-cuda13_2-py3_12-ubuntu24_04"]["tags"]
    assert "accel-images/pytorch:2.13-cuda13.2" in tags
    assert not any(t.endswith(":latest-cuda") for t in tags)  # 2.14 wears it, though it is not selected


def test_colliding_target_names_are_refused(expansion):
    variant = expansion.variants[0]
    twin = dataclasses.replace(variant, python=variant.python.replace(".", "_"))  # another tag, the same name
    with pytest.raises(InputError, match="share the bake target name"):
        fanout.bake([variant, twin], expansion)


def test_bake_command_writes_the_file(tmp_path, expansion):
    out = tmp_path / "docker-bake.json"
    result = invoke(cli_fanout.bake_command, "--vendor", "gaudi", "--registry", "127.0.0.1:5000", "--out", str(out))
    assert result.exit_code == 0, result.output
    definition = json.loads(out.read_text())
    assert definition == fanout.bake(select(expansion.variants, {"vendor": "gaudi"}), expansion, "127.0.0.1:5000")
    assert definition["group"]["default"]["targets"] == [
        "2_11_0-gaudi1_24_1-py3_12-ubuntu24_04-devel", "2_11_0-gaudi1_24_1-py3_10-ubuntu22_04-devel",
        "2_10_0-gaudi1_24_0-py3_12-ubuntu24_04-devel", "2_10_0-gaudi1_24_0-py3_10-ubuntu22_04-devel"]


def test_bake_command_defaults_to_stdout(expansion):
    result = invoke(cli_fanout.bake_command, "--vendor", "xpu")
    assert result.exit_code == 0, result.output
    tags = [t for target in json.loads(result.output)["target"].values() for t in target["tags"]]
    assert "accel-images/pytorch:latest-xpu" in tags


def test_bake_command_unwritable_out_is_one_line(tmp_path):
    result = invoke(cli_fanout.bake_command, "--out", str(tmp_path / "missing" / "docker-bake.json"))
    assert result.exit_code == 2
    assert result.output.startswith("accel-images: error: --out: cannot write")
