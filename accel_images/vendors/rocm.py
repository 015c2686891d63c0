"""AMD ROCm: rocmX.Y wheels (they bundle the ROCm user space) on plain Ubuntu, rocm/dev-ubuntu for
devel, /dev/kfd and /dev/dri with their host groups, gfx-target rules.

References:
- wheel indexes per torch: PyTorch RELEASE.md; gfx targets: pytorch/pytorch#164854, #167299
- device flags: https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html
  ("--device=/dev/kfd --device=/dev/dri ... --ipc=host ... --security-opt seccomp=unconfined")
- HSA_OVERRIDE_GFX_VERSION (unofficial): ROCm/legacy-rocm-build#1756, #2914 (compat-facts §8.8)
- the host's amdgpu kernel driver against the image's ROCm: AMD's user and kernel-space support matrix
  (rocm.yaml kernel_driver, SUPPORT_MATRIX_DOCS)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Mapping, Sequence

from accel_images.model.devices import (APPTAINER_GPU_DOCS, K8S_GPU_DOCS, SLURM_GRES_DOCS, DeviceOptions,
                                         SessionSettings, host_group_ids, under)
from accel_images.model.hostinfo import (DOTTED, Gpu, HostInfo, Remembering, Runner, answer, first_answer, host_from,
                                          leading_version, listing, quote, read, said, summary, unusable_host, wsl)
from accel_images.model.imagefacts import Claim, kb_row
from accel_images.model.knowledge import Combo, Resolution, minor_of
from accel_images.vendors.base import ALTERNATIVES_ENV, Fit, VendorBase, alternatives
from accel_images.versions import parse

if TYPE_CHECKING:
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.model.knowledge import Knowledge
    from accel_images.model.variant import Variant

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

SUPPORT_MATRIX_DOCS = "https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/compatibility/compatibility-matrix.html"
SUPPORT_MATRIX = "AMD's user and kernel-space support matrix"
"""What the kernel-driver rule cites in its messages (rocm.yaml kernel_driver: the rows and their source)."""


@dataclass(frozen=True)
class DriverRelease:
    """A row of AMD's user and kernel-space support matrix (rocm.yaml kernel_driver): an AMD GPU Driver
    release, the amdgpu module series its package carries (what a host reports), the ROCm it supports."""

    driver: str                 # '30.10'
    module: str                 # '6.14': the amdgpu module versions from 6.14 on are this release's
    rocm: tuple[str, ...]       # '7.14', ...: the ROCm releases (major.minor) supported on it


@dataclass(frozen=True)
class DriverWindow:
    """The amdgpu module versions a ROCm release is supported on: from `low` on (None: from the first row)
    and below `high` (None: no newer row drops it); `text` names the driver releases for people."""

    low: str | None
    high: str | None
    text: str

    def admits(self, module_version: str) -> bool:
        """Whether a host's amdgpu module version (dotted, as detection reads it) lies inside."""
        version = parse(module_version)
        return (self.low is None or version >= parse(self.low)) and (self.high is None or version < parse(self.high))

    def env(self) -> str:
        """'LOW-HIGH' for the guard (either side empty: unbounded), the form its in_window reads."""
        return f"{self.low or ''}-{self.high or ''}"


@dataclass(frozen=True)
class RocmFacts:
    archs: Mapping[str, tuple[str, ...]]            # 'all' and 'since_7_0': streams before 7.2
    devel_images: Mapping[str, Mapping[str, str]]   # ROCm -> os -> image, plus rocm_path
    streams: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # ROCm -> PYTORCH_ROCM_ARCH
    since: Mapping[str, str] = field(default_factory=dict)               # gfx target -> first torch minor
    drivers: tuple[DriverRelease, ...] = ()                              # oldest first, by module series


def load_drivers(raw: Mapping[str, Any]) -> tuple[DriverRelease, ...]:
    """rocm.yaml's kernel_driver releases, ordered by their module series (the order a host's version is read in)."""
    rows = [DriverRelease(str(row["driver"]), str(row["module"]), tuple(str(r) for r in row["rocm"]))
            for row in raw.get("releases") or ()]
    return tuple(sorted(rows, key=lambda row: parse(row.module)))


def driver_window(drivers: Sequence[DriverRelease], stack: str) -> DriverWindow | None:
    """The rows that support ROCm `stack` (a contiguous run, as AMD's matrix has them), as module bounds;
    None where no row lists the release (nothing to check against)."""
    release = minor_of(stack)
    supported = [index for index, row in enumerate(drivers) if release in row.rocm]
    if not supported:
        return None
    first, last = supported[0], supported[-1]
    low = drivers[first].module if first > 0 else None
    high = drivers[last + 1].module if last + 1 < len(drivers) else None
    releases = (f"AMD GPU Driver {drivers[first].driver} or later" if high is None
                else f"AMD GPU Driver {drivers[first].driver} to {drivers[last].driver}")
    modules = f"amdgpu {low or 'any'}" + (f" to below {high}" if high else " or later")
    return DriverWindow(low, high, f"{releases} ({modules})")


