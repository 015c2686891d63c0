"""The one-command hardware check (`make device-check`): this host, its real vendor tools, no Docker.

On a machine with an accelerator it answers, in one JSON record, whether what the images decide
about such a host matches what the host is:

1. detection: the vendor, driver, GPUs and architectures `recommend` would see (host/detect.py);
2. every rendered guard of that vendor (images/<vendor>/<tag>/guard.sh) run here against the real
   vendor tools, /dev and /sys, as the entry point of the tag's image of this host's platform would
   run it: with the ACCEL_IMAGES_* environment that image sets (the Dockerfile's shared stages and its
   platform's own, never another platform's) and its facts (those the knowledge base predicts for it,
   which every build of it is checked against: accel_images/kb/claims.py); whether it starts the command
   or refuses (exit 78), and whether `recommend` judges that image the same way on this host. A tag
   with no image of this platform is not run (an image of another architecture cannot start here), and
   `recommend` offers it to no host of this kind;
3. the smoke workload (smoke/workload.py, the file every image carries) run with this host's own
   Python and torch (`--python`), requiring the accelerator.

The record: {"schema": 1, "ok": bool, "host": {...}, "checks": [{"name", "ok", "detail", ...}]}.
Exit status 0 when every check passed, 1 otherwise. It needs no network and imports nothing beyond
the standard library and PyYAML (the knowledge base), so it runs on a bare GPU machine with the
repository and a Python that has torch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

from accel_images import vendors
from accel_images.host.detect import detect_host
from accel_images.host.recommend import host_platform, judge
from accel_images.kb.claims import claims
from accel_images.kb.compat import KnowledgeBase, load_kb
from accel_images.model import platforms
from accel_images.model.hostinfo import HostInfo, run_command
from accel_images.model.imagefacts import ImageFacts
from accel_images.model.variant import Variant
from accel_images.plan.matrix import load_matrix
from accel_images.plan.variants import expand
from accel_images.smoke import workload

SCHEMA = 1
GUARD_EXIT = 78
GUARD_TIMEOUT_S = 120.0
SMOKE_TIMEOUT_S = 900.0
SMOKE_SOURCE = Path(workload.__file__)
IMAGE_ENV = re.compile(r'(ACCEL_IMAGES_[A-Z_]+)="([^"]*)"')
NOT_FOR_THE_HOST = ("ACCEL_IMAGES_VENDOR", "ACCEL_IMAGES_HOME")
"""Image variables that describe the container, not the decision: the host keeps its own user and HOME."""


def check(name: str, ok: bool, detail: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, **fields}


def image_env(dockerfile: Path, platform: str = platforms.DEFAULT) -> dict[str, str]:
    """The ACCEL_IMAGES_* variables the rendered image of `platform` sets for its guard.

    A tag of several platforms renders one Dockerfile: the stages every platform shares, then one stage per
    platform (`FROM image AS image-<arch>`) setting what differs (compiled architectures, the images a
    refusal names), the last stage picking one by TARGETARCH. An image holds the shared values and its own
    stage's; reading every stage would let the last platform's values win."""
    arch = re.escape(platforms.architecture(platform))
    stages = re.split(r"\n(?=FROM )", dockerfile.read_text())
    own = "\n".join(stage for stage in stages if not re.match(rf"FROM \S+ AS image-(?!{arch}\b)", stage))
    return {key: value for key, value in IMAGE_ENV.findall(own) if key not in NOT_FOR_THE_HOST}


def predicted_facts(kb: KnowledgeBase, variant: Variant) -> dict[str, Any]:
    """The facts file (schema 1, accel_images/smoke/facts.py) of the variant's image as the knowledge base
    predicts it: every build of the image is checked against these very values (accel_images/kb/claims.py)
    and fails where it holds others, so they are what the built image's guard reads at its start."""
    known = kb.platforms.get(variant.platform)
    machine = known.machines[0] if known is not None else ""
    blank = ImageFacts(torch="", public="", local=None, python="", backend="", toolkit={}, archs=None, ptx=None,
                       companions={}, platform={"os": "linux", "machine": machine})
    expected = {claim.key: claim.expected for claim in claims(kb, variant, blank)}
    torch = str(expected.get("torch") or variant.torch)
    local = variant.wheel_index
    return {"schema": 1, "platform": {"os": "linux", "machine": machine}, "python": str(expected.get("python", "")),
            "torch": {"version": f"{torch}+{local}" if local else torch, "public": torch, "local": local},
            "backend": str(expected.get("backend") or vendors.get(variant.vendor).smoke_backend),
            "toolkit": dict.fromkeys(("cuda", "hip", "xpu", "cudnn", "nccl", "gaudi")),
            "archs": _listed(expected.get("archs")), "ptx": _listed(expected.get("ptx")),
            "companions": {key.removeprefix("companion:"): str(value) for key, value in expected.items()
                           if key.startswith("companion:")}, "distributions": {}}


