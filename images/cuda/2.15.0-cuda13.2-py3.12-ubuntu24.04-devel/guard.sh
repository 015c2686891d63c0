#!/bin/sh
# accel-images entry point guard.
#
# Explains, in one message, a host that cannot run this image before PyTorch fails with
# something cryptic: a driver too old for the image's CUDA, a GPU architecture the wheel was
# not compiled for, or the device nodes / runtime missing from `docker run`. A missing device
# is a warning (the image still works on the CPU) unless ACCEL_IMAGES_REQUIRE_ACCELERATOR=1;
# an unusable device is an error. ACCEL_IMAGES_GUARD=off turns the guard off.
#
# Facts: what the image holds comes from its facts file, written at build time by asking the
# installed torch itself (${ACCEL_IMAGES_FACTS:-/opt/accel-images/facts.json}, schema 1: compiled
# architectures, PTX targets, toolkit versions). Only when that file is absent (a rendered context
# run without a build) do the checks fall back to the values the template rendered into the
# environment from the knowledge base. What no binary can say (driver floors, the images a refusal
# names, ACCEL_IMAGES_TAG) always comes from the environment (the vendor module's image_env).
# ACCEL_IMAGES_DEV_ROOT (default empty) is prepended to every /dev, /sys and driver-tool path, so
# the checks can be exercised against a fake host tree; a production image names it when it is set
# (find_overrides).

set -u

# shellcheck disable=SC2034  # the vendors' check_vendor reads it (the CPU image has no devices to find)
dev="${ACCEL_IMAGES_DEV_ROOT:-}/dev"

guard_off() { [ "${ACCEL_IMAGES_GUARD:-on}" = "off" ]; }

say() { printf 'accel-images: %s\n' "$1" >&2; }

# What the device check found, for the banner of an interactive shell (/opt/accel-images/banner.sh):
# the image's vendor unless the check says otherwise.
seen_device="${ACCEL_IMAGES_VENDOR:-unknown}"

# A missing device: warn and go on in CPU mode, or fail when an accelerator is required.
missing() {
    if [ "${ACCEL_IMAGES_REQUIRE_ACCELERATOR:-0}" = "1" ]; then
        say "error: $1$(in_effect)"
        exit 78
    fi
    seen_device="CPU only ($1)"
    say "warning: $1; running on the CPU (set ACCEL_IMAGES_GUARD=off to silence)"
}

# A device that works with a reservation: say it once and go on.
warn() {
    say "warning: $1"
}

# An unusable device: stop with the reason.
refuse() {
    say "error: $1 (set ACCEL_IMAGES_GUARD=off to start anyway)$(in_effect)"
    exit 78
}

# any_exists PATH...: true when at least one path exists (unmatched globs stay literal and fail).
any_exists() {
    for candidate in "$@"; do
        [ -e "$candidate" ] && return 0
    done
    return 1
}

# is_version TEXT: digits and dots only, starting with a digit.
is_version() {
    case "$1" in
        ''|[!0-9]*|*[!0-9.]*) return 1 ;;
    esac
    return 0
}

# version_lt A B: true when dotted version A is lower than B (numeric per component, a missing one
# is 0). In the shell alone: the guard compares versions for every image a refusal may name.
version_lt() {
    left=$1 right=$2
    while [ -n "$left$right" ]; do
        l=${left%%.*} r=${right%%.*}
        [ "${l:-0}" -lt "${r:-0}" ] && return 0
        [ "${l:-0}" -gt "${r:-0}" ] && return 1
        case "$left" in *.*) left=${left#*.} ;; *) left="" ;; esac
        case "$right" in *.*) right=${right#*.} ;; *) right="" ;; esac
    done
    return 1
}

