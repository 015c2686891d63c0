"""Benchmarks against the local registry: reading a registry's catalogue behind added latency.

The images are layer-less (a config blob with a variant's labels, pushed over the registry API) with
a smoke record each, in a repository of their own that is deleted afterwards. The fault proxy of the
test suite (tests/faultproxy.py) stands between client and registry and adds 50 ms to every request,
as a registry across a continent would.
"""

from __future__ import annotations

import sys
import urllib.request
import uuid

from benchmarks.harness import ROOT, BenchResult, Row, interleaved

REGISTRY = "127.0.0.1:5000"
DELAY_S = 0.05


def registry_reachable() -> str | None:
    try:
        with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5):
            return None
    except OSError as err:
        return f"registry {REGISTRY} does not answer /v2/: {err}"


def bench_catalogue(quick: bool) -> BenchResult:
    result = BenchResult("catalogue")
    problem = registry_reachable()
    if problem:
        result.skipped = problem
        return result
    sys.path.insert(0, str(ROOT / "tests"))
    from faultproxy import FaultProxy
    from nightly_fixture.rawregistry import RawRegistry

    from accel_images.publish.catalogue import READ_WORKERS, read_catalogue, write_record
    from accel_images.registry import RegistryClient
    from accel_images.smoke.judge import SmokeResult

    count, repeats = (8, 1) if quick else (40, 3)
    repository = f"accel-bench-{uuid.uuid4().hex[:8]}/pytorch"
    raw, client = RawRegistry(REGISTRY), RegistryClient(REGISTRY)
    passed = SmokeResult(ok=True, ran_on="cpu", cpu_fallback=False, failures=(), checks=())
    try:
        for index in range(count):
            tag = f"2.{index // 2}.0-cpu-py3.{11 + index % 2}-ubuntu24.04"
            labels = {"io.accel-images.vendor": "cpu", "io.accel-images.tag": tag,
                      "io.accel-images.torch": f"2.{index // 2}.0", "io.accel-images.python": f"3.{11 + index % 2}",
                      "io.accel-images.os": "ubuntu24.04", "io.accel-images.flavor": "runtime"}
            write_record(client, repository, raw.push_config_image(repository, tag, labels), passed, "bench")
        with FaultProxy(REGISTRY) as proxy:
            proxy.faults.delay_s = DELAY_S
            slow = RegistryClient(proxy.host)

            def read(workers: int) -> None:
                catalogue = read_catalogue(slow, repository, workers=workers)
                if len(catalogue.offered()) != count:
                    raise RuntimeError(f"read {len(catalogue.offered())} of {count} images")

            ours, baseline = interleaved((f"{READ_WORKERS} concurrent reads", lambda: read(READ_WORKERS)),
                                         ("one read at a time", lambda: read(1)), repeats)
            requests = len(proxy.faults.seen) // (2 * repeats)
    finally:
        raw.delete_repository(repository)
    target = "<= 1 s" if count == 40 else "report only"
    result.rows.append(Row("catalogue", f"list a catalogue of {count} images, {DELAY_S * 1000:.0f} ms per request",
                           ours, baseline, baseline.median / ours.median, "faster", target,
                           ours.median <= 1.0 if count == 40 else None, f"{requests} requests per read"))
    result.commands += ["read_catalogue(RegistryClient(proxy), repository)   # what `accel-images catalogue` reads",
                        "read_catalogue(..., workers=1)   # baseline: the same requests one after the other"]
    result.notes.append("Per image: a HEAD for the digest its full tag serves, then its smoke record's manifest "
                        "(which carries the image's labels); plus one tag list. The fault proxy runs in the "
                        "benchmark's own process, so its forwarding shares the machine's cores with the client.")
    return result


REGISTRY_BENCHES = {"catalogue": bench_catalogue}
