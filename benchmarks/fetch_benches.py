"""What a forced nightly fetches: bytes a package index serves against the bytes of its distinct wheels.

The variants share wheels as a real torch release's do: two flavors (runtime, devel) and two
Pythons (3.11, 3.12) of one torch, on one OS. The index (benchmarks/wheel_index.py) holds that
torch in miniature, shaped like the CUDA stack: per Python a torch, a torchvision and a numpy wheel,
and one py3-none runtime wheel every Python shares (NVIDIA's libraries are 2.0 of the 2.8 GB of
2.15.0's closure), plus setuptools; it counts every byte it sends. It listens on the Docker bridge,
so the builds' own pip can reach it too.

Side by side, alternately, each a forced nightly (`--max-age 0` and no layer cache: every variant
built afresh, pushed, smoke-tested, promoted) into a registry namespace of its own:
- ours: `--pip-fetch host` with an empty wheel cache: the run fetches each variant's closure on
  this host, once per distinct wheel, and each build installs from its context;
- today's: `--pip-fetch build`, the route every build took before (the Dockerfile the checked-in
  images/ have: the build's pip fetches from the index).
Then ours once more with the cache the previous run left: what an unchanged nightly fetches.
The images are light (benchmarks/templates_fetch: the project's pip step alone, into a directory,
on the local Debian image with Python), so the times are the fetch, the install, the push and the
nightly's own work; the smoke test is a stub (the images hold no real torch).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness import PYTHON, BenchResult, Row, Series, time_once
from benchmarks.republish_benches import bridge_gateway
from benchmarks.wheel_index import Served, Sizes, WheelIndex, synthetic_torch

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates_fetch"
REGISTRY = "127.0.0.1:5000"
PYTHON_BASE = "local/debian:bookworm"
PYTHONS = ("3.11", "3.12")
QUICK_SIZES = Sizes(torch=2_000_000, runtime=5_000_000, torchvision=100_000, numpy=200_000, setuptools=10_000)
RATIO_TARGET = 1.05
MATRIX = """schema: 1
image: {image}
user: {{name: dev, uid: 1000, gid: 1000}}
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11", "3.12"]
      os: [ubuntu24.04]
      flavor: [runtime, devel]
"""


@dataclass
class Run:
    """One forced nightly: what it took and what the index served."""

    seconds: float
    served: Served
    published: int


@dataclass
class Space:
    """The benchmark's own corner: its index, registry namespace, base mirror, images to remove."""

    root: Path
    index: WheelIndex
    index_host: str      # the Docker bridge's gateway: the host and its builds both reach it
    namespace: str
    mirror: str
    made: set[str] = field(default_factory=set)
    runs: int = 0


def bench_fetch(quick: bool) -> BenchResult:
    result = BenchResult("fetch")
    repeats = 1 if quick else 3
    with space(quick) as where:
        distinct = sum(path.stat().st_size for path in where.index.directory.glob("*.whl"))
        ours: list[Run] = []
        today: list[Run] = []
        for attempt in range(repeats):
            ours.append(forced_nightly(where, host_fetch=True, cache=where.root / f"cache-{attempt}"))
            today.append(forced_nightly(where, host_fetch=False, cache=where.root / "cache-unused"))
        warm = forced_nightly(where, host_fetch=True, cache=where.root / f"cache-{repeats - 1}")
    rows(result, distinct, ours, today, warm)
    result.notes += notes(distinct, quick)
    python = PYTHON.replace(str(HERE.parent) + "/", "")
    result.commands.append(f"{python} -c 'run_nightly(..., NightlyOptions(max_age_days=0, attest=False), smoke=<stub>,"
                           " templates_dir=benchmarks/templates_fetch)'   # what `accel-images nightly --max-age 0"
                           " --pip-fetch host|build` runs")
    return result


def rows(result: BenchResult, distinct: int, ours: list[Run], today: list[Run], warm: Run) -> None:
    served = Series("ours: bytes served", tuple(float(r.served.file_bytes + r.served.page_bytes) for r in ours), "B")
    before = Series("--pip-fetch build", tuple(float(r.served.file_bytes + r.served.page_bytes) for r in today), "B")
    ratio = served.median / distinct
    result.rows.append(Row("fetch", "forced nightly, 2 flavors x 2 Pythons of one torch: bytes the index served",
                           served, before, ratio, "of the distinct wheels", f"<= {RATIO_TARGET:g}x",
                           ratio <= RATIO_TARGET,
                           f"--pip-fetch build: {before.median / distinct:.2f}x; distinct wheels"
                           f" {distinct / 1e6:,.1f} MB; pages {ours[-1].served.page_bytes / 1e3:,.0f} kB"))
    times = Series("ours", tuple(r.seconds for r in ours))
    old = Series("--pip-fetch build", tuple(r.seconds for r in today))
    result.rows.append(Row("fetch", "forced nightly, 2 flavors x 2 Pythons of one torch: wall time", times, old,
                           old.median / times.median, "faster", "report only", None,
                           f"{ours[-1].published} and {today[-1].published} of 4 published"))
    again = Series("ours, cache kept", (float(warm.served.file_bytes),), "B")
    result.rows.append(Row("fetch", "the next forced nightly, wheel cache kept: wheel bytes served", again, None,
                           warm.served.file_bytes / distinct, "of the distinct wheels", "0 B",
                           warm.served.file_bytes == 0, f"{warm.seconds:.0f} s"))


