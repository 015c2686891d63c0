"""Benchmarks that need the Docker engine: no-op and incremental rebuilds, parallel builds,
image size and smoke latency.

The rebuild benchmarks use light images (benchmarks/templates/, benchmarks/light_matrix.yaml)
so a matrix of several variants builds in seconds; they go through the project's own CLI,
exactly as a user runs it. Base images are local tags under a benchmark-only mirror prefix,
so nothing here touches names other work on the same engine uses. Image size and smoke
latency use the real published CPU image.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
import time
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from benchmarks.harness import (PYTHON, ROOT, BenchResult, Row, Series, interleaved, run_checked, shown,
                                speedup, time_once)

HERE = Path(__file__).resolve().parent
LIGHT_MATRIX = HERE / "light_matrix.yaml"
LIGHT_TEMPLATES = HERE / "templates"
BENCH_MIRROR = "docker.io=bench.accel-images.invalid/hub"
BASE_SOURCES = ("127.0.0.1:5000/library/debian:bookworm-slim", "local/debian:bookworm-slim")
WHEELHOUSE = Path("/var/cache/accel-images/wheelhouse")
CPU_IMAGE = "accel-images/pytorch:2.13.0-cpu-py3.11-debian12"
CPU_BUILD = ["build", "--vendor", "cpu", "--torch", "2.13", "--os", "debian12",
             "--registry-mirror", "docker.io=127.0.0.1:5000", "--pip-find-links", str(WHEELHOUSE)]
BASELINE_REPO = "accel-images-bench/baseline"
NAIVE_REPO = "accel-images-bench/naive"
LIGHT_CPU_VARIANTS = 4
LIGHT_CUDA_VARIANTS = 4


def engine_reachable() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        result = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                                text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"docker engine not reachable: {err}"
    return None if result.returncode == 0 else "docker engine not reachable: " + result.stderr.strip()[:200]


# ---- the light workspace ------------------------------------------------------------------------

@dataclass
class Workspace:
    """A private copy of the light templates, a state dir, and what was created (to clean up)."""

    root: Path
    created: set[str] = field(default_factory=set)

    @property
    def templates(self) -> Path:
        return self.root / "templates"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def build(self, *args: str, result: BenchResult | None = None) -> list[dict]:
        """`accel-images build` on the light matrix; returns the build report's records."""
        command = [PYTHON, "-m", "builder", "build", "--matrix", str(LIGHT_MATRIX), "--templates",
                   str(self.templates), "--registry-mirror", BENCH_MIRROR, "--no-smoke", "--network", "none",
                   "--state-dir", str(self.state), *args]
        if result is not None and shown(command) not in result.commands:
            result.commands.append(shown(command))
        run_checked(command)
        records = json.loads((self.state / "reports" / "build-latest.json").read_text())
        self.created.update(r["image_id"] for r in records if r.get("image_id"))
        return records


@contextmanager
def workspace() -> Iterator[Workspace]:
    root = Path(tempfile.mkdtemp(prefix="accel-bench-"))
    space = Workspace(root)
    shutil.copytree(LIGHT_TEMPLATES, space.templates)
    tag_bench_bases()
    try:
        yield space
    finally:
        remove_images(sorted(space.created))
        shutil.rmtree(root, ignore_errors=True)


def tag_bench_bases() -> None:
    """Every base the light matrix names, as a local tag of the Debian stand-in under the bench prefix."""
    from builder import compat
    from builder.matrix import load_matrix
    from builder.render import Mirror, mirrored
    from builder.variant import expand
    source = next((s for s in BASE_SOURCES if _image_exists(s)), None)
    if source is None:
        raise RuntimeError(f"no local Debian base image ({' or '.join(BASE_SOURCES)}): run `make engine`")
    mirrors = (Mirror.parse(BENCH_MIRROR),)
    for variant in expand(load_matrix(LIGHT_MATRIX), compat.load_kb()).variants:
        run_checked(["docker", "tag", source, mirrored(variant.base_image, mirrors)])


def _image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def remove_images(refs: list[str]) -> None:
    for ref in refs:
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True)


def fresh_uid() -> int:
    """A user ID no earlier build used, so the RUN step misses the layer cache (a real build)."""
    return random.randint(20000, 60000)


