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
# decimal DIGITS: DIGITS without leading zeros ('010' -> '10', '000' -> '0'), which shell arithmetic
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
