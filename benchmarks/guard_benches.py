"""The entry-point guard's cost at every container start: a CUDA image's guard on a fake H100 host that
reads the image's facts file, side by side with the same guard when the image has none (it then decides
from the environment its Dockerfile sets, and starts no python).

The host is the one tests/unit/test_guard_hosts.py fakes: a PATH of the tools the guard calls, a
`nvidia-smi` that answers from a list, and the host's Python as the image's `python3`. Both runs use
the environment the rendered image sets (tests/dockerfile_env.py), so the guard takes its real path.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import ROOT, BenchResult, Row, alternating

TAG = "2.15.0-cuda13.2-py3.12-ubuntu24.04"
FULL_RUNS, QUICK_RUNS = 41, 5
TOOLS = ("sort", "head", "cut", "tr", "id", "stat", "cat", "printf", "sh", "dirname", "true")
NVIDIA_SMI = """#!/bin/sh
if [ "$1" = "-q" ]; then
    printf 'GPU 00000000:09:00.0\\n    Product Name : NVIDIA H100 80GB HBM3\\n    Product Brand : NVIDIA\\n'
    exit 0
fi
case "$1" in
    --query-gpu=driver_version) echo 610.43.02 ;;
    --query-gpu=compute_cap) echo 9.0 ;;
    --query-gpu=name) echo "NVIDIA H100 80GB HBM3" ;;
    *) exit 2 ;;
esac
"""
FACTS = {"schema": 1, "platform": {"os": "linux", "machine": "x86_64"}, "python": "3.12.3",
         "torch": {"version": "2.15.0+cu132", "public": "2.15.0", "local": "cu132"}, "backend": "cuda",
         "toolkit": {"cuda": "13.2", "hip": None, "xpu": None, "cudnn": "9.26.0", "nccl": "2.30.7"},
         "archs": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], "ptx": [],
         "companions": {"torchvision": "0.29.2"}, "distributions": {}}


def fake_host(root: Path) -> tuple[Path, dict[str, str]]:
    """The guard script and the environment it runs with on a fake H100 host under `root`."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dockerfile_env import rendered_env

    from accel_images.render.contexts import guard_script

    bin_dir = root / "bin"
    (root / "host" / "dev").mkdir(parents=True)
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3").symlink_to(sys.executable)
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    guard = root / "guard.sh"
    guard.write_bytes(guard_script("cuda"))
    env = {"PATH": str(bin_dir), "ACCEL_IMAGES_DEV_ROOT": str(root / "host"), "LC_ALL": "C",
           **rendered_env("cuda", TAG)}
    return guard, env


def start(guard: Path, env: dict[str, str]) -> None:
    """One container start's guard, running `true` as the command."""
    result = subprocess.run(["sh", str(guard), "true"], env=env, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"the guard refused the fake H100 host: {result.stderr.strip()}")


def bench_guard_facts(quick: bool) -> BenchResult:
    result = BenchResult("guard_facts")
    with tempfile.TemporaryDirectory(prefix="accel-bench-guard-") as scratch:
        root = Path(scratch)
        guard, env = fake_host(root)
        facts = root / "facts.json"
        facts.write_text(json.dumps(FACTS))
        with_facts = env | {"ACCEL_IMAGES_FACTS": str(facts)}
        without = env | {"ACCEL_IMAGES_FACTS": str(root / "none.json")}
        for action in (with_facts, without):
            start(guard, action)   # warm-up: the file cache, python's byte code
        measured, baseline = alternating([("facts file read", lambda: start(guard, with_facts)),
                                          ("no facts file", lambda: start(guard, without))],
                                         QUICK_RUNS if quick else FULL_RUNS)
    result.rows.append(Row("guard_facts", f"CUDA guard on an H100 host ({TAG}), one start", measured, baseline,
                           measured.median / baseline.median, "of the guard without a facts file",
                           note=f"+{(measured.median - baseline.median) * 1000:.0f} ms a container start"))
    result.commands += ["sh guard.sh true   # ACCEL_IMAGES_FACTS=facts.json: the guard reads it with python3 -I -S",
                        "sh guard.sh true   # baseline: no facts file, the rendered environment decides"]
    result.notes.append("The difference is one python start (`python3 -I -S`, json from the standard library), "
                        "which tests/unit/test_guard_hosts.py counts; the guard reads the file only for the "
                        "checks that need it.")
    return result


GUARD_BENCHES = {"guard_facts": bench_guard_facts}
