"""Intel Gaudi: Intel's pytorch-installer images, whose own torch build is never replaced; the
habana container runtime; container software must match the host driver.

References:
- releases, bundled torch, OS/Python: https://docs.habana.ai/en/latest/Support_Matrix/Support_Matrix.html
- images and `docker run --runtime=habana -e HABANA_VISIBLE_DEVICES=all ... --cap-add=sys_nice
  --ipc=host`: https://docs.habana.ai/en/latest/shared/Pull_Prebuilt_Containers.html
- N-1 compatibility on Gaudi 2 from 1.17 (compat-facts §6.1, §8.19): "Added software backward/forward
  compatibility support for Gaudi 2, allowing users to run 1.16 dockers with Intel Gaudi software version
  1.17.0" (GAUDI_BACKWARD_DOCS); patch releases: `_behind`
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Mapping, Sequence

from accel_images.model.devices import APPTAINER_GPU_DOCS, DeviceOptions, SessionSettings, nodes, pci_vendor_is
from accel_images.model.hostinfo import Gpu, HostInfo, Runner, host_from, leading_version, quote, summary
from accel_images.model.imagefacts import Claim, kb_row
from accel_images.model.knowledge import Combo, Resolution, minor_of, version_matches
from accel_images.vendors.base import ALTERNATIVES_ENV, Fit, VendorBase, alternatives
from accel_images.versions import compare_driver, parse, sort_versions

if TYPE_CHECKING:
    from accel_images.model.imagefacts import ImageFacts
    from accel_images.model.knowledge import Knowledge, TorchRelease
    from accel_images.model.variant import Variant

GAUDI_DOCS = "https://docs.habana.ai/en/latest/shared/Pull_Prebuilt_Containers.html"
RDMA_MEMLOCK_DOCS = ("https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/9/html/"
                     "configuring_infiniband_and_rdma_networks/"
                     "increasing-the-amount-of-memory-that-users-are-allowed-to-pin-in-the-system_"
                     "configuring-infiniband-and-rdma-networks")
GAUDI_DOCKER_DOCS = "https://docs.habana.ai/en/latest/Installation_Guide/Additional_Installation/Docker_Installation.html"
GAUDI_K8S_DOCS = "https://docs.habana.ai/en/latest/Orchestration/Gaudi_Kubernetes/index.html"
GAUDI_BACKWARD_DOCS = "https://docs.habana.ai/en/latest/Release_Notes/Release%20Notes%20v1.17.html"
HABANA_PCI_VENDOR = "0x1da3"
N_MINUS_1_SINCE = "1.17"
GENERATIONS = {"205": "gaudi", "225": "gaudi2",
               "325": "gaudi3", "328": "gaudi3", "335": "gaudi3", "338": "gaudi3", "388": "gaudi3"}
"""hl-smi model number -> Gaudi generation, matched on the number so suffixed names follow (HL-225B, HL-325L).
Sources (excerpts in tests/data/host/gaudi-model-names-sources.txt): dstack's hl-smi name table
(src/dstack/_internal/utils/gpu.py: HL-205 Gaudi, HL-225 Gaudi2, HL-325 and HL-338 Gaudi3); Intel's Gaudi 3
whitepaper as The Register read it (2024-04-12: HL-325L and HL-335 OAM, HL-338 PCIe, HL-328 and HL-388 for
China); IBM Cloud's "Gaudi 3" machine listing 8 x HL-325L; Ray's Gaudi 2 tutorial listing 8 x HL-225."""
GAUDI2 = "gaudi2"
# The model number of an hl-smi name: "HL-325L" -> "325".
_MODEL_NUMBER = re.compile(r"HL-(\d{3})", re.IGNORECASE)


@dataclass(frozen=True)
class GaudiRelease:
    version: str
    torch: str
    os_python: Mapping[str, str]
    image_tag: str = "latest"


class Gaudi(VendorBase):
    """The Intel Gaudi vendor: see the module docstring for its references."""

    def load_facts(self, raw: Mapping[str, Any]) -> dict[str, GaudiRelease]:
        return {str(v): GaudiRelease(str(v), str(g["torch"]), {str(k): str(p) for k, p in g["os"].items()},
                                     str(g.get("image_tag", "latest")))
                for v, g in raw["releases"].items()}

    def releases(self, kb: Knowledge) -> dict[str, GaudiRelease]:
        releases: dict[str, GaudiRelease] = self.section(kb).facts
        return releases

    # ---- knowledge base ------------------------------------------------------------------

    def stacks(self, kb: Knowledge, torch: str) -> tuple[str, ...]:
        """Releases bundling this torch: '2.4' matches any 2.4.x, '2.4.1' only itself."""
        public = torch.split("+", 1)[0]
        by_minor = public == minor_of(public)
        return tuple(v for v, g in self.releases(kb).items()
                     if g.torch == public or (by_minor and minor_of(g.torch) == public))

    def torch_for_stack(self, kb: Knowledge, stack: str) -> list[str]:
        return [g.torch for v, g in self.releases(kb).items() if version_matches(stack, v)]

    def exact_stack(self, kb: Knowledge, stack: str | None, torch: str) -> str | None:
        return stack

    def stack_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        if combo.stack is None:
            return []
        stack, releases = combo.stack, self.releases(kb)
        matches = [v for v in releases if version_matches(stack, v)]
        if not matches:
            return [f"Intel Gaudi {stack} is unknown (known: {', '.join(releases)})"]
        bundled = {releases[v].torch for v in matches}
        wanted = combo.torch.split("+")[0]
        if any(b == wanted or minor_of(b) == wanted for b in bundled):
            return []
        fits = ", ".join(self.stacks(kb, combo.torch)) or "none"
        return [f"Intel Gaudi {stack} bundles torch {', '.join(sorted(bundled))}, not {wanted}"
                f" (Gaudi releases with torch {wanted}: {fits})"]

    def python_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease,
                       experimental: bool) -> list[str]:
        """Python is fixed by the image's OS: checked with the OS when there is one."""
        if combo.os is not None or combo.stack is None:
            return []
        pythons = {p for v, g in self.releases(kb).items() if version_matches(combo.stack, v)
                   for p in g.os_python.values()}
        if combo.python in pythons:
            return []
        return [f"Intel Gaudi {combo.stack} images ship Python {', '.join(sort_versions(pythons))}, not {combo.python}"]

    def os_reasons(self, kb: Knowledge, combo: Combo, row: TorchRelease) -> list[str]:
        base = self.os_base_reasons(kb, combo, row)
        if base or combo.stack is None:
            return base
        release = self.releases(kb).get(combo.stack)
        if release is None:
            return []
        if combo.os not in release.os_python:
            return [f"Intel Gaudi {combo.stack} has no image for {combo.os} (it has: {', '.join(release.os_python)})"]
        fixed = release.os_python[combo.os or ""]
        if combo.python and combo.python != fixed:
            return [f"Intel Gaudi {combo.stack} on {combo.os} ships Python {fixed}, not {combo.python}"]
        return []

    def resolve(self, kb: Knowledge, combo: Combo) -> Resolution:
        release = self.releases(kb)[combo.stack or ""]
        base = (f"vault.habana.ai/gaudi-docker/{release.version}/{combo.os}/habanalabs/"
                f"pytorch-installer-{release.torch}:{release.image_tag}")
        return Resolution(torch=release.torch, stack=release.version, base_image=base)

    def details(self, kb: Knowledge, stack: str | None, row: TorchRelease) -> dict[str, Any]:
        return {"gaudi": [v for v in self.releases(kb) if version_matches(stack or "", v)]} if stack else {}

    def facts_claims(self, kb: Knowledge, variant: Variant, facts: ImageFacts) -> list[Claim]:
        """A Gaudi image's torch, Python and release all come from its `releases` row: Intel's torch
        build (its public version), the base's python3, and the habana-torch-plugin distribution
        (1.24.1.482 is release 1.24.1)."""
        stack = variant.stack or ""
        return [Claim("torch", kb_row(self.kb_file, "releases", stack, "torch"), variant.torch, facts.public,
                      "release"),
                Claim("python", kb_row(self.kb_file, "releases", stack, "os", variant.os), variant.python,
                      facts.python, "release"),
                Claim("stack", kb_row(self.kb_file, "releases", stack), stack, facts.toolkit.get("gaudi") or "",
                      "release")]

    # ---- hardware -------------------------------------------------------------------------

    def device_options(self, dev_root: Path) -> DeviceOptions:
        return DeviceOptions(
            vendor=self.name,
            runtime="habana",  # the habana runtime mounts the device nodes itself
            environment=(("HABANA_VISIBLE_DEVICES", "all"), ("OMPI_MCA_btl_vader_single_copy_mechanism", "none")),
            cap_add=("SYS_NICE",),
            ipc_mode="host",  # "required for distributed training using HCCL"
            # Habana's Docker installation registers "habana": {"path": "/usr/bin/habana-container-runtime"} (V);
            # that path given to Podman's --runtime is inferred (I): no Habana document names Podman.
            runtime_path="/usr/bin/habana-container-runtime",
            # Habana's Kubernetes job example: limits "habana.ai/gaudi: 1", no HABANA_VISIBLE_DEVICES (V).
            k8s_resource="habana.ai/gaudi",
            selection_env=("HABANA_VISIBLE_DEVICES",),
            # Apptainer needs no flag: "all of /dev on the host is normally made available" (V); Slurm: Intel
            # Gaudi's own Slurm fork schedules it as a GRES whose name is the site's (unverified), so none here.
            sources=(GAUDI_DOCS, GAUDI_DOCKER_DOCS, GAUDI_K8S_DOCS, APPTAINER_GPU_DOCS),
        )

    def session_settings(self) -> SessionSettings:
        """Habana's `docker run` for its containers adds `--net=host` (Pull_Prebuilt_Containers, V),
        which scale-out over the hosts' NICs (HCCL) needs; a session gets it, the smoke run does not
        (one device, no network: accel_images/smoke/launcher.py runs it with the network off).
        `--ulimit memlock=-1`: RDMA pins the memory it registers, and pinning beyond the default
        limit is what the unlimited memlock grants (Red Hat, "Configuring InfiniBand and RDMA
        networks", ch. 5, V for RDMA in general); that Habana's host-NIC scale-out needs it is
        inferred (I: no Habana document asking for it was found)."""
        return SessionSettings(network="host", ulimits=(("memlock", "-1"),), sources=(GAUDI_DOCS, RDMA_MEMLOCK_DOCS))

    def image_env(self, kb: Knowledge, variant: Variant,
                  variants: Sequence[Variant]) -> Mapping[str, str]:
        """The image's Intel Gaudi software release, which the guard compares with the host driver's
        as `fit` does, and the sibling images a refusal may name with theirs."""
        env = {"ACCEL_IMAGES_GAUDI": variant.stack or "",
               ALTERNATIVES_ENV: alternatives(variant, variants, lambda v: (v.stack or "",))}
        return {key: value for key, value in env.items() if value}

    def accelerator_present(self, dev_root: Path) -> bool:
        if nodes(dev_root, "/dev", r"hl\d+"):
            return True
        return any(pci_vendor_is(dev_root, "accel", node.name, HABANA_PCI_VENDOR)
                   for node in nodes(dev_root, "/dev/accel", r"accel\d+"))

    def probe(self, run: Runner, root: Path, notes: list[str]) -> HostInfo | None:
        table = run(["hl-smi"])
        query = run(["hl-smi", "-Q", "name,driver_version", "-f", "csv,noheader"])
        if table is None and query is None:
            notes.append("gaudi: hl-smi missing, failing or timed out")
            return None
        query_driver, query_gpus = parse_hl_smi_query(query or "")
        table_driver, table_gpus = parse_hl_smi_table(table or "")
        driver, gpus = table_driver or query_driver, query_gpus or table_gpus
        if not (driver and gpus):
            notes.append("gaudi: hl-smi answered without a device row and driver version:"
                         f" {quote(table or query or '')}")
            return None
        version = leading_version(driver)
        gpus = [Gpu(gpu.name, generation(gpu.name)) for gpu in gpus]
        unknown = sorted({gpu.name or "" for gpu in gpus if gpu.arch is None})
        notes.append(f"gaudi: hl-smi lists {summary(gpus)}, driver {driver} (Gaudi software {version})"
                     + (f", generation {', '.join(dict.fromkeys(g.arch for g in gpus if g.arch))}"
                        if len(unknown) < len(gpus) else "")
                     + (f"; generation unknown for {', '.join(unknown)}" if unknown else ""))
        return host_from("gaudi", gpus, driver_version=driver, stack_version=version)

    def fit(self, host: HostInfo, variant: Variant, kb: Knowledge) -> Fit:
        """Image software must equal the host's; on Gaudi 2 with host software >= 1.17 it may be older
        within the host's minor release or the one before (`_behind`). The guard's `admits` is the same rule."""
        image_sw, host_sw = variant.stack or "", host.stack_version
        if host_sw is None:
            return Fit(variant, rejections=("the host's Intel Gaudi software version is unknown "
                                            "(hl-smi reported no driver version)",))
        if compare_driver(image_sw, host_sw) == 0:
            return Fit(variant, exact_arch=True, why=f"Intel Gaudi software {image_sw} matches the host's driver")
        behind = _behind(image_sw, host_sw)
        if behind and _gaudi2(host) and compare_driver(host_sw, N_MINUS_1_SINCE) >= 0:
            return Fit(variant, caveats=(f"image Gaudi software {image_sw} is {behind} behind the host's "
                                         f"{host_sw}: allowed on Gaudi 2 only (backward compatibility since 1.17)",),
                       exact_arch=True,
                       why=f"Intel Gaudi software {image_sw} runs on Gaudi 2 with {host_sw} ({behind} behind)")
        return Fit(variant, rejections=(f"image Gaudi software {image_sw} differs from the host's {host_sw}: "
                                        f"container and host driver must match ({OLDER_ON_GAUDI2})",))

    def describe_host(self, host: HostInfo) -> list[str]:
        return [f"Intel Gaudi software {host.stack_version}"] if host.stack_version else []


