"""Security promises: images run as a non-root user, credentials given to the builder never land in
an image, a log or the output, and smoke containers run locked down.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_security.py.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest


from accel_images.kb.compat import load_kb
from accel_images.credentials import hide_credentials
from accel_images.builder.progress import PlainProgress
from accel_images.cli.options import print_line, print_table, say
from accel_images.errors import InputError, RegistryError
from accel_images.formatting import inert
from accel_images.kb.sources import parse_registry_overrides
from accel_images.model.reference import Mirror
from accel_images.registry import Destination
from accel_images.report.reports import render_json
from accel_images.render.apt import AptMirror
from accel_images.model.devices import DeviceOptions
from accel_images.builder.engine import RunResult
from accel_images.render.contexts import APT_CREDENTIALS_ARG, CREDENTIALS_ARG, RenderOptions, Renderer
from accel_images.smoke.judge import Expectation
from accel_images.smoke.launcher import PIDS_LIMIT, SMOKE_LABEL, container_options, run_smoke
from accel_images.plan.variants import Expansion, make_variant
from accel_images.plan.matrix import User
from fakeimage import FakeEngine, honest_record

ROOT = Path(__file__).resolve().parents[2]
RUN = uuid.uuid4().hex[:10]
SECRET = f"s3cr3t-Pa55-{RUN}"
"""New for every run, so a layer or cache entry of an earlier run cannot pass for this one."""
INDEX_URL = f"https://builder:{SECRET}@127.0.0.1:9/simple/{{index}}"
"""The classic builder's line after each step: the image that step left (cached or new)."""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accel_images", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


# ---- credentials --------------------------------------------------------------------------------

def _cpu_context(options: RenderOptions):
    kb = load_kb()
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    expansion = Expansion((variant,), (), "accel-images/pytorch", User("dev", 1000, 1000))
    return Renderer(kb).context(variant, expansion, options)


def test_the_renderer_keeps_index_credentials_out_of_every_file_and_hands_them_to_the_build() -> None:
    context = _cpu_context(RenderOptions(pip_index_url=INDEX_URL))
    assert not [name for name, data in context.files.items() if SECRET.encode() in data]
    assert context.secret_args == {CREDENTIALS_ARG: f"builder:{SECRET}"}
    assert SECRET not in repr(context)
    dockerfile = context.files["Dockerfile"].decode()
    pip_steps = [step for step in dockerfile.split("\nRUN ")[1:] if "pip install" in step]
    assert len(pip_steps) == 1 and '--index-url "https://${FTP_PROXY}@127.0.0.1:9/simple/cpu"' in pip_steps[0]
    # Declared, the arg would be recorded in the history and cache key of every later RUN.
    assert not re.search(rf"^\s*ARG\s+{CREDENTIALS_ARG}\b", dockerfile, re.MULTILINE | re.IGNORECASE)
    # the pip step (its installs of torch and of IPython, its download of the build backend), and the comment
    # above it
    assert dockerfile.count(CREDENTIALS_ARG) == 4


APT_SECRET = f"apt-{SECRET}"
APT_MIRROR = f"deb.debian.org=http://mirror-user:{APT_SECRET}@127.0.0.1:9/debian"
AUTH_CONF = "/etc/apt/auth.conf.d/90accel-images-mirrors.conf"


