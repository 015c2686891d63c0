"""What a forced nightly rebuild re-pushes: bytes uploaded against the image's size.

Two template sets, side by side, on the real CPU image CI builds (Debian 12, torch 2.13 from
the local wheelhouse): ours (templates/) and the baseline (templates/ at BASELINE_REV, before
layers were reproducible and before OS updates had a layer of their own, extracted with
`git archive`). Neither set is edited. Both build on the same base: the local Debian 12 slim
image plus one more apt source, a security suite this benchmark serves over HTTP on the Docker
bridge (Suite `oldstable-security`, as Debian's own bookworm-security reads today; trusted, being
unsigned). For each set:
1. the suite is empty; build without the layer cache and push (the published image);
2. build again without the cache, inputs unchanged, and push: what a `nightly --max-age 0`
   re-uploads when nothing changed (goal: 0 bytes);
3. the suite gains one security update: UPDATED_PACKAGE, the archive's own .deb with its version
   raised (`dpkg-deb -R`, Version +bench1, `dpkg-deb -b`); build again without the cache and push
   (goal: the updates layer only, at most 10% of the image). Templates, build args and base are
   those of step 2: only the archive changed, as on the night a security update is published.
Bytes are the compressed sizes, from the pushed manifest, of the layers the engine reports it
uploaded ("Pushed"); a layer the registry already had costs nothing. Each step is one real
build of a 1 GB image on a shared host, so N=1 and the times are rough.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import ipaddress
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.harness import PYTHON, ROOT, WHEELHOUSE_ARGS, BenchResult, Row, Series, run_checked, shown

BASELINE_REV = os.environ.get("ACCEL_BENCH_REPUBLISH_BASELINE", "5546082")
REGISTRY = "127.0.0.1:5000"
TAG = "2.13.0-cpu-py3.11-debian12"
BASE = "local/debian:bookworm-slim"
UPDATED_PACKAGE = "libssl3"
"""OpenSSL's library: in the image through ca-certificates -> openssl, and a frequent security update."""
SUITE = "bookworm-security"
MATRIX = """schema: 1
image: {image}
user: {{name: dev, uid: 1000, gid: 1000}}
vendors:
  cpu:
    - torch: ["2.13"]
      python: ["3.11"]
      os: [debian12]
      flavor: [runtime]
"""


def bench_republish(quick: bool) -> BenchResult:
    result = BenchResult("republish")
    if quick:
        result.skipped = "three real builds of the 1 GB CPU image per template set (not in quick mode)"
        return result
    baseline_name = f"{BASELINE_REV} (dated layers, one apt layer)"
    with tempfile.TemporaryDirectory(prefix="accel-bench-republish-") as tmp, \
            security_suite(Path(tmp) / "suite") as suite:
        work = Path(tmp)
        update = updated_deb(work / "debs")
        namespace = f"accel-images-bench/republish-base-{uuid.uuid4().hex[:8]}"
        base = bench_base(suite.url, namespace, work / "base")
        try:
            sets = {"ours": _copy_templates(ROOT / "templates", work / "ours"),
                    baseline_name: _extract_templates(work / "baseline")}
            figures = {name: _measure(name, templates, work, result, suite, update, namespace)
                       for name, templates in sets.items()}
        finally:
            run_checked(["docker", "image", "rm", "-f", base])
    ours, old = figures["ours"], figures[baseline_name]
    _rows(result, ours, old)
    result.notes += _notes(update.name)
    return result


def _rows(result: BenchResult, ours: dict[str, float], base: dict[str, float]) -> None:
    """Bytes pushed and times, ours against the baseline, and the image sizes."""
    for key, what, target, limit in (("same", "forced rebuild, unchanged inputs: bytes pushed", "0 B", 0.0),
                                     ("apt", "rebuild after one OS package's security update: bytes pushed",
                                      "<= 10% of the image", 0.10)):
        measured = Series("ours", (float(ours[key]),), "B")
        baseline = Series(f"{BASELINE_REV}", (float(base[key]),), "B")
        share = ours[key] / ours["size"]
        result.rows.append(Row("republish", what, measured, baseline, share, "of the image", target,
                               share <= limit, f"baseline: {base[key] / base['size']:.0%} of its image;"
                                               f" ours {ours[f'{key}_layers']:g} layer(s),"
                                               f" baseline {base[f'{key}_layers']:g}"))
        result.rows.append(Row("republish", what.replace("bytes pushed", "build + push time"),
                               Series("ours", (ours[f"{key}_s"],)), Series(f"{BASELINE_REV}", (base[f"{key}_s"],)),
                               ours[f"{key}_s"] / base[f"{key}_s"], "of the baseline's", "report only", None))
    result.rows.append(Row("republish", "image size (compressed, in the registry)",
                           Series("ours", (ours["size"],), "B"),
                           Series(f"{BASELINE_REV}", (base["size"],), "B"), ours["size"] / base["size"],
                           "of the baseline's", "report only", None))
    result.rows.append(Row("republish", "the OS updates layer (compressed), after the update",
                           Series("ours", (ours["top"],), "B"), None, ours["top"] / ours["size"], "of the image",
                           "report only", None))