def driver_release(drivers: Sequence[DriverRelease], module_version: str) -> DriverRelease | None:
    """The release a host's amdgpu module version belongs to: the newest row whose series it has reached."""
    version = parse(module_version)
    reached = [row for row in drivers if parse(row.module) <= version]
    return reached[-1] if reached else None


def kernel_driver_reason(drivers: Sequence[DriverRelease], module_version: str | None, stack: str) -> str | None:
    """Why the host's amdgpu kernel driver cannot serve ROCm `stack` by AMD's support matrix; None when it
    can, or cannot be told (no version: the in-kernel driver has none; no row lists the release)."""
    window = driver_window(drivers, stack)
    if window is None or not module_version or not _DOTTED_RE.fullmatch(module_version):
        return None
    if window.admits(module_version):
        return None
    row = driver_release(drivers, module_version)
    which = f" (AMD GPU Driver {row.driver})" if row else ""
    return (f"amdgpu kernel driver {module_version}{which} is outside what ROCm {stack} supports: {window.text},"
            f" by {SUPPORT_MATRIX}")


class Rocm(VendorBase):
    """The AMD vendor: see the module docstring for its references."""

    def load_facts(self, raw: Mapping[str, Any]) -> RocmFacts:
        archs = raw["archs"]
        return RocmFacts(archs={str(k): tuple(str(a) for a in archs[k]) for k in ("all", "since_7_0")},
                         devel_images={str(k): dict(v) for k, v in raw["devel_images"].items()},
                         streams={str(k): tuple(str(a) for a in v) for k, v in archs.get("streams", {}).items()},
                         since={str(k): str(v) for k, v in archs.get("since", {}).items()},
                         drivers=load_drivers(raw.get("kernel_driver") or {}))

    def facts(self, kb: Knowledge) -> RocmFacts:
        facts: RocmFacts = self.section(kb).facts
        return facts

    # ---- knowledge base ------------------------------------------------------------------

    def flavor_reasons(self, kb: Knowledge, combo: Combo) -> list[str]:
        reasons = super().flavor_reasons(kb, combo)
        if reasons or combo.flavor != "devel" or not combo.stack or not combo.os:
            return reasons
        images = self.facts(kb).devel_images.get(combo.stack, {})
        if combo.os not in images:
            where = ", ".join(k for k in images if k.startswith(("ubuntu", "debian"))) or "none"
            return [f"no rocm/dev-ubuntu image for ROCm {combo.stack} on {combo.os} (available: {where})"]
        return []

    def wheel_index(self, kb: Knowledge, stack: str | None) -> str | None:
        return f"rocm{stack}"

    def gpu_archs(self, kb: Knowledge, torch: str, stack: str | None) -> tuple[str, ...]:
        """PyTorch's PYTORCH_ROCM_ARCH for the stream (rocm.yaml archs), less the targets its
        release branch did not have yet."""
        if not stack:
            return ()
        facts = self.facts(kb)
        if stack in facts.streams:
            listed = facts.streams[stack]
        else:
            listed = facts.archs["all"] + (facts.archs["since_7_0"] if parse(stack) >= (7, 0) else ())
        release = parse(minor_of(torch))
        return tuple(a for a in listed if parse(facts.since.get(a, "0")) <= release)

    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution:
        base = super().resolve(kb, combo)
        if combo.flavor != "devel":
            return base
        image = self.facts(kb).devel_images[base.stack or ""][combo.os or ""]
        return Resolution(**{**base.__dict__, "base_image": image})

    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]:
        """The compiled gfx targets (the guard's fallback when the image has no facts file), the amdgpu
        kernel driver versions its ROCm is supported on and who says so, and the sibling images a refusal
        may name, each with its targets and driver window (vendors.base.alternatives)."""
        window = self.driver_window(kb, variant.stack)
        env = {"ACCEL_IMAGES_GPU_ARCHS": ",".join(variant.gpu_archs),
               "ACCEL_IMAGES_AMDGPU_WINDOW": window.env() if window else "",
               "ACCEL_IMAGES_AMDGPU_SUPPORT": window.text if window else "",
               ALTERNATIVES_ENV: alternatives(variant, variants, lambda v: self._guard_facts(kb, v))}
        return {key: value for key, value in env.items() if value}

    def _guard_facts(self, kb: Knowledge, variant: Variant) -> tuple[str, ...]:
        """What the guard decides an image by: its gfx targets and its kernel-driver window ('-': any)."""
        window = self.driver_window(kb, variant.stack)
        return ",".join(variant.gpu_archs), window.env() if window else "-"

    def driver_window(self, kb: Knowledge, stack: str | None) -> DriverWindow | None:
        """The amdgpu module versions AMD's support matrix supports ROCm `stack` on (rocm.yaml kernel_driver)."""
        return driver_window(self.facts(kb).drivers, stack) if stack else None

    def base_upgrades(self, kb: Knowledge, variant: Variant) -> list[str]:
        if variant.flavor != "devel":
            return []
        images = [by_os[variant.os] for stack, by_os in self.facts(kb).devel_images.items()
                  if variant.os in by_os and parse(stack) > parse(variant.stack or "0")]
        return sorted(images, reverse=True)

    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """The ROCm the wheel was built for (torch.version.hip starts with it, `builds`; TheRock's 7.14
        HIP numbering is unverified) and its gfx targets (torch._C._cuda_getArchFlags() of a ROCm
        build, `archs.streams` where the stream has its own list, less `archs.since`)."""
        stack = variant.stack or ""
        claims = [Claim("stack", kb_row(self.kb_file, "builds", variant.torch_minor), stack,
                        facts.toolkit.get("hip"), "release")]
        if variant.gpu_archs:
            keys = ("archs", "streams", stack) if stack in self.facts(kb).streams else ("archs",)
            claims.append(Claim("archs", kb_row(self.kb_file, *keys), variant.gpu_archs, facts.archs))
        return claims

    # ---- hardware -------------------------------------------------------------------------

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(vendor=self.name, devices=DEVICE_PATHS, ipc_mode="host",
                             security_opt=("seccomp=unconfined",),
                             group_add=host_group_ids(DEVICE_PATHS, dev_root),  # video/render, whatever their ids
                             # Apptainer's GPU page: --rocm binds /dev/dri and the host's ROCm libraries (V)
                             apptainer_flags=("--rocm",),
                             k8s_resource="amd.com/gpu",  # Kubernetes "Schedule GPUs": amd.com/gpu (V)
                             slurm_gres="gpu",            # Slurm gres.html: GRES "gpu", AutoDetect=rsmi (V)
                             sources=(ROCM_DOCS, ROCM_PYTORCH_DOCS, APPTAINER_GPU_DOCS, K8S_GPU_DOCS,
                                      SLURM_GRES_DOCS))

    def session_settings(self) -> SessionSettings:
        """AMD's PyTorch container line adds `--cap-add=SYS_PTRACE` (rocgdb and profilers attach to
        processes) to the device options; its `--shm-size 8G` is moot under `--ipc=host`."""
        return SessionSettings(cap_add=("SYS_PTRACE",), sources=(ROCM_PYTORCH_DOCS,))

    def accelerator_present(self, dev_root: Path) -> bool:
        return under(dev_root, "/dev/kfd").exists()

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        """/dev/kfd natively; on WSL2 only /dev/dxg exists, and rocminfo and amd-smi answer there too."""
        if under(root, "/dev/kfd").exists():
            return _detect(Remembering(run), root, "/dev/kfd", notes)
        if wsl(root):
            notes.append("rocm: no /dev/kfd but /dev/dxg: WSL2, where ROCm reaches the GPU through the DirectX "
                         "paravirtual driver; asking rocminfo and amd-smi")
            return _detect(Remembering(run), root, "/dev/dxg", notes)
        notes.append("rocm: no /dev/kfd (amdgpu KFD driver not loaded) and no /dev/dxg (WSL2)")
        return None

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        """The host's amdgpu kernel driver must be one AMD's support matrix supports the image's ROCm on (the
        image brings its own user space: the host's ROCm does not matter), and the gfx target must be compiled
        into the wheel (§4.2)."""
        stack = variant.stack or ""
        outside = kernel_driver_reason(self.facts(kb).drivers, host.driver_version, stack)
        if outside:
            return Fit(variant, rejections=(outside,))
        caveats: list[str] = []
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
        if not host.driver_version:
            warnings.append(f"the amdgpu kernel driver's version is unknown (a distribution's in-kernel driver has"
                            f" none): {SUPPORT_MATRIX} was not checked")
        return warnings + _hsa_override_hints(host, fits)

    def describe_host(self, host: HostInfo) -> list[str]:
        return [f"ROCm {host.stack_version}"] if host.stack_version else []


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
# Host detection: /dev/kfd (or /dev/dxg on WSL2), GPUs from rocminfo / amd-smi / KFD topology,
# versions from amd-smi and friends, failures from what rocminfo and amd-smi print
# ---------------------------------------------------------------------------------------------

