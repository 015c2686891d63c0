"""`accel-images kb check` and `kb update` against recorded sources served on 127.0.0.1.

The world of 2026-12-03 (tests/kbserver.py): the package index has torch 2.14.1 and 2.15.0,
torchvision 0.29.1/0.29.2 and torchaudio 2.11.1 that the knowledge base does not know; the wheel
indexes list torch 2.15.0 on cu132, xpu and cpu, and 2.14.x on rocm7.2. Each test changes one
thing in that world and checks what the commands say, through the CLI (subprocess, `--json`
read by a JSON parser) where the exit code or the output is the point.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kbserver import DATA, Route, World, serving, source_args

from accel_images.kb import check as kbcheck, compat, sources as kbsources, update as kbupdate
from accel_images.cli.compat import describe_verdict
from accel_images import versions
from accel_images.errors import InputError
from accel_images.kb.sources import SourceUnreachable, SourceUrls

ROOT = Path(__file__).resolve().parents[2]
PINNED_KB = DATA / "knowledge-base"
"""The knowledge base and matrix as of 2026-12-03, so the findings below stay what they were when
the sources were recorded, whatever the package's own data files learn later."""
MATRIX = str(DATA / "matrix.yaml")
TODAY = "2026-12-03"


def run_kb(*args: str, base: str, kb_dir: Path = PINNED_KB, extra: tuple[str, ...] = (),
           matrix: str = MATRIX) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "accel_images", "kb", *args, "--matrix", matrix, *source_args(base),
               "--kb-dir", str(kb_dir), *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)


def check_json(world: World, kb_dir: Path = PINNED_KB) -> tuple[int, dict[str, Any], str]:
    with serving(world) as base:
        result = run_kb("check", "--json", base=base, kb_dir=kb_dir)
    return result.returncode, json.loads(result.stdout), result.stderr


