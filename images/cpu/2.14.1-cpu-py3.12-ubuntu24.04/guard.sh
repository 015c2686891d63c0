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
check_vendor() {
    :
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
