"""Failures people can act on: a short cause per failed build, the log apart, identical causes once.

The causes are read from log tails as Docker and pip really print them; the grouping and the
exit code are what `build` and `nightly` print and return; the reports group the same way.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from accel_images.kb import compat
from accel_images.builder import failure
from accel_images.builder.bases import with_newer_bases
from accel_images.builder.engine import registry_error
from accel_images.errors import NotInRegistry, RegistryError
from accel_images.builder.progress import LiveProgress, PlainProgress, progress_for
from accel_images.report.reports import render_html, render_markdown
from accel_images.plan.variants import make_variant

PIP_STEP = ("Step 5/24 : RUN python3.11 -m venv /opt/venv     && /opt/venv/bin/pip install --no-cache-dir"
            " --no-index --find-links /tmp/wheels \"torch==2.14.0\"     && /opt/venv/bin/pip check")
PIP_TAIL = (
    " ---> Running in 6b547f328d80",
    "Looking in links: /tmp/wheels",
    "ERROR: Could not find a version that satisfies the requirement torch==2.14.0 (from versions: 2.13.0+cpu)",
    "ERROR: No matching distribution found for torch==2.14.0",
)
DOCKER_ERROR = ("The command '/bin/sh -c python3.11 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir"
                " --no-index --find-links /tmp/wheels \"torch==2.14.0\"' returned a non-zero code: 1")


def test_pip_missing_from_the_wheelhouse_is_said_in_one_short_line() -> None:
    cause = failure.explain(DOCKER_ERROR, PIP_STEP, PIP_TAIL, wheelhouse=Path("/var/cache/wheelhouse"))
    assert str(cause) == ("step 5/24 (pip install) failed: no torch==2.14.0 in wheelhouse /var/cache/wheelhouse"
                          " (it has 2.13.0+cpu)")
    assert len(str(cause)) < 120  # Docker's own error quotes the whole RUN line


def test_without_a_wheelhouse_the_cause_names_the_index() -> None:
    cause = failure.explain(DOCKER_ERROR, PIP_STEP, PIP_TAIL)
    assert "no torch==2.14.0 in the package index (it has 2.13.0+cpu)" in str(cause)


def unreachable_index_tail(url: str, error: str) -> tuple[str, ...]:
    """What pip prints (`pip --isolated download --index-url URL torch==2.13.0 --retries 1`, observed here with
    pip 23.2 on the host and Debian 12's pip 23.0.1 in a container, line for line) for an index it cannot
    connect to: a retry warning per attempt, then "from versions: none"."""
    retry = ("WARNING: Retrying (Retry(total={left}, connect=None, read=None, redirect=None, status=None)) after"
             f" connection broken by '{error}': /simple/torch/")
    return (" ---> Running in 6b547f328d80", f"Looking in indexes: {url}", retry.format(left=1), retry.format(left=0),
            "ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)",
            "ERROR: No matching distribution found for torch==2.13.0")


UNREACHABLE = [
    ("http://127.0.0.1:9/simple", "NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at"
     " 0x7f3b2c1d0e50>: Failed to establish a new connection: [Errno 111] Connection refused')", "connection refused"),
    ("https://no-such-host.invalid/simple", "NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection"
     " object at 0x7f3b2c1d0e50>: Failed to establish a new connection: [Errno -2] Name or service not known')",
     "unknown host"),
    ("https://127.0.0.1:18443/simple", "SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED]"
     " certificate verify failed: self-signed certificate (_ssl.c:1006)'))", "TLS certificate not trusted"),
]
"""The three observed here: a closed port, a name that does not resolve, `openssl s_server` with a self-signed
certificate (pip then also prints `Could not fetch URL ...: There was a problem confirming the ssl certificate`)."""


@pytest.mark.parametrize(("url", "error", "reason"), UNREACHABLE)
def test_an_unreachable_package_index_is_said_to_be_unreachable_not_empty(url: str, error: str, reason: str) -> None:
    pip_step = PIP_STEP.replace('--no-index --find-links /tmp/wheels "torch==2.14.0"', f'--index-url {url} torch==2.13.0')
    cause = str(failure.explain(DOCKER_ERROR, pip_step, unreachable_index_tail(url, error)))
    assert cause == (f"step 5/24 (pip install) failed: the package index is unreachable ({reason}): pip found no"
                     " torch==2.13.0 there")
    assert "it has none" not in cause


def test_an_unknown_failure_says_the_exit_code_and_the_last_output_not_the_command() -> None:
    tail = ("Step 3/3 : RUN ./configure && make", " ---> Running in abc", "make: *** [all] Error 2",
            "ERROR: The command '/bin/sh -c ./configure && make' returned a non-zero code: 2")
    cause = failure.explain("The command '/bin/sh -c ./configure && make' returned a non-zero code: 2",
                            "Step 3/3 : RUN ./configure && make", tail)
    assert str(cause) == "step 3/3 (run ./configure) failed: exit code 2; last output: make: *** [all] Error 2"


def test_apt_and_network_causes() -> None:
    apt = failure.explain("returned a non-zero code: 100", "Step 2/9 : RUN apt-get update && apt-get install -y pyton3",
                          ("E: Unable to locate package pyton3",))
    assert str(apt) == "step 2/9 (apt-get install) failed: apt has no package pyton3"
    offline = failure.explain("returned a non-zero code: 100", "Step 2/9 : RUN apt-get update",
                              ("Err:1 http://deb.debian.org/debian bookworm InRelease",
                               "  Temporary failure resolving 'deb.debian.org'"))
    assert "apt cannot reach deb.debian.org (unknown host)" in str(offline) and "--apt-mirror" in str(offline)


def test_step_labels() -> None:
    assert failure.step_label("Step 9/24 : RUN set -eux; apt-get install -y git") == "step 9/24 (apt-get install)"
    assert failure.step_label("Step 1/24 : FROM ubuntu:24.04") == "step 1/24 (from ubuntu:24.04)"
    assert failure.step_label("Step 1/24 : FROM ubuntu:24.04 AS build") == "step 1/24 (build stage from ubuntu:24.04)"
    assert failure.step_label("Step 39/42 : FROM image-${TARGETARCH}") == "step 39/42 (from image-<TARGETARCH>)"
    assert failure.step_label(" ---> Running in 6b547f328d80") is None


def docker_steps(dockerfile: str) -> list[str]:
    """The `Step N/M : ...` lines the classic builder prints for a Dockerfile (continuations joined),
    with the three LABEL steps the build adds (accel_images.builder.builder) last."""
    joined = dockerfile.replace("\\\n", " ")
    instructions = [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    instructions += ["LABEL io.accel-images.base.digest=sha256:0", "LABEL io.accel-images.fingerprint=sha256:1",
                     "LABEL org.opencontainers.image.created=2026-12-05T15:27:03Z"]
    return [f"Step {n}/{len(instructions)} : {text}" for n, text in enumerate(instructions, 1)]


def test_every_step_of_every_image_is_labelled_with_what_it_does() -> None:
    """Not `step 2/32 (SHELL ["/bin/bash",)` or `(t0="$(($(date)`: words, for every rendered Dockerfile."""
    labels: set[str] = set()
    for dockerfile in sorted(Path(__file__).resolve().parents[2].glob("images/*/*/Dockerfile")):
        steps = docker_steps(dockerfile.read_text())
        for step in steps:
            label = failure.step_label(step)
            assert label is not None, step
            what = label.split(" (", 1)[1][:-1]
            assert not any(mark in what for mark in ('["', "$(", '="', "${", "\\", "t0=")), (dockerfile, step, label)
            labels.add(what)
        assert str(failure.step_label(steps[-1])).endswith("(committing the image)")
    assert {"set the shell", "build argument SOURCE_DATE_EPOCH", "create the user", "OS updates",
            "arrange the image's own files", "copy from the build stage", "committing the image"} <= labels


def test_identical_causes_across_variants_are_grouped_once() -> None:
    cause = "base image ubuntu:24.04 not found in mirror 127.0.0.1:5000"
    failures = [failure.Failure(f"cpu/2.14.0-cpu-py3.{n}-ubuntu24.04", cause, f"/logs/{n}.log") for n in range(36)]
    failures.append(failure.Failure("cpu/2.14.0-cpu-py3.11-debian12", "step 5/24 (pip install) failed: x", "/l.log"))
    shown = failure.lines(failure.group(failures))
    assert shown[0] == f"FAILED 36 variants: {cause}"
    assert sum(cause in line for line in shown) == 1
    assert "FAILED cpu/2.14.0-cpu-py3.11-debian12: step 5/24 (pip install) failed: x" in shown
    assert shown[-1] == "  log: /l.log"  # the log path on its own line


def test_run_exit_code() -> None:
    assert failure.run_exit_code([]) == 0
    assert failure.run_exit_code([4, 4]) == 4  # every failure a registry out of reach
    assert failure.run_exit_code([4, 1]) == 1


def test_a_tag_missing_from_a_mirror_is_not_called_withdrawn_upstream() -> None:
    kb = compat.load_kb()
    variant = make_variant(kb, "cpu", None, "2.14", "3.12", "ubuntu24.04", "runtime")
    missing = registry_error("pull", "127.0.0.1:5000/library/ubuntu:24.04", "manifest unknown")
    said = with_newer_bases(missing, variant, kb, pulled_from="127.0.0.1:5000/library/ubuntu:24.04")
    assert isinstance(said, NotInRegistry) and said.exit_code == 1
    assert said.message == "base image ubuntu:24.04 not found in mirror 127.0.0.1:5000"
    assert "withdrawn" not in said.one_line() and variant.key not in said.one_line()
    upstream = with_newer_bases(registry_error("pull", "ubuntu:24.04", "manifest unknown"), variant, kb,
                                pulled_from="ubuntu:24.04")
    assert upstream.message == "base image ubuntu:24.04 not found in registry docker.io"
    assert "withdrawn upstream" in upstream.one_line()


def test_an_unreachable_mirror_names_the_mapping_that_pointed_there() -> None:
    """Not "pull through a mirror: --registry-mirror 127.0.0.1:5999=HOST", which the tool then refuses."""
    from accel_images.model.reference import Mirror
    kb = compat.load_kb()
    variant = make_variant(kb, "cpu", None, "2.13", "3.11", "debian12", "runtime")
    pulled = "127.0.0.1:5999/library/debian:bookworm-slim"
    down = registry_error("pull", pulled, 'Get "http://127.0.0.1:5999/v2/": dial tcp 127.0.0.1:5999: connect: '
                                          "connection refused")
    said = with_newer_bases(down, variant, kb, pulled_from=pulled, mirrors=(Mirror.parse("docker.io=127.0.0.1:5999"),))
    assert said.one_line() == (f"pull of {pulled} failed: registry 127.0.0.1:5999 unreachable (connection refused)"
                               " (the --registry-mirror docker.io=127.0.0.1:5999 points there: start that mirror or"
                               " correct the mapping)")
    assert said.exit_code == 4 and said.transient


def test_not_found_is_not_unreachable_and_unreachable_docker_hub_mentions_mirrors() -> None:
    missing = registry_error("pull", "accel-images/pytorch:nope", "manifest for x not found: manifest unknown")
    assert isinstance(missing, NotInRegistry) and missing.exit_code == 1
    down = registry_error("pull", "ubuntu:24.04", "Get https://registry-1.docker.io/v2/: dial tcp: i/o timeout")
    assert type(down) is RegistryError and down.exit_code == 4 and down.transient
    assert "--registry-mirror docker.io=HOST[/PATH]" in down.one_line()
    push = registry_error("push", "registry.example.com/x:1", "connection refused")
    assert "--registry-mirror" not in push.one_line()


def _variants():
    kb = compat.load_kb()
    return [make_variant(kb, "cpu", None, "2.14", p, "ubuntu24.04", "runtime") for p in ("3.11", "3.12")]


def test_plain_progress_streams_steps_not_raw_lines() -> None:
    stream = io.StringIO()
    v = _variants()[0]
    progress = PlainProgress(stream)
    for text in ("building", "building: Step 9/24 : RUN pip install torch", "building: ---> Running in 6b547f328d80",
                 "built in 3 s, smoke passed on cpu"):
        progress(v, text)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[1].startswith(f"[{v.key}]") and lines[1].endswith("building step 9/24 (pip install)")
    assert not any("Running in" in line for line in lines)
    verbose = io.StringIO()
    PlainProgress(verbose, verbosity=1)(v, "building: ---> Running in 6b547f328d80")
    assert "Running in" in verbose.getvalue()
    quiet = io.StringIO()
    for text in ("building", "building: Step 9/24 : RUN pip install torch", "built in 3 s"):
        PlainProgress(quiet, verbosity=-1)(v, text)
    assert quiet.getvalue().count("\n") == 1


def test_without_a_tty_progress_is_plain() -> None:
    assert isinstance(progress_for(_variants(), stream=io.StringIO()), PlainProgress)


def test_live_progress_never_leaves_building_after_an_interrupt() -> None:
    from rich.console import Console
    console = Console(file=io.StringIO(), force_terminal=True, width=80)
    first, second = _variants()
    live = LiveProgress([first, second], console=console)
    try:
        with live:
            live(first, "building: Step 3/24 : RUN apt-get update")
            live(first, "building: ---> Running in 6b547f328d80")
            assert live.rows[first] == "building step 3/24 (apt-get update)"
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert live.rows == {first: "interrupted", second: "not started"}
    output = console.file.getvalue()  # type: ignore[attr-defined]
    assert first.key in output  # 80 columns: the tag is folded, never cut


RECORDS = [{"variant": f"cpu/2.14.0-cpu-py3.{n}-ubuntu24.04", "vendor": "cpu", "tag": f"2.14.0-cpu-py3.{n}-ubuntu24.04",
            "torch": "2.14.0", "python": f"3.{n}", "os": "ubuntu24.04", "flavor": "runtime", "status": "failed",
            "error": "base image ubuntu:24.04 not found in mirror 127.0.0.1:5000", "log": f"/logs/{n}.log"}
           for n in range(10, 13)]


def test_reports_group_identical_causes_and_lead_with_a_verdict() -> None:
    markdown = render_markdown(RECORDS, {})
    assert "**3 of 3 variants failed**" in markdown
    assert markdown.count("not found in mirror 127.0.0.1:5000") == 1
    assert "### 3 variants" in markdown
    html = render_html(RECORDS, {})
    assert html.count("not found in mirror 127.0.0.1:5000") == 3 + 1  # each card's excerpt, the failure once
    assert "3 of 3 variants failed" in html and "1 variants" not in html
    green = render_markdown([{**RECORDS[0], "status": "built", "error": None}], {})
    assert "**all green: 1 variant ok**" in green
