"""Run reports: the structure of each file, read back with the parser its readers use."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from html.parser import HTMLParser
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from accel_images.report import reports as report
from accel_images.builder.outcome import Outcome, outcome_record
from accel_images.report.reports import (duration_text, render_html, render_json, render_junit, render_markdown,
                                          size_gb, summarize, write_reports)
from accel_images.smoke.judge import Check, SmokeResult
from accel_images.model.variant import Variant

DATA = Path(__file__).parents[1] / "data" / "report"
META = {"started": "2026-05-12T02:00:03+00:00", "finished": "2026-05-12T03:12:45+00:00", "host": "ci-runner-7",
        "registry": "registry.example.com", "command": ["accel-images", "nightly", "--registry", "registry.example.com"],
        "revision": "3f9c2a1e0b7d"}
SCRIPT_IN_ERROR = "<script>alert('owned')</script>"
ROCM_FAILED = "rocm/2.14.0-rocm7.14-py3.12-ubuntu24.04"
XPU_FAILED = "xpu/2.14.0-xpu2026.1-py3.12-ubuntu24.04"


def load(name: str) -> list[dict]:
    return json.loads((DATA / f"{name}-records.json").read_text())


@pytest.fixture(params=["build", "nightly"])
def records(request: pytest.FixtureRequest) -> list[dict]:
    return load(request.param)


def test_sample_records_cover_every_status_and_vendor(records: list[dict]) -> None:
    assert {r["status"] for r in records} == {"built", "skipped", "failed"}
    assert {r["vendor"] for r in records} == {"cpu", "cuda", "rocm", "xpu", "gaudi"}
    assert any(r["smoke"] and r["smoke"]["cpu_fallback"] for r in records)
    assert any(r["smoke"] and not r["smoke"]["ok"] for r in records)


# ---- writing ----------------------------------------------------------------------------------

def test_write_reports_writes_every_report_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    paths = write_reports(load("build"), tmp_path / "out", META)
    assert paths == {"json": tmp_path / "out/report.json", "markdown": tmp_path / "out/summary.md",
                     "html": tmp_path / "out/index.html", "junit": tmp_path / "out/junit.xml"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["index.html", "junit.xml", "report.json",
                                                                     "summary.md"]
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in paths.values()), "reports are readable by others"


def test_a_failing_renderer_leaves_the_previous_reports_whole(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_reports(load("build"), tmp_path, META)
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}

    def broken(records: object, meta: object) -> str:
        raise RuntimeError("template bug")

    monkeypatch.setitem(report.RENDERERS, "html", broken)
    with pytest.raises(RuntimeError):
        write_reports(load("nightly"), tmp_path, {**META, "partial": True})
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_atomic_write_removes_its_temporary_file_when_the_rename_fails(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")

    def refuse(source: str, destination: object) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr("accel_images.report.reports.os.replace", refuse)
    with pytest.raises(OSError):
        report.atomic_write(target, "new")
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert target.read_text() == "old"


# ---- JSON -------------------------------------------------------------------------------------

def test_json_report_has_schema_meta_summary_and_the_records_as_given(records: list[dict]) -> None:
    document = json.loads(render_json(records, META))
    assert document["schema"] == 1
    assert document["meta"] == {**META, "command": "accel-images nightly --registry registry.example.com",
                                "partial": False}
    assert document["summary"] == {"total": 9, "counts": {"built": 4, "skipped": 3, "failed": 2},
                                   "failed": [ROCM_FAILED, XPU_FAILED]}
    assert document["variants"] == records


def test_json_keeps_nightly_fields() -> None:
    document = json.loads(render_json(load("nightly"), META))
    cpu = document["variants"][0]
    assert cpu["pushed_tags"][-1] == "registry.example.com/accel-images/pytorch:latest-cpu"
    assert cpu["digest"].startswith("sha256:")


def test_meta_is_made_json_ready() -> None:
    started = datetime(2026, 5, 12, 2, 0, 3, 512000, tzinfo=timezone.utc)
    meta = report.normalize_meta({"started": started, "host": None, "command": ("accel-images", "build", "a b"),
                                  "out": Path("/tmp/x"), "partial": 1})
    assert meta == {"started": "2026-05-12T02:00:03+00:00", "command": "accel-images build 'a b'",
                    "out": "/tmp/x", "partial": True}


def test_summary_counts_an_unknown_status_without_losing_the_usual_three() -> None:
    summary = summarize([{"variant": "cpu/x", "vendor": "cpu", "status": "cancelled"}])
    assert summary["counts"] == {"built": 0, "skipped": 0, "failed": 0, "cancelled": 1}


# ---- JUnit ------------------------------------------------------------------------------------

def test_junit_has_a_suite_per_vendor_and_a_case_per_variant(records: list[dict]) -> None:
    root = ET.fromstring(render_junit(records, META))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("9", "2", "3", "0")
    assert [s.get("name") for s in root.findall("testsuite")] == ["cpu", "cuda", "rocm", "xpu", "gaudi"]
    cuda = root.find("testsuite[@name='cuda']")
    assert (cuda.get("tests"), cuda.get("failures"), cuda.get("skipped")) == ("3", "0", "1")
    case = cuda.find("testcase[@name='2.14.0-cuda13.2-py3.12-ubuntu24.04']")
    assert case.get("classname") == "accel-images.cuda"
    assert float(case.get("time")) == pytest.approx(1412.0)
    assert case.find("failure") is None and case.find("skipped") is None


def test_junit_failures_carry_the_message_and_the_log_path(records: list[dict]) -> None:
    root = ET.fromstring(render_junit(records, META))
    failures = {case.get("name"): case.find("failure") for case in root.iter("testcase")
                if case.find("failure") is not None}
    assert set(failures) == {"2.14.0-rocm7.14-py3.12-ubuntu24.04", "2.14.0-xpu2026.1-py3.12-ubuntu24.04"}
    rocm = failures["2.14.0-rocm7.14-py3.12-ubuntu24.04"]
    assert SCRIPT_IN_ERROR in rocm.get("message")
    assert "\x1b" not in rocm.get("message") and "[31m" not in rocm.get("message"), "colour codes are dropped"
    assert "log: /srv/ci/.accel-images/logs/rocm/2.14.0-rocm7.14-py3.12-ubuntu24.04-" in rocm.text
    skipped = [case for case in root.iter("testcase") if case.find("skipped") is not None]
    assert all("unchanged" in case.find("skipped").get("message") for case in skipped)


def test_junit_stays_well_formed_whatever_the_error_says() -> None:
    record = {**load("build")[5], "error": "bad\x00byte \x07bell \ud800 ]]> </failure> & \"quotes\""}
    root = ET.fromstring(render_junit([record], META))
    assert root.find(".//failure").get("message") == "badbyte bell  ]]> </failure> & \"quotes\""


def test_partial_junit_has_a_failing_case_that_says_so() -> None:
    root = ET.fromstring(render_junit(load("build"), {**META, "partial": True}))
    assert "PARTIAL" in root.get("name")
    run = root.find("testsuite[@name='run']")
    assert run.find("testcase/failure").get("type") == "partial"
    assert run.find("properties/property[@name='partial']").get("value") == "true"
    assert root.get("failures") == "3"


# ---- HTML -------------------------------------------------------------------------------------

class PageReader(HTMLParser):
    """Collects what the page tests look at: tags, the grid's header and cells, all text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.columns: list[str] = []
        self.cells: dict[tuple[str, str, str], list[dict[str, str | None]]] = {}
        self.cell_text: dict[tuple[str, str, str], str] = {}
        self.text: list[str] = []
        self._in_column = False
        self._cell: tuple[str, str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        self._in_column = tag == "th" and attributes.get("scope") == "col"
        if tag == "td" and "data-torch" in attributes:
            self._cell = (attributes["data-vendor"], attributes["data-stack"], attributes["data-torch"])
            self.cells[self._cell] = []
            self.cell_text[self._cell] = ""
        elif tag == "div" and "data-variant" in attributes and self._cell:
            self.cells[self._cell].append(attributes)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        self._in_column = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_column:
            self.columns.append(data.strip())
        if self._cell:
            self.cell_text[self._cell] += data


def read_page(html: str) -> PageReader:
    reader = PageReader()
    reader.feed(html)
    reader.close()
    return reader


def test_html_grid_has_vendor_rows_and_torch_columns(records: list[dict]) -> None:
    page = read_page(render_html(records, META))
    assert page.columns == ["torch 2.14.0", "torch 2.13.0", "torch 2.11.0"]
    rows = list(dict.fromkeys((vendor, stack) for vendor, stack, _ in page.cells))
    assert rows == [("cpu", ""), ("cuda", "13.2"), ("cuda", "12.6"), ("rocm", "7.14"), ("rocm", "7.2"),
                    ("xpu", "2026.1"), ("gaudi", "1.24.1")]
    assert len(page.cells) == len(rows) * 3
    assert sum(len(cards) for cards in page.cells.values()) == len(records)


def test_html_cells_show_status_size_time_smoke_and_device(records: list[dict]) -> None:
    page = read_page(render_html(records, META))
    cuda = page.cells[("cuda", "13.2", "2.14.0")]
    assert [card["class"] for card in cuda] == ["card s-built", "card s-built"]
    text = " ".join(page.cell_text[("cuda", "13.2", "2.14.0")].split())
    assert "py3.12 · ubuntu24.04 · runtime" in text and "py3.12 · ubuntu24.04 · devel" in text
    assert "9.87 GB · built in 23 min 32 s" in text
    assert "passed on cuda" in text and "matmul fp32 0.4 ms" in text and "training 21.7 ms" in text
    assert "passed on cpu CPU mode" in text, "the CPU-mode run is flagged"
    assert [c["class"] for c in page.cells[("rocm", "7.14", "2.14.0")]] == ["card s-failed"]
    assert [c["class"] for c in page.cells[("rocm", "7.2", "2.13.0")]] == ["card s-skipped"]
    assert page.cells[("rocm", "7.2", "2.14.0")] == []
    assert "unchanged, not rebuilt" in page.cell_text[("rocm", "7.2", "2.13.0")]


def test_html_escapes_error_text_and_needs_nothing_outside_the_file(records: list[dict]) -> None:
    html = render_html(records, META)
    page = read_page(html)
    assert "script" not in [tag for tag, _ in page.tags]
    assert SCRIPT_IN_ERROR not in html and "&lt;script&gt;" in html
    assert any(SCRIPT_IN_ERROR in text for text in page.text), "the error is shown, as text"
    assert not [attrs for _, attrs in page.tags if "src" in attrs or (attrs.get("rel") == "stylesheet")]
    assert "http://" not in html and "https://" not in html


def test_html_failures_section_links_from_the_grid(records: list[dict]) -> None:
    page = read_page(render_html(records, META))
    sections = [attrs["id"] for tag, attrs in page.tags if tag == "section"]
    links = [attrs["href"] for tag, attrs in page.tags if tag == "a" and attrs["href"].startswith("#")]
    assert sections == ["failure-1", "failure-2"]
    assert links == ["#failure-1", "#failure-2"]
    text = "".join(page.text)
    assert "/srv/ci/.accel-images/logs/xpu/2.14.0-xpu2026.1-py3.12-ubuntu24.04-" in text


def test_html_nightly_cells_list_pushed_tags() -> None:
    page = read_page(render_html(load("nightly"), META))
    cpu = page.cell_text[("cpu", "", "2.14.0")]
    assert "pushed 3 tags" in cpu and "registry.example.com/accel-images/pytorch:latest-cpu" in cpu
    assert "not pushed" in page.cell_text[("rocm", "7.14", "2.14.0")]


def test_html_says_partial_only_for_a_partial_run() -> None:
    partial = read_page(render_html(load("build"), {**META, "partial": True}))
    whole = read_page(render_html(load("build"), META))
    assert [attrs for tag, attrs in partial.tags if attrs.get("class") == "partial"]
    assert not [attrs for tag, attrs in whole.tags if attrs.get("class") == "partial"]
    assert "Partial report." in "".join(partial.text) and "Partial report." not in "".join(whole.text)


def test_every_report_renders_an_empty_run() -> None:
    assert "No variants were reported." in render_html([], META)
    assert ET.fromstring(render_junit([], META)).get("tests") == "0"
    assert "**nothing was built** (0 built, 0 skipped, 0 failed)" in render_markdown([], META)
    assert json.loads(render_json([], META))["variants"] == []


# ---- Markdown ---------------------------------------------------------------------------------

def test_markdown_headline_tables_and_failures(records: list[dict]) -> None:
    text = render_markdown(records, META)
    word = "published" if "pushed_tags" in records[0] else "built"   # a nightly's word, and a build's
    assert f"**2 of 9 variants failed** (4 {word}, 3 skipped, 2 failed)" in text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Since the previous run", "## CPU", "## NVIDIA CUDA", "## AMD ROCm", "## Intel XPU",
                        "## Intel Gaudi", "## Failures"]
    assert (f"| `2.14.0-cuda13.2-py3.12-ubuntu24.04` | {word} | 9.87 | 23 min 32 s | passed on cuda | "
            "matmul fp32 0.4 ms, matmul bf16 0.2 ms, training 21.7 ms |") in text
    assert "| passed on cpu (CPU mode) |" in text
    assert "- Git revision: `3f9c2a1e0b7d`" in text
    failures = text.split("## Failures", 1)[1]
    assert f"### `{ROCM_FAILED}`" in failures and f"### `{XPU_FAILED}`" in failures
    assert "Log: `/srv/ci/.accel-images/logs/rocm/2.14.0-rocm7.14-py3.12-ubuntu24.04-" in failures