OLDER_ON_GAUDI2 = "Gaudi 2 from 1.17 also runs older images of the host's minor release and the one before"


def _behind(image_sw: str, host_sw: str) -> str | None:
    """How far an image release older than the host's is behind it, where Gaudi 2's backward compatibility
    reaches: 'one release' for the previous minor, any patch ("allowing users to run 1.16 dockers with Intel
    Gaudi software version 1.17.0", GAUDI_BACKWARD_DOCS), 'a patch release' for an older patch of the host's
    own minor. The second is inferred: no Habana document speaks of patch releases, and an image must not be
    refused on a driver nearer to it than one that admits it. None otherwise, a newer image included."""
    try:
        image, host = parse(image_sw), parse(host_sw.split("-")[0])
    except ValueError:
        return None
    if len(image) < 2 or len(host) < 2 or image[0] != host[0] or compare_driver(image_sw, host_sw) >= 0:
        return None
    return {host[1] - 1: "one release", host[1]: "a patch release"}.get(image[1])


def generation(model: str | None) -> str | None:
    """'HL-225' -> 'gaudi2', 'HL-325L' -> 'gaudi3', 'HL-205' -> 'gaudi'; an unknown model -> None."""
    number = _MODEL_NUMBER.match((model or "").strip())
    return GENERATIONS.get(number.group(1)) if number else None