def by_kind(report: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {f["subject"]: f for f in report["findings"] if f["kind"] == kind}


@pytest.fixture
def kb_copy(tmp_path: Path) -> Path:
    target = tmp_path / "kb"
    shutil.copytree(PINNED_KB, target)
    return target


@pytest.fixture
def package_kb_copy(tmp_path: Path) -> Path:
    """The package's own knowledge base, whatever it holds today: what the nightly updates."""
    target = tmp_path / "package-kb"
    shutil.copytree(compat.DATA_FILE.parent, target)
    return target


# ---- the acceptance case: 2.14.1 and 2.15.0 -----------------------------------------------------

def test_check_lists_the_new_patch_the_new_release_and_their_companions():
    code, report, stderr = check_json(World.recorded())
    assert code == 1, stderr
    assert report["up_to_date"] is False and report["unreachable"] == []
    patch = by_kind(report, "new-patch")["torch 2.14.1"]
    assert patch["facts"] == {"minor": "2.14", "version": "2.14.1", "uploaded": "2026-09-30",
                              "companions": {"torchvision": "0.29.1"}}
    assert "torchvision 0.29.1" in patch["message"] and "no torchaudio release uploaded with it" in patch["message"]
    release = by_kind(report, "new-release")["torch 2.15"]
    facts = release["facts"]
    assert facts["versions"] == ["2.15.0"] and facts["released"] == "2026-10-28"
    assert facts["requires_python"] == ">=3.11"
    assert facts["wheel_pythons"] == ["3.11", "3.12", "3.13", "3.14", "3.15"]
    assert facts["glibc_min"] == "2.28"
    # torchvision 0.29.2 and torchaudio 2.11.1 were uploaded that day too, but as patches of lines
    # that began with torch 2.14.0 and 2.11.0: no companion of 2.15 exists yet
    assert facts["companions"] == {}
    assert "no torchvision release uploaded with it (newest: 0.29.2)" in release["message"]
    assert "no torchaudio release uploaded with it (newest: 2.11.1)" in release["message"]
    assert release["to_fill"] == ["python"]
    assert release["source"] == "https://pypi.org/project/torch/2.15.0/" and release["evidence"] == "Vm"
    variants = by_kind(report, "new-variant")
    assert set(variants) == {"torch 2.15 cuda 13.2", "torch 2.14 rocm 7.2", "torch 2.15 xpu (index xpu)"}
    # what the vendor's own tables keep per torch minor (toolkits, archs) and this build lacks
    assert variants["torch 2.15 cuda 13.2"]["to_fill"] == ["toolkits[2.15]", "archs[2.15]"]
    assert variants["torch 2.14 rocm 7.2"]["to_fill"] == []   # rocm's tables already cover 7.2
    assert variants["torch 2.15 xpu (index xpu)"]["to_fill"] == ["oneAPI version"]
    assert {f["kind"] for f in report["findings"]} == {"new-patch", "new-release", "new-variant"}


def test_check_prints_one_line_per_finding():
    with serving(World.recorded()) as base:
        result = run_kb("check", base=base)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("new-patch: torch 2.14.1: ")
    assert any(line.startswith("new-release: torch 2.15: ") for line in lines)
    assert len(lines) == 5 and result.stderr == ""


def test_update_writes_the_rows_keeps_every_comment_and_then_check_is_clean(kb_copy: Path):
    before = {p.name: p.read_text() for p in [kb_copy / "kb.yaml", *(kb_copy / "vendors").glob("*.yaml")]}
    with serving(World.recorded()) as base:
        updated = run_kb("update", "--date", TODAY, base=base, kb_dir=kb_copy)
        again = run_kb("check", "--json", base=base, kb_dir=kb_copy)
    assert updated.returncode == 0, updated.stderr
    assert "wrote kb.yaml: torch 2.15: new row (2.15.0); to fill: python" in updated.stdout
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["up_to_date"] is True
    after = {p.name: p.read_text() for p in [kb_copy / "kb.yaml", *(kb_copy / "vendors").glob("*.yaml")]}
    for name, text in before.items():
        old_lines = [line for line in text.splitlines() if line.strip()]
        new_lines = after[name].splitlines()
        # every line the file had is still there, in the same order (as_of and the edited rows aside)
        kept = iter(new_lines)
        missing = [line for line in old_lines
                   if "as_of" not in line and "versions:" not in line and line not in kept]
        assert not missing, (name, missing[:3])
    assert after["cpu.yaml"] == before["cpu.yaml"] and after["gaudi.yaml"] == before["gaudi.yaml"]
    kb_text = after["kb.yaml"]
    assert 'as_of: "2026-12-03"' in kb_text
    assert 'versions: ["2.14.0", "2.14.1"]  # 2.14.1: the package index, uploaded 2026-09-30 (Vm)' in kb_text
    assert "\n  \"2.15\":\n    released: \"2026-10-28\"\n    versions: [\"2.15.0\"]\n    python: []\n" in kb_text
    # the os section's heading comment stays above the os section
    assert kb_text.index('"2.15":') < kb_text.index("# Base operating systems") < kb_text.index("\nos:")
    assert '"2.15": ["13.2"]  # kb update 2026-12-03: torch-2.15.0+cu132-' in after["cuda.yaml"]
    assert '"2.15": "*"' in after["xpu.yaml"]


def test_after_update_compat_answers_unverified_for_what_a_person_must_fill(kb_copy: Path):
    with serving(World.recorded()) as base:
        assert run_kb("update", "--date", TODAY, base=base, kb_dir=kb_copy).returncode == 0
    kb = kbcheck.KbFiles(kb_copy).load()
    for query in ({"torch": "2.15", "python": "3.12"}, {"torch": "2.15", "cuda": "13.2"},
                  {"torch": "2.15", "cuda": "13.2", "python": "3.12"}, {"torch": "2.14", "rocm": "7.2"},
                  {"torch": "2.15", "xpu": "2026.1"}, {"torch": "2.15"}):
        verdict = kb.check(query)
        assert verdict.unknown and verdict.exit_code == 5, (query, verdict)
        assert describe_verdict(verdict).startswith("unverified: "), query
        assert all("unverified" in reason for reason in verdict.reasons)
    assert kb.check({"torch": "2.14.1", "cuda": "13.2", "python": "3.12"}).ok
    assert kb.resolve_torch("2.14") == "2.14.1"
    # the matrix skips what is unverified instead of building it on a guess
    assert not any(reason for reason in kb.why_not("cpu", None, "2.15", "3.12") if "unverified" not in reason)


def test_after_update_the_matrix_renders_and_render_check_is_green(package_kb_copy: Path, tmp_path: Path):
    """What the nightly does: `kb update` on the package's knowledge base, then render the repository's matrix."""
    from accel_images.plan.matrix import load_matrix
    from accel_images.render.contexts import Renderer, RenderOptions, stale_paths, write_tree
    from accel_images.plan.variants import expand
    with serving(World.recorded()) as base:
        result = run_kb("update", "--date", TODAY, base=base, kb_dir=package_kb_copy, matrix=str(ROOT / "matrix.yaml"))
    assert result.returncode == 0, result.stderr
    kb = kbcheck.KbFiles(package_kb_copy).load()
    assert kb.resolve_torch("2.14") == "2.14.1"
    expansion = expand(load_matrix(str(ROOT / "matrix.yaml")), kb)
    assert {v.torch for v in expansion.variants if v.torch.startswith("2.14")} == {"2.14.1"}
    contexts = Renderer(kb).render_all(expansion, expansion.variants, RenderOptions())
    out = tmp_path / "images"
    write_tree(out, list(contexts))
    assert stale_paths(out, contexts) == []
    assert any("2.14.1-cuda13.2-py3.12-ubuntu24.04" in path for path in {str(p) for p in out.rglob("Dockerfile")})


# ---- one change at a time ------------------------------------------------------------------------

def _yank(world: World, version: str, reason: str = "broken wheel") -> None:
    data = world.project("torch")
    for entry in data["releases"][version]:
        entry["yanked"], entry["yanked_reason"] = True, reason
    world.set_project("torch", data)


def test_a_yanked_release_the_kb_lists_is_reported_and_update_drops_it(kb_copy: Path):
    world = World.recorded()
    _yank(world, "2.12.1", "Contains an incorrect dependency")
    code, report, _ = check_json(world, kb_copy)
    assert code == 1
    yanked = by_kind(report, "yanked")["torch 2.12.1"]
    assert "Contains an incorrect dependency" in yanked["message"]
    with serving(world) as base:
        assert run_kb("update", "--date", TODAY, base=base, kb_dir=kb_copy).returncode == 0
    assert kbcheck.KbFiles(kb_copy).load().torch["2.12"].versions == ("2.12.0",)
    assert "2.12.1 yanked on the package index (Contains an incorrect dependency)" in (kb_copy / "kb.yaml").read_text()


def test_a_yanked_new_patch_is_not_proposed():
    world = World.recorded()
    _yank(world, "2.14.1")
    _, report, _ = check_json(world)
    assert "torch 2.14.1" not in by_kind(report, "new-patch")
    assert "torch 2.14.1" not in by_kind(report, "yanked")   # the knowledge base never listed it


def test_a_new_minor_with_a_companion_uploaded_the_same_day(kb_copy: Path):
    world = World.recorded()
    data = world.project("torchvision")
    data["releases"]["0.30.0"] = [dict(entry, filename=entry["filename"].replace("0.29.2", "0.30.0"),
                                       upload_time_iso_8601="2026-10-28T16:00:00Z")
                                  for entry in data["releases"]["0.29.2"]]
    world.set_project("torchvision", data)
    _, report, _ = check_json(world)
    release = by_kind(report, "new-release")["torch 2.15"]
    assert release["facts"]["companions"] == {"torchvision": "0.30"}
    assert "torchvision 0.30.0" in release["message"]
    with serving(world) as base:
        assert run_kb("update", "--date", TODAY, base=base, kb_dir=kb_copy).returncode == 0
    assert kbcheck.KbFiles(kb_copy).load().torch["2.15"].companions == {"torchvision": "0.30"}


def test_a_wheel_variant_that_disappeared():
    world = World.recorded()
    world.set_page("cu130", "\n".join(line for line in world.page("cu130").splitlines() if "torch-2.13.0+" not in line))
    world.routes["/whl/rocm7.14/torch/"] = Route(b"", status=404)
    code, report, _ = check_json(world)
    assert code == 1
    gone = by_kind(report, "variant-gone")
    assert set(gone) == {"torch 2.13 cuda 13.0", "torch 2.14 rocm 7.14"}
    assert "no torch 2.13 wheel on it" in gone["torch 2.13 cuda 13.0"]["message"]
    assert "the page is gone (404)" in gone["torch 2.14 rocm 7.14"]["message"]


def test_update_leaves_disappearances_to_a_person(kb_copy: Path):
    world = World.recorded()
    world.routes["/whl/rocm7.14/torch/"] = Route(b"", status=404)
    with serving(world) as base:
        result = run_kb("update", "--date", TODAY, base=base, kb_dir=kb_copy)
    assert result.returncode == 0
    assert "for a person: variant-gone: torch 2.14 rocm 7.14:" in result.stdout
    assert kbcheck.KbFiles(kb_copy).load().section("rocm").builds["2.14"] == ("7.14",)


def test_a_base_tag_that_disappeared_and_a_newer_patch_tag():
    world = World.recorded()
    world.set_tags("nvidia/cuda", [t for t in world.tags("nvidia/cuda") if t != "13.0.3-devel-ubuntu24.04"]
                   + ["13.2.2-devel-ubuntu24.04", "13.2.10-devel-ubuntu24.04", "13.3.0-devel-ubuntu24.04"])
    _, report, _ = check_json(world)
    assert set(by_kind(report, "base-tag-gone")) == {"nvidia/cuda:13.0.3-devel-ubuntu24.04"}
    newer = by_kind(report, "new-base-tag")["nvidia/cuda:13.2.1-devel-ubuntu24.04"]
    assert newer["facts"]["newer"] == ["13.2.2-devel-ubuntu24.04", "13.2.10-devel-ubuntu24.04"]


def test_tag_lists_follow_link_pages_and_the_token_challenge():
    """The next page is the tag list itself with `n` and `last` (the registry API's pagination: `Link:
    <<url>?n=<n from the request>&last=<last tag value from previous response>>; rel="next"`); a Link to
    any other path is refused (tests/integration/test_registry_hostile.py)."""
    world = World.recorded()
    tags = world.tags("rocm/dev-ubuntu-24.04")
    next_page = f"/v2/rocm/dev-ubuntu-24.04/tags/list?n=2&last={tags[1]}"
    world.routes["/v2/rocm/dev-ubuntu-24.04/tags/list"] = Route(
        json.dumps({"name": "rocm/dev-ubuntu-24.04", "tags": tags[:2]}).encode(), needs_token=True,
        headers={"Link": f'<{next_page}>; rel="next"'})
    world.routes[next_page] = Route(
        json.dumps({"name": "rocm/dev-ubuntu-24.04", "tags": tags[2:]}).encode(), needs_token=True)
    code, report, _ = check_json(world)
    assert code == 1 and not by_kind(report, "base-tag-gone"), report.get("unreachable")
    assert next_page in world.asked
    assert "/token?service=recorded&scope=repository%3Ax%3Apull" in world.asked


def test_a_repository_the_registry_does_not_know_loses_all_its_tags():
    world = World.recorded()
    del world.routes["/v2/rocm/dev-ubuntu-22.04/tags/list"]   # the server answers NAME_UNKNOWN, 404
    _, report, _ = check_json(world)
    assert set(by_kind(report, "base-tag-gone")) == {"rocm/dev-ubuntu-22.04:7.2.4-complete"}


# ---- sources that fail ---------------------------------------------------------------------------

@pytest.mark.parametrize("path, route, named, reason", [
    ("/pypi/torch/json", Route(b"", status=404), "pypi:torch", "answered 404 (no such project)"),
    ("/pypi/torchvision/json", Route(b"<html>maintenance</html>", content_type="text/html"), "pypi:torchvision",
     "answered something that is not JSON"),
    ("/pypi/torch/json", Route(b'{"info": {}}'), "pypi:torch", "answered JSON without a 'releases' object"),
    ("/whl/cu126/torch/", Route(b"upstream error", status=500), "wheel index cu126", "answered 500"),
    ("/whl/xpu/torch/", Route(bytes(range(256)) * 10, content_type="application/octet-stream"), "wheel index xpu",
     "answered something that is not text"),
    ("/whl/cpu/torch/", Route(b"just words, no page", content_type="text/plain"), "wheel index cpu",
     "answered something that is not an HTML page"),
    ("/v2/nvidia/cuda/tags/list", Route(b"{}", status=503), "registry docker.io", "answered 503"),
    ("/v2/nvidia/cuda/tags/list", Route(b"[1, 2]"), "registry docker.io", "JSON that is not an object"),
])
def test_a_source_that_fails_is_named_and_exits_4(path, route, named, reason):
    world = World.recorded()
    world.routes[path] = route
    code, report, stderr = check_json(world)
    assert code == 4
    (failure,) = report["unreachable"]
    assert failure["source"] == named and reason in failure["reason"]
    assert failure["url"].endswith(path.replace("/json", "/json"))
    assert stderr.count("\n") == 1 and f"source {named} unreachable" in stderr and "Traceback" not in stderr
    assert report["findings"]   # what the other sources said is still there


def test_a_huge_answer_is_refused_without_reading_it_all():
    world = World.recorded()
    world.routes["/pypi/torchaudio/json"] = Route(stream_bytes=kbsources.MAX_BYTES + (8 << 20))
    started = time.monotonic()
    code, report, _ = check_json(world)
    assert code == 4 and time.monotonic() - started < 60
    (failure,) = report["unreachable"]
    assert failure["source"] == "pypi:torchaudio" and "more than the 67108864 bytes read" in failure["reason"]


def test_a_declared_huge_answer_is_refused_at_once():
    world = World.recorded()
    with serving(world) as base:
        world.routes["/pypi/torch/json"] = Route(b"x" * 2048)
        with pytest.raises(SourceUnreachable, match="answered 2048 bytes, more than the 1024 read"):
            kbsources.http_get("pypi:torch", f"{base}/pypi/torch/json", max_bytes=1024)


def test_a_huge_valid_index_page_is_read(capsys):
    """A page with every torch build of ten years (here 40,000 anchors, ~18 MB) parses in seconds."""
    template = ('<a href="https://download-r2.pytorch.org/whl/cu126/torch-{v}%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl'
                '#sha256={h}" data-dist-info-metadata="sha256={h}" data-core-metadata="sha256={h}"'
                ' data-upload-time="2026-09-02T13:20:00.000000Z">torch-{v}+cu126-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>')
    body = "<!DOCTYPE html>\n<html><body><h1>Links for torch</h1>\n" + "\n".join(
        template.format(v=f"2.{i // 1000}.{i % 1000}", h="ab" * 32) for i in range(40_000)) + "\n</body></html>"
    started = time.monotonic()
    wheels = kbsources.parse_wheel_index(body.encode(), "http://mirror/whl/cu126/torch/")
    elapsed = time.monotonic() - started
    assert len(wheels) == 40_000 and wheels[-1].version == "2.39.999" and wheels[-1].local == "cu126"
    assert elapsed < 30
    with capsys.disabled():
        print(f"\n  {len(body) / 1e6:.1f} MB index page, {len(wheels)} wheels parsed in {elapsed:.2f} s")


def test_an_unreachable_host_is_named():
    with serving(World.recorded()) as base:
        pass   # closed: nothing listens on that port any more
    result = run_kb("check", "--json", base=base)
    assert result.returncode == 4
    report = json.loads(result.stdout)
    assert all("connection refused" in u["reason"] for u in report["unreachable"])
    assert {u["source"] for u in report["unreachable"]} >= {"pypi:torch", "wheel index cu132", "registry docker.io"}


def test_update_writes_nothing_when_a_source_is_unreachable(kb_copy: Path):
    world = World.recorded()
    world.routes["/whl/cu132/torch/"] = Route(b"", status=502)
    before = (kb_copy / "kb.yaml").read_text()
    with serving(world) as base:
        result = run_kb("update", "--date", TODAY, base=base, kb_dir=kb_copy)
    assert result.returncode == 4 and "source wheel index cu132 unreachable: answered 502" in result.stderr
    assert (kb_copy / "kb.yaml").read_text() == before


# ---- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, message", [
    (("--registry-url", "docker.io"), "--registry-url: 'docker.io' is not REGISTRY=http[s]://HOST[:PORT]"),
    (("--pypi-url", "ftp://mirror/pypi"), "--pypi-url: 'ftp://mirror/pypi' is not an http(s) URL"),
])
def test_bad_options_exit_2(extra, message):
    with serving(World.recorded()) as base:
        result = run_kb("check", base=base, extra=extra)
    assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1