def _listed(value: object) -> list[str]:
    """A claim's expected targets as a facts file lists them ([] where the knowledge base predicts none)."""
    if isinstance(value, tuple):
        return [str(item) for item in value]
    return [str(value)] if value else []


def not_built_here(tag: str, platform: str | None, built_for: Sequence[str], machine: str | None) -> dict[str, Any]:
    """The check of a tag that has no image of this host's platform: nothing runs (an image of another
    architecture cannot start here), and `recommend` offers it to no host of this kind, so both agree."""
    where = f"no {platform} image of this tag" if platform else f"no image of this tag for this {machine} CPU"
    return check(f"guard {tag}", True, f"{where} (it is built for {', '.join(built_for)}): not run here, and"
                 " recommend offers it to none of this host's kind", starts=False, recommend=False, skipped=True,
                 platform=platform)


def detection_check(host: HostInfo) -> dict[str, Any]:
    accelerator = vendors.get(host.vendor).accelerator
    if host.unusable:
        return check("detect", False, f"{host.vendor}: accelerator present but unusable: {host.unusable}")
    if not accelerator:
        return check("detect", False, "no accelerator found (" + "; ".join(host.evidence[-1:]) + ")")
    gpus = ", ".join(dict.fromkeys(host.gpu_names)) or "unnamed"
    return check("detect", True, f"{host.vendor}: {host.device_count} device(s) ({gpus}), driver "
                 f"{host.driver_version or 'unknown'}, architectures {', '.join(host.gpu_archs) or 'unknown'}")


def guard_checks(host: HostInfo, images: Path, matrix: Path, dev_root: Path | None) -> list[dict[str, Any]]:
    """Each rendered guard of the host's vendor, on this host, beside `recommend`'s judgement."""
    directory = images / host.vendor
    if not directory.is_dir():
        return [check("guards", False,
                      f"no rendered images of {host.vendor} under {images} (run `accel-images render`)")]
    kb = load_kb()
    platform = host_platform(host, kb)
    by_tag: dict[str, dict[str, Variant]] = {}
    for variant in expand(load_matrix(matrix), kb).variants:
        if variant.vendor == host.vendor:
            by_tag.setdefault(variant.tag, {})[variant.platform] = variant
    results = []
    with tempfile.TemporaryDirectory(prefix="accel-images-facts-") as scratch:
        for context in sorted(path for path in directory.iterdir() if (path / "guard.sh").is_file()):
            built = by_tag.get(context.name)
            own = built.get(platform or "") if built is not None else None
            if built is None:
                results.append(check(f"guard {context.name}", False, "not in the matrix (images/ is stale?)",
                                     **run_guard(context, dev_root)))
            elif own is None:
                results.append(not_built_here(context.name, platform, list(built), host.machine))
            else:
                results.append(guard_check(host, kb, context, own, dev_root, Path(scratch)))
    return results


def guard_check(host: HostInfo, kb: KnowledgeBase, context: Path, variant: Variant, dev_root: Path | None,
                scratch: Path) -> dict[str, Any]:
    """One tag's image of this host's platform: its guard run here with that image's environment and facts,
    beside `recommend`'s judgement of that very image."""
    facts = predicted_facts(kb, variant)
    facts_file = scratch / f"{variant.local_tag}.json"
    facts_file.write_text(json.dumps(facts))
    result = run_guard(context, dev_root, variant.platform, facts_file)
    starts = result["exit"] == 0
    fit = judge(host, variant, kb)
    agrees = result["exit"] in (0, GUARD_EXIT) and starts == fit.fits
    verdict = "starts" if starts else "refuses"
    detail = (f"{verdict}; recommend {'admits' if fit.fits else 'rejects'} it"
              + ("" if agrees else " (disagreement)"))
    return check(f"guard {context.name}", agrees, detail, starts=starts, recommend=fit.fits,
                 rejections=list(fit.rejections), platform=variant.platform, facts=facts, **result)