def _gaudi2(host: HostInfo) -> bool:
    """Every device is a Gaudi 2, by the detected generation; a host recorded with names only (an
    older --host-json) by the generation its model names give."""
    generations = host.gpu_archs or tuple(generation(name) or "" for name in host.gpu_names)
    return bool(generations) and set(generations) == {GAUDI2}


# ---------------------------------------------------------------------------------------------
# Host detection: hl-smi
# ---------------------------------------------------------------------------------------------

_HL_DRIVER = re.compile(r"^\|\s*Driver Version:\s*(\S+)", re.MULTILINE)  # not "Nic Driver Version"
_HL_ROW = re.compile(r"^\|\s+\d+\s+(HL-\S+)\s", re.MULTILINE)
_HL_DRIVER_VALUE = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?")


def parse_hl_smi_query(text: str) -> tuple[str | None, list[Gpu]]:
    """``hl-smi -Q name,driver_version -f csv,noheader`` rows: 'HL-225, 1.15.0-c43dc7b'."""
    driver, gpus = None, []
    for line in text.splitlines():
        name, _, value = (part.strip() for part in line.partition(","))
        if name and _HL_DRIVER_VALUE.fullmatch(value):
            driver = driver or value
            gpus.append(Gpu(name))
    return driver, gpus


def parse_hl_smi_table(text: str) -> tuple[str | None, list[Gpu]]:
    driver = _HL_DRIVER.search(text)
    value = driver.group(1) if driver and _HL_DRIVER_VALUE.fullmatch(driver.group(1)) else None
    return value, [Gpu(name) for name in _HL_ROW.findall(text)]