def test_a_broken_knowledge_base_exits_2_naming_file_and_line(kb_copy: Path):
    (kb_copy / "vendors" / "rocm.yaml").write_text("vendor: rocm\nbuilds: [unclosed\n")
    with serving(World.recorded()) as base:
        result = run_kb("check", base=base, kb_dir=kb_copy)
        missing = run_kb("check", base=base, kb_dir=kb_copy / "vendors")
        bad_date = run_kb("update", "--date", "03/12/2026", base=base, kb_dir=kb_copy)
    assert result.returncode == 2 and f"{kb_copy / 'vendors' / 'rocm.yaml'}:3: not valid YAML" in result.stderr
    assert missing.returncode == 2 and "--kb-dir: no kb.yaml in" in missing.stderr
    assert bad_date.returncode == 2 and "--date: '03/12/2026' is not a date" in bad_date.stderr


# ---- the parsers, on recorded bytes --------------------------------------------------------------

def test_recorded_index_lines_from_real_pages_are_read():
    """Verbatim anchors of download.pytorch.org pages quoted in public issues (excerpts.json):
    absolute R2 and relative hrefs, with and without #sha256, attributes in any order."""
    excerpts = json.loads((DATA / "recorded" / "pytorch-index" / "excerpts.json").read_text())
    seen = {}
    for excerpt in excerpts:
        package = "torchvision" if "torchvision" in excerpt["index_page"] else "torch"
        body = f"<html><body>{excerpt['text']}</body></html>".encode()
        wheels = kbsources.parse_wheel_index(body, excerpt["index_page"], package)
        assert wheels or excerpt.get("truncated"), excerpt["source"]
        for wheel in wheels:
            seen[wheel.filename] = (wheel.version, wheel.local)
    assert seen["torch-2.11.0+cu128-cp310-cp310-manylinux_2_28_x86_64.whl"] == ("2.11.0", "cu128")
    assert seen["torch-2.6.0+cu126-cp310-cp310-manylinux_2_28_x86_64.whl"] == ("2.6.0", "cu126")


