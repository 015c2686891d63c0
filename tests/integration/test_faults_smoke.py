"""Forged smoke verdicts: images that try to pass `accel-images smoke` without a working torch.

Each case derives a hostile image from the published CPU image (built by test_build_integration's
fixture, whose state directory holds the build's record) and runs the real CLI on it. Before the
launcher checked images from outside, every one of these passed (`smoke` exit 0) while torch was
deleted or replaced; now each is refused with one line naming the file, or (the image's own
entry point and smoke.py) simply not used. Run from a directory with no state directory, the
structural checks still name what they find, and the image is refused for having no build
record (a poisoned `.pyc`, which only the record catches, passed before). The forgers echo the run's nonce, as a forger that
reads its arguments would: the nonce alone stops only a canned document (tests/test_smoke_integrity.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from conftest import SUITE_IMAGE as IMAGE   # tests/conftest.py published_build's, named for this run alone
from test_build_integration import cli
from accel_images.smoke.launcher import NO_RECORD
from test_smoke_judge import RECORDED_CPU

pytestmark = [pytest.mark.engine, pytest.mark.registry, pytest.mark.slow]

SITE = "/opt/venv/lib/python3.11/site-packages"
FORGED_REPO = "accel-images-test/forged"
# A success report as the real workload prints it, with the run's nonce put in by the forger.
FORGED = json.dumps({**RECORDED_CPU, "nonce": "NONCE", "forged": True})
FORGER_SH = ("#!/bin/sh\n"
             "nonce=; while [ $# -gt 0 ]; do [ \"$1\" = --nonce ] && nonce=\"$2\"; shift; done\n"
             "sed \"s/NONCE/$nonce/\" /opt/forged.json\n")
FORGER_PY = ("import sys, os\n"
             "argv = sys.argv if len(sys.argv) > 1 else open('/proc/self/cmdline').read().split('\\0')\n"
             "nonce = argv[argv.index('--nonce') + 1] if '--nonce' in argv else ''\n"
             "sys.stdout.write(open('/opt/forged.json').read().replace('NONCE', nonce)); sys.stdout.flush()\n"
             "os._exit(0)\n")
DELETE_TORCH = f"rm -rf {SITE}/torch {SITE}/torch-*.dist-info"


def dockerfile(*lines: str) -> str:
    """FROM the published image, as root for the changes, back to its user at the end."""
    return "\n".join([f"FROM {IMAGE}", "USER 0:0", "COPY forged.json forger.sh forger.py /opt/",
                      "RUN chmod 0755 /opt/forger.sh", *lines, "USER 1000:1000", ""])


CASES = {
    "python-script": dockerfile(f"RUN {DELETE_TORCH} && rm /opt/venv/bin/python && cp /opt/forger.sh /opt/venv/bin/python"),
    # Debian's own sitecustomize (the standard library's, ahead of site-packages) imports apport's hook.
    "apport-hook": dockerfile(f"RUN {DELETE_TORCH} && cp /opt/forger.py {SITE}/apport_python_hook.py"),
    "pth": dockerfile(f"RUN {DELETE_TORCH} && echo \"import os; exec(open('/opt/forger.py').read())\" > {SITE}/forger.pth"),
    "torch-init": dockerfile(f"RUN cp /opt/forger.py {SITE}/torch/__init__.py"),
    "torch-and-record": dockerfile(
        f"RUN cp /opt/forger.py {SITE}/torch/__init__.py && python3 -c \"import base64, hashlib, pathlib, re; "
        f"h = base64.urlsafe_b64encode(hashlib.sha256(pathlib.Path('{SITE}/torch/__init__.py').read_bytes())"
        f".digest()).rstrip(b'=').decode(); r = next(pathlib.Path('{SITE}').glob('torch-*.dist-info/RECORD')); "
        "r.write_text(re.sub(r'^torch/__init__\\.py,sha256=[^,]*,\\d*$', 'torch/__init__.py,sha256=' + h + ',', "
        "r.read_text(), flags=re.M))\""),
    "entrypoint-and-smoke-py": dockerfile("RUN cp /opt/forger.py /opt/accel-images/smoke.py",
                                          'ENTRYPOINT ["/opt/forger.sh"]'),
    "ld-preload": dockerfile("ENV LD_PRELOAD=/opt/forger.so"),
    "ld-so-preload": dockerfile("RUN echo /opt/forger.so > /etc/ld.so.preload"),
    "root-user": "\n".join([f"FROM {IMAGE}", "USER 0:0", ""]),
    # torch's byte code replaced by the forger's, its 16-byte header kept (the source and its hash are
    # unchanged, so Python loads it in place of torch/__init__.py, and the real torch never imports);
    # written with -B, so no other byte code changes. Every file a RECORD lists is untouched.
    "poisoned-pyc": dockerfile(
        f"RUN /opt/venv/bin/python -I -B -c \"import importlib.util, marshal, pathlib; "
        f"source = '{SITE}/torch/__init__.py'; pyc = pathlib.Path(importlib.util.cache_from_source(source)); "
        "pyc.write_bytes(pyc.read_bytes()[:16] + marshal.dumps(compile(open('/opt/forger.py').read(), source, "
        "'exec')))\""),
}


@pytest.fixture(scope="module")
def forged(published_build: dict, docker_client: docker.DockerClient,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every case's image, built once for the module and removed afterwards."""
    run = uuid.uuid4().hex[:8]
    built: dict[str, str] = {}
    [record] = published_build["records"]
    base = record["image_id"]   # by ID: the name is shared with every other run on this engine
    try:
        for case, text in CASES.items():
            context = tmp_path_factory.mktemp(case)
            (context / "Dockerfile").write_text(text.replace(f"FROM {IMAGE}\n", f"FROM {base}\n", 1))
            (context / "forged.json").write_text(FORGED + "\n")
            (context / "forger.sh").write_text(FORGER_SH)
            (context / "forger.py").write_text(FORGER_PY)
            tag = f"{FORGED_REPO}:{case}-{run}"
            docker_client.images.build(path=str(context), tag=tag, rm=True, forcerm=True, network_mode="none")
            built[case] = tag
        yield built
    finally:
        for tag in built.values():
            docker_client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def nowhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory without a state directory: the checks that need no build record."""
    return tmp_path_factory.mktemp("no-state")


def smoke(image: str, cwd: Path) -> tuple[int, str, str]:
    result = cli("smoke", image, "--json", cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr.strip()


def refusal(image: str, cwd: Path) -> str:
    """The one line that refuses a smoke run (exit 1), after the phase the run had reached (`smoke` says
    each phase as it starts). With no state directory in `cwd`, the refusal ends saying there is no build
    record, whatever the structural checks found before."""
    code, _, said = smoke(image, cwd)
    assert code == 1, said
    *phases, stderr = said.splitlines()
    assert phases == [f"{image}: checking the image's interpreter and torch from outside (file hashes, nothing runs)"], said
    prefix = f"{image}: smoke failed on unknown device: refused before the run: "
    assert stderr.startswith(prefix), stderr
    if not (cwd / ".accel-images").exists():
        assert stderr.endswith(f"refused before the run: {NO_RECORD}"), stderr
    return stderr.removeprefix(prefix)


def test_a_script_in_place_of_python_is_refused(forged: dict[str, str], nowhere: Path) -> None:
    line = refusal(forged["python-script"], nowhere)
    assert line.startswith("/opt/venv/bin/python resolves to /opt/venv/bin/python, which is not an executable "
                           "binary (it starts with '#!/bin/sh"), line
    assert f"torch is not installed: no torch/__init__.py in {SITE}" in line


@pytest.mark.parametrize(("case", "said"), [
    ("apport-hook", f"{SITE}/apport_python_hook.py runs at interpreter start, before the smoke workload"),
    ("pth", f"{SITE}/forger.pth is a .pth file no installed distribution's RECORD lists: it can run code at "
            "interpreter start"),
])
def test_a_start_up_hook_printing_the_report_with_torch_deleted_is_refused(forged: dict[str, str], nowhere: Path,
                                                                           case: str, said: str) -> None:
    line = refusal(forged[case], nowhere)
    assert said in line
    assert f"torch is not installed: no torch/__init__.py in {SITE}" in line


def test_a_replaced_torch_init_is_named_with_both_hashes(forged: dict[str, str], nowhere: Path) -> None:
    line = refusal(forged["torch-init"], nowhere)
    assert line.startswith(f"{SITE}/torch/__init__.py is sha256:"), line
    assert ", but torch-2.13.0+cpu.dist-info/RECORD lists sha256:" in line


def test_torch_replaced_with_its_record_is_caught_by_the_build_record(forged: dict[str, str],
                                                                      published_build: dict, tmp_path: Path) -> None:
    """The image alone is consistent here; what the build recorded of this fingerprint is not what it holds."""
    (tmp_path / ".accel-images").symlink_to(published_build["state"])  # the default state directory of that cwd
    line = refusal(forged["torch-and-record"], cwd=tmp_path)
    assert line.startswith(f"{SITE}/torch/__init__.py is sha256:"), line
    assert ", the build recorded sha256:" in line


def test_the_images_entry_point_and_smoke_py_are_not_what_runs(forged: dict[str, str], published_build: dict,
                                                               tmp_path: Path) -> None:
    """The derived image holds the files its build recorded (only /opt/accel-images changed): it is run, and
    what runs is the launcher's interpreter and workload."""
    (tmp_path / ".accel-images").symlink_to(published_build["state"])
    code, stdout, stderr = smoke(forged["entrypoint-and-smoke-py"], tmp_path)
    assert code == 0, stderr
    report = json.loads(stdout)
    assert "forged" not in report, "the image's own entry point or smoke.py wrote the report"
    assert {check["name"] for check in report["checks"]} >= {"mlp_training", "pip_install"}
    assert stderr.endswith("smoke passed on cpu")


