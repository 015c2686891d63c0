"""The real CUDA runtime image on Debian 12 (torch 2.15.0+cu132 from the package index): its size against
its floor, its compressed size, and what the run's wheel cache saves a cold build.

Two builds without the layer cache, side by side: the first into an empty wheel cache (the run fetches
the closure, about 3 GB, from the package index), the second into the cache the first filled (it fetches
nothing). The image's size is then held to its floor, the base plus what the image adds measured inside it
(du), with the OS-updates layer aside as for the CPU image (engine_benches.bench_image_size: that layer
holds a second copy of each upgraded package on purpose). Its compressed size is what a registry stores:
the layers' sizes in the manifest after a push to the local registry, against the wheels the run
fetched (compressed too) plus the base. Needs .ci/setup-host.sh's engine, registry and Debian 12 stand-in.
"""

from __future__ import annotations

import json
import tempfile
import urllib.request
from pathlib import Path

from benchmarks.engine_benches import REAL_MIRROR, files_bytes, image_bytes, layer_sizes, updates_layer_bytes
from benchmarks.harness import PYTHON, BenchResult, Row, Series, run_checked, shown, time_once

TAG = "2.15.0-cuda13.2-py3.11-debian12"
IMAGE = f"accel-images/pytorch:{TAG}"
BUILD = ["build", "--vendor", "cuda", "--torch", "2.15", "--python", "3.11", "--os", "debian12",
         "--flavor", "runtime", "--platform", "linux/amd64", "--registry-mirror", REAL_MIRROR]
REGISTRY = "127.0.0.1:5000"
PUSHED = f"{REGISTRY}/accel-images-bench/cuda:{TAG}"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
CLUSTER_MARKER = "ibverbs-utils"
"""In the history line of the multi-node stack's layer alone (templates/partials/cluster.j2)."""
CLUSTER_BUDGET = 0.05
"""Under this share of a GPU image, the multi-node stack goes into every GPU image; above it, a flavor of its own."""


def cluster_stack_row(image: str) -> Row:
    """What the multi-node stack (RDMA verbs, UCX, Open MPI) adds to a GPU image, against the image."""
    [stack] = layer_sizes(image, CLUSTER_MARKER)
    size = image_bytes(image)
    return Row("cluster_stack", "multi-node stack layer (RDMA verbs, UCX, Open MPI) of the CUDA image",
               Series("the stack's layer", (float(stack),), "B"), Series(image, (float(size),), "B"), stack / size,
               "of the image", f"< {CLUSTER_BUDGET:.0%}: in every GPU image", stack / size < CLUSTER_BUDGET)


def build(cache: Path, state: Path, result: BenchResult) -> float:
    """One build of the CUDA image without the layer cache, into `cache`; its wall time."""
    command = [PYTHON, "-m", "accel_images", *BUILD, "--no-cache", "--cache-dir", str(cache), "--state-dir",
               str(state)]
    result.commands.append(shown(command))
    return time_once(lambda: run_checked(command, timeout_s=3600))


def compressed_bytes(ref: str) -> int:
    """The sum of the layers a registry stores for `ref` (pushed to the local registry first)."""
    run_checked(["docker", "tag", IMAGE, ref])
    run_checked(["docker", "push", ref], timeout_s=3600)
    return registry_layer_bytes(ref)


def registry_layer_bytes(ref: str) -> int:
    """The compressed size of `ref` in the local registry: its manifest's layer sizes."""
    repository, tag = ref.split("/", 1)[1].rsplit(":", 1)
    request = urllib.request.Request(f"http://{REGISTRY}/v2/{repository}/manifests/{tag}",
                                     headers={"Accept": DOCKER_MANIFEST})
    with urllib.request.urlopen(request, timeout=60) as response:
        return sum(int(layer["size"]) for layer in json.loads(response.read())["layers"])


def wheel_bytes(cache: Path) -> int:
    return sum(path.stat().st_size for path in cache.rglob("*.whl"))


