"""The `accel-images` commands compat, list and render, as a user runs them.

Most tests drive the click command in-process (CliRunner, stdout and stderr apart); a few run
the installed `.venv/bin/accel-images` to prove no traceback reaches a real terminal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from accel_images.cli import main

REPO = Path(__file__).resolve().parents[2]
MATRICES = Path(__file__).resolve().parents[1] / "matrices"
SMALL = str(MATRICES / "small.yaml")
EXECUTABLE = Path(sys.executable).with_name("accel-images")


@pytest.fixture(autouse=True)
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands read matrix.yaml and images/ relative to the working directory."""
    monkeypatch.chdir(REPO)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def one_error_line(result: Result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("accel-images: error: ")
    assert "Traceback" not in result.output
    return lines[0]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- compat -------------------------------------------------------------------------------------

def test_compat_compatible_with_details() -> None:
    result = run("compat", "torch==2.4.1", "cuda==12.4")
    assert result.exit_code == 0
    assert result.stdout.startswith("compatible: torch==2.4.1 cuda==12.4")
    fields = dict(line.strip().split(": ", 1) for line in result.stdout.splitlines()[1:])
    assert {key: value.strip() for key, value in fields.items()} == {
        "torch": "2.4.1", "python": "3.8, 3.9, 3.10, 3.11, 3.12", "CUDA": "12.4", "toolkit": "12.4.0",
        "wheel index": "cu124", "minimum driver": "550.54.14", "minor-version floor": "525.60.13",
        "GPU architectures": "not recorded in the knowledge base (its sources do not state them)",
        "source": "https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix"}


@pytest.mark.parametrize("terms", [["torch==2.4.1", "cuda==12.4"], ["torch==2.14", "cuda==13.0"],
                                   ["torch==2.14", "rocm==7.14"], ["torch==2.14", "xpu==2026.1"],
                                   ["torch==2.14", "cpu"]])
def test_compat_text_says_what_its_json_says(terms: list[str]) -> None:
    """Every field of the JSON answer is a line of the text, with the same value; the GPU
    architectures the README promises are a line for CUDA and ROCm, said unknown when unknown."""
    from accel_images.cli.compat import NOT_RECORDED, detail_labels
    answer = json.loads(run("compat", *terms, "--json").stdout)
    text = run("compat", *terms).stdout
    fields = {k.strip(): v.strip() for k, v in (line.split(": ", 1) for line in text.splitlines()[1:])}
    labels = detail_labels()
    shown = {key: answer[key] for key in labels if key in answer}
    assert {labels[key]: NOT_RECORDED if value is None else ", ".join(value) if isinstance(value, list)
            else value for key, value in shown.items()} == fields
    assert ("GPU architectures" in fields) == terms[-1].startswith(("cuda", "rocm"))


def test_compat_with_python() -> None:
    result = run("compat", "torch==2.4.1", "cuda==12.4", "python==3.11")
    assert result.exit_code == 0 and result.stdout.startswith("compatible")


def test_compat_impossible_is_one_line_with_the_alternative() -> None:
    result = run("compat", "torch==2.1", "rocm==6.2")
    assert result.exit_code == 1
    assert result.stderr == ""
    (line,) = result.stdout.splitlines()
    assert line.startswith("incompatible: torch==2.1 rocm==6.2: torch 2.1 has no ROCm 6.2 build")
    assert "ROCm builds: 5.6" in line


@pytest.mark.parametrize("terms, fragment", [
    (["torch==2.8", "cuda==11.8"], "CUDA builds: 12.6, 12.8, 12.9"),
    (["torch==2.4", "xpu==2025.0"], "+xpu binaries start with 2.5"),
    (["torch==2.14", "gaudi==1.24.1"], "bundles torch 2.11.0"),
    (["torch==2.9", "cuda==12.6", "python==3.9"], "supports Python 3.10-3.14"),
    (["torch==2.14", "cuda==13.2", "python==3.15"], "--experimental-python"),
])
def test_compat_other_impossible_answers(terms: list[str], fragment: str) -> None:
    result = run("compat", *terms)
    assert result.exit_code == 1
    (line,) = result.stdout.splitlines()
    assert fragment in line


@pytest.mark.parametrize("terms, fragment", [
    (["torch==3.0"], "torch 3.0 is unknown to the knowledge base of 20"),
    (["torch==2.99", "cuda==13.0"], "torch 2.99 is unknown to the knowledge base of 20"),
])
def test_compat_unknown_is_not_incompatible(terms: list[str], fragment: str) -> None:
    """Unknown gets its own answer and exit code (5), naming the knowledge base's date."""
    result = run("compat", *terms)
    assert result.exit_code == 5
    (line,) = result.stdout.splitlines()
    assert line.startswith("unknown: ") and fragment in line
    answer = json.loads(run("compat", *terms, "--json").stdout)
    assert (answer["compatible"], answer["unknown"]) == (False, True)


def test_compat_experimental_python_flag() -> None:
    assert run("compat", "torch==2.14", "cuda==13.2", "python==3.15", "--experimental-python").exit_code == 0


def test_compat_torch_only_lists_every_stack() -> None:
    result = run("compat", "torch==2.4.1")
    assert result.exit_code == 0
    assert "cpu: cpu; cuda: 11.8, 12.1, 12.4; rocm: 6.1; xpu: none; gaudi: none" in result.stdout
    assert "source: https://" in result.stdout


def test_compat_stack_only_lists_torch_versions() -> None:
    result = run("compat", "cuda==12.4")
    assert result.exit_code == 0
    assert result.stdout.strip() == "cuda==12.4: torch 2.4, 2.5, 2.6"
    assert run("compat", "rocm==7.14").stdout.strip() == "rocm==7.14: torch 2.14"
    assert run("compat", "gaudi==1.24.1").stdout.strip() == "gaudi==1.24.1: torch 2.11.0"
    assert run("compat", "xpu==2025.3").stdout.strip() == "xpu==2025.3: torch 2.10, 2.11, 2.12"


def test_compat_json() -> None:
    good = run("compat", "torch==2.14", "cuda==13.2", "--json")
    assert good.exit_code == 0
    answer = json.loads(good.stdout)
    assert answer["compatible"] is True and answer["reasons"] == []
    assert (answer["wheel_index"], answer["driver_min"], answer["mvc_floor"]) == ("cu132", "595.58.03", "580")
    bad = run("compat", "torch==2.1", "rocm==6.2", "--json")
    assert bad.exit_code == 1
    answer = json.loads(bad.stdout)
    assert answer["compatible"] is False and answer["query"] == {"torch": "2.1", "rocm": "6.2"}
    assert answer["alternatives"]["stacks"] == ["5.6"]
    listing = json.loads(run("compat", "torch==2.14", "--json").stdout)
    assert listing["builds"]["rocm"] == ["7.14"] and listing["builds"]["xpu"] == ["2026.1"]


@pytest.mark.parametrize("terms, field", [
    (["tensorflow==2.14"], "tensorflow"),
    (["torch==2.x"], "torch"),
    (["cuda==12.4;id"], "cuda"),
    (["torch=2.4"], "torch=2.4"),
    (["torch==2.4", "cuda==12.4", "rocm==6.1"], "rocm"),
    ([], None),
])
def test_compat_malformed_query_exits_2(terms: list[str], field: str | None) -> None:
    result = run("compat", *terms)
    assert result.exit_code == 2
    line = one_error_line(result)
    if field:
        assert line.startswith(f"accel-images: error: {field}: ")
    assert result.stdout == ""


# -- list ------------------------------------------------------------------------------------------

def test_list_json_of_the_published_matrix() -> None:
    result = run("list", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)["variants"]
    assert len(rows) >= 20
    assert {r["vendor"] for r in rows} == {"cpu", "cuda", "rocm", "xpu", "gaudi"}
    for row in rows:
        assert {"vendor", "stack", "torch", "python", "os", "flavor", "tag", "base_image"} <= set(row)
    debian = [r for r in rows if (r["vendor"], r["torch"], r["python"], r["os"]) == ("cpu", "2.13.0", "3.11", "debian12")]
    assert [(r["base_image"], r["platform"]) for r in debian] == [("debian:bookworm-slim", "linux/amd64"),
                                                                  ("debian:bookworm-slim", "linux/arm64")]
    assert {r["platforms"] == ["linux/amd64", "linux/arm64"] for r in debian} == {True}


def test_list_json_has_arm64_images_for_cpu_and_cuda_only_and_explains_the_rest() -> None:
    """One tag, one index: arm64 variants for CPU and CUDA (SBSA); ROCm, Intel XPU and Gaudi publish
    none, and `--explain` says so for every combination it pruned on arm64."""
    document = json.loads(run("list", "--json", "--explain").stdout)
    arm64 = {r["vendor"] for r in document["variants"] if r["platform"] == "linux/arm64"}
    assert arm64 == {"cpu", "cuda"}
    reasons = {r["vendor"]: r["reasons"][0] for r in document["pruned"] if r["platform"] == "linux/arm64"}
    assert reasons["rocm"].startswith("AMD ROCm images are amd64 only: ")
    assert reasons["xpu"].startswith("Intel XPU images are amd64 only: ")
    assert reasons["gaudi"].startswith("Intel Gaudi images are amd64 only: ")
    cuda_arm64 = [r for r in document["variants"] if r["vendor"] == "cuda" and r["platform"] == "linux/arm64"]
    assert {tuple(r["gpu_archs"]) for r in cuda_arm64} == {("8.0", "9.0", "10.0", "11.0", "12.0")}  # sbsa list
    explained = run("list", "--explain", "--vendor", "rocm").stdout
    assert "linux/arm64: AMD ROCm images are amd64 only" in explained
    assert "no cluster flavor: every GPU image carries the multi-node stack" in " ".join(explained.split())


def test_list_table() -> None:
    result = run("list", "--matrix", SMALL)
    assert result.exit_code == 0
    assert "2.14.1-cuda13.2-py3.12-ubuntu24.04-devel" in result.stdout
    assert "nvidia/cuda:13.2.1-devel-ubuntu24.04" in result.stdout
    assert "13 variants, 3 combinations pruned (--explain shows why)" in result.stdout


@pytest.mark.parametrize("args, tags", [
    (["--vendor", "rocm"], ["2.14.1-rocm7.14-py3.12-ubuntu24.04", "2.13.0-rocm7.2-py3.12-ubuntu24.04"]),
    (["--vendor", "cpu", "--torch", "2.13"], ["2.13.0-cpu-py3.11-debian12"]),
    (["--python", "3.10"], ["2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel"]),
    (["--vendor", "cuda", "--stack", "12.6", "--flavor", "devel"], ["2.14.1-cuda12.6-py3.12-ubuntu24.04-devel"]),
    (["--os", "debian12", "--torch", "2.14"], ["2.14.1-cpu-py3.11-debian12", "2.14.1-cpu-py3.11-debian12-devel"]),
])
def test_list_filters(args: list[str], tags: list[str]) -> None:
    result = run("list", "--matrix", SMALL, "--json", *args)
    assert result.exit_code == 0, result.output
    assert [r["tag"] for r in json.loads(result.stdout)["variants"]] == tags


def test_list_explain_shows_pruned_with_reasons() -> None:
    result = run("list", "--matrix", SMALL, "--explain")
    assert result.exit_code == 0
    pruned = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("pruned")]
    assert len(pruned) == 3
    assert ("pruned (matrix line 24): rocm 7.14 torch 2.13 py3.12 ubuntu24.04 runtime: "
            "torch 2.13 has no ROCm 7.14 build; ROCm builds: 7.2 (torch with ROCm 7.14: 2.14)") in pruned