def test_a_yanked_file_on_an_index_page_is_no_build():
    body = (b'<html><body><a href="/whl/cu130/torch-2.15.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"'
            b' data-yanked="broken">torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl</a>'
            b'<a href="/whl/cu130/torch-2.14.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=00"></a></body></html>')
    wheels = kbsources.parse_wheel_index(body, "http://mirror/whl/cu130/torch/")
    assert [(w.version, w.local) for w in wheels] == [("2.14.1", "cu130")]   # the name from the href


def test_the_recorded_package_index_is_read():
    import gzip
    body = gzip.decompress((DATA / "recorded" / "pypi" / "torch.json.gz").read_bytes())
    project = kbsources.parse_pypi_project(body, "https://pypi.org/pypi/torch/json", "torch")
    assert max(project.releases, key=versions.parse) == "2.15.0"
    release = project.releases["2.14.1"]
    assert release.uploaded == "2026-09-30" and not release.yanked and release.requires_python == ">=3.10"
    assert release.wheel_pythons() == ("3.10", "3.11", "3.12", "3.13", "3.14")
    assert "cp314-cp314t" in release.wheel_tags   # free-threaded: a wheel, not a Python of its own
    assert all(kbsources.FINAL_VERSION.match(v) for v in project.releases)
    tv = kbsources.parse_pypi_project(gzip.decompress((DATA / "recorded" / "pypi" / "torchvision.json.gz").read_bytes()),
                                      "https://pypi.org/pypi/torchvision/json", "torchvision")
    assert tv.releases["0.15.0"].yanked and "incorrect torch dependency" in tv.releases["0.15.0"].yanked_reason


