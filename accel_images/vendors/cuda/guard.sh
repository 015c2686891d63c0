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
        case "$word" in @CONSUMER@) return 0 ;; esac
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
            @JETSON_CASES@
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
        compat_consumer) refuse "host NVIDIA driver $driver is older than the CUDA forward-compatibility driver $compat_driver of $tag, @COMPAT_LOADED@, and CUDA forward compatibility does not serve GeForce, TITAN or NVS GPUs (CUDA error 804): @WAYS_OUT@, or use ${alt:-a runtime image}" ;;
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