_ROCMINFO = ["rocminfo"]
_AMD_SMI_VERSION = ["amd-smi", "version"]
_AMD_SMI_TABLE = ["amd-smi"]
_AMD_SMI_STATIC = [["amd-smi", "static", "--asic", "--driver"], ["amd-smi", "static", "--asic"], ["amd-smi", "static"]]
"""The sections read (ASIC, DRIVER), then the forms older callers and tools answer."""

_GFX = re.compile(r"(gfx[0-9a-f]+)(?::\S*)?")
_ISA_GFX = re.compile(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)(?::\S*)?")
_ROCK_MODULE = re.compile(rf"ROCk module version ({DOTTED}) is loaded")
_DOTTED_RE = re.compile(DOTTED)
_AMD_VENDOR_ID = 0x1002
# rocminfo's first line under WSL2 (ROCm 6.x WSL runtime): "WSL environment detected."
_ROCMINFO_WSL = re.compile(r"^WSL environment detected", re.MULTILINE)
# rocminfo's failures (rocminfo.cc CheckInitialState, then the HSA status of the failing call):
#   "Unable to open /dev/kfd read-write: Cannot allocate memory"
#   "ROCk module is NOT loaded, possibly no GPU devices"
#   "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate ..."
_KFD_OPEN = re.compile(r"Unable to open /dev/kfd read-write:[ \t]*(?P<why>[^\n]*?)[ \t]*$", re.MULTILINE)
_ROCK_NOT_LOADED = re.compile(r"ROCk module is NOT loaded")
_HSA_ERROR = re.compile(r"\b(HSA_STATUS_ERROR_[A-Z_]+)")
# amd-smi's library failing to start (Python logging, on stderr), ROCm/amdsmi#172:
#   "ERROR:root:Unable to get devices, driver not initialized (amdgpu not found in modules)"
_AMDGPU_NOT_FOUND = re.compile(r"amdgpu not found in modules")
_SMI_NOT_INITIALIZED = re.compile(r"driver not initiali[sz]ed")
# Plain `amd-smi`: a header box, closed by its first "|----+----|" rule. AMD-SMI 26 puts it on one line,
#   "| AMD-SMI 26.2.0+021c61fc      amdgpu version: 6.16.6   ROCm version: 7.1.1    |",
# AMD-SMI 27 one field a line: "| AMD-SMI            27.0.0 |", "| amdgpu Version:    6.19.4 |",
# "| ROCm Version:      7.14.0 |".
_SMI_RULE = re.compile(r"\|[-=]+\+[-=+|]*")
_SMI_TOOL = re.compile(r"AMD-SMI\s+(\S+)")
_SMI_AMDGPU = re.compile(r"amdgpu version:\s*(\S+)", re.IGNORECASE)
_SMI_ROCM = re.compile(r"ROCm version:\s*(\S+)", re.IGNORECASE)
# Then two rows a GPU, first cells "| 0000:04:00.0  AMD Radeon RX 9070 XT |" and
# "|   0       0     N/A             N/A |" (GPU, HIP-ID, OAM-ID, Partition-Mode); the process table follows.
_SMI_ROW = re.compile(r"\s*([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(\S.*?)\s*")
_SMI_ROW_IDS = re.compile(r"\s*\d+\s+\S+\s+\S+\s+(\S+)\s*")
_SMI_PROCESSES = re.compile(r"^\|?\s*Processes:?", re.MULTILINE)
# `amd-smi static`: a block per device opened by "GPU: 0" (or "CPU: 0", on APUs such as the MI300A) at
# the left margin; sections ("    ASIC:", "    DRIVER:") one indent in, fields ("        MARKET_NAME: ...")
# two, some deeper ("LIMIT:" / "PPT0:" / "MAX_POWER_LIMIT: 550 W"). IFWI and DRIVER both have a VERSION.
_STATIC_BLOCK = re.compile(r"(GPU|CPU|NIC|SWITCH)\s*:\s*\d+\s*")


