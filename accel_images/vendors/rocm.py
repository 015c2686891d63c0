"""AMD ROCm: rocmX.Y wheels (they bundle the ROCm user space) on plain Ubuntu, rocm/dev-ubuntu for
devel, /dev/kfd and /dev/dri with their host groups, gfx-target rules.

References:
- wheel indexes per torch: PyTorch RELEASE.md; gfx targets: pytorch/pytorch#164854, #167299
- device flags: https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html
  ("--device=/dev/kfd --device=/dev/dri ... --ipc=host ... --security-opt seccomp=unconfined")
- HSA_OVERRIDE_GFX_VERSION (unofficial): ROCm/legacy-rocm-build#1756, #2914 (compat-facts §8.8)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from accel_images.devices import DeviceOptions, host_group_ids, under
from accel_images.hostinfo import (DOTTED, Gpu, HostInfo, Runner, host_from, leading_version, listing, quote, read,
                                   summary)
from accel_images.vendors.base import Combo, Fit, Resolution, VendorBase
from accel_images.versions import parse

if TYPE_CHECKING:
    from accel_images.compat import KnowledgeBase, TorchRelease
    from accel_images.variant import Variant

ROCM_DOCS = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html"
ROCM_PYTORCH_DOCS = ("https://rocm.docs.amd.com/projects/install-on-linux/en/docs-6.2.0/"
                     "how-to/3rd-party/pytorch-install.html")
DEVICE_PATHS = ("/dev/kfd", "/dev/dri")

HSA_OVERRIDES = {
    "gfx1031": ("10.3.0", "gfx1030"), "gfx1032": ("10.3.0", "gfx1030"),
    "gfx1101": ("11.0.0", "gfx1100"), "gfx1102": ("11.0.0", "gfx1100"), "gfx1103": ("11.0.0", "gfx1100"),
}
"""Unofficial HSA_OVERRIDE_GFX_VERSION values users run these GPUs with, and the target each then
poses as (§8.8): RDNA2 parts as gfx1030, RDNA3 parts as gfx1100. AMD: "not supported by AMD but
some have had success"."""

ROCM_MINOR_WINDOW = 2
"""How many minor releases container ROCm may stray from the host's before a caveat (§4.3: the
ROCm 6.3 kernel driver was tested with user space 6.3, 6.2 and 6.1)."""


@dataclass(frozen=True)
class RocmFacts:
    archs: Mapping[str, tuple[str, ...]]            # 'all' and 'since_7_0'
    devel_images: Mapping[str, Mapping[str, str]]   # ROCm -> os -> image, plus rocm_path