def test_list_explain_of_the_published_matrix_names_rocm_7_14() -> None:
    result = run("list", "--explain")
    assert result.exit_code == 0
    assert "rocm 7.14 torch 2.13" in result.stdout and "has no ROCm 7.14 build" in result.stdout


def test_list_explain_json() -> None:
    answer = json.loads(run("list", "--matrix", SMALL, "--explain", "--json").stdout)
    assert len(answer["variants"]) == 13
    assert {(p["vendor"], p["stack"], p["torch"]) for p in answer["pruned"]} == {
        ("rocm", "7.14", "2.13"), ("rocm", "7.2", "2.14"), ("gaudi", "1.23.0", "2.11")}
    assert all(p["reasons"] and p["line"] for p in answer["pruned"])


def test_list_filter_matching_nothing_exits_2_naming_the_filter() -> None:
    result = run("list", "--matrix", SMALL, "--vendor", "rocm", "--torch", "2.12")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith("accel-images: error: --torch: no variant in the matrix matches --vendor rocm --torch 2.12")
    assert result.stdout == ""


def test_list_filter_matching_only_pruned_exits_1_with_the_reason() -> None:
    result = run("list", "--matrix", SMALL, "--vendor", "rocm", "--stack", "7.14", "--torch", "2.13")
    assert result.exit_code == 1
    assert "torch 2.13 has no ROCm 7.14 build" in one_error_line(result)