def test_recorded_registry_answers_are_read():
    """docker-registry 2.8.2's own answers: unsorted tags, `n` ignored, NAME_UNKNOWN for a missing repository."""
    world = World()
    recorded = DATA / "recorded" / "registry"
    world.routes["/v2/probe/accel-images/tags/list"] = Route((recorded / "tags-list-n2.json").read_bytes())
    with serving(world) as base:
        urls = SourceUrls(registries={"registry.example": base})
        tags = kbsources.registry_tags("registry.example", "probe/accel-images", urls)
        assert kbsources.registry_tags("registry.example", "probe/missing", urls) == ()
    assert tags == ("v1", "sha256-9fe3727a84230b3690c78385dfc2c9d7cec5769838a47a55fd416e051fadb5b3", "v2",
                    "docker-v2", "v10", "v3")
    assert json.loads((recorded / "tags-list-unknown-repo.json").read_text())["errors"][0]["code"] == "NAME_UNKNOWN"


@pytest.mark.parametrize("tag, tags, expected", [
    ("13.2.1-devel-ubuntu24.04", ["13.2.2-devel-ubuntu24.04", "13.3.0-devel-ubuntu24.04", "13.2.2-runtime-ubuntu24.04"],
     ["13.2.2-devel-ubuntu24.04"]),
    ("7.2.4-complete", ["7.2.10-complete", "7.2.3-complete", "7.2.5", "7.14.0-complete"], ["7.2.10-complete"]),
    ("24.04", ["24.10", "26.04"], []),
    ("latest", ["1.0.0"], []),
])
def test_newer_patch_tags(tag, tags, expected):
    assert kbcheck.newer_patch_tags(tag, tags) == expected