# open_or_group_add NODE...: every node opens for reading and writing as this user, or stop
# naming the exact --group-add values (the nodes' groups as this container sees them): on current
# hosts /dev/kfd and /dev/dri/renderD* are root:render 0660 with a distribution-specific GID.
open_or_group_add() {
    closed="" gids=""
    for node in "$@"; do
        [ -e "$node" ] || continue
        if ! (exec 3<>"$node") 2>/dev/null; then
            closed="$closed ${node#"${ACCEL_IMAGES_DEV_ROOT:-}"}"
            gid=$(stat -c %g "$node" 2>/dev/null)
            case " $gids " in *" $gid "*) ;; *) gids="$gids $gid" ;; esac
        fi
    done
    [ -z "$closed" ] && return 0
    flags=$(for gid in $gids; do printf -- ' --group-add %s' "$gid"; done)
    refuse "user $(id -u) cannot open$closed: run with$flags (the groups owning them on this host)"
}

# The facts file, read at most once, by the vendor checks that need it (a python start costs tens of
# milliseconds on every container start), with the image's own Python (json from the standard library; -I -S:
# nothing from the environment or site-packages) into facts_* variables, only those a check decides
# with: facts_archs (compiled targets, comma-separated: sm_90, gfx942, ...), facts_ptx (compute_XX) and
# facts_compat (the CUDA forward-compatibility libcuda's driver, empty: none or not recorded). Every value
# is checked against a plain character set before the shell sees it, so the file cannot inject shell
# code. facts_read is 1 when they came from the file.
facts_file="${ACCEL_IMAGES_FACTS:-/opt/accel-images/facts.json}"
# shellcheck disable=SC2034  # each vendor's check reads those it decides with, some none
facts_read="" facts_archs="" facts_ptx="" facts_compat="" facts_ibverbs="" facts_collective=""
FACTS_READER='
import json, re, sys
safe = re.compile(r"[A-Za-z0-9_.+-]*")
def field(name, value):
    values = [str(v) for v in value] if isinstance(value, list) else [str(value or "")]
    bad = [v for v in values if not safe.fullmatch(v)]
    if bad:
        sys.exit("%s holds %r" % (name, bad[0][:40]))
    print("facts_%s=%s" % (name, ",".join(values)))
def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        facts = json.load(handle)
    if not isinstance(facts, dict) or type(facts.get("schema")) is not int or facts["schema"] != 1:
        sys.exit("not a schema 1 facts file")
    field("archs", facts.get("archs") or [])
    field("ptx", facts.get("ptx") or [])
    field("compat", facts.get("cuda_compat"))
    net = facts.get("network")
    net = net if isinstance(net, dict) else {}
    field("ibverbs", "none" if "network" in facts and not net.get("ibverbs") else net.get("ibverbs"))
    collective = net.get("collective") if isinstance(net.get("collective"), dict) else {}
    field("collective", collective.get("name"))
try:
    main()
except (OSError, ValueError, AttributeError, TypeError) as error:
    sys.exit("%s: %s" % (type(error).__name__, str(error).splitlines()[0] if str(error) else ""))
'
read_facts() {
    [ -z "${facts_tried:-}" ] || return 0
    facts_tried=1
    [ -f "$facts_file" ] || return 0
    python=$(command -v python3 2> /dev/null || command -v python 2> /dev/null) || {
        warn "no python to read $facts_file: deciding from the image's environment"
        return 0
    }
    if ! assignments=$("$python" -I -S -c "$FACTS_READER" "$facts_file" 2>&1); then
        warn "cannot read $facts_file ($(printf '%s\n' "$assignments" | head -n1)): deciding from the image's environment"
        return 0
    fi
    eval "$assignments"
    # shellcheck disable=SC2034  # read by the vendors' checks
    facts_read=1
}

# pick_alternative: set `alt` to the first image of ACCEL_IMAGES_ALTERNATIVES (space-separated
# "TAG|FACT|..." entries, rendered by the vendor module) whose facts the vendor's own decision
# (`admits FACTS`) accepts on this host, or to nothing: a refusal names only an image that would
# start here, never one that refuses the same host in turn.
pick_alternative() {
    alt=""
    for candidate in ${ACCEL_IMAGES_ALTERNATIVES:-}; do
        if admits "${candidate#*|}"; then
            alt="${candidate%%|*}"
            return 0
        fi
    done
}

