#!/bin/sh
# accel-images entry point guard.
#
# Explains, in one message, a host that cannot run this image before PyTorch fails with
# something cryptic: a driver too old for the image's CUDA, a GPU architecture the wheel was
# not compiled for, or the device nodes / runtime missing from `docker run`. A missing device
# is a warning (the image still works on the CPU) unless ACCEL_IMAGES_REQUIRE_ACCELERATOR=1;
# an unusable device is an error. ACCEL_IMAGES_GUARD=off turns the guard off.
#
# Facts come from the image's environment, set at build time from the knowledge base:
# ACCEL_IMAGES_TAG and what the vendor's check reads (its module's image_env).
# ACCEL_IMAGES_DEV_ROOT (default empty) is prepended to every /dev path, so the checks can be
# exercised against a fake device tree.

set -u

dev="${ACCEL_IMAGES_DEV_ROOT:-}/dev"

guard_off() { [ "${ACCEL_IMAGES_GUARD:-on}" = "off" ]; }

say() { printf 'accel-images: %s\n' "$1" >&2; }

# A missing device: warn and go on in CPU mode, or fail when an accelerator is required.
missing() {
    if [ "${ACCEL_IMAGES_REQUIRE_ACCELERATOR:-0}" = "1" ]; then
        say "error: $1"
        exit 78
    fi
    say "warning: $1; running on the CPU (set ACCEL_IMAGES_GUARD=off to silence)"
}

# A device that works with a reservation: say it once and go on.
warn() {
    say "warning: $1"
}

# An unusable device: stop with the reason.
refuse() {
    say "error: $1 (set ACCEL_IMAGES_GUARD=off to start anyway)"
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

# version_lt A B: true when dotted version A is lower than B (numeric per component).
version_lt() {
    [ "$1" = "$2" ] && return 1
    lowest=$(printf '%s\n%s\n' "$1" "$2" | sort -t. -k1,1n -k2,2n -k3,3n | head -n1)
    [ "$lowest" = "$1" ]
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

# The vendor's own checks, from its module (accel_images/vendors/<vendor>.py), inserted here
# when the image's context is rendered: check_vendor warns with `missing` or stops with `refuse`.
# arch_runs CC: the image has kernels a GPU of compute capability CC can run: SASS for CC or a
# lower minor of the same major, or PTX of an architecture not above CC (JIT compiled).
arch_runs() {
    for arch in $(printf '%s' "${ACCEL_IMAGES_GPU_ARCHS:-}" | tr ',' ' '); do
        target=${arch%+PTX}
        if [ "$target" = "$1" ]; then return 0; fi
        if [ "${target%%.*}" = "${1%%.*}" ] && version_lt "$target" "$1"; then return 0; fi
        if [ "$target" != "$arch" ] && version_lt "$target" "$1"; then return 0; fi
    done
    return 1
}

# or_use TAG: ", or use TAG" when a sibling image is named.
or_use() {
    if [ -n "$1" ]; then printf ', or use %s' "$1"; fi
}

check_vendor() {
    if ! command -v nvidia-smi > /dev/null 2>&1; then
        missing "no NVIDIA GPU visible in the container: run with --gpus all (NVIDIA Container Toolkit)"
        return
    fi
    # nvidia-smi prints its own failures on stdout: only a zero exit makes the answer a version.
    if ! answer=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1); then
        missing "nvidia-smi cannot reach the NVIDIA driver ($(printf '%s\n' "$answer" | head -n1))"
        return
    fi
    driver=$(printf '%s\n' "$answer" | head -n1 | tr -d ' ')
    is_version "$driver" || driver=""
    floor="${ACCEL_IMAGES_DRIVER_FLOOR:-}"
    cuda="${ACCEL_IMAGES_CUDA:-}"
    if [ -n "$driver" ] && [ -n "$floor" ] && version_lt "$driver" "$floor"; then
        refuse "host NVIDIA driver $driver is below $floor, the CUDA ${cuda%%.*}.x floor (minor-version compatibility) of ${ACCEL_IMAGES_TAG:-this image}: update the driver$(or_use "${ACCEL_IMAGES_FOR_OLDER_DRIVER:-}")"
    fi
    if [ -n "$driver" ] && [ -n "${ACCEL_IMAGES_MIN_DRIVER:-}" ] && version_lt "$driver" "$ACCEL_IMAGES_MIN_DRIVER"; then
        warn "host NVIDIA driver $driver is below the CUDA $cuda toolkit driver $ACCEL_IMAGES_MIN_DRIVER: it runs under minor-version compatibility, which covers the compiled kernels but not PTX JIT of newer code (torch.compile, Triton)"
    fi
    # compute_cap is unknown to old drivers: no answer means no architecture check.
    capabilities=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' ')
    [ -n "${ACCEL_IMAGES_GPU_ARCHS:-}" ] || return 0
    known="" served="" unserved=""
    for capability in $capabilities; do
        is_version "$capability" || continue
        known=1
        if arch_runs "$capability"; then served="$served $capability"; else unserved="$unserved $capability"; fi
    done
    [ -n "$known" ] || return 0
    if [ -n "$served" ]; then
        if [ -n "$unserved" ]; then
            warn "no kernels in ${ACCEL_IMAGES_TAG:-this image} for the GPUs of compute capability${unserved}: only those of${served} can use it"
        fi
        return 0
    fi
    capability=$(printf '%s' "$unserved" | tr -s ' ' | cut -d' ' -f2)
    oldest=$(printf '%s' "$ACCEL_IMAGES_GPU_ARCHS" | cut -d, -f1)
    if version_lt "$capability" "$oldest"; then
        refuse "GPU compute capability $capability is older than every architecture compiled into ${ACCEL_IMAGES_TAG:-this image} ($ACCEL_IMAGES_GPU_ARCHS)$(or_use "${ACCEL_IMAGES_FOR_OLDER_GPU:-}")"
    fi
    refuse "no kernels for GPU compute capability $capability in ${ACCEL_IMAGES_TAG:-this image} (compiled for $ACCEL_IMAGES_GPU_ARCHS)$(or_use "${ACCEL_IMAGES_FOR_NEWER_GPU:-}")"
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
# `docker exec` starts without the entry point, so it goes without the name.
name_unknown_user() {
    uid="$(id -u)"
    gid="$(id -g)"
    getent passwd "$uid" > /dev/null 2>&1 && return 0
    for lib in /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
        [ -e "$lib" ] || continue
        names="$(mktemp -d 2> /dev/null)" || return 0
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

if ! guard_off; then
    check_vendor
fi

exec "$@"