def test_split_image():
    assert kbsources.split_image("ubuntu:24.04") == ("docker.io", "library/ubuntu", "24.04")
    assert kbsources.split_image("rocm/dev-ubuntu-24.04:7.2.4-complete") == ("docker.io", "rocm/dev-ubuntu-24.04",
                                                                             "7.2.4-complete")
    assert kbsources.split_image("vault.habana.ai/gaudi-docker/1.24.1/ubuntu24.04/habanalabs/pytorch-installer-2.11.0")[2] \
        == "latest"


def test_release_rows_marked_unverified_answer_unverified():
    kb = kbcheck.KbFiles(PINNED_KB).load()
    row = kb.torch["2.14"]
    open_row = type(row)(**{**row.__dict__, "unverified": ("python",), "python": ()})
    edited = type(kb)(**{**kb.__dict__, "torch": {**kb.torch, "2.14": open_row}})
    verdict = edited.check({"torch": "2.14", "python": "3.12", "cuda": "13.2"})
    assert verdict.unknown and "Python support of torch 2.14 is unverified" in verdict.reasons[0]
    assert kb.check({"torch": "2.14", "python": "3.12", "cuda": "13.2"}).ok   # the shipped row is filled


def test_apply_refuses_a_partial_report(kb_copy: Path):
    failure = SourceUnreachable("pypi:torch", "http://x/pypi/torch/json", "answered 500")
    report = kbcheck.Report("2026-12-03", (), (failure,), ())
    with pytest.raises(SourceUnreachable):
        kbupdate.apply(report, kbcheck.KbFiles(kb_copy), TODAY)


def test_kb_files_name_the_file_of_a_malformed_row(kb_copy: Path):
    (kb_copy / "kb.yaml").write_text((kb_copy / "kb.yaml").read_text().replace("    versions: [\"2.13.0\"]\n", ""))
    with pytest.raises(InputError) as error:
        kbcheck.KbFiles(kb_copy).load()
    assert error.value.file == str(kb_copy / "kb.yaml") and "versions" in error.value.message