@pytest.mark.parametrize("value", ["cpu;id", "cpu gpu", "", "$(id)"])
def test_list_rejects_odd_filter_values(value: str) -> None:
    result = run("list", "--vendor", value)
    assert result.exit_code == 2
    assert "--vendor" in one_error_line(result)


def test_missing_matrix_file_exits_2() -> None:
    result = run("list", "--matrix", "no-such-matrix.yaml")
    assert result.exit_code == 2
    assert one_error_line(result) == "accel-images: error: no-such-matrix.yaml: matrix file not found"


def test_every_command_with_filters_takes_matrix() -> None:
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        options = {opt for param in command.params if isinstance(param, click.Option) for opt in param.opts}
        if "--vendor" in options:
            assert "--matrix" in options, name
    assert {"compat", "list", "render"} <= set(main.list_commands(ctx))


# -- render ------------------------------------------------------------------------------------------

@pytest.mark.live_data
def test_render_check_passes_on_the_repository() -> None:
    result = run("render", "--check")
    assert result.exit_code == 0, result.output
    assert "is up to date" in result.stderr and result.stdout == ""


@pytest.mark.live_data
def test_render_matches_images_and_is_byte_identical_on_every_run(tmp_path: Path) -> None:
    out = tmp_path / "images"
    first = run("render", "--out", str(out))
    assert first.exit_code == 0, first.output
    rendered = tree(out)
    assert rendered == tree(REPO / "images")
    second = run("render", "--out", str(out))
    assert second.exit_code == 0
    assert "(0 file(s) changed)" in second.stderr and second.stdout == ""
    assert tree(out) == rendered