# or_use: ", or use TAG" when pick_alternative found an image.
or_use() {
    if [ -n "${alt:-}" ]; then printf ', or use %s' "$alt"; fi
}

# in_list ITEM LIST: ITEM is one of the comma-separated LIST.
in_list() {
    case ",$2," in *",$1,"*) return 0 ;; esac
    return 1
}

# The vendor's own checks, from its module (accel_images/vendors/<vendor>.py), inserted here
# when the image's context is rendered: check_vendor warns with `missing` or stops with `refuse`.
# find_smi: nvidia-smi on PATH, else where the GKE device plugin mounts the host driver's tools
# (-container-path /usr/local/nvidia: GoogleCloudPlatform/container-engine-accelerators
# cmd/nvidia_gpu/nvidia_gpu.go; pytorch/pytorch's and nvidia/cuda's Dockerfiles put its bin on PATH).
find_smi() {
    smi=$(command -v nvidia-smi 2> /dev/null) && return 0
    smi="${ACCEL_IMAGES_DEV_ROOT:-}/usr/local/nvidia/bin/nvidia-smi"
    [ -x "$smi" ]
}

# cc_of NAME: facts.json's 'sm_90' / 'compute_120' as a compute capability (9.0 / 12.0); '9.0' as is.
cc_of() {
    case "$1" in
        sm_*|compute_*)
            digits=${1#*_}
            digits=${digits%%[!0-9]*}
            printf '%s.%s' "${digits%?}" "${digits#"${digits%?}"}" ;;
        *) printf '%s' "$1" ;;
    esac
}

# own_archs: the compute capabilities this image has kernels for, PTX ones marked +PTX: from the
# facts file (archs, ptx) when it was read, else the list rendered from the knowledge base.
own_archs() {
    read_facts
    if [ -z "$facts_read" ]; then
        printf '%s' "${ACCEL_IMAGES_GPU_ARCHS:-}"
        return
    fi
    list=""
    for name in $(printf '%s' "$facts_archs" | tr ',' ' '); do list="$list,$(cc_of "$name")"; done
    for name in $(printf '%s' "$facts_ptx" | tr ',' ' '); do list="$list,$(cc_of "$name")+PTX"; done
    printf '%s' "${list#,}"
}

# arch_runs CC ARCHS: an image compiled for ARCHS has kernels a GPU of compute capability CC can
# run: SASS for CC or a lower minor of the same major, or PTX not above CC (JIT compiled).
arch_runs() {
    for arch in $(printf '%s' "$2" | tr ',' ' '); do
        target=${arch%+PTX}
        if [ "$target" = "$1" ]; then return 0; fi
        if [ "${target%%.*}" = "${1%%.*}" ] && version_lt "$target" "$1"; then return 0; fi
        if [ "$target" != "$arch" ] && version_lt "$target" "$1"; then return 0; fi
    done
    return 1
}

# consumer_gpu: a visible GPU is of a brand CUDA forward compatibility does not serve (CUDA error
# 804 "forward compatibility was attempted on non supported HW"): GeForce, TITAN, NVS, the NVML
# brands that nvidia/cuda's NVIDIA_REQUIRE_CUDA never lists. `nvidia-smi -q` names each GPU's
# "Product Brand"; without it, the GPU names say GeForce or TITAN. Asked once, only when needed.
consumer_gpu() {
    if [ -z "${brands:-}" ]; then
        brands=$("$smi" -q 2> /dev/null | while IFS= read -r line; do
            case "$line" in *"Product Brand"*:*) printf '%s\n' "${line#*: }" ;; esac
        done)
        [ -n "$brands" ] || brands=$("$smi" --query-gpu=name --format=csv,noheader 2> /dev/null)
        brands=$(printf '%s\n' "${brands:-unknown}" | tr '[:upper:]' '[:lower:]')
    fi
    for word in $brands; do
        case "$word" in geforce|titan|nvs) return 0 ;; esac
    done
    return 1
}

