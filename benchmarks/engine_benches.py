"""Benchmarks that need the Docker engine: no-op and incremental rebuilds, parallel builds,
image size and smoke latency.

The rebuild benchmarks use light images (benchmarks/templates/, benchmarks/light_matrix.yaml)
so a matrix of several variants builds in seconds; they go through the project's own CLI,
exactly as a user runs it. Base images are local tags under a benchmark-only mirror prefix,
so nothing here touches names other work on the same engine uses. Image size and smoke
latency use the real published CPU image.
"""

from __future__ import annotations

import os
import random
import uuid
import shutil
import subprocess
import tempfile
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator

from benchmarks.harness import (PYTHON, ROOT, WHEELHOUSE, WHEELHOUSE_ARGS, WITHOUT_COMPANION_ARGS, BenchResult, Row,
                                Series, alternating, interleaved, repeat, run_checked, shown, speedup, time_once)

HERE = Path(__file__).resolve().parent
LIGHT_MATRIX = HERE / "light_matrix.yaml"
LIGHT_TEMPLATES = HERE / "templates"
BENCH_MIRROR = "docker.io=bench.accel-images.invalid/hub"
BASE_SOURCES = ("127.0.0.1:5000/library/debian:bookworm-slim", "local/debian:bookworm-slim")
CPU_IMAGE = "accel-images/pytorch:2.13.0-cpu-py3.11-debian12"
CPU_BUILD = ["build", "--vendor", "cpu", "--torch", "2.13", "--os", "debian12",
             "--registry-mirror", "docker.io=127.0.0.1:5000", *WHEELHOUSE_ARGS]
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
        command = [PYTHON, "-m", "accel_images", "build", "--matrix", str(LIGHT_MATRIX), "--templates",
                   str(self.templates), "--registry-mirror", BENCH_MIRROR, "--no-smoke", "--network", "none",
                   "--state-dir", str(self.state), *args]
        if result is not None and shown(command) not in result.commands:
            result.commands.append(shown(command))
        run_checked(command)
        records = json.loads((self.state / "reports" / "build-latest" / "report.json").read_text())["variants"]
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
    from accel_images.kb import compat
    from accel_images.plan.matrix import load_matrix
    from accel_images.model.reference import Mirror, mirrored
    from accel_images.plan.variants import expand
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

REAL_MIRROR = "docker.io=127.0.0.1:5000"
"""The mirror the real CPU contexts use: nightly pulls every base on each run, so it must be a real registry."""
BENCH_REGISTRY_HOST = "127.0.0.1:5000"
NOOP_SIZES = (4, 8, 16)
QUICK_NOOP_SIZES = (4,)
NOOP_REPEATS = {4: 5, 8: 3, 16: 3}
STARTUP_REPEATS = 5