def gfx(value: str) -> str | None:
    """'gfx942:sramecc+:xnack-' -> 'gfx942'; generic targets and non-gfx names -> None."""
    match = _GFX.fullmatch(value.strip().lower())
    return match.group(1) if match else None


def _version(value: str | None) -> str | None:
    """A dotted version as the tool printed it; 'N/A', 'Linuxver' or a kernel banner -> None."""
    value = (value or "").strip()
    return value if _DOTTED_RE.fullmatch(value) else None


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


def rocminfo_failure(text: str) -> tuple[str, bool] | None:
    """(why rocminfo cannot reach the GPU, whether containers are blocked too), from its output.

    /dev/kfd refusing the host user ("Permission denied": not in the render group) blocks only that
    user: the `docker run` line adds the device groups. Any other refusal (ENOMEM, EBUSY) is the
    kernel driver's, so no container gets further either.
    """
    status = _HSA_ERROR.search(text)
    suffix = f" ({status.group(1)})" if status else ""
    if (kfd := _KFD_OPEN.search(text)):
        why = kfd.group("why") or "no reason given"
        if "permission" in why.lower():
            return (f"cannot open /dev/kfd: {why}{suffix}: this user is not in the render/video group "
                    "(containers get the groups through --group-add)"), False
        return f"cannot open /dev/kfd: {why}{suffix}", True
    if _ROCK_NOT_LOADED.search(text):
        return "amdgpu (ROCk) kernel module not loaded (rocminfo)", False
    if status:
        return f"rocminfo fails with {status.group(1)}", False
    return None