def statuses(records: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    return counts


def require(records: list[dict], status: str, count: int, what: str) -> None:
    got = statuses(records)
    if len(records) != count or got.get(status, 0) != count:
        raise RuntimeError(f"{what}: expected {count} {status}, got {got}")


# ---- 1. no-op nightly -------------------------------------------------------------------------

def nightly_available() -> bool:
    result = subprocess.run([PYTHON, "-m", "builder", "nightly", "--help"], cwd=ROOT, capture_output=True)
    return result.returncode == 0


def bench_noop(quick: bool) -> BenchResult:
    result = BenchResult("noop")
    repeats = 2 if quick else 5
    wheels = ["--pip-find-links", str(WHEELHOUSE)] if WHEELHOUSE.is_dir() else []
    if nightly_available():
        result.notes.append("`accel-images nightly` exists, but this benchmark times the no-op path of "
                            "`accel-images build` (the fingerprint skip that nightly relies on).")
    else:
        result.notes.append("`accel-images nightly` is not available yet: this times the no-op path of "
                            "`accel-images build` (render, fingerprint, one image inspect per variant, skip).")
    with workspace() as space:
        space.build("--vendor", "cpu", *wheels, result=result)
        contexts = sorted((space.state / "contexts" / "cpu").iterdir())
        loop = docker_build_loop(contexts, space)
        result.commands += [shown(c) for c in loop]
        run_loop(loop)  # warm the layer cache

        def noop() -> None:
            require(space.build("--vendor", "cpu", *wheels), "skipped", LIGHT_CPU_VARIANTS, "no-op build")

        ours, baseline = interleaved(("accel-images build (no-op)", noop),
                                     ("docker build loop (warm cache)", lambda: run_loop(loop)), repeats)
    result.rows.append(Row("noop", f"{len(contexts)} CPU variants, nothing changed", ours, baseline,
                           speedup(baseline, ours), "faster", ">= 20x faster", speedup(baseline, ours) >= 20,
                           "contexts include the wheelhouse" if wheels else "contexts without wheelhouse"))
    result.notes.append(f"Both sides see the same {len(contexts)} rendered contexts"
                        + (f" (each with the {WHEELHOUSE} wheelhouse hard-linked in, as the real CPU"
                           " contexts have)" if wheels else "") + "; the docker loop sends each context "
                        "to the daemon, which answers every step from its cache.")
    return result


def docker_build_loop(contexts: list[Path], space: Workspace) -> list[list[str]]:
    args = ["--build-arg", "USER_NAME=dev", "--build-arg", "USER_UID=1000", "--build-arg", "USER_GID=1000"]
    commands = []
    for context in contexts:
        ref = f"{BASELINE_REPO}:{context.name}"
        space.created.add(ref)
        commands.append(["docker", "build", "-q", *args, "-t", ref, str(context)])
    return commands


def run_loop(commands: list[list[str]]) -> None:
    for command in commands:
        run_checked(command)


# ---- 2. incremental -----------------------------------------------------------------------------

def bench_incremental(quick: bool) -> BenchResult:
    result = BenchResult("incremental")
    repeats = 1 if quick else 3
    full: list[float] = []
    incremental: list[float] = []
    rebuilt: list[float] = []
    with workspace() as space:
        template = space.templates / "vendors" / "cuda.Dockerfile.j2"
        for run in range(repeats):
            uid = str(fresh_uid())
            records: list[dict] = []
            full.append(time_once(lambda: records.extend(space.build("--force", "--uid", uid, result=result))))
            require(records, "built", LIGHT_CPU_VARIANTS + LIGHT_CUDA_VARIANTS, "full rebuild")
            with template.open("a") as stream:
                stream.write(f'RUN echo "benchmark edit {uid}-{run}" > /opt/edit.txt\n')
            records.clear()
            incremental.append(time_once(lambda: records.extend(space.build("--uid", uid, result=result))))
            rebuilt.append(float(statuses(records).get("built", 0)))
    result.commands.insert(0, f"(between the two builds: append a RUN line to {template.relative_to(space.root)})")
    full_s = Series(f"full rebuild ({LIGHT_CPU_VARIANTS + LIGHT_CUDA_VARIANTS} images)", tuple(full))
    incr_s = Series("after editing the cuda template", tuple(incremental))
    counts = Series("images rebuilt", tuple(rebuilt), "images")
    affected = Series("affected variants", tuple(float(LIGHT_CUDA_VARIANTS) for _ in rebuilt), "images")
    result.rows.append(Row("incremental", "images rebuilt after editing one vendor's template", counts, affected,
                           None, "", "= affected variants",
                           all(c == LIGHT_CUDA_VARIANTS for c in rebuilt), f"of {LIGHT_CPU_VARIANTS + LIGHT_CUDA_VARIANTS} variants"))
    result.rows.append(Row("incremental", "time to bring the matrix up to date", incr_s, full_s,
                           speedup(full_s, incr_s), "faster", "report only", None))
    result.notes.append("Each full rebuild uses a fresh --uid so no RUN step is answered from the layer cache; "
                        "the incremental build that follows keeps that uid, so only the edit differs.")
    return result


# ---- 4. parallel builds -------------------------------------------------------------------------

def bench_parallel(quick: bool) -> BenchResult:
    result = BenchResult("parallel")
    repeats = 1 if quick else 3
    job_counts = (1, 2, 4)
    times: dict[int, list[float]] = {jobs: [] for jobs in job_counts}
    with workspace() as space:
        for run in range(repeats):
            order = job_counts[run % len(job_counts):] + job_counts[:run % len(job_counts)]
            for jobs in order:
                uid = str(fresh_uid())
                records: list[dict] = []
                times[jobs].append(time_once(lambda: records.extend(space.build(
                    "--vendor", "cpu", "--force", "--uid", uid, "--jobs", str(jobs), result=result))))
                require(records, "built", LIGHT_CPU_VARIANTS, f"--jobs {jobs}")
    baseline = Series("--jobs 1", tuple(times[1]))
    for jobs in job_counts[1:]:
        measured = Series(f"--jobs {jobs}", tuple(times[jobs]))
        result.rows.append(Row("parallel", f"{LIGHT_CPU_VARIANTS} independent images, --jobs {jobs}", measured,
                               baseline, speedup(baseline, measured), "faster", "report only", None))
    result.notes.append("Every run uses a fresh --uid (no layer-cache hits); the order of the --jobs values "
                        "rotates between repeats so host load drifts hit each alike.")
    return result


# ---- 5. image size ------------------------------------------------------------------------------

def bench_image_size(quick: bool) -> BenchResult:
    result = BenchResult("image_size")
    if not _image_exists(CPU_IMAGE):
        if quick:
            result.skipped = f"{CPU_IMAGE} is not built (quick mode does not build it)"
            return result
        command = [PYTHON, "-m", "builder", *CPU_BUILD]
        result.commands.append(shown(command))
        run_checked(command, timeout_s=3600)
    base = base_of(CPU_IMAGE)
    image_size, base_size = image_bytes(CPU_IMAGE), image_bytes(base)
    payload = files_bytes(CPU_IMAGE) - files_bytes(base)
    floor = base_size + payload
    result.commands += [f"docker image inspect --format '{{{{.Size}}}}' {CPU_IMAGE}",
                        f"docker run --rm --entrypoint du {CPU_IMAGE} -sxb /   (and the same in {base})"]
    naive_ref, naive_size, naive_s = build_naive(base, quick, result)
    ours = Series(CPU_IMAGE, (float(image_size),), "B")
    floor_s = Series("floor: base + payload", (float(floor),), "B")
    naive = Series("naive single-stage", (float(naive_size),), "B")
    result.rows.append(Row("image_size", "CPU image size against its floor", ours, floor_s,
                           image_size / floor, "of floor", "<= 1.02x floor", image_size / floor <= 1.02))
    result.rows.append(Row("image_size", "naive single-stage image (copies the wheelhouse)", naive, floor_s,
                           naive_size / floor, "of floor", "report only", None,
                           "tiny wheelhouse in quick mode" if quick else ""))
    result.rows.append(Row("image_size", "CPU image against the naive one", ours, naive, image_size / naive_size,
                           "of naive", "report only", None))
    result.notes += [f"Base {base}: {base_size / 1e6:,.1f} MB; payload measured inside the image "
                     f"(du -sxb / in the image minus the same in the base): {payload / 1e6:,.1f} MB.",
                     "Sizes are deterministic for a given image: N=1.",
                     f"Naive image built in {naive_s:.0f} s as {naive_ref}, then removed."]
    return result


def base_of(image: str) -> str:
    """The base the image was built from: its base digest label, else the CPU build's mirror ref."""
    from builder.build import BASE_DIGEST_LABEL
    labels = json.loads(run_checked(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}",
                                     image]).stdout) or {}
    digest = labels.get(BASE_DIGEST_LABEL)
    if digest and _image_exists(digest):
        return digest
    return BASE_SOURCES[0]


