"""The HTML and Markdown reports answer the morning questions: is everything green, what changed since
the previous run, what broke and why, what to pull. The pages are the three runs of
docs/report/scenarios.py (the screenshots beside it are of the same pages)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from accel_images.report.reports import (compare, read_previous, render_html, render_json, render_markdown,
                                          write_reports)

ROOT = Path(__file__).resolve().parents[2]


def scenarios() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scenarios", ROOT / "docs" / "report" / "scenarios.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("scenarios", module)
    spec.loader.exec_module(module)
    return module


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_title_says_which_run_and_when() -> None:
    records, meta = scenarios().all_green()
    assert "<title>accel-images nightly report, 2026-12-03 02:00 UTC</title>" in render_html(records, meta)
    assert render_markdown(records, meta).startswith("# accel-images nightly report, 2026-12-03 02:00 UTC\n")


def test_an_all_green_run_says_so_first_and_that_nothing_changed() -> None:
    records, meta = scenarios().all_green()
    page = text_of(render_html(records, meta))
    assert page.index(f"all green: {len(records)} variants ok") < page.index("Failures")
    assert "Nothing changed: the same variants pass as in the previous run." in page
    assert "Since the previous run (2026-12-02 02:00 UTC)" in page


def test_one_new_failure_is_named_with_its_last_good_run() -> None:
    records, meta = scenarios().one_new_failure()
    page = text_of(render_html(records, meta))
    key = "rocm/2.14.1-rocm7.14-py3.12-ubuntu24.04"
    assert f"1 of {len(records)} variants failed" in page
    assert f"1 new failure: {key}" in page
    assert "new failure; last good: the run of 2026-12-02 02:00 UTC, sha256:" in page
    assert "No matching distribution found for torch==2.14.1" in page


def test_a_failure_carried_over_keeps_the_run_it_last_passed_in() -> None:
    """Failing yesterday and today: the last good run is the day before yesterday's, carried forward."""
    records, meta = scenarios().shared_cause()
    changes = meta["changes"]
    assert len(changes.still_failing) == 36 and not changes.new_failures
    assert {good["run"] for good in changes.last_good.values()} == {"2026-12-01T02:00:00+00:00"}
    document = json.loads(render_json(records, meta))
    assert document["changes"]["still_failing"] == list(changes.still_failing)


def test_36_variants_failing_for_one_cause_are_one_group_with_the_cause_once() -> None:
    records, meta = scenarios().shared_cause()
    html = render_html(records, meta)
    assert html.count('<section class="failure"') == 1
    assert html.count("apt cannot reach archive.ubuntu.com (connection refused)") == 1
    page = text_of(html)
    assert "36 variants still failing; last good: the run of 2026-12-01 02:00 UTC Root cause, shared by 36 variants" \
        in page
    assert "and 31 more (under Failures)" in page
    assert "(one cause, 36 variants)" in page


def test_one_variant_is_singular() -> None:
    records, meta = scenarios().one_new_failure()
    one = [r for r in records if r["status"] == "failed"]
    page = text_of(render_html(one, {**meta, "changes": compare(one, None)}))
    assert "1 of 1 variant failed" in page and "1 variants" not in page
    assert "No previous report to compare with" in page


def test_each_card_says_why_it_was_rebuilt_and_the_page_how_to_pull_by_full_digest() -> None:
    records, meta = scenarios().all_green()
    html = render_html(records, meta)
    built = next(r for r in records if r["status"] == "built")
    assert "why: base image changed (sha256:" in text_of(html)
    pull = f"docker pull registry.example.com/ml/accel-images/pytorch@{built['digest']}"
    assert len(built["digest"]) == len("sha256:") + 64 and pull in html
    assert f"`{pull}`" in render_markdown(records, meta)


def test_a_skipped_image_shows_its_earlier_pass_not_not_run() -> None:
    records, meta = scenarios().all_green()
    skipped = next(r for r in records if r["status"] == "skipped")
    page = text_of(render_html([skipped], meta))
    assert "smoke passed earlier in the run of 2026-11-29" in page and "not run" not in page


@pytest.mark.parametrize("stored", ["{not json", "[]", '{"variants": 3}'])
def test_an_unreadable_previous_report_is_no_previous_report(tmp_path: Path, stored: str) -> None:
    (tmp_path / "report.json").write_text(stored)
    assert read_previous(tmp_path) is None
    assert read_previous(tmp_path / "missing") is None