def amd_smi_failure(text: str) -> str | None:
    """Why amd-smi's library could not start, from its log lines."""
    if _AMDGPU_NOT_FOUND.search(text):
        return ("amdgpu not found in modules (amd-smi sees no amdgpu kernel module: not loaded, or built into "
                "the kernel, which amd-smi before the ROCm/amdsmi#172 fix does not recognise)")
    if _SMI_NOT_INITIALIZED.search(text):
        return "amd-smi: driver not initialized"
    return None


@dataclass(frozen=True)
class AmdSmiTable:
    """Plain ``amd-smi``: the header's versions as printed (maybe 'N/A' or a cut kernel banner) and
    one row per GPU (BDF, name, partition mode)."""

    tool: str | None
    amdgpu: str | None
    rocm: str | None
    rows: tuple[tuple[str, str, str | None], ...]

    @property
    def gpus(self) -> list[Gpu]:
        return [Gpu(name) for _, name, _ in self.rows]


def parse_amd_smi_table(text: str) -> AmdSmiTable:
    lines = text.splitlines()
    rule = next((i for i, line in enumerate(lines) if _SMI_RULE.fullmatch(line.strip())), len(lines))
    header = "\n".join(lines[:rule])
    found = [pattern.search(header) for pattern in (_SMI_TOOL, _SMI_AMDGPU, _SMI_ROCM)]
    tool, amdgpu, rocm = (match.group(1) if match else None for match in found)
    body = _SMI_PROCESSES.split("\n".join(lines[rule:]), maxsplit=1)[0]
    rows: list[tuple[str, str, str | None]] = []
    for line in body.splitlines():
        cell = line.split("|")[1] if line.startswith("|") and line.count("|") > 2 else ""
        if (row := _SMI_ROW.fullmatch(cell)):
            rows.append((row.group(1), row.group(2), None))
        elif rows and rows[-1][2] is None and (ids := _SMI_ROW_IDS.fullmatch(cell)):
            rows[-1] = (*rows[-1][:2], ids.group(1))
    return AmdSmiTable(tool, amdgpu, rocm, tuple(rows))


def _static_blocks(text: str) -> list[tuple[str, dict[tuple[str, ...], str]]]:
    """`amd-smi static` as (kind, {section path + key: value}) per device block, first value kept."""
    blocks: list[tuple[str, dict[tuple[str, ...], str]]] = []
    sections: list[tuple[int, str]] = []
    margin: int | None = None
    for line in text.splitlines():
        indent, stripped = len(line) - len(line.lstrip()), line.strip()
        if _STATIC_BLOCK.fullmatch(stripped) and (margin is None or indent <= margin):
            margin, sections = indent, []
            blocks.append((stripped.partition(":")[0].strip(), {}))
            continue
        key, colon, value = stripped.partition(":")
        if not blocks or not colon:
            continue
        while sections and sections[-1][0] >= indent:
            sections.pop()
        if not value.strip():
            sections.append((indent, key.strip()))
            continue
        path = (*(name for _, name in sections), key.strip())
        blocks[-1][1].setdefault(path, value.strip())
    return blocks


def _field(fields: Mapping[tuple[str, ...], str], key: str, section: str | None = None) -> str | None:
    """The value of `key`, under `section` when one is named, else in whichever section has it."""
    for path, value in fields.items():
        if path[-1] == key and (section is None or path[:-1] == (section,)):
            return value if value.upper() != "N/A" else None
    return None


@dataclass(frozen=True)
class AmdSmiStatic:
    gpus: list[Gpu]
    driver: str | None       # the DRIVER section's VERSION (not IFWI's, a firmware number)


def parse_amd_smi_static(text: str) -> AmdSmiStatic:
    """GPU blocks only: an APU's CPU block (MI300A) is no GPU."""
    gpu_blocks = [fields for kind, fields in _static_blocks(text) if kind == "GPU"]
    gpus = [Gpu(_field(fields, "MARKET_NAME"), gfx(_field(fields, "TARGET_GRAPHICS_VERSION") or ""))
            for fields in gpu_blocks
            if _field(fields, "MARKET_NAME") or _field(fields, "TARGET_GRAPHICS_VERSION")]
    drivers = [_version(_field(fields, "VERSION", "DRIVER")) for fields in gpu_blocks]
    return AmdSmiStatic(gpus, next((d for d in drivers if d), None))


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


