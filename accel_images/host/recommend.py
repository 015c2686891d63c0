"""Which published image fits this host: the answer behind `accel-images recommend` and `pull`.

Each variant is judged against the detected host by its vendor's rules (the `fit` of
accel_images/vendors/<vendor>.py, each citing compat-facts.md), and the judgement says one of three
things: it cannot work (a rejection, with the reason), it works with a reservation that is specific
to this image (a caveat), or it fits. The newest image that fits wins:

    preferred flavor, then one that runs on the host's own driver (not through a compatibility layer
    the image ships: CUDA forward compatibility), then newest torch, then an image without caveats,
    then one compiled for the GPU's own architecture, then newest stack, newest Python, newest OS.

An image that runs natively beats a newer torch that needs forward compatibility: NVIDIA supports
forward compatibility on data-center GPUs only and for the driver branches each base names, and the
container toolkit's cuda-compat mode must be on (its default); the native image depends on none of it
(docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html).

A clean fit beats a newer stack of the same torch that only fits with a caveat: both carry the same
torch, so nothing is lost, while the caveat (PTX/JIT paths, a runtime that may refuse to start the
container) is a real risk for a development image whose users run torch.compile. Images of a vendor
without an accelerator (CPU) run anywhere; on an accelerator host they rank after that vendor's own.

A host whose accelerator is present but unusable (HostInfo.unusable: a driver/library mismatch, a
driver that is not loaded) runs none of that vendor's images: they are rejected with the reason, the
CPU image is what `default_vendor` offers instead, and the first warning says "accelerator present but
unusable: <reason>", so the user fixes the driver rather than debugging a GPU image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel_images import vendors
from accel_images.errors import AccelError
from accel_images.kb.compat import KnowledgeBase
from accel_images.model import platforms as platform_names
from accel_images.model.hostinfo import HostInfo
from accel_images.model.reference import image_ref
from accel_images.model.variant import OS_ORDER, Variant
from accel_images.plan.variants import by_tag
from accel_images.vendors.base import Fit
from accel_images.versions import newest_first

@dataclass(frozen=True)
class Recommendation:
    """The chosen variant (None when nothing fits), why, what to watch out for, and how to run it."""

    variant: Variant | None
    image: str | None
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    docker_run: str | None
    digest: str | None = None
    """The chosen image's manifest digest, where a registry's catalogue said it."""

    @property
    def ok(self) -> bool:
        return self.variant is not None


def recommend(host: HostInfo, variants: Sequence[Variant], kb: KnowledgeBase, *, image: str,
              registry: str | None = None, prefer_flavor: str = "runtime",
              dev_root: Path = Path("/")) -> Recommendation:
    """The newest variant that runs on `host`, with the reasons for it and against newer ones.

    `image` is the matrix's image name and `registry` an optional prefix (`ghcr.io/acme`); `dev_root`
    stands for `/` when the device flags read group ids from the host's device files.
    """
    runnable, elsewhere = on_host_platform(host, variants, kb)
    fits = [judge(host, variant, kb) for variant in runnable] + elsewhere
    usable = sorted((f for f in fits if f.fits), key=lambda f: _rank(f, host, prefer_flavor))
    warnings = [unusable_warning(host)] if host.unusable else list(host_warnings(host, fits))
    if not usable:
        reasons = tuple(f"{f.variant.tag}: {'; '.join(f.rejections)}"
                        for f in sorted(fits, key=lambda f: f.variant.sort_key()))
        return Recommendation(None, None, reasons or ("no variant to choose from",), tuple(warnings), None)
    chosen = usable[0]
    warnings += chosen.caveats
    if chosen.variant.flavor != prefer_flavor:
        warnings.append(f"no {prefer_flavor} image fits; {chosen.variant.flavor} chosen "
                        f"({chosen.variant.vendor} images come as: {_flavors(variants, chosen.variant.vendor)})")
    if chosen.variant.vendor != host.vendor and not host.unusable:
        warnings.append(f"no {host.vendor} image fits; the {chosen.variant.vendor} image uses no accelerator")
    elif chosen.variant.vendor != host.vendor:
        warnings.append(f"the {chosen.variant.vendor} image is recommended instead: it uses no accelerator")
    ref = image_ref(image, chosen.variant.tag, registry)
    reasons = (f"{chosen.variant.tag}: {chosen.why}", *_passed_over(chosen, fits))
    return Recommendation(chosen.variant, ref, reasons, tuple(warnings),
                          docker_run_line(chosen.variant.vendor, ref, dev_root))


def host_platform(host: HostInfo, kb: KnowledgeBase) -> str | None:
    """The platform whose images run natively here (`uname -m` through the knowledge base's table);
    linux/amd64 when the machine is unknown; None for a CPU no platform of the images is built for."""
    if host.machine is None:
        return platform_names.DEFAULT
    return kb.platform_of_machine(host.machine)


def on_host_platform(host: HostInfo, variants: Sequence[Variant],
                     kb: KnowledgeBase) -> tuple[list[Variant], list[Fit]]:
    """The variants built for the host's platform, and one rejection per tag that has no image for it,
    saying why (the knowledge base's reason: "AMD ROCm images are amd64 only", or that the registry's
    index lacks it): an image of another architecture would die with "exec format error"."""
    platform = host_platform(host, kb)
    runnable: list[Variant] = []
    elsewhere: list[Fit] = []
    for group in by_tag(variants):
        mine = [v for v in group if v.platform == platform]
        if mine:
            runnable += mine
            continue
        first = group[0]
        built = ", ".join(dict.fromkeys(p for v in group for p in v.platforms))
        if platform is None:
            why = f"this host's CPU is {host.machine}; the images are built for {built}"
        else:
            kb_reasons = _platform_reasons(kb, first, platform)
            why = f"no {platform} image ({'; '.join(kb_reasons) if kb_reasons else f'it is published for {built}'})"
        elsewhere.append(Fit(first, rejections=(why,)))
    return runnable, elsewhere


def _platform_reasons(kb: KnowledgeBase, variant: Variant, platform: str) -> list[str]:
    try:
        return kb.why_not_on(platform, variant.vendor, variant.stack, variant.torch, variant.python, variant.os,
                             variant.flavor)
    except AccelError:  # an image the installed knowledge base does not know (built by a newer accel-images)
        return []


def default_vendor(host: HostInfo) -> str:
    """Whose images to choose from when the user names no vendor: the host's, unless its accelerator
    is unusable; then the vendor without one (CPU), which runs all the same."""
    return vendors.fallback() if host.unusable else host.vendor


def unusable_warning(host: HostInfo) -> str:
    return f"accelerator present but unusable: {host.unusable}"


def docker_run_line(vendor: str, ref: str, dev_root: Path = Path("/"), *, local: bool = False) -> str:
    """`docker run --rm -it <device flags> --ipc host <vendor's settings> <ref>`: the docker renderer's line
    of the Launch (accel_images.host.launch), the container `run --print` names less the session's user,
    workspace and identity; `local`: a build of this host, never pulled."""
    from dataclasses import replace

    from accel_images.host.launch import launch
    from accel_images.host.runtimes import docker
    return docker.render(replace(launch(ref, vendor, dev_root), local=local)).text.rstrip("\n")


# ---------------------------------------------------------------------------------------------
# Judging one variant
# ---------------------------------------------------------------------------------------------

def judge(host: HostInfo, variant: Variant, kb: KnowledgeBase) -> Fit:
    """Whether `variant` runs on `host`, and with which reservations: its vendor decides."""
    vendor = vendors.get(variant.vendor)
    if vendor.accelerator and variant.vendor != host.vendor:
        have = f"a {host.vendor} accelerator" if vendors.get(host.vendor).accelerator else "no accelerator"
        return Fit(variant, rejections=(f"needs a {variant.vendor} accelerator; this host has {have}",))
    if vendor.accelerator and host.unusable:
        return Fit(variant, rejections=(f"needs a working {vendor.title} accelerator; {unusable_warning(host)}",))
    return vendor.fit(host, variant, kb)


# ---------------------------------------------------------------------------------------------
# Ranking and explaining
# ---------------------------------------------------------------------------------------------

def _rank(fit: Fit, host: HostInfo, prefer_flavor: str) -> tuple[Any, ...]:
    v = fit.variant
    return (v.vendor != host.vendor, v.flavor != prefer_flavor, bool(fit.through), newest_first(v.torch),
            bool(fit.caveats), not fit.exact_arch, newest_first(v.stack), newest_first(v.python),
            -OS_ORDER.index(v.os) if v.os in OS_ORDER else 0, v.tag)


def _passed_over(chosen: Fit, fits: list[Fit]) -> list[str]:
    """Why each newer variant of the chosen vendor and flavor lost to the chosen one."""
    lines = []
    for fit in sorted(fits, key=lambda f: f.variant.sort_key()):
        v = fit.variant
        if fit is chosen or v.sort_key() >= chosen.variant.sort_key():
            continue
        if v.vendor != chosen.variant.vendor or v.flavor != chosen.variant.flavor:
            continue
        if fit.rejections:
            lines.append(f"{v.tag}: {'; '.join(fit.rejections)}")
        elif fit.through and not chosen.through:
            lines.append(f"{v.tag}: passed over for {chosen.variant.tag}, which runs on the host's driver without"
                         f" {fit.through}: {'; '.join(fit.caveats)}")
        elif fit.caveats:
            lines.append(f"{v.tag}: passed over for {chosen.variant.tag}: {'; '.join(fit.caveats)}")
    return lines


def host_warnings(host: HostInfo, fits: list[Fit]) -> list[str]:
    """What holds for every image on this host: facts detection could not establish, workarounds."""
    return vendors.get(host.vendor).host_warnings(host, fits)


def _flavors(variants: Sequence[Variant], vendor: str) -> str:
    return ", ".join(sorted({v.flavor for v in variants if v.vendor == vendor}))


def describe_host(host: HostInfo) -> str:
    """One line: what was found on the host."""
    vendor = vendors.get(host.vendor)
    if not vendor.accelerator:
        return f"{host.vendor} (no accelerator found)" + _machine(host)
    if host.unusable:
        return f"{host.vendor}, {unusable_warning(host)}" + _machine(host)
    parts: list[str] = [host.vendor]
    if host.driver_version:
        parts.append(f"driver {host.driver_version}")
    parts += vendor.describe_host(host)
    names = ", ".join(dict.fromkeys(host.gpu_names))
    parts.append(f"{host.device_count} device(s)" + (f" ({names})" if names else ""))
    if host.gpu_archs:
        parts.append("arch " + ", ".join(host.gpu_archs))
    return ", ".join(parts) + _machine(host)


def _machine(host: HostInfo) -> str:
    """`, on aarch64` for a CPU other than x86_64 (what an x86_64 host says is unchanged)."""
    return f", on {host.machine}" if host.machine and host.machine not in ("x86_64", "amd64") else ""