# not_served CC: the GPU of compute capability CC these builds do not run on at all (a Jetson module:
# ACCEL_IMAGES_GPU_NOT_SERVED="8.7:Jetson Orin,..." in the linux/arm64 images), or nothing.
not_served() {
    rest="${ACCEL_IMAGES_GPU_NOT_SERVED:-}"
    while [ -n "$rest" ]; do
        entry=${rest%%,*}
        if [ "${entry%%:*}" = "$1" ]; then printf '%s' "${entry#*:}"; return 0; fi
        [ "$rest" = "$entry" ] && return 0
        rest=${rest#*,}
    done
}

# jetson_capabilities: a Jetson's nvidia-smi reports no compute capability; its integrated GPU's name
# (`Orin (nvgpu)`) says it, as host detection reads it (JETSON_GPU_CC).
jetson_capabilities() {
    for model in $("$smi" --query-gpu=name --format=csv,noheader 2> /dev/null | cut -d' ' -f1); do
        case "$model" in
            Orin) capabilities="$capabilities 8.7" ;;
            Xavier) capabilities="$capabilities 7.2" ;;
        esac
    done
}

# refuse_jetson: a visible GPU is a Jetson's, which the SBSA builds do not run on: say where to go.
refuse_jetson() {
    for capability in $capabilities; do
        jetson=$(not_served "$capability")
        if [ -n "$jetson" ]; then
            refuse "GPU compute capability $capability is a $jetson GPU: ${ACCEL_IMAGES_TAG:-this image} is an SBSA build, which does not run on Jetson; use ${ACCEL_IMAGES_GPU_ELSEWHERE:-the NVIDIA L4T/JetPack containers}"
        fi
    done
}

# compat_loaded COMPAT: the container toolkit puts the image's compat libcuda (driver COMPAT) ahead of the
# host's: its driver branch is newer than the host driver's (the majors alone, as NVIDIA/nvidia-container-toolkit
# cmd/nvidia-cdi-hook/cudacompat/cudacompat.go compares them; the GPU is not asked: #1426, fixed by #1784).
compat_loaded() {
    is_version "$1" && [ -n "$driver" ] && version_lt "${driver%%.*}" "${1%%.*}"
}

# decide FLOOR ARCHS BRANCHES COMPAT: whether an image whose wheel needs the driver FLOOR (minor-version
# compatibility), has kernels for ARCHS, declares the driver BRANCHES for forward compatibility and holds
# the compat libcuda of driver COMPAT (empty: none) runs on this host. Sets `problem` (arch, driver,
# no_compat, consumer, compat_consumer; empty when it runs) and `forward` (1 when it runs only through
# forward compatibility). `vendor.decide` is the same rule.
decide() {
    problem="" forward=""
    if [ -n "$2" ] && [ -n "$capabilities" ]; then
        runs=""
        for capability in $capabilities; do
            if arch_runs "$capability" "$2"; then runs=1; fi
        done
        if [ -z "$runs" ]; then problem=arch; return 1; fi
    fi
    if [ -z "$driver" ] || [ -z "$1" ]; then return 0; fi
    if ! version_lt "$driver" "$1"; then
        if compat_loaded "$4" && consumer_gpu; then problem=compat_consumer; return 1; fi
        return 0
    fi
    if ! in_list "${driver%%.*}" "$3"; then problem=driver; return 1; fi
    if [ -z "$4" ]; then problem=no_compat; return 1; fi
    if consumer_gpu; then problem=consumer; return 1; fi
    forward=1
}