def _notes(deb: str) -> list[str]:
    return [
        f"The security update: {deb} (the archive's {UPDATED_PACKAGE} with its version raised) appearing in a"
        " security suite the build's base lists; templates, build args and base image unchanged between the"
        " second and third build.",
        "Ours takes the bulk OS packages (interpreter, compiler, headers) from the release suites only (apt"
        " priority -1 for *-security and *-updates) and upgrades from those suites in the final stage's last"
        " layer, so an update changes that layer alone; the baseline installs from every suite in its one apt"
        " layer.",
        "The updates layer holds every update the -security and -updates suites have over the release for the"
        " image's packages, not only the one that changed, and is re-pushed whole at each update; it grows until"
        " the next point release moves those versions into the release suite.",
        "The cost: an upgraded package's files are in the image twice (the release version in the bulk layer,"
        " the update above it).",
        "An upgrade that deletes a file a lower layer holds would leave whiteouts the engine dates with the wall"
        " clock; the updates step makes each such directory anew (an opaque directory, written undated).",
        "A registry stores layers by content, so only changed layers are pushed wherever they sit; Docker's"
        " image store keys layers by the chain below them, so a `docker pull` re-downloads every layer above a"
        " changed one: the updates layer is the last, and nothing is above it.",
        "Ours keeps the published digest on an identical rebuild (`nightly` compares layers and pushes nothing);"
        " this benchmark pushes every build to count what the engine would upload.",
        "Times: one build each, on a 2-core host shared with other work; load average in the Machine section."]


def _measure(name: str, templates: Path, work: Path, result: BenchResult, suite: SecuritySuite,
             update: Path, namespace: str) -> dict[str, float]:
    """Publish, rebuild unchanged, rebuild after the security update: bytes and seconds of the last two."""
    from accel_images.builder.engine import Engine
    from accel_images.registry import RegistryClient
    slug = "ours" if name == "ours" else "baseline"
    image = f"accel-images-bench/republish-{slug}-{uuid.uuid4().hex[:8]}"
    engine, registry = Engine.connect(), RegistryClient(REGISTRY)
    matrix = work / f"{slug}.yaml"
    matrix.write_text(MATRIX.format(image=image))
    figures: dict[str, float] = {}
    built: list[str] = []
    try:
        for step in ("first", "same", "apt"):
            suite.publish([update] if step == "apt" else [])
            started = time.monotonic()
            _build(matrix, templates, work / f"{slug}-state", namespace, result)
            info = engine.inspect_image(f"{image}:{TAG}")
            built += [info.id] if info else []
            engine.tag(f"{image}:{TAG}", f"{REGISTRY}/{image}:{TAG}")
            uploaded = _push(f"{REGISTRY}/{image}:{TAG}", result)
            remote = registry.image(image, TAG)
            assert remote is not None
            figures[step] = float(sum(remote.layer_size(short) for short in uploaded))
            figures[f"{step}_layers"] = float(len(uploaded))
            figures[f"{step}_s"] = time.monotonic() - started
            figures["size"] = float(sum(remote.layer_sizes))
            figures["top"] = float(remote.layer_sizes[-1])
    finally:
        for ref in (f"{image}:{TAG}", f"{REGISTRY}/{image}:{TAG}", *built):
            engine.remove_image(ref, force=True)
        engine.close()
    return figures


# ---- the security suite: a local apt repository the builds see --------------------------------

class SecuritySuite:
    """A `dists/SUITE` apt repository in a directory, served over HTTP where build containers reach it."""

    def __init__(self, root: Path, url: str) -> None:
        self.root = root
        self.url = url

    def publish(self, debs: list[Path]) -> None:
        """Make the suite hold exactly `debs` (Packages and Release rewritten, as an archive does)."""
        pool, index = self.root / "pool", self.root / "dists" / SUITE / "main" / "binary-amd64"
        shutil.rmtree(self.root, ignore_errors=True)
        pool.mkdir(parents=True)
        index.mkdir(parents=True)
        stanzas = []
        for deb in debs:
            shutil.copy2(deb, pool / deb.name)
            stanzas.append(deb.with_suffix(".control").read_text().rstrip("\n") + f"\nFilename: pool/{deb.name}\n"
                           f"Size: {deb.stat().st_size}\nSHA256: {_sha256(deb)}\n")
        (index / "Packages").write_text("\n".join(stanzas))
        (self.root / "dists" / SUITE / "Release").write_text(_release(index / "Packages"))


def _release(packages: Path) -> str:
    """A Release file naming the suite as Debian's security archive does (apt checks the index hash)."""
    return ("Origin: accel-images-bench\nLabel: accel-images-bench\nSuite: oldstable-security\n"
            f"Version: 12\nCodename: {SUITE}\nDate: Thu, 01 Jan 2026 00:00:00 UTC\nArchitectures: amd64\n"
            f"Components: main\nSHA256:\n {_sha256(packages)} {packages.stat().st_size} main/binary-amd64/Packages\n")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextmanager
def security_suite(root: Path) -> Iterator[SecuritySuite]:
    """Serve `root` on the Docker bridge's gateway address, which build containers reach."""
    gateway = bridge_gateway()
    root.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer((gateway, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield SecuritySuite(root, f"http://{gateway}:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()


def bridge_gateway() -> str:
    """The host's address on Docker's default bridge: IPAM's Gateway, else the subnet's first host (Docker's rule)."""
    config = json.loads(run_checked(["docker", "network", "inspect", "bridge", "-f", "{{json .IPAM.Config}}"]).stdout)
    first = config[0]
    return str(first.get("Gateway") or next(ipaddress.ip_network(first["Subnet"]).hosts()))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """The files of the suite, without a log line per request on the benchmark's stderr."""

    def log_message(self, format: str, *args: object) -> None:
        pass


def updated_deb(out: Path) -> Path:
    """The archive's newest UPDATED_PACKAGE for Debian 12, rebuilt with a higher version (and its control file)."""
    out.mkdir(parents=True, exist_ok=True)
    script = (f"apt-get update -q >/dev/null && cd /tmp && apt-get download -q {UPDATED_PACKAGE} >/dev/null"
              f" && dpkg-deb -R {UPDATED_PACKAGE}_*.deb pkg"
              " && sed -i 's/^Version: \\(.*\\)$/Version: \\1+bench1/' pkg/DEBIAN/control"
              " && version=$(sed -n 's/^Version: //p' pkg/DEBIAN/control)"
              f" && dpkg-deb --root-owner-group -b pkg /out/{UPDATED_PACKAGE}_bench.deb >/dev/null"
              f" && dpkg-deb -f /out/{UPDATED_PACKAGE}_bench.deb > /out/{UPDATED_PACKAGE}_bench.control"
              f" && mv /out/{UPDATED_PACKAGE}_bench.deb \"/out/{UPDATED_PACKAGE}_${{version}}_amd64.deb\""
              f" && mv /out/{UPDATED_PACKAGE}_bench.control \"/out/{UPDATED_PACKAGE}_${{version}}_amd64.control\""
              " && chmod a+r /out/*")
    run_checked(["docker", "run", "--rm", "-v", f"{out}:/out", BASE, "bash", "-o", "pipefail", "-c", script],
                timeout_s=600)
    [deb] = out.glob("*.deb")
    return deb


def bench_base(suite_url: str, namespace: str, context: Path) -> str:
    """BASE plus the security suite's source, named where `--registry-mirror docker.io=REGISTRY/namespace` finds it."""
    context.mkdir(parents=True, exist_ok=True)
    (context / "bench-security.sources").write_text(
        f"Types: deb\nURIs: {suite_url}\nSuites: {SUITE}\nComponents: main\nTrusted: yes\n")
    (context / "Dockerfile").write_text(f"FROM {BASE}\nCOPY bench-security.sources /etc/apt/sources.list.d/\n")
    ref = f"{REGISTRY}/{namespace}/library/debian:bookworm-slim"
    run_checked(["docker", "build", "-q", "-t", ref, str(context)], timeout_s=600)
    run_checked(["docker", "push", ref], timeout_s=600)
    return ref


def _push(ref: str, result: BenchResult) -> list[str]:
    """`docker push` (no client-side read timeout on a loaded host); the short IDs it says it pushed."""
    if "docker push <registry>/<image>:<tag>" not in result.commands:
        result.commands.append("docker push <registry>/<image>:<tag>")
    output = run_checked(["docker", "push", ref], timeout_s=3600).stdout
    return re.findall(r"^([0-9a-f]{12}): Pushed\s*$", output, re.M)


def _build(matrix: Path, templates: Path, state: Path, namespace: str, result: BenchResult) -> None:
    command = [PYTHON, "-m", "accel_images", "build", "--matrix", str(matrix), "--templates", str(templates),
               "--no-cache", "--no-smoke", "--registry-mirror", f"docker.io={REGISTRY}/{namespace}", *WHEELHOUSE_ARGS,
               "--state-dir", str(state)]
    line = shown(command).replace(str(matrix.parent) + "/", "<work>/").replace(namespace, "<bench-base>")
    if line not in result.commands:
        result.commands.append(line)
    run_checked(command, timeout_s=3600)


def _copy_templates(source: Path, into: Path) -> Path:
    shutil.copytree(source, into)
    return into


def _extract_templates(into: Path) -> Path:
    """templates/ at BASELINE_REV (git archive: no worktree registered in the shared repository)."""
    archive = into.with_suffix(".tar")
    run_checked(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), BASELINE_REV, "templates"])
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)
    return into / "templates"


REPUBLISH_BENCHES = {"republish": bench_republish}