def test_the_renderer_keeps_apt_mirror_credentials_out_of_every_file_and_hands_them_to_the_build() -> None:
    """Before: `--apt-mirror HOST=http://user:token@mirror/...` went into the sed of every apt step (a RUN
    line: the image history, the build log) and so into /etc/apt/sources.list of the image."""
    mirror = AptMirror.parse(APT_MIRROR)
    assert APT_SECRET not in repr(mirror) and mirror.prefix == "http://127.0.0.1:9/debian"
    context = _cpu_context(RenderOptions(apt_mirrors=(mirror,)))
    assert not [name for name, data in context.files.items() if APT_SECRET.encode() in data]
    assert APT_SECRET not in repr(context)
    assert context.secret_args == {
        APT_CREDENTIALS_ARG: f"machine http://127.0.0.1:9/debian login mirror-user password {APT_SECRET}"}
    dockerfile = context.files["Dockerfile"].decode()
    update = "/lists update"   # apt-get -o Dir::State::lists=... update (partials/apt.j2)
    apt_steps = [step for step in dockerfile.split("\nRUN ")[1:] if update in step]
    assert len(apt_steps) == 3   # the build stage's packages, the final stage's, the OS updates
    for step in apt_steps:
        # apt's login file, from the predefined arg, exists only while the step runs: no layer holds it
        login = f"printf '%s\\n' \"${{{APT_CREDENTIALS_ARG}}}\" > {AUTH_CONF}"
        assert step.index(login) < step.index(update) < step.rindex(f"rm -f {AUTH_CONF}"), step
        assert "s#https\\?://deb\\.debian\\.org#http://127.0.0.1:9/debian#g" in step
    assert not re.search(rf"^\s*ARG\s+{APT_CREDENTIALS_ARG}\b", dockerfile, re.MULTILINE)
    assert APT_CREDENTIALS_ARG != CREDENTIALS_ARG   # pip's credentials may come too, each in its own arg


@pytest.mark.parametrize(("given", "problem"), [
    ("deb.debian.org=http://mirror-user@127.0.0.1:9/debian", "give user:password"),
    ("deb.debian.org=http://mirror%20user:pw@127.0.0.1:9/debian", "no spaces"),
])
def test_apt_mirror_credentials_apt_cannot_take_are_refused(given: str, problem: str) -> None:
    line = _refusal(lambda: AptMirror.parse(given))
    assert line.startswith("--apt-mirror: ") and problem in line and "mirror-user" not in line, line


def test_an_index_without_credentials_or_a_wheelhouse_needs_no_secret(tmp_path: Path) -> None:
    plain = _cpu_context(RenderOptions(pip_index_url="https://127.0.0.1:9/simple/{index}"))
    assert plain.secret_args == {}
    assert b"--index-url https://127.0.0.1:9/simple/cpu " in plain.files["Dockerfile"]
    assert CREDENTIALS_ARG.encode() not in plain.files["Dockerfile"]
    for wheel in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "ipython-9.18.1-py3-none-any.whl",
                  "pip-26.3-py3-none-any.whl"):
        (tmp_path / wheel).write_bytes(b"wheel")
    offline = _cpu_context(RenderOptions(pip_index_url=INDEX_URL, pip_find_links=tmp_path,
                                         without_companions=("torchvision",)))
    assert offline.secret_args == {} and CREDENTIALS_ARG.encode() not in offline.files["Dockerfile"]


def test_hide_credentials_masks_userinfo_only() -> None:
    assert hide_credentials(f"build --pip-index-url {INDEX_URL}") == \
        "build --pip-index-url https://***@127.0.0.1:9/simple/{index}"
    assert hide_credentials("https://example.org/a@b") == "https://example.org/a@b"