def notes(distinct: int, quick: bool) -> list[str]:
    return [
        f"Index: {len(PYTHONS)} Pythons x (torch, torchvision, numpy) + one shared py3-none runtime wheel + setuptools,"
        f" {distinct / 1e6:,.1f} MB of distinct wheels" + (" (quick: tiny sizes)" if quick else "") + "; one"
        " variant's closure is every wheel of its Python and the shared ones, so today's route serves each"
        " shared wheel four times and each per-Python wheel twice.",
        "Bytes served: every file and page the index sent during the nightly (page bytes are included in the"
        " figure and shown apart in the note).",
        "Each run has its own user ID (a fresh fingerprint: no earlier image is reused), no layer cache, an empty"
        " wheel cache (ours) and its own registry namespace; ours and today's alternate. The last row keeps the"
        " wheel cache of the run before it.",
        "Wall time: the index is on this host, so fetching costs next to nothing; what ours adds is the wheelhouse"
        " route's own work (each variant's closure sent to the engine in its build context and copied into the"
        " build stage), plus pip resolving on the host (two runs of pip per distinct closure). Where bytes cost"
        " time (an index across a network) the saving is the bytes the first row shows.",
    ]


@contextmanager
def space(quick: bool) -> Iterator[Space]:
    root = Path(tempfile.mkdtemp(prefix="accel-bench-fetch-"))
    synthetic_torch(root / "index", "2.13.0", "0.28.0", PYTHONS, sizes=QUICK_SIZES if quick else Sizes())
    gateway = bridge_gateway()
    name = f"accel-bench-fetch-{uuid.uuid4().hex[:8]}"
    index = WheelIndex(root / "index", host=gateway)
    trusted = os.environ.get("PIP_TRUSTED_HOST")
    os.environ["PIP_TRUSTED_HOST"] = gateway  # pip takes plain http from localhost alone (the template does the same)
    with index.running():
        where = Space(root, index, gateway, name, f"docker.io={REGISTRY}/{name}/hub")
        try:
            push_bases(where)
            yield where
        finally:
            cleanup(where)
            if trusted is None:
                os.environ.pop("PIP_TRUSTED_HOST", None)
            else:
                os.environ["PIP_TRUSTED_HOST"] = trusted


def push_bases(where: Space) -> None:
    """The local Debian image with Python, in the registry under every base name the matrix gives (nightly pulls)."""
    import docker

    from accel_images.kb import compat
    from accel_images.model.reference import Mirror, mirrored
    from accel_images.plan.matrix import load_matrix
    from accel_images.plan.variants import expand
    matrix = where.root / "matrix.yaml"
    matrix.write_text(MATRIX.format(image=f"{where.namespace}/light"))
    client = docker.from_env()
    for variant in expand(load_matrix(matrix), compat.load_kb()).variants:
        ref = mirrored(variant.base_image, (Mirror.parse(where.mirror),))
        if ref not in where.made:
            client.images.get(PYTHON_BASE).tag(ref)
            client.images.push(ref)
            where.made.add(ref)


def forced_nightly(where: Space, *, host_fetch: bool, cache: Path) -> Run:
    """One `nightly --max-age 0` of the four variants, in-process (its smoke stage a stub: no real torch)."""
    from accel_images.builder.engine import Engine
    from accel_images.builder.settings import BuildSettings
    from accel_images.builder.wheels import RunWheelhouse
    from accel_images.cli.options import load_expansion
    from accel_images.kb import compat
    from accel_images.model.reference import Mirror
    from accel_images.publish.nightly import NightlyOptions, run_nightly
    from accel_images.publish.promote import Target
    from accel_images.registry import Destination, RegistryClient
    from accel_images.render.contexts import RenderOptions
    from accel_images.smoke.judge import SmokeResult
    from accel_images.state import StateDir
    where.runs += 1
    run = where.root / f"run-{where.runs}"
    expansion = load_expansion(str(where.root / "matrix.yaml"))
    destination = Destination.parse(f"{REGISTRY}/{where.namespace}/run-{where.runs}")
    options = RenderOptions((Mirror.parse(where.mirror),), where.index.url(where.index_host), host_fetch=host_fetch)
    settings = BuildSettings(options=options, state_dir=StateDir(run / "state"), no_cache=True,
                             user_uid=random.randint(20000, 60000))
    green = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=())
    engine = Engine.connect()
    nightly = NightlyOptions(Target(destination.host, destination.repository(expansion.image)), max_age_days=0,
                             attest=False)
    where.index.reset()
    nights: list = []
    seconds = time_once(lambda: nights.extend(run_nightly(
        engine, compat.load_kb(), expansion, expansion.variants, RegistryClient.for_destination(destination),
        settings, nightly, smoke=lambda image, variant: green, templates_dir=TEMPLATES,
        wheels=RunWheelhouse(cache))))
    failed = [n.outcome.error for n in nights if not n.ok]
    if failed:
        raise RuntimeError(f"forced nightly ({'host' if host_fetch else 'build'} fetch): {failed[0]}")
    where.made.update(n.outcome.image_id for n in nights if n.outcome.image_id)
    return Run(seconds, where.index.reset(), sum(n.status == "built" for n in nights))


def cleanup(where: Space) -> None:
    import docker

    from benchmarks.engine_benches import delete_remote, remove_images
    client = docker.from_env()
    remove_images(sorted(where.made))
    refs = [tag for image in client.images.list() for tag in image.tags if where.namespace in tag]
    delete_remote([ref for ref in refs if ref.startswith(REGISTRY)])
    remove_images(refs)
    shutil.rmtree(where.root, ignore_errors=True)


FETCH_BENCHES = {"fetch": bench_fetch}