def cpu_matrix_yaml(variants: int) -> str:
    """The light matrix's CPU entry widened to `variants` (runtime + devel of the newest torch releases).

    At 4 it has as many variants as the light matrix's CPU entry; more variants add older torch releases
    on the same OS and Python, so every variant has the same base and the same wheelhouse (standin_wheelhouse).
    """
    from accel_images.kb import compat
    from accel_images.versions import sort_versions
    releases = sort_versions(compat.load_kb().torch, newest_first=True)[:max(1, variants // 2)]
    torch = ", ".join(f'"{release}"' for release in releases)
    return ("schema: 1\nimage: accel-images-bench/light\nuser: {name: dev, uid: 1000, gid: 1000}\nvendors:\n"
            f"  cpu:\n    - torch: [{torch}]\n      python: [\"3.11\"]\n      os: [debian12]\n"
            "      flavor: [runtime, devel]\n")


def standin_wheelhouse(dest: Path, matrix: Path) -> Path:
    """A wheelhouse of as many bytes as the real one, holding a torch wheel for every release the matrix names.

    The light images install no torch, but a build with `--pip-find-links` refuses a variant whose torch
    the wheelhouse lacks (accel_images.render.companions.check_wheelhouse), and the real one holds a single
    release. Here its other wheels are hard-linked, and its torch wheel's bytes are shared out among
    stand-in files named for the matrix's releases, so every context still carries the real wheelhouse's
    size (what the baseline's `docker build` sends to the daemon), whatever the number of releases.
    """
    from accel_images.kb import compat
    from accel_images.plan.matrix import load_matrix
    from accel_images.plan.variants import expand
    dest.mkdir()
    real = sorted(w for w in WHEELHOUSE.iterdir() if w.is_file())
    torches = [w for w in real if w.name.startswith("torch-")]
    for wheel in real:
        if wheel not in torches:
            os.link(wheel, dest / wheel.name)
    wanted = sorted({(v.torch, v.wheel_index, v.python)
                     for v in expand(load_matrix(matrix), compat.load_kb()).variants})
    share = sum(w.stat().st_size for w in torches) // max(1, len(wanted))
    for torch, local, python in wanted:
        tag = "cp" + python.replace(".", "")
        with (dest / f"torch-{torch}+{local}-{tag}-{tag}-manylinux_2_28_x86_64.whl").open("wb") as out:
            for start in range(0, share, 1 << 24):
                out.write(os.urandom(min(1 << 24, share - start)))
    return dest


@dataclass
class NoopSetup:
    """One size of the no-op benchmark: its matrix, the commands of both sides, what to clean up."""

    variants: int
    matrix: Path
    nightly: list[str]
    build: list[str]
    loop: list[list[str]]
    pushed: list[str]


def bench_noop(quick: bool) -> BenchResult:
    result = BenchResult("noop")
    sizes = QUICK_NOOP_SIZES if quick else NOOP_SIZES
    namespace = f"accel-bench-{uuid.uuid4().hex[:8]}"
    with workspace() as space:
        require_registry_base()
        startup_cmd = [PYTHON, "-m", "accel_images", "--version"]
        startup = repeat("accel-images --version", lambda: run_checked(startup_cmd), 1 if quick else STARTUP_REPEATS)
        result.commands.append(shown(startup_cmd))
        measured: dict[int, tuple[Series, Series]] = {}
        pushed: list[str] = []
        try:
            for n in sizes:
                setup = prepare_noop(space, n, namespace, result)
                pushed += setup.pushed
                measured[n] = time_noop_size(space, setup, 1 if quick else NOOP_REPEATS.get(n, 3), result)
        finally:
            delete_remote(pushed)
    result.rows.append(Row("noop", "CLI start-up alone (`accel-images --version`)", startup, None, None, "",
                           "report only", None, "paid once by every nightly"))
    add_noop_rows(result, measured, startup)
    result.notes += noop_notes(namespace, sizes)
    return result


def require_registry_base() -> None:
    """The base the real mirror names must be in the local registry (the nightly pulls it)."""
    from accel_images.model.reference import Mirror, mirrored
    base = mirrored("debian:bookworm-slim", (Mirror.parse(REAL_MIRROR),))
    if subprocess.run(["docker", "pull", "-q", base], capture_output=True).returncode != 0:
        raise RuntimeError(f"{base} cannot be pulled: run `make engine` (it seeds the local registry)")


def prepare_noop(space: Workspace, variants: int, namespace: str, result: BenchResult) -> NoopSetup:
    """Build the variants, publish them as a nightly would, warm both sides, check nightly skips all."""
    matrix = space.root / f"cpu-{variants}.yaml"
    matrix.write_text(cpu_matrix_yaml(variants))
    state = space.root / f"state-{variants}"
    wheelhouse = standin_wheelhouse(space.root / f"wheelhouse-{variants}", matrix)
    common = ["--matrix", str(matrix), "--templates", str(space.templates), "--registry-mirror", REAL_MIRROR,
              "--pip-find-links", str(wheelhouse), *WITHOUT_COMPANION_ARGS, "--vendor", "cpu",
              "--state-dir", str(state)]
    build = [PYTHON, "-m", "accel_images", "build", *common, "--no-smoke", "--network", "none"]
    nightly = [PYTHON, "-m", "accel_images", "nightly", *common, "--registry", f"{BENCH_REGISTRY_HOST}/{namespace}",
               "--report-dir", str(space.root / f"nightly-{variants}")]
    records = run_build(space, build + ["--jobs", "4"], state)
    if len(records) != variants or any(r["status"] not in ("built", "skipped") for r in records):
        # a smaller size may already have built some of these very images: skipped is fine here
        raise RuntimeError(f"warm-up build of {variants} variants: got {statuses(records)}")
    pushed = [publish_like_nightly(r["image"], f"{BENCH_REGISTRY_HOST}/{namespace}/accel-images-bench/light", r["tag"])
              for r in records]
    space.created.update(pushed)
    require(run_nightly(nightly, space.root / f"nightly-{variants}"), "skipped", variants,
            f"first nightly after publishing {variants} variants")
    contexts = sorted((state / "contexts" / "cpu").iterdir())
    if len(contexts) != variants:
        raise RuntimeError(f"expected {variants} contexts, found {len(contexts)}")
    loop = docker_build_loop(contexts, space)
    run_loop(loop)  # warm the layer cache
    for command in (nightly, build):
        if shown(command) not in result.commands:
            result.commands.append(shown(command))
    if variants == NOOP_SIZES[0]:
        result.commands += [shown(c) for c in loop]
    return NoopSetup(variants, matrix, nightly, build, loop, pushed)


def run_build(space: Workspace, command: list[str], state: Path) -> list[dict]:
    run_checked(command)
    records = json.loads((state / "reports" / "build-latest" / "report.json").read_text())["variants"]
    space.created.update(r["image_id"] for r in records if r.get("image_id"))
    return records


def run_nightly(command: list[str], report_dir: Path) -> list[dict]:
    run_checked(command)
    return json.loads((report_dir / "report.json").read_text())["variants"]


def publish_like_nightly(image: str, repository: str, tag: str) -> str:
    """Push a locally built image under its full tag, as a green nightly leaves it in the registry.

    The light images carry no torch, so the nightly's own smoke test on the pushed candidate
    would refuse them; their labels (fingerprint, base digest, build date) are what the next
    nightly compares, and those are the build's own. A nightly skips only a digest its tested
    record lists (accel_images.publish.tested), so the record a green nightly writes is written too.
    """
    ref = f"{repository}:{tag}"
    run_checked(["docker", "tag", image, ref])
    run_checked(["docker", "push", ref])
    record_as_tested(repository, tag)
    return ref


def record_as_tested(repository: str, tag: str) -> None:
    """Write the `<tag>-tested` record a green nightly leaves for the digest `tag` points at."""
    from datetime import date

    from accel_images.registry import RegistryClient
    from accel_images.publish.tested import SmokedDigest, SmokedRecord, write_record
    host, _, path = repository.partition("/")
    client = RegistryClient(host)
    remote = client.image(path, tag)
    if remote is None or not remote.digest:
        raise RuntimeError(f"{repository}:{tag} is not in the registry after its push")
    record = SmokedRecord().adding(SmokedDigest(remote.digest, date.today(), "bench"))
    write_record(client, path, f"{tag}-tested", record)


def delete_remote(refs: list[str]) -> None:
    """Remove what this benchmark published (best effort: the registry may refuse deletes)."""
    import urllib.request
    for ref in refs:
        repository, tag = ref.split("/", 1)[1].rsplit(":", 1)
        base = f"http://{BENCH_REGISTRY_HOST}/v2/{repository}"
        try:
            head = urllib.request.Request(f"{base}/manifests/{tag}", method="HEAD", headers={
                "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
            digest = urllib.request.urlopen(head, timeout=10).headers["Docker-Content-Digest"]
            urllib.request.urlopen(urllib.request.Request(f"{base}/manifests/{digest}", method="DELETE"), timeout=10)
        except OSError:
            pass


def time_noop_size(space: Workspace, setup: NoopSetup, repeats: int, result: BenchResult) -> tuple[Series, Series]:
    """Nightly no-op and docker loop alternately; at the smallest size the build-skip no-op too."""
    report_dir = Path(setup.nightly[setup.nightly.index("--report-dir") + 1])
    state = Path(setup.build[setup.build.index("--state-dir") + 1])

    def nightly() -> None:
        require(run_nightly(setup.nightly, report_dir), "skipped", setup.variants, "no-op nightly")

    def build() -> None:
        require(run_build(space, setup.build, state), "skipped", setup.variants, "no-op build")

    actions = [("accel-images nightly (no-op)", nightly),
               ("docker build loop (warm cache)", lambda: run_loop(setup.loop))]
    if setup.variants == NOOP_SIZES[0]:
        actions.append(("accel-images build (no-op)", build))
    series = alternating(actions, repeats)
    if len(series) == 3:
        result.rows.append(Row("noop", f"build-skip no-op, {setup.variants} CPU variants", series[2], series[1],
                               speedup(series[1], series[2]), "faster", "report only", None,
                               per_variant(series[2], series[1], setup.variants)))
    return series[0], series[1]


def per_variant(ours: Series, baseline: Series, variants: int) -> str:
    return (f"per variant: {ours.median / variants * 1000:,.0f} ms vs {baseline.median / variants * 1000:,.0f} ms")


def add_noop_rows(result: BenchResult, measured: dict[int, tuple[Series, Series]], startup: Series) -> None:
    """One row per size (the target row first), then the marginal cost of one more variant."""
    rows = []
    for n, (ours, baseline) in measured.items():
        ratio = speedup(baseline, ours)
        rows.append(Row("noop", f"no-op nightly, {n} CPU variants", ours, baseline, ratio, "faster",
                        ">= 20x faster", ratio >= 20,
                        per_variant(ours, baseline, n) + "; " + without_startup(ours, baseline, startup)))
    missed = [(n, ours, baseline) for n, (ours, baseline) in measured.items() if speedup(baseline, ours) < 20]
    if missed:
        n, ours, baseline = missed[0]
        share = startup.median / ours.median
        result.notes.append(
            f"What stands in the way of 20x at {n} variants: the CLI start-up ({startup.median:.2f} s, measured "
            f"alone: interpreter plus the imports of the docker SDK, requests, jinja2, rich and yaml) is paid once "
            f"per run and is {share:.0%} of it; the rest: {without_startup(ours, baseline, startup)}. "
            "The ratio grows with the number of variants (see the 8 and 16 rows).")
    build_rows = [r for r in result.rows if r.what.startswith("build-skip")]
    others = [r for r in result.rows if not r.what.startswith("build-skip")]
    result.rows[:] = rows + build_rows + others
    sizes = sorted(measured)
    if len(sizes) > 1:
        low, high = sizes[0], sizes[-1]
        ours = Series(f"{low} -> {high}", ((measured[high][0].median - measured[low][0].median) / (high - low),))
        docker = Series("docker build", ((measured[high][1].median - measured[low][1].median) / (high - low),))
        result.rows.insert(len(rows), Row("noop", f"cost of one more variant ({low} -> {high} variants)", ours,
                                          docker, speedup(docker, ours), "faster", "report only", None,
                                          "slope of the medians"))


def without_startup(ours: Series, baseline: Series, startup: Series) -> str:
    """The ratio with the CLI start-up taken off our side; none where start-up alone took longer (noise: one
    quick-mode sample of each), rather than a ratio of billions over a clamped difference."""
    beyond = ours.median - startup.median
    if beyond <= 0:
        return "start-up alone was no faster than the whole run (too few samples to take it off)"
    return f"{baseline.median / beyond:.1f}x without start-up"


def noop_notes(namespace: str, sizes: tuple[int, ...]) -> list[str]:
    return [
        f"Sizes {', '.join(map(str, sizes))}: the light matrix's CPU entry widened with older torch releases "
        "(runtime + devel each); 4 is as many as the light matrix's CPU variants.",
        f"Options as the real CPU contexts: --registry-mirror {REAL_MIRROR} (the nightly pulls each distinct base once "
        f"per run) and --pip-find-links with a wheelhouse of {WHEELHOUSE}'s size (hard-linked into every context, so "
        "every `docker build` of the baseline sends it to the daemon): its wheels but torch, and stand-in torch wheels "
        "named for the matrix's releases sharing the real torch wheel's size (the light images install none; a "
        "build refuses a torch its wheelhouse lacks).",
        f"Registry: {BENCH_REGISTRY_HOST}/{namespace} (deleted afterwards). Warm-up: `accel-images build` then "
        "`docker push` of each image under its full tag (the light images carry no torch, so a nightly's own smoke "
        "test would refuse to promote them); a first nightly then realigns the aliases and must skip every variant.",
        "Timed: the no-op nightly (render, base pull, fingerprint, one registry manifest+config read per variant, "
        "skip) and the docker build loop over the same contexts (warm layer cache), alternately; at 4 variants the "
        "build-skip no-op (`accel-images build`, image inspect instead of the registry) alternates with them.",
    ]


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
                           all(c == LIGHT_CUDA_VARIANTS for c in rebuilt),
                           f"of {LIGHT_CPU_VARIANTS + LIGHT_CUDA_VARIANTS} variants"))
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
        command = [PYTHON, "-m", "accel_images", *CPU_BUILD]
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
    # The OS-updates layer (templates/partials/apt.j2 os_updates) replaces files of earlier layers on
    # purpose, so the bytes it holds are counted twice; it is empty while the mirror holds nothing newer
    # than the layers below it, and grows as Debian publishes updates after those were cached.
    updates = updates_layer_bytes(CPU_IMAGE)
    packed = Series(f"{CPU_IMAGE} less its OS-updates layer", (float(image_size - updates),), "B")
    result.rows.append(Row("image_size", "CPU image size against its floor (OS-updates layer aside)", packed,
                           floor_s, (image_size - updates) / floor, "of floor", "<= 1.02x floor",
                           (image_size - updates) / floor <= 1.02))
    result.rows.append(Row("image_size", "OS-updates layer (updates published after the layers below were built)",
                           Series("OS-updates layer", (float(updates),), "B"), ours, updates / image_size,
                           "of the image", "report only", None))
    result.rows.append(Row("image_size", "naive single-stage image (copies the wheelhouse)", naive, floor_s,
                           naive_size / floor, "of floor", "report only", None,
                           "tiny wheelhouse in quick mode" if quick else ""))
    result.rows.append(Row("image_size", "CPU image against the naive one", ours, naive, image_size / naive_size,
                           "of naive", "report only", None))
    apt_layer = runtime_apt_layer_bytes(CPU_IMAGE)
    result.rows.append(Row("image_size",
                           "runtime apt layer (compiler, Python headers, everyday tools) in the CPU image",
                           Series("apt layer with gcc, g++, python3-dev, git", (float(apt_layer),), "B"), ours,
                           apt_layer / image_size, "of the image", "report only", None,
                           "torch.compile (Inductor) needs the compiler at run time"))
    result.notes += [f"Base {base}: {base_size / 1e6:,.1f} MB; payload measured inside the image "
                     f"(du -sxb / in the image minus the same in the base): {payload / 1e6:,.1f} MB.",
                     "Sizes are deterministic for a given image: N=1.",
                     "The naive image installs torch alone; ours adds numpy, the companions the wheelhouse offers, "
                     "the C/C++ compiler with the Python headers that torch.compile needs, and the everyday tools "
                     "(the apt layer row).",
                     f"Naive image built in {naive_s:.0f} s as {naive_ref}, then removed."]
    return result


def layer_sizes(image: str, marker: str) -> list[int]:
    """The sizes of the image's layers whose history line contains `marker`."""
    lines = run_checked(["docker", "image", "history", "--no-trunc", "--human=false", "--format",
                         "{{.Size}}\t{{.CreatedBy}}", image]).stdout.splitlines()
    return [int(size) for size, _, created_by in (line.partition("\t") for line in lines) if marker in created_by]


def runtime_apt_layer_bytes(image: str) -> int:
    """Size of the final stage's OS package layer: the one that installs the C/C++ compiler (its
    history line names g++) with the everyday tools."""
    sizes = layer_sizes(image, " g++")
    if not sizes:
        raise RuntimeError(f"{image} has no layer that installs g++")
    return max(sizes)


def updates_layer_bytes(image: str) -> int:
    """Size of the final stage's OS-updates layer (its history line runs apt-get install --only-upgrade)."""
    sizes = layer_sizes(image, "--only-upgrade")
    if len(sizes) != 1:
        raise RuntimeError(f"{image} has {len(sizes)} OS-updates layers, expected one")
    return sizes[0]


def base_of(image: str) -> str:
    """The base the image was built from: its base digest label, else the CPU build's mirror ref."""
    from accel_images.builder.builder import BASE_DIGEST_LABEL
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

SMOKE_TARGET_S = 30.0
"""The smoke test of the CPU image, developer checks included, stays under this (median)."""


def bench_smoke_latency(quick: bool) -> BenchResult:
    result = BenchResult("smoke_latency")
    if not _image_exists(CPU_IMAGE):
        result.skipped = f"{CPU_IMAGE} is not built (run `make image-offline` or the image_size benchmark)"
        return result
    from accel_images.cli.build import expectation_from_labels
    from accel_images.builder.engine import Engine
    from accel_images.smoke.integrity import Recorded
    from accel_images.smoke.launcher import container_options, inventory_of, run_smoke
    repeats = 1 if quick else 5
    engine = Engine.connect()
    info = engine.inspect_image(CPU_IMAGE)
    expectation = expectation_from_labels(CPU_IMAGE, info.labels)
    inventory = inventory_of(engine, info, expectation.python)  # what its build recorded: smoke runs against it
    recorded = Recorded(info.id, inventory.interpreter, inventory.files, info.layers)

    def smoke() -> None:
        verdict = run_smoke(engine, CPU_IMAGE, expectation, recorded=recorded, vendor_options=None,
                            require_accelerator=False)
        if not verdict.ok:
            raise RuntimeError(f"smoke failed: {verdict.summary()}")

    def bare() -> None:
        outcome = engine.run(CPU_IMAGE, ["true"], options=container_options(None, mem_limit="8g"), timeout_s=120)
        if outcome.exit_code != 0:
            raise RuntimeError(f"`true` in {CPU_IMAGE} exited {outcome.exit_code}: {outcome.stderr[-300:]}")

    ours, baseline = interleaved(("smoke: container start to JSON verdict", smoke),
                                 ("same container running `true`", bare), repeats)
    result.rows.append(Row("smoke_latency", "CPU image, start to judged JSON result", ours, baseline,
                           ours.median / baseline.median, "of a bare container", f"median < {SMOKE_TARGET_S:g} s",
                           ours.median < SMOKE_TARGET_S))
    result.commands += [f"{PYTHON.replace(str(ROOT) + '/', '')} -c 'run_smoke(Engine.connect(), \"{CPU_IMAGE}\", ...)'"
                        f"   # what `accel-images smoke {CPU_IMAGE}` runs",
                        f"Engine.run(\"{CPU_IMAGE}\", [\"true\"])   # baseline, through the same engine wrapper"]
    result.notes.append("Both go through accel_images.builder.engine.Engine (create, start, wait, logs, remove); the "
                        "baseline runs `true` with the same container options behind the same entrypoint guard, "
                        "so the difference is the "
                        "workload: Python start, torch import, the checks and the JSON.")
    result.notes.append("A run includes the launcher's checks from outside the image (interpreter, torch's "
                        "RECORD hashes, start-up hooks) and every developer check. Each is a fresh container, so "
                        "torch.compile compiles cold (g++ on Inductor's C++ kernel); the check turns off what a "
                        "developer pays once per machine (the compile worker pool, the precompiled header, the "
                        "vector ISA probes: accel_images/smoke/workload.py INDUCTOR_QUICK), which took it from "
                        "about 15 s to about 4 s. The spread follows the host's load (the load average is in "
                        "the machine section).")
    return result


from benchmarks.republish_benches import bench_republish  # noqa: E402  (a module of its own, same engine)

ENGINE_BENCHES = {
    "noop": bench_noop,
    "incremental": bench_incremental,
    "parallel": bench_parallel,
    "image_size": bench_image_size,
    "smoke_latency": bench_smoke_latency,
    "republish": bench_republish,
}