def run_guard(context: Path, dev_root: Path | None, platform: str = platforms.DEFAULT,
              facts: Path | None = None) -> dict[str, Any]:
    """The guard of the tag's image of `platform` as its entry point, on this host: `true` as the command,
    accelerator required, with that image's environment and, where given, its facts file."""
    env = {**os.environ, **image_env(context / "Dockerfile", platform), "ACCEL_IMAGES_REQUIRE_ACCELERATOR": "1",
           **facts_env(facts)}
    env.pop("ACCEL_IMAGES_GUARD", None)
    if dev_root is not None:
        env["ACCEL_IMAGES_DEV_ROOT"] = str(dev_root)
    start = time.monotonic()
    try:
        done = subprocess.run(["sh", str(context / "guard.sh"), "true"], env=env, capture_output=True, text=True,
                              timeout=GUARD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"exit": None, "said": [f"timed out after {GUARD_TIMEOUT_S:.0f} s"], "ms": GUARD_TIMEOUT_S * 1000}
    ms = round((time.monotonic() - start) * 1000, 1)
    return {"exit": done.returncode, "said": done.stderr.splitlines(), "ms": ms}


def facts_env(facts: Path | None) -> Mapping[str, str]:
    """ACCEL_IMAGES_FACTS for the guard: the image's facts file, or (a tag not in the matrix) a path that is
    certainly absent, so the guard never reads the facts of an image this host itself runs in."""
    return {"ACCEL_IMAGES_FACTS": str(facts) if facts is not None else os.devnull + "/absent"}


def smoke_check(host: HostInfo, python: str) -> dict[str, Any]:
    """The smoke workload with this host's Python and torch, requiring the accelerator."""
    argv = [python, str(SMOKE_SOURCE)]
    if vendors.get(host.vendor).accelerator:
        argv.append("--require-accelerator")
    start = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return check("smoke", False, f"no Python at {python!r} (give the one with torch: --python)")
    except subprocess.TimeoutExpired:
        return check("smoke", False, f"timed out after {SMOKE_TIMEOUT_S:.0f} s")
    ms = round((time.monotonic() - start) * 1000, 1)
    lines = done.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return check("smoke", False, f"exit {done.returncode}, no JSON report: {tail}", exit=done.returncode, ms=ms)
    failed = [c.get("name", "?") for c in report.get("checks", []) if not c.get("ok")]
    expected = vendors.get(host.vendor).smoke_backend
    on_device = report.get("backend") == expected
    ok = bool(report.get("ok")) and done.returncode == 0 and on_device
    detail = (f"torch {report.get('torch')} on {report.get('backend')} ({report.get('device_name')}, "
              f"{report.get('device_count')} device(s))"
              + (f"; failed: {', '.join(failed)}" if failed else "")
              + ("" if on_device else f"; expected the {expected} backend"))
    return check("smoke", ok, detail, exit=done.returncode, ms=ms, report=report)


def device_check(python: str, images: Path, matrix: Path, root: Path = Path("/")) -> dict[str, Any]:
    """Detection, the guards and the smoke workload on this host: the record `make device-check` writes."""
    host = detect_host(run_command, root)
    dev_root = None if root == Path("/") else root
    checks = [detection_check(host)]
    if vendors.get(host.vendor).accelerator and not host.unusable:
        checks += guard_checks(host, images, matrix, dev_root)
        checks.append(smoke_check(host, python))
    return {"schema": SCHEMA, "ok": all(c["ok"] for c in checks), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                          time.gmtime()),
            "host": asdict(host), "python": python, "checks": checks}


def summary(record: dict[str, Any]) -> list[str]:
    host = record["host"]
    lines = [f"host: {host['vendor']}, driver {host['driver_version'] or 'unknown'}, "
             f"{host['device_count']} device(s) ({', '.join(dict.fromkeys(host['gpu_names'])) or '-'})"]
    lines += [f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}" for c in record["checks"]]
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m accel_images.host.devicecheck", description=__doc__.split("\n")[0])
    parser.add_argument("--python", default="python3", help="the Python with this host's torch (default: python3)")
    parser.add_argument("--images", type=Path, default=Path("images"), help="the rendered images (default: images)")
    parser.add_argument("--matrix", type=Path, default=Path("matrix.yaml"), help="default: matrix.yaml")
    parser.add_argument("--out", type=Path, default=Path("device-check.json"), help="default: device-check.json")
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)  # a fake host, for tests
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for path, what in ((args.matrix, "matrix"), (args.images, "rendered images")):
        if not path.exists():
            print(f"accel-images: error: {path}: no {what} (run from the repository root)", file=sys.stderr)
            return 2
    record = device_check(args.python, args.images, args.matrix, args.root)
    args.out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print("\n".join(summary(record)))
    print(f"record: {args.out}")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