def _detect(run: Remembering, root: Path, device: str, notes: list[str]) -> HostInfo | None:
    """GPUs, versions and failures; a failure makes the host unusable when it blocks containers or
    when no source lists a GPU at all (the built-in-amdgpu amd-smi message alone is no failure)."""
    rocminfo = run(_ROCMINFO)
    if _ROCMINFO_WSL.search(rocminfo or ""):
        notes.append("rocm: rocminfo reports a WSL environment (the GPU driver is the Windows one)")
    gpus = _amd_gpus(rocminfo, run, root, device, notes)
    smi_version = run(_AMD_SMI_VERSION)
    found = rocminfo_failure(said(rocminfo))
    smi_failures = [reason for out in run.outputs("amd-smi") if (reason := amd_smi_failure(said(out)))]
    reasons = [reason for reason in ((found or ("", False))[0], *smi_failures[:1]) if reason]
    if not gpus and not reasons:
        return None
    smi = _amd_smi_fields(answer(smi_version) or (smi_version if smi_failures else None))
    if smi.get("amdsmi tool"):
        library = smi.get("amdsmi library version") or "unknown"
        notes.append(f"rocm: AMDSMI Tool {smi['amdsmi tool']}, library {library}")
    versions = {"driver_version": _amd_driver(smi, rocminfo, run, root, notes),
                "stack_version": _rocm_version(run, root, smi, notes)}
    if found and found[1]:
        return _broken(found[0], gpus, versions, notes)
    if not gpus:
        return _broken(reasons[0], [], versions, notes)
    notes += [f"rocm: {reason} (GPUs are listed all the same)" for reason in reasons]
    return host_from("rocm", gpus, **versions)


def _broken(reason: str, gpus: list[Gpu], versions: dict[str, str | None], notes: list[str]) -> HostInfo:
    notes.append(f"rocm: accelerator present but unusable: {reason}")
    return unusable_host("rocm", reason, gpus, **versions)


def _amd_gpus(rocminfo: str | None, run: Runner, root: Path, device: str, notes: list[str]) -> list[Gpu]:
    """rocminfo names the canonical gfx targets; amd-smi and the KFD topology stand in without it."""
    if rocminfo is not None and (gpus := parse_rocminfo(rocminfo)):
        notes.append(f"rocm: rocminfo lists {summary(gpus)}")
        return gpus
    command, static = first_answer(run, _AMD_SMI_STATIC)
    if static is not None and (gpus := parse_amd_smi_static(static).gpus):
        notes.append(f"rocm: {command} lists {summary(gpus)}")
        return gpus
    table = run(_AMD_SMI_TABLE)
    if table is not None and (gpus := (parsed := parse_amd_smi_table(table)).gpus):
        where = ", ".join(bdf + (f" {mode}" if mode and mode != "N/A" else "") for bdf, _, mode in parsed.rows)
        notes.append(f"rocm: amd-smi {parsed.tool or ''} lists {summary(gpus)} at {where}; no gfx target in its table")
        return gpus
    if (gpus := _kfd_gpus(root)):
        notes.append(f"rocm: KFD topology lists {len(gpus)} GPU node(s)")
        return gpus
    answered = [name for name, out in (("rocminfo", rocminfo), ("amd-smi", static), ("amd-smi", table))
                if out is not None]
    notes.append(f"rocm: {device} present but no GPU in "
                 + (", ".join(dict.fromkeys(answered)) + " or " if answered else "") + "KFD topology")
    return []


def _amd_smi_fields(text: str | None) -> dict[str, str]:
    """``amd-smi version``: 'AMDSMI Tool: 25.4.2+aca1101 | ... | ROCm version: 6.4.1 | amdgpu version: 6.10.5',
    read line by line (log lines may come first: 'ERROR:root:...'), keys in lower case (the tool's
    capitalisation varies between releases: 'amdgpu version', 'amdgpu Version')."""
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        for part in line.split("|"):
            key, _, value = part.partition(":")
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def _table(run: Runner) -> AmdSmiTable:
    return parse_amd_smi_table(run(_AMD_SMI_TABLE) or "")


def _rocm_version(run: Runner, root: Path, smi: dict[str, str], notes: list[str]) -> str | None:
    """amd-smi first (its version command, then its table's header), then hipconfig, then the legacy
    file: TheRock installs may lack the file."""
    if (version := leading_version(smi.get("rocm version"))):
        notes.append(f"rocm: amd-smi reports ROCm {version}")
        return version
    if (version := _version(_table(run).rocm)):
        notes.append(f"rocm: the amd-smi table header says ROCm {version}")
        return version
    if (version := leading_version(answer(run(["hipconfig", "--version"])), parts=2)):
        notes.append(f"rocm: hipconfig reports HIP {version}, taken as ROCm {version}")
        return version
    if (version := leading_version(read(under(root, "/opt/rocm/.info/version")))):
        notes.append(f"rocm: /opt/rocm/.info/version says {version}")
        return version
    notes.append("rocm: ROCm version unknown (no amd-smi, hipconfig or /opt/rocm/.info/version)")
    return None