@pytest.mark.parametrize(("case", "said"), [
    ("ld-preload", "the image sets LD_PRELOAD=/opt/forger.so: a library loaded into every process, which the "
                   "smoke test cannot vouch for"),
    ("ld-so-preload", "the image has /etc/ld.so.preload: a library loaded into every process, which the smoke "
                      "test cannot vouch for"),
    ("root-user", "the image runs as root (User 0:0); accel-images images run as a non-root user"),
])
def test_injected_libraries_and_a_root_user_are_refused(forged: dict[str, str], nowhere: Path, case: str,
                                                        said: str) -> None:
    assert refusal(forged[case], nowhere).startswith(said)


def test_poisoned_byte_code_with_no_build_record_is_refused(forged: dict[str, str], nowhere: Path) -> None:
    """Before: with no build record the byte code went unchecked, and the forger's .pyc, loaded in place of
    torch/__init__.py, printed a green report (`smoke passed on cpu`, exit 0)."""
    line = refusal(forged["poisoned-pyc"], nowhere)
    assert line == NO_RECORD, line


def test_poisoned_byte_code_is_named_against_the_build_record(forged: dict[str, str], published_build: dict,
                                                              tmp_path: Path) -> None:
    (tmp_path / ".accel-images").symlink_to(published_build["state"])
    line = refusal(forged["poisoned-pyc"], tmp_path)
    assert line.startswith(f"{SITE}/torch/__pycache__/__init__.cpython-311.pyc is sha256:"), line
    assert ", the build recorded sha256:" in line