def test_markdown_error_fence_outlasts_backticks_in_the_error() -> None:
    text = render_markdown(load("build"), META)
    error_line = next(line for line in text.splitlines() if SCRIPT_IN_ERROR in line)
    lines = text.splitlines()
    index = lines.index(error_line)
    assert lines[index - 1] == "````text" and lines[index + 1] == "````"


def test_markdown_partial_banner_and_nightly_column() -> None:
    text = render_markdown(load("nightly"), {**META, "partial": True})
    assert text.splitlines()[0] == "# accel-images run report, 2026-05-12 02:00 UTC (PARTIAL)"
    assert "> **PARTIAL REPORT.**" in text
    assert "| Pushed |" in text and "| 3 tags |" in text
    assert "PARTIAL" not in render_markdown(load("nightly"), META)


def test_markdown_table_cells_cannot_break_the_table() -> None:
    record = {**load("build")[0], "tag": "a|b<i>"}
    row = next(line for line in render_markdown([record], META).splitlines() if "a\\|b" in line)
    assert "a\\|b&lt;i&gt;" in row


# ---- a record as the builder makes it ---------------------------------------------------------

def test_reports_read_the_builders_own_records(tmp_path: Path) -> None:
    variant = Variant(vendor="cpu", stack=None, torch="2.13.0", python="3.11", os="debian12", flavor="runtime",
                      base_image="debian:bookworm")
    smoke = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(),
                        checks=(Check("matmul_float32", True, "ok", 5.04), Check("mlp_training", True, "ok", 8.1)))
    outcome = Outcome(variant=variant, status="built", image=f"accel-images/pytorch:{variant.tag}",
                      image_id="sha256:1", size=2_101_000_000, build_s=75.0, fingerprint="sha256:f",
                      base_digest="sha256:b", smoke=smoke, log_path=tmp_path / "build.log")
    paths = write_reports([outcome_record(outcome)], tmp_path, META)
    assert "| `2.13.0-cpu-py3.11-debian12` | built | 2.10 | 1 min 15 s | passed on cpu | " \
           "matmul fp32 5.0 ms, training 8.1 ms |" in paths["markdown"].read_text()
    assert json.loads(paths["json"].read_text())["variants"][0]["log"] == str(tmp_path / "build.log")