# admits "FLOOR|ARCHS|BRANCHES|COMPAT": decide, for an entry of ACCEL_IMAGES_ALTERNATIVES.
admits() {
    a_rest=${1#*|}
    a_archs=${a_rest%%|*}
    a_rest=${a_rest#*|}
    decide "${1%%|*}" "$a_archs" "${a_rest%%|*}" "${a_rest#*|}"
}

# own_compat: the driver of this image's CUDA forward-compatibility libcuda, empty when it has none: what
# its build found under /usr/local/cuda/compat (facts.json cuda_compat) when the facts file was read (an
# older branch is admitted only on the image's own word), else the knowledge base's (rendered) value.
own_compat() {
    read_facts
    if [ -n "$facts_read" ]; then printf '%s' "$facts_compat"; else printf '%s' "${ACCEL_IMAGES_COMPAT_DRIVER:-}"; fi
}

check_vendor() {
    if ! find_smi; then
        missing "no NVIDIA GPU visible in the container: run with --gpus all (NVIDIA Container Toolkit)"
        return
    fi
    # nvidia-smi prints its own failures on stdout: only a zero exit makes the answer a version.
    if ! answer=$("$smi" --query-gpu=driver_version --format=csv,noheader 2>&1); then
        missing "nvidia-smi cannot reach the NVIDIA driver ($(printf '%s\n' "$answer" | head -n1))"
        return
    fi
    driver=$(printf '%s\n' "$answer" | head -n1 | tr -d ' ')
    is_version "$driver" || driver=""
    # compute_cap is unknown to old drivers: no answer means no architecture check.
    capabilities=""
    for capability in $("$smi" --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | tr -d ' '); do
        if is_version "$capability"; then capabilities="$capabilities $capability"; fi
    done
    [ -n "$capabilities" ] || jetson_capabilities
    refuse_jetson
    read_facts  # here, not in the subshells below: once a container start
    archs=$(own_archs)
    compat_driver=$(own_compat)
    floor="${ACCEL_IMAGES_DRIVER_FLOOR:-}"
    branches="${ACCEL_IMAGES_COMPAT_BRANCHES:-}"
    tag="${ACCEL_IMAGES_TAG:-this image}"
    major="${ACCEL_IMAGES_CUDA:-}"
    major="CUDA ${major%%.*}.x"
    if decide "$floor" "$archs" "$branches" "$compat_driver"; then
        warn_runs
        return 0
    fi
    reason=$problem
    pick_alternative
    install="install an NVIDIA driver >= $floor$(or_use)"
    below="host NVIDIA driver $driver is below $floor, the $major floor (minor-version compatibility) of $tag"
    case "$reason" in
        arch) refuse_arch ;;
        consumer) refuse "$below, and CUDA forward compatibility does not serve GeForce, TITAN or NVS GPUs (CUDA error 804): $install" ;;
        compat_consumer) refuse "host NVIDIA driver $driver is older than the CUDA forward-compatibility driver $compat_driver of $tag, which the NVIDIA Container Toolkit loads from /usr/local/cuda/compat ahead of the host's in its default cuda-compat mode, and CUDA forward compatibility does not serve GeForce, TITAN or NVS GPUs (CUDA error 804): use a container toolkit with NVIDIA/nvidia-container-toolkit#1784, set nvidia-container-runtime.modes.legacy.cuda-compat-mode = \"disabled\", or use ${alt:-a runtime image}" ;;
        no_compat) refuse "$below; forward compatibility would serve it, but the image has no CUDA forward-compatibility library (/usr/local/cuda/compat, facts.json cuda_compat): $install" ;;
        *) refuse "$below$(compat_scope): $install" ;;
    esac
}

# compat_scope: which older drivers this image serves through forward compatibility, if any.
compat_scope() {
    if [ -n "$branches" ]; then
        printf '; its forward compatibility serves the driver branches R%s on data-center GPUs only' \
            "$(printf '%s' "$branches" | tr ',' '/')"
    fi
}