class Rocm(VendorBase):
    """The AMD vendor: see the module docstring for its references."""

    def load_facts(self, raw: Mapping[str, Any]) -> RocmFacts:
        return RocmFacts(archs={k: tuple(str(a) for a in v) for k, v in raw["archs"].items()},
                         devel_images={str(k): dict(v) for k, v in raw["devel_images"].items()})

    def facts(self, kb: "KnowledgeBase") -> RocmFacts:
        facts: RocmFacts = self.section(kb).facts
        return facts

    # ---- knowledge base ------------------------------------------------------------------

    def flavor_reasons(self, kb: "KnowledgeBase", combo: Combo) -> list[str]:
        reasons = super().flavor_reasons(kb, combo)
        if reasons or combo.flavor != "devel" or not combo.stack or not combo.os:
            return reasons
        images = self.facts(kb).devel_images.get(combo.stack, {})
        if combo.os not in images:
            where = ", ".join(k for k in images if k.startswith(("ubuntu", "debian"))) or "none"
            return [f"no rocm/dev-ubuntu image for ROCm {combo.stack} on {combo.os} (available: {where})"]
        return []

    def wheel_index(self, kb: "KnowledgeBase", stack: str | None) -> str | None:
        return f"rocm{stack}"

    def gpu_archs(self, kb: "KnowledgeBase", torch: str, stack: str | None) -> tuple[str, ...]:
        if not stack:
            return ()
        archs = self.facts(kb).archs
        extra = archs["since_7_0"] if parse(stack) >= (7, 0) else ()
        return tuple(archs["all"]) + tuple(extra)

    def resolve(self, kb: "KnowledgeBase", combo: Combo) -> Resolution:
        base = super().resolve(kb, combo)
        if combo.flavor != "devel":
            return base
        image = self.facts(kb).devel_images[base.stack or ""][combo.os or ""]
        return Resolution(**{**base.__dict__, "base_image": image})

    def base_upgrades(self, kb: "KnowledgeBase", variant: "Variant") -> list[str]:
        if variant.flavor != "devel":
            return []
        images = [by_os[variant.os] for stack, by_os in self.facts(kb).devel_images.items()
                  if variant.os in by_os and parse(stack) > parse(variant.stack or "0")]
        return sorted(images, reverse=True)

    # ---- hardware -------------------------------------------------------------------------

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(vendor=self.name, devices=DEVICE_PATHS, ipc_mode="host",
                             security_opt=("seccomp=unconfined",),
                             group_add=host_group_ids(DEVICE_PATHS, dev_root),  # video/render, whatever their ids
                             sources=(ROCM_DOCS, ROCM_PYTORCH_DOCS))

    def accelerator_present(self, dev_root: Path) -> bool:
        return under(dev_root, "/dev/kfd").exists()

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        if not under(root, "/dev/kfd").exists():
            notes.append("rocm: no /dev/kfd (amdgpu KFD driver not loaded)")
            return None
        rocminfo = run(["rocminfo"])
        gpus = _amd_gpus(rocminfo, run, root, notes)
        if not gpus:
            return None
        smi = _amd_smi_fields(run(["amd-smi", "version"]))
        return host_from("rocm", gpus, driver_version=_amd_driver(smi, rocminfo, root, notes),
                         stack_version=_rocm_version(run, root, smi, notes))

    def fit(self, host: HostInfo, variant: "Variant", kb: "KnowledgeBase") -> Fit:
        """The gfx target must be compiled into the wheel; a far host ROCm is a caveat (§4.2, §4.3)."""
        stack = variant.stack or ""
        caveats = []
        if host.stack_version and _rocm_far(host.stack_version, stack):
            caveats.append(f"container ROCm {stack} is far from the host's ROCm {host.stack_version}: the host "
                           "kernel driver is tested with user space within a few releases of its own")
        if not host.gpu_archs:
            return Fit(variant, caveats=tuple(caveats), why=f"ROCm {stack}")
        compiled = variant.gpu_archs
        served = [a for a in host.gpu_archs if a in compiled]
        missing = [a for a in host.gpu_archs if a not in compiled]
        if not served:
            return Fit(variant, rejections=(f"GPU architecture {', '.join(missing)} is not compiled into the "
                                            f"{variant.wheel_index} wheel (it has {', '.join(compiled)})",))
        if missing:
            caveats.append(f"GPU architecture {', '.join(missing)} is not compiled into the {variant.wheel_index} "
                           f"wheel; only the {', '.join(served)} GPUs can use it")
        return Fit(variant, caveats=tuple(caveats), exact_arch=True,
                   why=f"{', '.join(served)} compiled into the {variant.wheel_index} wheel")

    def host_warnings(self, host: HostInfo, fits: list[Fit]) -> list[str]:
        warnings = []
        if host.device_count and not host.gpu_archs:
            warnings.append("the GPU gfx target is unknown: the image's compiled architectures were not checked")
        if host.stack_version is None:
            warnings.append("the host ROCm version is unknown: container/host ROCm distance was not checked")
        return warnings + _hsa_override_hints(host, fits)

    def describe_host(self, host: HostInfo) -> list[str]:
        return [f"ROCm {host.stack_version}"] if host.stack_version else []


def _rocm_far(host_version: str, stack: str) -> bool:
    """More than ROCM_MINOR_WINDOW minor releases apart, or a different major (tuples, never floats)."""
    try:
        host, image = parse(host_version), parse(stack)
    except ValueError:
        return False
    if host[0] != image[0]:
        return True
    return abs((host + (0,))[1] - (image + (0,))[1]) > ROCM_MINOR_WINDOW


