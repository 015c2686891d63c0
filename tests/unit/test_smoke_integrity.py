"""The launcher's checks from outside the image, on a fake image's file system (tests/fakeimage.py).

Each test changes one thing of an honest image the way a hostile image would, and expects the
launcher to refuse it before the workload runs, with one line naming the file (and, for a changed
file, both hashes). The same attacks against real images are in tests/test_faults_smoke.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from accel_images.builder.engine import RunResult
from accel_images.smoke.integrity import Entry, ImageConfig, differences, parse_record, take_inventory
from accel_images.smoke.judge import Expectation, judge
from accel_images.smoke.launcher import NotMounted, check_mounted, run_smoke

from fakeimage import ELF, PATH, SITE, TORCH_FILES, FakeEngine, FakeFiles, FakeInfo, file_entry, honest_files, \
    honest_record, link, replaced, without
from test_smoke_judge import RECORDED_CPU

CPU = Expectation(vendor="cpu", torch="2.13.0", stack=None, python="3.11")
PASSED = RunResult(exit_code=0, stdout=json.dumps(RECORDED_CPU) + "\n", stderr="", timed_out=False)
FORGER = b"#!/bin/sh\necho '{\"schema\": 1, \"ok\": true}'\n"


def smoke(engine: FakeEngine, **kwargs: object):
    """run_smoke against the honest image's build record unless a test gives another one."""
    kwargs.setdefault("recorded", honest_record())
    return run_smoke(engine, "img", CPU, vendor_options=None, require_accelerator=False, **kwargs)  # type: ignore[arg-type]


def refused(engine: FakeEngine, **kwargs: object) -> str:
    """The first failure of a run the launcher refused; the workload must not have run."""
    result = smoke(engine, **kwargs)
    assert not result.ok
    assert engine.calls == [], "the workload ran in an image the launcher should have refused"
    assert all("\n" not in line and line.startswith("refused before the run: ") for line in result.failures)
    return result.failures[0].removeprefix("refused before the run: ")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_honest_image_runs_through_its_interpreter_as_the_entry_point() -> None:
    engine = FakeEngine(PASSED)
    result = smoke(engine)
    assert result.ok, result.failures
    [call] = engine.calls
    assert call["options"]["entrypoint"] == ["/opt/venv/bin/python"]
    assert call["options"]["healthcheck"] == {"test": ["NONE"]}
    [(source, mount)] = call["options"]["volumes"].items()
    assert Path(source).name.startswith("accel-images-smoke-")  # a fresh directory holding the package's workload
    assert not Path(source).exists()                              # gone after the run
    assert mount["mode"] == "ro" and f"{mount['bind']}/smoke.py" == call["command"][1]
    assert mount["bind"].startswith("/run/accel-images-smoke-") and call["command"][0] == "-I"


def test_a_script_in_place_of_python_is_refused() -> None:
    files = replaced(honest_files(), "/opt/venv/bin/python", FORGER)
    line = refused(FakeEngine(PASSED, files))
    assert line.startswith("/opt/venv/bin/python resolves to /opt/venv/bin/python, which is not an executable "
                           "binary (it starts with '#!/bin/sh")


def test_a_script_at_the_end_of_the_link_chain_is_refused() -> None:
    line = refused(FakeEngine(PASSED, replaced(honest_files(), "/usr/bin/python3.11", FORGER)))
    assert "resolves to /usr/bin/python3.11, which is not an executable binary" in line


def test_a_binary_outside_the_environments_home_is_refused() -> None:
    files = {**honest_files(), "/opt/venv/bin/python": link("/opt/venv/bin/python", "/opt/forger")}
    files["/opt/forger"] = file_entry("/opt/forger", ELF + b"forger")
    line = refused(FakeEngine(PASSED, files))
    assert line == ("/opt/venv/bin/python resolves to /opt/forger, outside the environment's base interpreter "
                    "directory /usr/bin (/opt/venv/pyvenv.cfg)")


def test_system_site_packages_are_refused() -> None:
    files = replaced(honest_files(), "/opt/venv/pyvenv.cfg", b"home = /usr/bin\ninclude-system-site-packages = true\n")
    assert refused(FakeEngine(PASSED, files)) == "/opt/venv/pyvenv.cfg adds the system site-packages to sys.path"


def test_no_python_on_path_is_refused() -> None:
    files = without(honest_files(), "/opt/venv/bin/python")
    line = refused(FakeEngine(PASSED, files, FakeInfo(env=("PATH=/opt/venv/bin",))))
    assert line == "no python on the image's PATH (/opt/venv/bin)"


def test_deleted_torch_is_refused() -> None:
    line = refused(FakeEngine(PASSED, without(honest_files(), f"{SITE}/torch", f"{SITE}/torch-2.13.0+cpu.dist-info")))
    assert line.startswith(f"torch is not installed: no torch/__init__.py in {SITE}")


def test_a_replaced_torch_init_is_named_with_both_hashes() -> None:
    fake = b"print('{\"schema\": 1, \"ok\": true}'); import os; os._exit(0)\n"
    files = replaced(honest_files(), f"{SITE}/torch/__init__.py", fake)
    original = honest_files()[f"{SITE}/torch/__init__.py"].sha256
    line = refused(FakeEngine(PASSED, files))
    assert line == (f"{SITE}/torch/__init__.py is sha256:{sha(fake)}, but torch-2.13.0+cpu.dist-info/RECORD "
                    f"lists sha256:{original}")