# ---- formatting -------------------------------------------------------------------------------

@pytest.mark.parametrize(("seconds", "text"), [(None, "–"), (0.4, "0 s"), (59.4, "59 s"), (60, "1 min 00 s"),
                                               (754.2, "12 min 34 s"), (3725, "1 h 02 min")])
def test_duration_text(seconds: float | None, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.parametrize(("size", "text"), [(None, "–"), (True, "–"), (9_874_000_000, "9.87"), (5_000_000, "0.01")])
def test_size_in_gigabytes(size: object, text: str) -> None:
    assert size_gb(size) == text


# ---- what an image holds, and what it was built without -----------------------------------------------

def held_record() -> dict:
    """A built CPU image's record whose companion was left out on purpose, with the facts its build read."""
    from accel_images.kb.compat import load_kb
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.plan.variants import make_variant

    variant = make_variant(load_kb(), "cpu", None, "2.13", "3.11", "debian12", "runtime")
    facts = ImageFacts.from_document({
        "schema": 1, "platform": {"os": "linux", "machine": "x86_64"}, "python": "3.11.2",
        "torch": {"version": "2.13.0+cpu", "public": "2.13.0", "local": "cpu"}, "backend": "cpu",
        "toolkit": dict.fromkeys(("cuda", "hip", "xpu", "cudnn", "nccl", "gaudi")), "archs": [], "ptx": [],
        "companions": {"numpy": "2.4.6"}, "distributions": {"numpy": "2.4.6", "torch": "2.13.0+cpu"}})
    outcome = Outcome(variant, "built", "accel-images/pytorch:2.13.0-cpu-py3.11-debian12", "sha256:1", 10**9, 300.0,
                      notes=("torchvision 0.28 left out (--without-companion torchvision)",),
                      without_companions=("torchvision",), facts=facts)
    return dict(outcome_record(outcome))


def test_every_report_says_what_the_image_holds_and_which_companion_it_lacks() -> None:
    record = held_record()
    assert record["without_companions"] == ["torchvision"]
    assert record["facts"] == {"torch": "2.13.0+cpu", "python": "3.11.2", "backend": "cpu", "machine": "x86_64",
                               "toolkit": {}, "archs": [], "ptx": [], "companions": {"numpy": "2.4.6"}}
    texts = report.render_all([record], META)
    assert json.loads(texts["json"])["variants"][0]["without_companions"] == ["torchvision"]
    assert ("- `cpu/2.13.0-cpu-py3.11-debian12`: torch 2.13.0+cpu · Python 3.11.2 · numpy 2.4.6"
            " · without torchvision (--without-companion)") in texts["markdown"]
    assert ('<span class="flag">without torchvision (--without-companion)</span>' in texts["html"])
    assert "holds torch 2.13.0+cpu · Python 3.11.2 · numpy 2.4.6</div>" in texts["html"]
    assert "without torchvision (--without-companion)" in texts["junit"]


# ---- a previous report that is damaged ------------------------------------------------------------

def previous_document() -> dict:
    """A nightly's report.json as the next run reads it: every record failed once, so each is compared."""
    records = [dict(r, status="failed", error="boom") for r in load("nightly")]
    changes = {"previous": "2026-05-11T02:00:00+00:00", "new_failures": [], "still_failing": [], "fixed": [],
               "last_good": {report.view(records[0]).key: {"run": "2026-05-10T02:00:00+00:00", "digest": "sha256:1"}}}
    return json.loads(json.dumps({"schema": 1, "meta": META, "changes": changes, "variants": records}))  # a copy


DAMAGE = [  # (where, the value put there): what a hand edit, a disk error or another tool leaves
    (("variants", 0, "smoke", "failures"), 5), (("variants", 0, "smoke", "checks"), 5),
    (("variants", 0, "smoke", "checks"), [5, "x", None]), (("variants", 0, "smoke"), "passed"),
    (("variants", 0, "pushed_tags"), 5), (("variants", 0, "variant"), ["a", "list"]), (("variants", 0), 5),
    (("variants", 0, "status"), {"a": 1}), (("variants", 0, "verified"), 5), (("variants", 0, "provenance"), []),
    (("changes", "last_good"), [1, 2]), (("changes", "last_good", "x"), 5), (("changes",), "x"), (("meta",), [1]),
    (("meta", "started"), 7), (("variants", 0, "build_s"), "12 s"), (("variants", 0, "size"), "big"),
]


def damaged(where: tuple, value: object) -> dict:
    document = previous_document()
    target = document
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    return document


@pytest.mark.parametrize(("where", "value"), DAMAGE, ids=[".".join(map(str, w)) + f"={v!r}" for w, v in DAMAGE])
def test_a_damaged_previous_report_is_compared_and_reported_without_a_crash(where: tuple, value: object,
                                                                            tmp_path: Path) -> None:
    latest = tmp_path / "nightly-latest"
    latest.mkdir()
    (latest / "report.json").write_text(json.dumps(damaged(where, value)))
    records = load("nightly")
    meta = {**META, "changes": report.compare(records, report.read_previous(latest))}
    for text in report.render_all(records, meta).values():
        assert text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), value=st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                                          lambda inner: st.lists(inner, max_size=3)
                                          | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8))