def _hsa_override_hints(host: HostInfo, fits: list[Fit]) -> list[str]:
    rocm = [f.variant for f in fits if f.variant.vendor == "rocm"]
    hints = []
    for arch in host.gpu_archs:
        if arch not in HSA_OVERRIDES or not rocm or any(arch in v.gpu_archs for v in rocm):
            continue
        version, poses_as = HSA_OVERRIDES[arch]
        hints.append(f"{arch} is in no official wheel; unofficial workaround, not supported by AMD: "
                     f"-e HSA_OVERRIDE_GFX_VERSION={version} makes ROCm treat it as {poses_as}")
    return hints


# ---------------------------------------------------------------------------------------------
# Host detection: /dev/kfd, GPUs from rocminfo / amd-smi / KFD topology, versions from amd-smi and friends
# ---------------------------------------------------------------------------------------------

_GFX = re.compile(r"(gfx[0-9a-f]+)(?::\S*)?")
_ISA_GFX = re.compile(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)(?::\S*)?")
_ROCK_MODULE = re.compile(rf"ROCk module version ({DOTTED}) is loaded")
_DOTTED_RE = re.compile(DOTTED)
_AMD_VENDOR_ID = 0x1002


def gfx(value: str) -> str | None:
    """'gfx942:sramecc+:xnack-' -> 'gfx942'; generic targets and non-gfx names -> None."""
    match = _GFX.fullmatch(value.strip().lower())
    return match.group(1) if match else None


def _rocminfo_agents(text: str) -> list[dict[str, str]]:
    """Per agent, the first value of each key: the agent's own Name comes before its ISA names."""
    agents: list[dict[str, str]] = []
    for line in text.splitlines():
        if re.fullmatch(r"\s*Agent \d+\s*", line):
            agents.append({})
        elif agents and ":" in line:
            key, _, value = line.partition(":")
            agents[-1].setdefault(key.strip(), value.strip())
            if key.strip() == "Name" and _ISA_GFX.fullmatch(value.strip()):
                agents[-1].setdefault("ISA", value.strip())
    return agents


def parse_rocminfo(text: str) -> list[Gpu]:
    gpus = []
    for agent in _rocminfo_agents(text):
        if agent.get("Device Type") != "GPU":
            continue
        isa = _ISA_GFX.fullmatch(agent.get("ISA", "").lower())
        arch = gfx(agent.get("Name", "")) or (isa.group(1) if isa else None)
        gpus.append(Gpu(agent.get("Marketing Name") or None, arch))
    return gpus


def parse_amd_smi_static(text: str) -> list[Gpu]:
    """``amd-smi static --asic``: 'GPU: N' blocks with MARKET_NAME and (ROCm 6.3+) TARGET_GRAPHICS_VERSION."""
    blocks: list[dict[str, str]] = []
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "GPU" and value.strip().isdigit():
            blocks.append({})
        elif blocks and value.strip():
            blocks[-1].setdefault(key.strip(), value.strip())
    return [Gpu(block.get("MARKET_NAME"), gfx(block.get("TARGET_GRAPHICS_VERSION", "")))
            for block in blocks if "MARKET_NAME" in block or "TARGET_GRAPHICS_VERSION" in block]


def kfd_arch(properties: str) -> str | None:
    """A KFD topology node's gfx target: gfx_target_version 90402 -> gfx942, 90010 -> gfx90a."""
    fields = dict(line.split(None, 1) for line in properties.splitlines() if len(line.split(None, 1)) == 2)
    version, vendor = fields.get("gfx_target_version", ""), fields.get("vendor_id", str(_AMD_VENDOR_ID))
    if not version.isdigit() or int(version) == 0 or vendor.strip() != str(_AMD_VENDOR_ID):
        return None
    number = int(version)
    major, minor, stepping = number // 10000, (number // 100) % 100, number % 100
    return f"gfx{major}{minor:x}{stepping:x}"


def _kfd_gpus(root: Path) -> list[Gpu]:
    nodes = listing(under(root, "/sys/class/kfd/kfd/topology/nodes"), "*/properties")
    archs = [kfd_arch(read(node) or "") for node in nodes]
    return [Gpu(None, arch) for arch in archs if arch]