def bench_cuda_image(quick: bool) -> BenchResult:
    result = BenchResult("cuda_image")
    if quick:
        result.skipped = "two cold builds of a 6.5 GB image (about 20 minutes): full mode only"
        return result
    with tempfile.TemporaryDirectory(prefix="accel-bench-cuda-") as tmp:
        cache = Path(tmp) / "wheels"
        cold = build(cache, Path(tmp) / "cold", result)
        warm = build(cache, Path(tmp) / "warm", result)
        fetched = wheel_bytes(cache)
    cold_s, warm_s = Series("empty wheel cache", (cold,)), Series("warm wheel cache", (warm,))
    result.rows.append(Row("cuda_image", "cold build (no layer cache) with a warm wheel cache", warm_s, cold_s,
                           warm / cold, "of the build with an empty cache", "report only", None,
                           f"the empty cache's build fetched {fetched / 1e9:.2f} GB of wheels first"))
    base = f"{REGISTRY}/library/debian:bookworm-slim"
    size, updates = image_bytes(IMAGE), updates_layer_bytes(IMAGE)
    floor = image_bytes(base) + files_bytes(IMAGE) - files_bytes(base)
    result.rows.append(Row("cuda_image", "CUDA image size against its floor (OS-updates layer aside)",
                           Series(f"{IMAGE} less its OS-updates layer", (float(size - updates),), "B"),
                           Series("floor: base + payload", (float(floor),), "B"), (size - updates) / floor,
                           "of floor", "<= 1.02x floor", (size - updates) / floor <= 1.02))
    result.rows.append(Row("cuda_image", "OS-updates layer of the CUDA image",
                           Series("OS-updates layer", (float(updates),), "B"), Series(IMAGE, (float(size),), "B"),
                           updates / size, "of the image", "report only", None))
    compressed, base_compressed = compressed_bytes(PUSHED), registry_layer_bytes(base)
    result.rows.append(Row("cuda_image", "CUDA image compressed (what a registry stores and a pull downloads)",
                           Series("compressed layers", (float(compressed),), "B"),
                           Series("base + the wheels fetched", (float(base_compressed + fetched),), "B"),
                           compressed / (base_compressed + fetched), "of base + wheels", "report only", None))
    result.commands += [f"docker image inspect --format '{{{{.Size}}}}' {IMAGE}",
                        f"docker run --rm --entrypoint du {IMAGE} -sxb /   (and the same in {base})",
                        f"docker push {PUSHED}   (layer sizes from its manifest)"]
    result.notes += ["N=1 per build: each is a full build of a 6.5 GB image; sizes are deterministic for an image.",
                     "PyTorch's own runtime image of 2.15 (pytorch/pytorch:*-cuda13.2-cudnn9-runtime): no published"
                     " compressed size was found to cite, so no row compares with it."]
    return result


def bench_cluster_stack(quick: bool) -> BenchResult:
    """The multi-node stack's share of the CUDA image: built with the layer cache when it is not here yet."""
    result = BenchResult("cluster_stack")
    if quick:
        result.skipped = "reads a 6.5 GB image, building it first when absent: full mode only"
        return result
    if run_checked(["docker", "image", "ls", "--quiet", IMAGE]).stdout.strip() == "":
        command = [PYTHON, "-m", "accel_images", *BUILD]
        result.commands.append(shown(command))
        run_checked(command, timeout_s=3600)
    result.rows.append(cluster_stack_row(IMAGE))
    result.commands.append(f"docker image history --no-trunc {IMAGE}   (the layer whose step names {CLUSTER_MARKER})")
    result.notes.append("N=1: a layer's size is deterministic for an image. templates/partials/cluster.j2 goes into"
                        f" every GPU image while this share stays under {CLUSTER_BUDGET:.0%}.")
    return result


CUDA_IMAGE_BENCHES = {"cuda_image": bench_cuda_image, "cluster_stack": bench_cluster_stack}