# refuse_arch: no visible GPU has kernels in this image; the first one says which way it misses.
refuse_arch() {
    # shellcheck disable=SC2086  # the list is split into first_of's arguments on purpose
    capability=$(first_of $capabilities)
    oldest=""
    for arch in $(printf '%s' "$archs" | tr ',' ' '); do
        if [ -z "$oldest" ] || version_lt "${arch%+PTX}" "$oldest"; then oldest=${arch%+PTX}; fi
    done
    if [ -n "$alt" ]; then use="; use $alt instead"; else use="; no sibling image has kernels for it"; fi
    if version_lt "$capability" "$oldest"; then
        refuse "GPU compute capability $capability is older than every architecture compiled into $tag ($archs)$use"
    fi
    refuse "no kernels for GPU compute capability $capability in $tag (compiled for $archs)$use"
}

first_of() {
    printf '%s' "${1:-}"
}

# warn_runs: what holds for a host this image runs on: GPUs it has no kernels for, forward
# compatibility, minor-version compatibility below the toolkit's own driver.
warn_runs() {
    served="" unserved=""
    for capability in $capabilities; do
        if arch_runs "$capability" "$archs"; then served="$served $capability"; else unserved="$unserved $capability"; fi
    done
    if [ -n "$archs" ] && [ -n "$unserved" ]; then
        warn "no kernels in $tag for the GPUs of compute capability${unserved}: only those of${served} can use it"
    fi
    if [ -n "$forward" ]; then
        warn "host NVIDIA driver $driver is below $floor, the $major floor of $tag: it runs through CUDA forward compatibility (the image's cuda-compat libcuda $compat_driver), which NVIDIA supports on data-center GPUs only and the container toolkit loads unless its cuda-compat mode is disabled (nvidia-container-runtime.modes.legacy.cuda-compat-mode)"
    elif [ -n "$driver" ] && [ -n "${ACCEL_IMAGES_MIN_DRIVER:-}" ] && version_lt "$driver" "$ACCEL_IMAGES_MIN_DRIVER"; then
        warn "host NVIDIA driver $driver is below the CUDA ${ACCEL_IMAGES_CUDA:-} toolkit driver $ACCEL_IMAGES_MIN_DRIVER: it runs under minor-version compatibility, which covers the compiled kernels but not PTX JIT of newer code (torch.compile, Triton)"
    fi
}

# A user the image does not know (`docker run --user UID:GID`) gets HOME=/ from Docker: give it the
# image user's home, which is sticky and world-writable like /tmp, so pip's cache, shell history
# and dot-files have a place. Users with a home of their own (root, the image's user) keep it.
if [ -n "${ACCEL_IMAGES_HOME:-}" ] && { [ "${HOME:-/}" = "/" ] || [ ! -w "${HOME:-/}" ]; }; then
    export HOME="$ACCEL_IMAGES_HOME"
fi

# Such a user has no name either: `whoami` fails, bash prompts "I have no name!", and whatever looks
# the user up (ssh, git's identity) stops. nss_wrapper names it for this container's command, from
# copies of /etc/passwd and /etc/group that list it (under the image user's name, with the home
# above), while the real files stay read-only: the technique of docker-library/postgres's
# docker-entrypoint.sh (docker_init_database_dir; https://cwrap.org/nss_wrapper.html).
# `docker exec` starts without the entry point, so it goes without the name. Under a read-only root
# (`docker run --read-only`, Kubernetes' readOnlyRootFilesystem, Enroot's default) /tmp may not be
# writable; /dev/shm, a tmpfs in every runtime, holds the copies then.
name_unknown_user() {
    uid="$(id -u)"
    gid="$(id -g)"
    getent passwd "$uid" > /dev/null 2>&1 && return 0
    for lib in /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
        [ -e "$lib" ] || continue
        names="$(mktemp -d 2> /dev/null || mktemp -d -p /dev/shm 2> /dev/null)" || return 0
        { echo "${ACCEL_IMAGES_HOME##*/}:x:${uid}:${gid}:accel-images user:${HOME:-/}:/bin/bash"; cat /etc/passwd; } \
            > "$names/passwd"
        cat /etc/group > "$names/group"
        getent group "$gid" > /dev/null 2>&1 || echo "${ACCEL_IMAGES_HOME##*/}:x:${gid}:" >> "$names/group"
        export LD_PRELOAD="${lib}${LD_PRELOAD:+ $LD_PRELOAD}" NSS_WRAPPER_PASSWD="$names/passwd" \
            NSS_WRAPPER_GROUP="$names/group"
        return 0
    done
}
if [ -n "${ACCEL_IMAGES_HOME:-}" ]; then
    name_unknown_user