def _amd_gpus(rocminfo: str | None, run: Runner, root: Path, notes: list[str]) -> list[Gpu]:
    """rocminfo names the canonical gfx targets; amd-smi and the KFD topology stand in without it."""
    if rocminfo is not None and (gpus := parse_rocminfo(rocminfo)):
        notes.append(f"rocm: rocminfo lists {summary(gpus)}")
        return gpus
    static = run(["amd-smi", "static", "--asic"])
    if static is not None and (gpus := parse_amd_smi_static(static)):
        notes.append(f"rocm: amd-smi static lists {summary(gpus)}")
        return gpus
    if (gpus := _kfd_gpus(root)):
        notes.append(f"rocm: KFD topology lists {len(gpus)} GPU node(s)")
        return gpus
    answered = [name for name, out in (("rocminfo", rocminfo), ("amd-smi static", static)) if out is not None]
    notes.append("rocm: /dev/kfd present but no GPU in "
                 + (", ".join(answered) + " or " if answered else "") + "KFD topology")
    return []


def _amd_smi_fields(text: str | None) -> dict[str, str]:
    """``amd-smi version``: 'AMDSMI Tool: 25.4.2 | ... | ROCm version: 6.4.1 | amdgpu version: 6.10.5'."""
    fields = {}
    for part in (text or "").split("|"):
        key, _, value = part.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def _rocm_version(run: Runner, root: Path, smi: dict[str, str], notes: list[str]) -> str | None:
    """amd-smi first, then hipconfig, then the legacy file: TheRock installs may lack the file."""
    if (version := leading_version(smi.get("ROCm version"))):
        notes.append(f"rocm: amd-smi reports ROCm {version}")
        return version
    if (version := leading_version(run(["hipconfig", "--version"]), parts=2)):
        notes.append(f"rocm: hipconfig reports HIP {version}, taken as ROCm {version}")
        return version
    if (version := leading_version(read(under(root, "/opt/rocm/.info/version")))):
        notes.append(f"rocm: /opt/rocm/.info/version says {version}")
        return version
    notes.append("rocm: ROCm version unknown (no amd-smi, hipconfig or /opt/rocm/.info/version)")
    return None


def _amd_driver(smi: dict[str, str], rocminfo: str | None, root: Path, notes: list[str]) -> str | None:
    """The amdgpu kernel driver: amd-smi, the rocminfo banner, then the DKMS module's version file.
    The in-kernel driver has no version of its own (amd-smi then prints a kernel banner)."""
    reported = smi.get("amdgpu version", "")
    if reported and reported != "N/A" and not _DOTTED_RE.fullmatch(reported):
        notes.append(f"rocm: amd-smi amdgpu version is not a version (in-kernel driver?): {quote(reported)}")
    banner = _ROCK_MODULE.search(rocminfo or "")
    module = (read(under(root, "/sys/module/amdgpu/version")) or "").strip()
    for source, value in (("amd-smi", reported), ("rocminfo", banner.group(1) if banner else ""),
                          ("/sys/module/amdgpu/version", module)):
        if _DOTTED_RE.fullmatch(value):
            notes.append(f"rocm: amdgpu driver {value} (from {source})")
            return value
    notes.append("rocm: amdgpu driver version unknown")
    return None


# ---------------------------------------------------------------------------------------------
# The in-image guard (accel_images/smoke/guard.sh calls check_vendor)
# ---------------------------------------------------------------------------------------------

GUARD = r'''check_vendor() {
    if [ ! -e "$dev/kfd" ] || [ ! -d "$dev/dri" ]; then
        missing "/dev/kfd or /dev/dri missing: run with --device /dev/kfd --device /dev/dri --group-add video"
        return
    fi
    open_or_group_add "$dev/kfd" "$dev"/dri/renderD*
}
'''

VENDOR = Rocm(
    name="rocm",
    title="AMD ROCm",
    stack_name="ROCm",
    smoke_backend="rocm",
    kb_file=Path(__file__).parent.parent / "data" / "vendors" / "rocm.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gpu-amd"),
    detect_rank=20,
    guard_check=GUARD,
    sources=(ROCM_DOCS, ROCM_PYTORCH_DOCS),
)