def test_render_check_lists_modified_extra_and_deleted_files(tmp_path: Path) -> None:
    out = tmp_path / "images"
    assert run("render", "--matrix", SMALL, "--out", str(out)).exit_code == 0
    assert run("render", "--matrix", SMALL, "--out", str(out), "--check").exit_code == 0
    modified = out / "cuda" / "2.14.1-cuda13.2-py3.12-ubuntu24.04" / "Dockerfile"
    modified.write_text(modified.read_text().replace("torch==2.14.1", "torch==2.13.0"))
    extra = out / "cpu" / "2.14.1-cpu-py3.11-debian12" / "leftover.txt"
    extra.write_text("x\n")
    deleted = out / "gaudi" / "2.11.0-gaudi1.24.1-py3.10-ubuntu22.04-devel" / "smoke.py"
    deleted.unlink()
    before = tree(out)
    result = run("render", "--matrix", SMALL, "--out", str(out), "--check")
    assert result.exit_code == 1
    stale = sorted(line.removeprefix("stale: ") for line in result.stderr.splitlines() if line.startswith("stale: "))
    assert stale == sorted(str(p) for p in (modified, extra, deleted))
    assert "3 file(s)" in result.stderr
    assert tree(out) == before, "--check writes nothing"
    assert run("render", "--matrix", SMALL, "--out", str(out)).exit_code == 0
    assert run("render", "--matrix", SMALL, "--out", str(out), "--check").exit_code == 0
    assert not extra.exists() and deleted.exists()


def test_render_check_on_a_missing_directory_is_stale(tmp_path: Path) -> None:
    result = run("render", "--matrix", SMALL, "--out", str(tmp_path / "nothing"), "--check")
    assert result.exit_code == 1
    assert not (tmp_path / "nothing").exists()


@pytest.mark.parametrize("args", [["--registry-mirror", "docker.io=127.0.0.1:5000"],
                                  ["--pip-index-url", "http://127.0.0.1:8080/{index}"],
                                  ["--vendor", "cpu", "--pip-index-url", "http://127.0.0.1:8080/{index}"]])