def image_bytes(ref: str) -> int:
    return int(run_checked(["docker", "image", "inspect", "--format", "{{.Size}}", ref]).stdout.strip())


def files_bytes(ref: str) -> int:
    """Apparent size of every file in the image's file system, measured inside a container."""
    out = run_checked(["docker", "run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "du", ref,
                       "-sxb", "/"]).stdout
    return int(out.split()[0])


NAIVE_DOCKERFILE = """\
FROM {base}
RUN apt-get update \\
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \\
    && rm -rf /var/lib/apt/lists/*
COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/venv \\
    && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels {requirement}
"""


def build_naive(base: str, quick: bool, result: BenchResult) -> tuple[str, int, float]:
    """A single-stage image that installs torch from a copied wheelhouse (which stays in a layer)."""
    with tempfile.TemporaryDirectory(prefix="accel-bench-naive-") as tmp:
        context = Path(tmp)
        wheels = context / "wheels"
        wheels.mkdir()
        chosen = sorted(WHEELHOUSE.glob("typing_extensions-*.whl"))[:1] if quick else sorted(WHEELHOUSE.iterdir())
        for wheel in chosen:
            shutil.copy2(wheel, wheels / wheel.name)
        requirement = "typing_extensions" if quick else '"torch==2.13.0"'
        (context / "Dockerfile").write_text(NAIVE_DOCKERFILE.format(base=base, requirement=requirement))
        ref = f"{NAIVE_REPO}:{'quick' if quick else 'torch'}"
        command = ["docker", "build", "-q", "--network", "host", "-t", ref, str(context)]
        result.commands.append(shown(command) + "   # Dockerfile: " + " / ".join(
            line.strip() for line in NAIVE_DOCKERFILE.splitlines() if line.startswith(("FROM", "RUN", "COPY"))))
        seconds = time_once(lambda: run_checked(command, timeout_s=3600))
        size = image_bytes(ref)
    remove_images([ref])
    return ref, size, seconds