fi

# find_overrides: in a production image (this file run as its ENTRYPOINT, /opt/accel-images/guard.sh:
# accel_images/model/variant.py GUARD_PATH), set `overrides` to what the environment sets that the image
# does not and that changes what the guard decides or where it looks: every ACCEL_IMAGES_* variable not in
# ACCEL_IMAGES_OWN_ENV (the names the image's ENV sets, rendered with it) and every HSA_OVERRIDE_* (ROCr's),
# as NAME=VALUE, comma-separated. Pyxis hands the submitting user's environment to the container, the
# image's own variables winning (NVIDIA/pyxis#124), so what a login node exported arrives here unseen
# otherwise. ACCEL_IMAGES_DEV_ROOT, the test hook that moves /dev, /sys and the driver tools, is named as
# one. Copies run from elsewhere (tests over a fake host tree) find nothing.
overrides=""
find_overrides() {
    [ "$0" = /opt/accel-images/guard.sh ] || return 0
    for name in $(export -p | while IFS= read -r line; do
        case "$line" in
            "export "*) line=${line#export } ;;
            "declare -x "*) line=${line#declare -x } ;;
            *) continue ;;
        esac
        printf '%s\n' "${line%%=*}"
    done); do
        case "$name" in
            *[!A-Za-z0-9_]*|ACCEL_IMAGES_DEVICE) continue ;;  # ACCEL_IMAGES_DEVICE: set below, for the banner
            ACCEL_IMAGES_*|HSA_OVERRIDE_*) ;;
            *) continue ;;
        esac
        case " ${ACCEL_IMAGES_OWN_ENV:-} " in *" $name "*) continue ;; esac
        eval "[ -n \"\${$name+set}\" ]" || continue
        eval "value=\${$name}"
        value=$(printf '%s' "$value" | tr '\n\r' '  ')
        case "$name" in
            ACCEL_IMAGES_DEV_ROOT) value="$value (a test hook: devices and driver tools are read under it)" ;;
        esac
        overrides="${overrides:+$overrides, }$name=$value"
    done
}

# in_effect: the overrides, for the end of a refusal's one line.
in_effect() {
    if [ -n "$overrides" ]; then printf '; set in the environment, not by the image: %s' "$overrides"; fi
}

# The fabric between nodes, for an image whose facts say it carries the RDMA verbs library (or when a job asks
# for RDMA): one line on whether RDMA devices are visible and usable, since NCCL and RCCL fall back to TCP
# sockets between nodes without a word when they are not (NCCL's Networking Troubleshooting guide). Seen as
# libibverbs sees them: the devices the kernel lists under /sys/class/infiniband and the character devices
# /dev/infiniband/uverbsN that user space opens (linux-rdma/rdma-core README, "/dev/infiniband/uverbsX
# (libibverbs)"), which `docker run` passes only with --device /dev/infiniband; and the locked-memory limit the
# registration of buffers needs (NVIDIA and AMD document `--ulimit memlock=-1`; Docker's default is 8 MB
# [inferred from the engine's default, not read in a vendor file]). ACCEL_IMAGES_REQUIRE_RDMA=1 turns a missing
# or unusable fabric into a refusal, for jobs that must not fall back to TCP.
fabric_problem() {
    if [ "$require_rdma" = 1 ] && [ "$facts_ibverbs" = none ]; then
        refuse "ACCEL_IMAGES_REQUIRE_RDMA=1, but this image has no RDMA verbs library (libibverbs); use a GPU image of accel-images"
    fi
    if [ "$require_rdma" = 1 ]; then
        refuse "ACCEL_IMAGES_REQUIRE_RDMA=1: $1"
    fi
    say "note: network: $1; ${facts_collective:-the collective library} between nodes uses TCP sockets"
}
# is_count TEXT: digits only (a byte count the shell can divide; "unlimited" and "unknown" are not).
is_count() {
    case "$1" in
        ''|*[!0-9]*) return 1 ;;
    esac
    return 0
}