def test_any_value_anywhere_in_a_previous_report_is_compared_without_a_crash(data: st.DataObject,
                                                                            value: object) -> None:
    document = previous_document()
    paths = list(_paths(document))
    where = data.draw(st.sampled_from(paths))
    target = document
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    changes = report.compare(RECORDS, document)
    report.change_lines(changes)                  # what the reports show of it (render_all above, cheaper)
    for key, shown in report.trend(changes).items():
        assert isinstance(key, str) and isinstance(shown, str)


RECORDS = load("nightly")

def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON document, as the keys and indexes that lead there."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        items: Iterable[tuple[object, object]] = value.items()
    elif isinstance(value, list):
        items = enumerate(value[:2])
    else:
        return found
    for key, item in items:
        found += _paths(item, (*prefix, key))
    return found


# ---- one outcome, one word (issue 41, 5) -----------------------------------------------------------

def test_a_kept_rebuild_is_kept_in_every_report_as_the_command_says() -> None:
    """Before: after a forced rebuild with identical content, the CLI said "0 published, 1 kept" while the HTML
    badge and headline said "1 published" (the record's status is `built`, its `kept` was not read)."""
    kept = {**load("nightly")[0], "status": "built", "kept": True, "pushed_tags": []}
    summary = summarize([kept])
    assert summary["counts"] == {"built": 0, "kept": 1, "skipped": 0, "failed": 0}
    said = report.status_words(META, [report.view(kept)])
    assert report.headline(summary, said) == "0 published, 1 kept, 0 skipped, 0 failed"
    page = render_html([kept], META)
    assert '<span class="pill s-kept">1 kept</span>' in page and '<span class="pill s-built">0 published</span>' in page
    assert '<span class="badge s-kept">kept</span>' in page
    assert "| kept |" in render_markdown([kept], META)
    published = {**kept, "kept": False}
    assert summarize([published])["counts"] == {"built": 1, "kept": 0, "skipped": 0, "failed": 0}