GUARD = r"""# host_release: the host driver's Intel Gaudi software release ('1.24.1' of '1.24.1-3bf9e81'), from
# `hl-smi -Q driver_version -f csv,noheader` (the System Management Interface guide's -Q queries), else
# the "| Driver Version: 1.24.1-3bf9e81 |" line of its summary (not "Nic Driver Version"). Empty
# without hl-smi or an answer. `generations` gets the devices' model names ('HL-225').
host_release() {
    release="" generations=""
    command -v hl-smi > /dev/null 2>&1 || return 0
    answer=$(hl-smi -Q driver_version -f csv,noheader 2> /dev/null) || answer=""
    release=$(printf '%s\n' "$answer" | head -n1 | tr -d ' ')
    release=${release%%-*}
    if ! is_version "$release"; then
        release=$(hl-smi 2> /dev/null | while IFS= read -r line; do
            case "$line" in "| Driver Version:"*) set -- ${line#*:}; printf '%s' "${1%%-*}" ;; esac
        done)
        is_version "$release" || release=""
    fi
    generations=$(hl-smi -Q name -f csv,noheader 2> /dev/null | tr -d ' ')
}

# behind_host RELEASE: an image release older than the host driver's, within the host's minor release or
# the one before, as far as Gaudi 2's backward compatibility reaches; `behind` says how far: 'one release'
# for the previous minor, any patch ("Added software backward/forward compatibility support for Gaudi 2,
# allowing users to run 1.16 dockers with Intel Gaudi software version 1.17.0", docs.habana.ai Release
# Notes v1.17), 'a patch release' for an older patch of the host's own minor (inferred: no Habana document
# speaks of patch releases, and an image must not be refused on a driver nearer to it than one that
# admits it). `_behind` in vendors/gaudi.py is the same rule.
behind_host() {
    behind=""
    version_lt "$1" "$release" || return 1
    [ "${1%%.*}" = "${release%%.*}" ] || return 1
    image_minor=${1#*.} host_minor=${release#*.}
    image_minor=${image_minor%%.*} host_minor=${host_minor%%.*}
    if [ "$image_minor" = "$host_minor" ]; then
        behind="a patch release"
    elif [ "$image_minor" -eq $((host_minor - 1)) ] 2> /dev/null; then
        behind="one release"
    fi
    [ -n "$behind" ]
}

# admits RELEASE: an image of Intel Gaudi software RELEASE runs with the host driver: the same release,
# or, on Gaudi 2 only and with a host from 1.17 on, one behind it (behind_host). `vendor.fit` is the same rule.
admits() {
    [ -z "$release" ] && return 0
    [ "$1" = "$release" ] && return 0
    behind_host "$1" || return 1
    version_lt "$release" "1.17" && return 1
    [ -n "$generations" ] || return 1
    for model in $generations; do
        case "$model" in HL-225*) ;; *) return 1 ;; esac
    done
}

# own_directory DIR: DIR is a directory of this user's that it can write to, made (mode 0700) where it
# is missing. A name another user took first in a shared /tmp (Apptainer binds the host's: "system-defined
# bind paths", apptainer.org/docs/user/main/bind_paths_and_mounts.html) or a symbolic link does not count.
own_directory() {
    mkdir -m 700 "$1" 2> /dev/null
    [ -d "$1" ] && [ ! -L "$1" ] && [ -w "$1" ] && [ "$(stat -c %u "$1" 2> /dev/null)" = "$(id -u)" ]
}

# habana_logs: make HABANA_LOGS a directory the Habana runtime can write to, which it aborts (SIGABRT)
# without (opendatahub-io/opendatahub-tests#2301). Under a read-only root `[ -w ]` is false even for root:
# Apptainer's SIF images are read-only ("The default format is immutable", apptainer build), and so is
# Enroot's root file system unless ENROOT_ROOTFS_WRITABLE (NVIDIA/enroot doc/configuration.md) or Pyxis's
# --container-writable (NVIDIA/pyxis wiki, Usage) says otherwise. The logs then go to a directory of this
# user's under ${TMPDIR:-/tmp}, else under /dev/shm (a tmpfs in every runtime), exported for the command;
# that the runtime needs nothing else of HABANA_LOGS than a writable directory is inferred.
habana_logs() {
    logs="${HABANA_LOGS:-/var/log/habana_logs}"
    writable="$logs"
    [ -e "$writable" ] || writable=$(dirname "$logs")
    [ -d "$writable" ] && [ -w "$writable" ] && return 0
    for place in "${TMPDIR:-/tmp}" "$dev/shm"; do
        fallback="$place/habana_logs-$(id -u)"
        if [ -d "$place" ] && own_directory "$fallback"; then
            export HABANA_LOGS="$fallback"
            warn "HABANA_LOGS=$logs is not writable by user $(id -u) (a read-only root?): the Habana runtime logs to ${fallback#"${ACCEL_IMAGES_DEV_ROOT:-}"} instead"
            return 0
        fi
    done
    refuse "HABANA_LOGS=$logs is not writable by user $(id -u), nor is a directory of its own under ${TMPDIR:-/tmp} or /dev/shm: the Habana runtime aborts without its logs; set HABANA_LOGS to a writable directory"
}

check_vendor() {
    habana_logs
    if ! any_exists "$dev"/accel/accel* "$dev"/hl*; then
        missing "no Gaudi device visible: run with --runtime=habana -e HABANA_VISIBLE_DEVICES=all"
        return
    fi
    # The nodes the habana runtime maps (/dev/accel/accel*, accel_controlD*; /dev/hlN before the accel
    # subsystem: HabanaAI/habana-container-runtime devPrefixes) must open for this user.
    open_or_group_add "$dev"/accel/accel* "$dev"/hl[0-9]*
    host_release
    image="${ACCEL_IMAGES_GAUDI:-}"
    [ -n "$image" ] && [ -n "$release" ] || return 0
    if admits "$image"; then
        if [ "$image" != "$release" ]; then
            warn "image Intel Gaudi software $image is $behind behind the host driver's $release: allowed on Gaudi 2 only (backward compatibility since 1.17)"
        fi
        return 0
    fi
    pick_alternative
    refuse "host Intel Gaudi driver $release does not match the image's Intel Gaudi software $image (container and host driver must match; @OLDER_ON_GAUDI2@): install the Intel Gaudi $image driver on the host$(or_use)"
}
""".replace("@OLDER_ON_GAUDI2@", OLDER_ON_GAUDI2)  # noqa: E501 - each of the guard's messages is one line of shell

VENDOR = Gaudi(
    name="gaudi",
    title="Intel Gaudi",
    stack_name="Intel Gaudi",
    smoke_backend="hpu",
    kb_file=Path(__file__).parent.parent / "data" / "vendors" / "gaudi.yaml",
    runner_labels=("self-hosted", "linux", "x64", "gaudi"),
    detect_rank=40,
    guard_check=GUARD,
    sources=(GAUDI_DOCS,),
)