def test_a_missing_libtorch_is_refused() -> None:
    line = refused(FakeEngine(PASSED, without(honest_files(), f"{SITE}/torch/lib/libtorch_cpu.so")))
    assert line.startswith(f"{SITE}/torch/lib/libtorch_cpu.so is absent, but torch-2.13.0+cpu.dist-info/RECORD lists")


@pytest.mark.parametrize("path", [f"{SITE}/sitecustomize.py", f"{SITE}/usercustomize.py",
                                  "/usr/lib/python3.11/sitecustomize.py", "/usr/lib/python3.11/torch.py",
                                  "/usr/lib/python3.11/lib-dynload/torch.cpython-311-x86_64-linux-gnu.so"])
def test_start_up_hooks_and_shadows_are_refused(path: str) -> None:
    line = refused(FakeEngine(PASSED, replaced(honest_files(), path, b"import os\n")))
    assert line.startswith(path + " ")


def test_a_pth_file_no_record_lists_is_refused_and_one_a_record_lists_is_not() -> None:
    line = refused(FakeEngine(PASSED, replaced(honest_files(), f"{SITE}/evil.pth", b"import evil\n")))
    assert line == (f"{SITE}/evil.pth is a .pth file no installed distribution's RECORD lists: "
                    "it can run code at interpreter start")
    owned = honest_files({"distutils-precedence.pth": b"import os\n", **TORCH_FILES})
    assert smoke(FakeEngine(PASSED, owned), recorded=honest_record(owned)).ok


def test_injected_libraries_and_a_root_user_are_refused() -> None:
    assert refused(FakeEngine(PASSED, info=FakeInfo(env=(PATH, "LD_PRELOAD=/opt/evil.so")))) == (
        "the image sets LD_PRELOAD=/opt/evil.so: a library loaded into every process, which the smoke test "
        "cannot vouch for")
    preload = replaced(honest_files(), "/etc/ld.so.preload", b"/opt/evil.so\n")
    assert refused(FakeEngine(PASSED, preload)).startswith("the image has /etc/ld.so.preload")
    assert refused(FakeEngine(PASSED, info=FakeInfo(user="root"))) == (
        "the image runs as root (User root); accel-images images run as a non-root user")
    assert refused(FakeEngine(PASSED, replaced(honest_files(), "/usr/lib/python311.zip", b"PK"))).startswith(
        "/usr/lib/python311.zip exists")


def inventory(files: dict[str, Entry]):
    return take_inventory(FakeFiles(files), ImageConfig((PATH,), "1000:1000"), "3.11")


def test_the_build_record_catches_what_the_image_alone_cannot() -> None:
    built = inventory(honest_files())
    recorded = parse_record(json.dumps(built.record("sha256:built")))
    assert recorded is not None and differences(built, recorded) == []
    assert smoke(FakeEngine(PASSED), recorded=recorded).ok
    # A standard-library file is in no RECORD: only the build's record knows what it held.
    changed, original = b"# os\nimport forger\n", b"# os\n"
    derived = replaced(honest_files(), "/usr/lib/python3.11/os.py", changed)
    assert inventory(derived).failures == ()
    line = refused(FakeEngine(PASSED, derived), recorded=recorded)
    assert line == (f"/usr/lib/python3.11/os.py is sha256:{sha(changed)}, the build recorded "
                    f"sha256:{sha(original)}")
    # torch replaced together with its RECORD: consistent in itself, not what was built.
    forger = b"import forger\n"
    forged = honest_files({**TORCH_FILES, "torch/__init__.py": forger})
    assert inventory(forged).failures == ()
    line = refused(FakeEngine(PASSED, forged), recorded=recorded)
    assert line.startswith(f"{SITE}/torch/__init__.py is sha256:{sha(forger)}, the build recorded "
                           f"sha256:{built.files[f'{SITE}/torch/__init__.py'].removeprefix('sha256:')} (and 1 more")


def test_a_damaged_record_counts_as_none() -> None:
    for text in ("", "[]", '{"version": 1, "files": {"a": 1}}', '{"version": 99, "files": {}}'):
        assert parse_record(text) is None


def test_the_workload_seen_at_the_mount_path_must_be_the_one_mounted() -> None:
    other = b"print('forged')\n"
    engine = FakeEngine(PASSED, mounted=lambda source, target: file_entry(target, other))
    result = smoke(engine)
    assert not result.ok
    (line,) = result.failures
    assert line.startswith("refused before the run: the workload at /run/accel-images-smoke-")
    assert f"in the container is sha256:{sha(other)}, not the mounted sha256:" in line
    with pytest.raises(NotMounted, match="is absent, not the mounted"):
        check_mounted(FakeFiles({}), "/run/x/smoke.py", "0" * 64)


def test_a_report_without_this_runs_nonce_fails() -> None:
    canned = FakeEngine(PASSED, echo_nonce=False)
    result = smoke(canned)
    assert not result.ok
    assert "smoke JSON does not carry this run's nonce: a report written in advance, not by this run's workload" \
        in result.failures


def test_a_second_report_beside_the_real_one_fails() -> None:
    text = json.dumps({**RECORDED_CPU, "nonce": "n"}) + "\n"
    result = judge(CPU, text + text, 0, False, nonce="n")
    assert result.failures == ("stdout holds 2 smoke reports; the workload prints one",)
    assert judge(CPU, text, 0, False, nonce="n").ok