def _amd_driver(smi: dict[str, str], rocminfo: str | None, run: Runner, root: Path, notes: list[str]) -> str | None:
    """The amdgpu kernel driver: amd-smi, the rocminfo banner, the DKMS module's version file, then
    amd-smi's table header and its static DRIVER section. The in-kernel driver has no version of
    its own (amd-smi then prints a kernel banner, cut to 'Linuxver' in its table)."""
    sources: list[tuple[str, Callable[[], str | None]]] = [
        ("amd-smi version", lambda: smi.get("amdgpu version", "")),
        ("rocminfo", lambda: banner.group(1) if (banner := _ROCK_MODULE.search(rocminfo or "")) else ""),
        ("/sys/module/amdgpu/version", lambda: (read(under(root, "/sys/module/amdgpu/version")) or "").strip()),
        ("the amd-smi table header", lambda: _table(run).amdgpu or ""),
        ("amd-smi static DRIVER", lambda: parse_amd_smi_static(first_answer(run, _AMD_SMI_STATIC)[1] or "").driver),
    ]
    for source, value_of in sources:
        value = value_of() or ""
        if _DOTTED_RE.fullmatch(value):
            notes.append(f"rocm: amdgpu driver {value} (from {source})")
            return value
        if value and value != "N/A":
            notes.append(f"rocm: {source} gives an amdgpu version that is not a version (in-kernel driver?): "
                         f"{quote(value)}")
    notes.append("rocm: amdgpu driver version unknown")
    return None


# ---------------------------------------------------------------------------------------------
# The in-image guard (accel_images/smoke/guard.sh calls check_vendor)
# ---------------------------------------------------------------------------------------------

