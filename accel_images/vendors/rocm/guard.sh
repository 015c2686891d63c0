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
