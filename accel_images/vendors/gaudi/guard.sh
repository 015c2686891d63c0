# host_release: the host driver's Intel Gaudi software release ('1.24.1' of '1.24.1-3bf9e81'), from
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
            # shellcheck disable=SC2086  # the words after the colon, split on purpose
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