# locked_memory: this process's soft limit of locked memory in bytes, "unlimited", or "unknown" (proc(5),
# /proc/self/limits: "Max locked memory  8388608  8388608  bytes"; under ACCEL_IMAGES_DEV_ROOT like /dev and /sys).
locked_memory() {
    limits="${ACCEL_IMAGES_DEV_ROOT:-}/proc/self/limits"
    [ -r "$limits" ] || { echo unknown; return 0; }
    while read -r first second third soft _; do
        if [ "$first $second $third" = "Max locked memory" ]; then echo "$soft"; return 0; fi
    done < "$limits"
    echo unknown
}
check_fabric() {
    require_rdma="${ACCEL_IMAGES_REQUIRE_RDMA:-0}"
    # The CPU image carries no RDMA user space (templates/partials/cluster.j2): no facts to read on its start.
    [ "${ACCEL_IMAGES_VENDOR:-}" != cpu ] || [ "$require_rdma" = 1 ] || return 0
    read_facts
    [ -n "$facts_ibverbs" ] && [ "$facts_ibverbs" != none ] || [ "$require_rdma" = 1 ] || return 0
    [ "$facts_ibverbs" != none ] || { fabric_problem "no RDMA verbs library"; return 0; }
    # On the CPU (no accelerator found) the fabric is no news, unless a job requires it.
    case "$seen_device" in "CPU only"*) [ "$require_rdma" = 1 ] || return 0 ;; esac
    sys_ib="${ACCEL_IMAGES_DEV_ROOT:-}/sys/class/infiniband"
    hcas=""
    for hca in "$sys_ib"/*; do
        [ -e "$hca" ] && hcas="${hcas:+$hcas }${hca##*/}"
    done
    memlock=$(locked_memory)
    set -- "$dev"/infiniband/uverbs*
    if [ -z "$hcas" ]; then
        fabric_problem "no RDMA device visible (${sys_ib#"${ACCEL_IMAGES_DEV_ROOT:-}"} lists none)"
    elif [ ! -e "$1" ]; then
        fabric_problem "RDMA devices $hcas on the host, but no /dev/infiniband/uverbs* here: run with --device /dev/infiniband"
    elif ! (exec 3<>"$1") 2> /dev/null; then
        fabric_problem "user $(id -u) cannot open ${1#"${ACCEL_IMAGES_DEV_ROOT:-}"}"
    elif is_count "$memlock"; then
        fabric_problem "RDMA devices $hcas, but locked memory is limited to $((memlock / 1024)) KB: run with --ulimit memlock=-1"
    else
        say "network: RDMA devices $hcas usable ($# verbs nodes, locked memory $memlock)"
    fi
}

find_overrides
if ! guard_off; then
    check_vendor
    check_fabric
else
    seen_device="not checked (ACCEL_IMAGES_GUARD=off)"
fi
# Started: the overrides on a line of their own (a refusal carried them on its line).
if [ -n "$overrides" ]; then say "note: set in the environment, not by the image: $overrides"; fi
export ACCEL_IMAGES_DEVICE="$seen_device"

exec "$@"