GUARD = r"""# decimal DIGITS: DIGITS without leading zeros ('010' -> '10', '000' -> '0'), which shell arithmetic
# would read as octal ("Illegal number: 09") where ROCr's %u reads decimal.
decimal() {
    digits=${1#"${1%%[!0]*}"}
    printf '%s' "${digits:-0}"
}

# at_most NUMBER LIMIT: NUMBER (decimal, no leading zeros) is LIMIT or less; four digits or more never
# reach the arithmetic, where they could overflow.
at_most() {
    [ ${#1} -le 3 ] && [ "$1" -le "$2" ]
}

# gfx_override: the target HSA_OVERRIDE_GFX_VERSION names for every GPU ('10.3.0' -> gfx1030), into
# `override`; empty when the variable is unset. ROCr takes it only when sscanf("%u.%u.%u%c") converts
# exactly three numbers with major <= 63 and minor, stepping <= 255, and otherwise logs
# "HSA_OVERRIDE_GFX_VERSION %s is invalid" (ROCR-Runtime libhsakmt/src/topology.c,
# topology_sysfs_get_node_props): a value set but not so (plain decimals here) is one warning, and the
# check goes on with each GPU's own target.
gfx_override() {
    override=""
    [ -n "${HSA_OVERRIDE_GFX_VERSION+set}" ] || return 0
    value=$HSA_OVERRIDE_GFX_VERSION
    case "$value" in
        *[!0-9.]*|*..*|*.*.*.*|.*) ;;
        [0-9]*.[0-9]*.[0-9]*)
            major=$(decimal "${value%%.*}") rest=${value#*.}
            minor=$(decimal "${rest%%.*}") step=$(decimal "${rest#*.}")
            if at_most "$major" 63 && at_most "$minor" 255 && at_most "$step" 255; then
                override=$(printf 'gfx%d%x%x' "$major" "$minor" "$step")
                return 0
            fi ;;
    esac
    shown=$(printf '%s' "$value" | tr -c '[:print:]' '?')
    warn "HSA_OVERRIDE_GFX_VERSION=$shown is not major.minor.stepping (ROCr's form: 10.3.0, major <= 63, the others <= 255): ignored, the gfx check goes on with the GPUs' own targets"
}

# gfx_targets: each GPU's target as rocminfo names it: KFD topology's gfx_target_version
# (kernel kfd_topology.c node_show; CPU nodes show 0) is major*10000 + minor*100 + stepping
# (ROCR-Runtime libhsakmt.h HSA_GET_GFX_VERSION_*), named with minor and stepping in hex
# (AMD's run_kfdtest.sh: printf "%d%x%x"; 90010 -> gfx90a, 110003 -> gfx1103). ROCr takes
# HSA_OVERRIDE_GFX_VERSION ("11.0.0") over it for every GPU (libhsakmt topology.c), and so does this
# (`override`, from gfx_override).
gfx_targets() {
    for properties in "${ACCEL_IMAGES_DEV_ROOT:-}"/sys/class/kfd/kfd/topology/nodes/*/properties; do
        [ -r "$properties" ] || continue
        while read -r key value; do
            [ "$key" = gfx_target_version ] || continue
            case "$value" in ''|*[!0-9]*|0) continue ;; esac
            if [ -n "$override" ]; then
                printf '%s\n' "$override"
            else
                printf 'gfx%d%x%x\n' $((value / 10000)) $((value / 100 % 100)) $((value % 100))
            fi
        done < "$properties"
    done
}

# own_archs: the gfx targets this image's wheel was compiled for: the facts file's archs when it
# was read (torch's own list), else the list rendered from the knowledge base.
own_archs() {
    read_facts
    if [ -n "$facts_read" ]; then printf '%s' "$facts_archs"; else printf '%s' "${ACCEL_IMAGES_GPU_ARCHS:-}"; fi
}

# serves ARCHS: a visible GPU's target is among ARCHS (comma-separated; feature suffixes such as
# ':xnack-' ignored). Sets `served` and `unserved`.
serves() {
    served="" unserved="" plain=""
    for arch in $(printf '%s' "$1" | tr ',' ' '); do plain="$plain,${arch%%:*}"; done
    for target in $targets; do
        if in_list "$target" "${plain#,}"; then
            served="$served $target"
        else
            unserved="$unserved $target"
        fi
    done
    [ -n "$served" ]
}

# amdgpu_driver: the host's amdgpu kernel module version into `amdgpu`, from /sys/module/amdgpu/version,
# which AMD's DKMS driver (amdgpu-dkms, versioned module.release: 6.8.5.60203) writes; a distribution's
# in-kernel driver writes none, and `amdgpu` is then empty: its support is not checked, as in recommend.
amdgpu_driver() {
    amdgpu=""
    version_file="${ACCEL_IMAGES_DEV_ROOT:-}/sys/module/amdgpu/version"
    [ -r "$version_file" ] || return 0
    read -r amdgpu < "$version_file" || true
    is_version "$amdgpu" || amdgpu=""
}

# in_window LOW-HIGH: the host's amdgpu module version is LOW or later and below HIGH (either side empty:
# unbounded), the versions AMD's user and kernel-space support matrix supports an image's ROCm on
# (vendors/rocm.py driver_window, from rocm.yaml kernel_driver); true when the version is unknown.
in_window() {
    [ -n "$amdgpu" ] || return 0
    low=${1%%-*} high=${1#*-}
    if [ -n "$low" ] && version_lt "$amdgpu" "$low"; then return 1; fi
    if [ -n "$high" ] && ! version_lt "$amdgpu" "$high"; then return 1; fi
    return 0
}

# admits ARCHS|WINDOW: decide, for an entry of ACCEL_IMAGES_ALTERNATIVES: its kernels serve the GPUs
# (where their targets are known) and its ROCm is supported on the host's amdgpu driver.
admits() {
    if [ -n "$targets" ] && ! serves "${1%%|*}"; then return 1; fi
    in_window "${1#*|}"
}

# check_targets: every GPU's gfx target has kernels in this image, or the refusal names an image with them.
check_targets() {
    archs=$(own_archs)
    [ -n "$targets" ] && [ -n "$archs" ] || return 0
    tag="${ACCEL_IMAGES_TAG:-this image}"
    if serves "$archs"; then
        if [ -n "$unserved" ]; then
            warn "no kernels in $tag for the GPUs of target${unserved}: only those of${served} can use it"
        fi
        return 0
    fi
    missed=$unserved
    pick_alternative
    if [ -n "$alt" ]; then use="; use $alt instead"; else use="; no sibling image has kernels for it"; fi
    refuse "GPU target${missed} has no kernels in $tag (compiled for $archs)$use"
}

# check_driver: the host's amdgpu kernel driver is one AMD supports this image's ROCm user space on
# (ACCEL_IMAGES_AMDGPU_WINDOW), or the refusal names an image whose ROCm it supports.
check_driver() {
    if [ -z "${ACCEL_IMAGES_AMDGPU_WINDOW:-}" ] || in_window "$ACCEL_IMAGES_AMDGPU_WINDOW"; then
        return 0
    fi
    pick_alternative
    if [ -n "$alt" ]; then use="; use $alt instead"; else use="; no sibling image is supported on it either"; fi
    refuse "amdgpu kernel driver $amdgpu is outside what ${ACCEL_IMAGES_TAG:-this image} supports: ${ACCEL_IMAGES_AMDGPU_SUPPORT:-}, by AMD's user and kernel-space support matrix$use"
}

check_vendor() {
    if [ ! -e "$dev/kfd" ] || [ ! -d "$dev/dri" ]; then
        missing "/dev/kfd or /dev/dri missing: run with --device /dev/kfd --device /dev/dri --group-add video"
        return
    fi
    open_or_group_add "$dev/kfd" "$dev"/dri/renderD*
    gfx_override
    targets=$(gfx_targets | sort -u)
    amdgpu_driver
    check_targets
    check_driver
}
"""  # noqa: E501 - each of the guard's messages is one line of shell

VENDOR = Rocm(
    name="rocm",
    title="AMD ROCm",
    stack_name="ROCm",
    smoke_backend="rocm",
    kb_file=Path(__file__).parent.parent / "data" / "vendors" / "rocm.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gpu-amd"),
    detect_rank=20,
    guard_check=GUARD,
    sources=(ROCM_DOCS, ROCM_PYTORCH_DOCS, SUPPORT_MATRIX_DOCS),
)