def test_render_writes_no_credentials_to_disk(tmp_path: Path) -> None:
    result = cli("render", "--matrix", str(ROOT / "tests" / "matrices" / "cpu-debian.yaml"),
                 "--pip-index-url", INDEX_URL, "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]
    [dockerfile] = (tmp_path / "out").rglob("Dockerfile")
    assert "${" + CREDENTIALS_ARG + "}@127.0.0.1:9/simple/cpu" in dockerfile.read_text()
    assert SECRET not in result.stdout + result.stderr


# ---- smoke containment --------------------------------------------------------------------------

def test_smoke_options_drop_everything_the_device_does_not_need() -> None:
    plain = container_options(None, mem_limit="2g")
    assert plain["network_disabled"] is True
    assert plain["cap_drop"] == ["ALL"] and plain["cap_add"] == []
    assert "no-new-privileges" in plain["security_opt"]
    assert plain["mem_limit"] == "2g" and plain["pids_limit"] == PIDS_LIMIT
    device = container_options(DeviceOptions("gaudi", devices=("/dev/accel0",), cap_add=("SYS_NICE",)),
                               mem_limit="2g")
    assert device["cap_drop"] == ["ALL"] and device["cap_add"] == ["SYS_NICE"]
    assert device["network_disabled"] is True and device["devices"] == ["/dev/accel0:/dev/accel0:rwm"]


def test_run_smoke_applies_the_locked_down_options_and_its_label() -> None:
    runner = FakeEngine(RunResult(exit_code=1, stdout="", stderr="", timed_out=False))
    run_smoke(runner, "img", Expectation(vendor="cpu", torch="2.13.0", stack=None, python="3.11"),
              recorded=honest_record(), vendor_options=None, require_accelerator=False, mem_limit="3g")
    [call] = runner.calls
    locked = container_options(None, mem_limit="3g")
    assert {key: call["options"][key] for key in locked} == locked
    assert set(call["options"]) - set(locked) == {"entrypoint", "healthcheck", "volumes"}
    assert call["labels"][SMOKE_LABEL] == "true"


# ---- credentials in rejected values ----------------------------------------------------------------

def _refusal(parse: Callable[[], object]) -> str:
    with pytest.raises(InputError) as caught:
        parse()
    return caught.value.one_line()


@pytest.mark.parametrize(("parse", "shown"), [
    (lambda: RenderOptions(pip_index_url=f"https://builder:{SECRET}@mirror.example.com/simple; id"),
     "--pip-index-url: 'https://***@mirror.example.com/simple; id' is not an http(s):// or file:// URL"),
    (lambda: Destination.parse(f"https://builder:{SECRET}@ghcr.io/team"),
     "--registry: 'https://***@ghcr.io/team' is not [http[s]://]HOST[:PORT][/NAMESPACE]"),
    (lambda: Destination.parse(f"builder:{SECRET}@ghcr.io/team"),
     "--registry: '***@ghcr.io/team' is not [http[s]://]HOST[:PORT][/NAMESPACE]"),
    (lambda: Mirror.parse(f"docker.io=builder:{SECRET}@mirror.example.com/hub"),
     "--registry-mirror: 'docker.io=***@mirror.example.com/hub' is not REGISTRY=HOST[/PATH]"),
    (lambda: AptMirror.parse(f"deb.debian.org=ftp://builder:{SECRET}@mirror.example.com/debian"),
     "--apt-mirror: 'deb.debian.org=ftp://***@mirror.example.com/debian' is not HOST=URL"),
    (lambda: parse_registry_overrides((f"docker.io=builder:{SECRET}@mirror.example.com",)),
     "--registry-url: 'docker.io=***@mirror.example.com' is not REGISTRY=http[s]://HOST[:PORT]"),
    (lambda: RenderOptions(pip_index_url=f"https://builder:it's{SECRET}@mirror.example.com/simple"),
     "--pip-index-url: 'https://***@mirror.example.com/simple' is not an http(s):// or file:// URL"),
    (lambda: RenderOptions(pip_index_url=f"https://builder:pa/ss{SECRET}@mirror.example.com/simple"),
     "--pip-index-url: 'https://***@mirror.example.com/simple': the part before its last '@' holds a '/', '?' or"
     " '#', which ends a URL's host, so a password there would be read as the host (percent-encode them in the"
     " password: %2F, %3F, %23)"),
], ids=["pip-index-url", "registry-with-scheme", "registry", "registry-mirror", "apt-mirror", "kb-registry-url",
        "pip-index-url-password-with-quote", "pip-index-url-password-with-slash"])
def test_a_rejected_value_is_echoed_without_its_credentials(parse: Callable[[], object], shown: str) -> None:
    line = _refusal(parse)
    assert SECRET not in line and "builder" not in line, line
    assert line.startswith(shown), line


def test_hide_credentials_masks_every_userinfo_and_nothing_else() -> None:
    assert hide_credentials(f"https://u:{SECRET}@h/p and u:{SECRET}@h and x=u:{SECRET}@h") == \
        "https://***@h/p and ***@h and x=***@h"
    assert hide_credentials("https://h/simple/a@b mail me@example.com") == "https://h/simple/a@b mail ***@example.com"


TRICKY_USERINFO = {
    "token-ending-in-equals": f"builder:{SECRET}TOKEN==",
    "token-alone": f"{SECRET}TOKEN==",
    "password-with-at": f"builder:pa@ss{SECRET}",
    "password-with-slash": f"builder:pa/ss{SECRET}",
    "password-with-quote": f"builder:it's{SECRET}",
    "percent-encoded": f"builder:p%40ss%2F%27{SECRET}",
    "password-with-query-and-fragment": f"builder:p?x#y{SECRET}",
}
"""Userinfo a shell passes as given: what a password or a token may hold, RFC 3986 or not."""


@pytest.mark.parametrize("userinfo", TRICKY_USERINFO.values(), ids=TRICKY_USERINFO.keys())
def test_hide_credentials_masks_any_userinfo(userinfo: str) -> None:
    url = f"http://{userinfo}@mirror.example.com/simple/{{index}}"
    for given, shown in [
        (f"accel-images build --pip-index-url {url} --vendor cpu",
         "accel-images build --pip-index-url http://***@mirror.example.com/simple/{index} --vendor cpu"),
        (f"--pip-index-url={url}", "--pip-index-url=http://***@mirror.example.com/simple/{index}"),
        (f"--pip-index-url: '{url}' is not", "--pip-index-url: 'http://***@mirror.example.com/simple/{index}' is not"),
        (f"--registry {userinfo}@ghcr.io/team", "--registry ***@ghcr.io/team"),
        (f"docker.io={userinfo}@mirror.example.com/hub", "docker.io=***@mirror.example.com/hub"),
    ]:
        assert hide_credentials(given) == shown, given


@pytest.mark.parametrize("text", ["https://h/simple/a@b", "reg.example:5000/team/pytorch@sha256:" + "a" * 64,
                                  "pytorch@sha256:" + "a" * 64, "torch @ file:///wheels/torch.whl",
                                  "http://127.0.0.1:8080/simple"])
def test_hide_credentials_leaves_paths_digests_and_plain_urls_alone(text: str) -> None:
    assert hide_credentials(text) == text


def _report_texts(directory: Path) -> dict[str, str]:
    """Each report file's text as a reader gets it: JSON decoded, HTML and XML entities resolved."""
    import html
    import xml.etree.ElementTree as ET
    texts = {}
    for path in directory.iterdir():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            text = json.dumps(json.loads(text), ensure_ascii=False)
        elif path.suffix == ".html":
            text = html.unescape(text)
        elif path.suffix == ".xml":
            root = ET.fromstring(text)
            text = " ".join([*(element.text or "" for element in root.iter()),
                             *(value for element in root.iter() for value in element.attrib.values())])
        texts[path.name] = text
    return texts


@pytest.mark.parametrize("userinfo", TRICKY_USERINFO.values(), ids=TRICKY_USERINFO.keys())
def test_no_report_format_shows_credentials_whatever_they_hold(userinfo: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """report.json, summary.md, index.html and junit.xml, from build's own writer (its command line from
    sys.argv) and from the writers given the raw text; a failure quoting the URL and a note too."""
    from accel_images.builder.outcome import Outcome, outcome_record
    from accel_images.cli.build import write_build_report
    from accel_images.report.reports import REPORT_FILES, write_reports
    from accel_images.state import StateDir
    url = f"http://{userinfo}@mirror.example.com/simple/{{index}}"
    monkeypatch.setattr(sys, "argv", ["accel-images", "build", "--pip-index-url", url, "--vendor", "cpu"])
    variant = make_variant(load_kb(), "cpu", None, "2.13", "3.11", "debian12", "runtime")
    failed = Outcome(variant, "failed", "accel-images/pytorch:x", error=f"pip could not reach {url}: refused",
                     notes=(f"fetched from {url}",), exit_code=1)
    page = write_build_report(StateDir(tmp_path / "state"), [failed])
    write_reports([outcome_record(failed)], tmp_path / "direct", {"command": " ".join(sys.argv), "kind": "nightly"})
    for directory in (page.parent, tmp_path / "direct"):
        texts = _report_texts(directory)
        assert set(texts) == set(REPORT_FILES.values())
        for name, text in texts.items():
            assert SECRET not in text, f"{directory.name}/{name}"
            assert "http://***@mirror.example.com/simple/{index}" in text, f"{directory.name}/{name}"


@pytest.mark.parametrize("userinfo", TRICKY_USERINFO.values(), ids=TRICKY_USERINFO.keys())
def test_kb_sources_behind_a_login_are_shown_and_recorded_without_it(userinfo: str) -> None:
    """`kb check --wheel-index-url https://user:token@mirror/whl`: its unreachable line, its findings' source
    (which `kb update` writes into the knowledge base) and its list of URLs asked."""
    from accel_images.kb.check import Finding, Report
    from accel_images.kb.sources import SourceUnreachable
    url = f"https://{userinfo}@mirror.example.com/whl/cu130/torch/"
    down = SourceUnreachable("wheel index cu130", url, "connection refused")
    finding = Finding("new-variant", "torch 2.15 cuda 13.0", "new", url, "Vm")
    shown = json.dumps(Report("2026-12-01", (finding,), (down,), (url,)).as_json()) + down.one_line()
    assert SECRET not in shown and "https://***@mirror.example.com/whl/cu130/torch/" in finding.source


# ---- outside text on a terminal ------------------------------------------------------------------

HOSTILE = "ok\x1b]0;owned\x07\x1b[2J\x9b1m\u202eevil\x7f"
SHOWN = "ok\\x1b]0;owned\\x07\\x1b[2J\\x9b1m\\u202eevil\\x7f"


def test_inert_escapes_what_a_terminal_acts_on_and_keeps_every_script() -> None:
    assert inert(HOSTILE) == SHOWN
    assert inert("torch 2.13.0+cpu on AMD EPYC 日本 é") == "torch 2.13.0+cpu on AMD EPYC 日本 é"


def test_errors_tables_lines_and_progress_print_outside_text_inert(capsys: pytest.CaptureFixture[str]) -> None:
    assert RegistryError(f"registry r answered 400 (DENIED: {HOSTILE})").one_line() == \
        f"registry r answered 400 (DENIED: {SHOWN})"
    print_table(("tag", "smoke"), [("t", f"passed on {HOSTILE}")])
    print_line(f"note {HOSTILE}")
    say(f"why: {HOSTILE}", err=True)
    stream = io.StringIO()
    variant = make_variant(load_kb(), "cpu", None, "2.13", "3.11", "debian12", "runtime")
    PlainProgress(stream)(variant, f"FAILED: {HOSTILE}")
    printed = capsys.readouterr()
    for text in (printed.out, printed.err, stream.getvalue()):
        assert [char for char in text if not char.isprintable() and char != "\n"] == [], repr(text)
        assert SHOWN in text


def test_the_json_report_escapes_what_a_terminal_acts_on_and_loses_nothing() -> None:
    """`nightly --json` and `build --json` print report.json: a record's error may quote a registry.
    JSON already escapes C0 controls; C1 controls and bidirectional overrides it leaves raw."""
    record = {"variant": "cpu/x", "status": "failed", "error": f"registry r answered 400 (DENIED: {HOSTILE})"}
    text = render_json([record], {"command": "nightly"})
    assert [char for char in text if not char.isprintable() and char != "\n"] == [], repr(text)
    assert json.loads(text)["variants"][0]["error"] == record["error"]
    assert "日本" in render_json([{**record, "error": "日本"}], {})    # printable text of any script stays