# ---- 6. smoke latency ---------------------------------------------------------------------------

def bench_smoke_latency(quick: bool) -> BenchResult:
    result = BenchResult("smoke_latency")
    if not _image_exists(CPU_IMAGE):
        result.skipped = f"{CPU_IMAGE} is not built (run `make image-offline` or the image_size benchmark)"
        return result
    from builder.cli import expectation_from_labels
    from builder.engine import Engine
    from builder.smoke.launcher import container_options, run_smoke
    repeats = 1 if quick else 5
    engine = Engine.connect()
    info = engine.inspect_image(CPU_IMAGE)
    expectation = expectation_from_labels(CPU_IMAGE, info.labels)

    def smoke() -> None:
        verdict = run_smoke(engine, CPU_IMAGE, expectation, vendor_options=None, require_accelerator=False)
        if not verdict.ok:
            raise RuntimeError(f"smoke failed: {verdict.summary()}")

    def bare() -> None:
        outcome = engine.run(CPU_IMAGE, ["true"], options=container_options(None, mem_limit="8g"), timeout_s=120)
        if outcome.exit_code != 0:
            raise RuntimeError(f"`true` in {CPU_IMAGE} exited {outcome.exit_code}: {outcome.stderr[-300:]}")

    ours, baseline = interleaved(("smoke: container start to JSON verdict", smoke),
                                 ("same container running `true`", bare), repeats)
    result.rows.append(Row("smoke_latency", "CPU image, start to judged JSON result", ours, baseline,
                           ours.median / baseline.median, "of a bare container", "report only", None))
    result.commands += [f"{PYTHON.replace(str(ROOT) + '/', '')} -c 'run_smoke(Engine.connect(), \"{CPU_IMAGE}\", ...)'"
                        f"   # what `accel-images smoke {CPU_IMAGE}` runs",
                        f"Engine.run(\"{CPU_IMAGE}\", [\"true\"])   # baseline, through the same engine wrapper"]
    result.notes.append("Both go through builder.engine.Engine (create, start, wait, logs, remove); the "
                        "baseline runs `true` with the same container options behind the same entrypoint guard, so the difference is the "
                        "workload: Python start, torch import, the checks and the JSON.")
    return result


ENGINE_BENCHES = {
    "noop": bench_noop,
    "incremental": bench_incremental,
    "parallel": bench_parallel,
    "image_size": bench_image_size,
    "smoke_latency": bench_smoke_latency,
}