def test_write_reports_compares_with_what_an_earlier_write_left(tmp_path: Path) -> None:
    module = scenarios()
    before = module.run(module.YESTERDAY, lambda v: None)
    write_reports(before, tmp_path / "one", module.meta(module.YESTERDAY))
    now, _ = module.one_new_failure()
    changes = compare(now, read_previous(tmp_path / "one"))
    assert changes.new_failures == ("rocm/2.14.1-rocm7.14-py3.12-ubuntu24.04",)
    assert changes.previous == "2026-12-02T02:00:00+00:00"


def test_a_failure_for_another_cause_than_yesterdays_is_not_still_failing() -> None:
    """Yesterday the mirror was down, today a package is missing: news, not "still failing"."""
    def record(key: str, error: str) -> dict[str, str]:
        vendor, tag = key.split("/")
        return {"variant": key, "vendor": vendor, "tag": tag, "torch": "2.13.0", "python": "3.11", "os": "debian12",
                "flavor": "runtime", "status": "failed", "error": error}
    same, other = "cpu/2.13.0-cpu-py3.11-debian12", "cpu/2.13.0-cpu-py3.12-ubuntu24.04"
    unreachable = "step 4/32 (apt-get install) failed: apt cannot reach the mirror 127.0.0.1:9 (connection refused)"
    previous = {"meta": {"started": "2026-12-02T02:00:00+00:00"},
                "variants": [record(same, unreachable), record(other, unreachable)]}
    now = [record(same, unreachable), record(other, "step 17/32 (apt-get install) failed: apt has no package pyton3")]
    changes = compare(now, previous)
    assert changes.still_failing == (same,) and dict(changes.other_cause) == {other: unreachable}
    page = text_of(render_html(now, {"changes": changes}))
    assert f"1 still failing, for the same cause: {same}" in page
    assert f"1 failing for another cause than before: {other}" in page
    assert "failing for another cause (before: step 4/32 (apt-get install) failed: apt cannot reach" in page
    markdown = render_markdown(now, {"changes": changes})
    assert "1 failing for another cause than before" in markdown and "still failing, for the same cause" in markdown


def test_one_word_for_one_outcome_in_every_place_of_a_report() -> None:
    """A nightly's image built, tested and pushed is "published" in its summary line, its table, its pill
    and its badge (no CSS upper-casing it into a third spelling); a build's is "built" everywhere."""
    records, meta = scenarios().all_green()
    page = render_html(records, meta)
    assert "text-transform: uppercase" not in page
    assert re.search(r'class="pill s-built">\d+ published<', page) and 'class="badge s-built">published<' in page
    assert 'class="badge s-built">built<' not in page and "published" in render_markdown(records, meta)
    build = [{key: value for key, value in record.items() if key not in ("pushed_tags", "full_ref", "digest")}
             for record in records]
    local = render_html(build, {**meta, "kind": "build"})
    assert 'class="badge s-built">built<' in local and "published" not in text_of(local).replace(
        "the nightly is what publishes", "")


def test_a_build_report_says_where_its_images_are_not_that_nothing_was_published() -> None:
    records, meta = scenarios().all_green()
    build = [{key: value for key, value in record.items() if key not in ("pushed_tags", "full_ref", "digest")}
             for record in records]
    page = text_of(render_html(build, {**meta, "kind": "build"}))
    assert "Nothing was published by this run" not in page
    assert "Where the images are On the machine that built them" in page


def test_log_paths_are_links_and_a_missing_log_is_said_once() -> None:
    records, meta = scenarios().shared_cause()
    unbuilt = [{**record, "log": None} if record["status"] == "failed" else record for record in records]
    page = render_html(unbuilt, meta)   # a base image out of reach: 36 variants, not one build log
    assert "log none" not in text_of(page) and text_of(page).count("No build log") == 1
    with_log = [dict(records[0], status="failed", error="step 7/32 (pip install) failed: x",
                     log="/srv/state/logs/cpu/a.log")]
    linked = render_html(with_log, {})
    assert '<a href="file:///srv/state/logs/cpu/a.log"><code>/srv/state/logs/cpu/a.log</code></a>' in linked