def test_render_refuses_a_mirrored_images_dir(args: list[str]) -> None:
    before = tree(REPO / "images")
    result = run("render", *args)
    assert result.exit_code == 2
    assert "--out" in one_error_line(result)
    assert tree(REPO / "images") == before


def test_render_with_filters_and_no_out_writes_those_variants_into_images(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`render --vendor cpu` writes where `render` always writes: the chosen variants' directories of
    images/, rewritten whole; every other directory there is left as it was."""
    monkeypatch.chdir(tmp_path)
    assert run("render", "--matrix", SMALL).exit_code == 0
    full = tree(tmp_path / "images")
    cpu_file = next(path for path in full if path.startswith("cpu/") and path.endswith("/guard.sh"))
    cuda_file = next(path for path in full if path.startswith("cuda/") and path.endswith("/Dockerfile"))
    (tmp_path / "images" / cpu_file).write_text("edited\n")
    (tmp_path / "images" / cuda_file).write_text("edited\n")
    (tmp_path / "images" / cpu_file).with_name("leftover.txt").write_text("x\n")
    result = run("render", "--matrix", SMALL, "--vendor", "cpu")
    assert result.exit_code == 0, result.output
    cpu_count = len({path.split("/")[1] for path in full if path.startswith("cpu/")})
    assert result.stderr == f"rendered {cpu_count} variants into images (2 file(s) changed)\n"
    after = tree(tmp_path / "images")
    assert after == {**full, cuda_file: b"edited\n"}, "the cpu directories rendered afresh, the cuda one untouched"
    checked = run("render", "--matrix", SMALL, "--vendor", "cpu", "--check")
    assert checked.exit_code == 0 and "is up to date" in checked.stderr, checked.output
    assert run("render", "--matrix", SMALL, "--check").exit_code == 1  # the whole tree: the cuda edit is stale


def test_render_with_mirror_and_index(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("render", "--matrix", SMALL, "--out", str(out), "--vendor", "cpu", "--os", "debian12",
                 "--torch", "2.13", "--registry-mirror", "docker.io=127.0.0.1:5000",
                 "--pip-index-url", "http://127.0.0.1:8080/whl/{index}")
    assert result.exit_code == 0, result.output
    dockerfile = (out / "cpu" / "2.13.0-cpu-py3.11-debian12" / "Dockerfile").read_text()
    assert dockerfile.count("FROM 127.0.0.1:5000/library/debian:bookworm-slim") == 3   # build, files, image
    assert "--index-url http://127.0.0.1:8080/whl/cpu " in dockerfile
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "cpu/2.13.0-cpu-py3.11-debian12/Dockerfile", "cpu/2.13.0-cpu-py3.11-debian12/banner.sh",
        "cpu/2.13.0-cpu-py3.11-debian12/facts.py",
        "cpu/2.13.0-cpu-py3.11-debian12/guard.sh",
        "cpu/2.13.0-cpu-py3.11-debian12/pip.conf", "cpu/2.13.0-cpu-py3.11-debian12/profile.sh",
        "cpu/2.13.0-cpu-py3.11-debian12/smoke.py"]
    pip_conf = (out / "cpu" / "2.13.0-cpu-py3.11-debian12" / "pip.conf").read_text()
    assert "index-url = http://127.0.0.1:8080/whl/cpu\n" in pip_conf   # a later `pip install` uses the mirror too


def test_render_with_a_wheelhouse(tmp_path: Path) -> None:
    out = tmp_path / "out"
    wheelhouse = tmp_path / "wheels"
    wheelhouse.mkdir()
    for name in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "torch-2.14.1+cpu-cp311-cp311-linux_x86_64.whl",
                 "ipython-9.18.1-py3-none-any.whl", "pip-26.3-py3-none-any.whl"):
        (wheelhouse / name).write_bytes(b"wheel")
    result = run("render", "--matrix", SMALL, "--out", str(out), "--vendor", "cpu", "--pip-find-links", str(wheelhouse),
                 "--without-companion", "torchvision")
    assert result.exit_code == 0, result.output
    dockerfile = (out / "cpu" / "2.13.0-cpu-py3.11-debian12" / "Dockerfile").read_text()
    assert "--no-index --find-links /tmp/wheels" in dockerfile
    assert "COPY wheels/ /tmp/wheels/" in dockerfile
    assert 'io.accel-images.without-companions="torchvision"' in dockerfile
    assert "torchvision==" not in dockerfile


def test_a_wheelhouse_without_a_companion_is_an_error_naming_the_way_out(tmp_path: Path) -> None:
    """Before: torchvision was left out with a note a terminal overwrote, and the image published without it."""
    for wheel in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "ipython-9.18.1-py3-none-any.whl",
                  "pip-26.3-py3-none-any.whl"):
        (tmp_path / wheel).touch()   # what else the image installs is there (tests/unit/test_image_pip.py)
    result = run("render", "--matrix", SMALL, "--out", str(tmp_path / "out"), "--vendor", "cpu", "--torch", "2.13",
                 "--pip-find-links", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr == (f"accel-images: error: {tmp_path}: --pip-find-links: the wheelhouse has no +cpu build of"
                             " torchvision 0.28 for Python 3.11; add one, or leave torchvision out with"
                             " --without-companion torchvision\n")
    assert not (tmp_path / "out").exists()
    (tmp_path / "torchvision-0.28.1+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    served = run("render", "--matrix", SMALL, "--out", str(tmp_path / "out"), "--vendor", "cpu", "--torch", "2.13",
                 "--python", "3.11", "--os", "debian12", "--pip-find-links", str(tmp_path))
    assert served.exit_code == 0, served.output
    assert '"torchvision==0.28.*"' in (tmp_path / "out" / "cpu" / "2.13.0-cpu-py3.11-debian12" / "Dockerfile").read_text()


def test_an_unknown_companion_to_leave_out_is_one_line() -> None:
    result = run("render", "--matrix", SMALL, "--out", "/nonexistent", "--without-companion", "torchvisoin")
    assert result.exit_code == 2
    assert result.stderr == ("accel-images: error: --without-companion: 'torchvisoin' is not a companion of torch"
                             " (companions: torchaudio, torchvision)\n")


def test_render_bad_mirror_exits_2(tmp_path: Path) -> None:
    result = run("render", "--matrix", SMALL, "--out", str(tmp_path / "out"), "--registry-mirror", "docker.io")
    assert result.exit_code == 2
    assert one_error_line(result).startswith("accel-images: error: --registry-mirror: ")
    assert not (tmp_path / "out").exists()


def test_render_bad_index_url_exits_2(tmp_path: Path) -> None:
    result = run("render", "--matrix", SMALL, "--out", str(tmp_path / "out"), "--pip-index-url", "http://x/;id")
    assert result.exit_code == 2
    assert one_error_line(result).startswith("accel-images: error: --pip-index-url: ")
    assert not (tmp_path / "out").exists()


def test_render_filter_matching_only_pruned_writes_nothing(tmp_path: Path) -> None:
    result = run("render", "--matrix", SMALL, "--out", str(tmp_path / "out"), "--vendor", "gaudi", "--stack", "1.23")
    assert result.exit_code == 1
    assert "bundles torch 2.9.0" in one_error_line(result)
    assert not (tmp_path / "out").exists()


# -- the installed executable ---------------------------------------------------------------------

@pytest.mark.parametrize("args, code, stream, fragment", [
    (["compat", "torch==2.4.1", "cuda==12.4"], 0, "stdout", "compatible: torch==2.4.1 cuda==12.4"),
    (["compat", "torch==2.1", "rocm==6.2"], 1, "stdout", "ROCm builds: 5.6"),
    (["compat", "torch==abc"], 2, "stderr", "accel-images: error: torch: 'abc' is not a version"),
    (["list", "--matrix", str(MATRICES.parent / "corpus" / "matrices" / "float-version.yaml")], 2, "stderr", '("12.10")'),
    pytest.param(["render", "--check"], 0, "stderr", "is up to date", marks=pytest.mark.live_data),
])
def test_installed_executable(args: list[str], code: int, stream: str, fragment: str) -> None:
    assert EXECUTABLE.exists(), f"{EXECUTABLE} is missing: install the package into the venv"
    done = subprocess.run([str(EXECUTABLE), *args], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert fragment in getattr(done, stream)
    assert "Traceback" not in done.stderr
