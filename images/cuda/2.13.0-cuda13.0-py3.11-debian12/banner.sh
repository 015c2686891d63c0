# accel-images: which image this shell is in, said once when an interactive shell starts, as NGC's
# containers say theirs. /etc/bash.bashrc sources this file, and bash reads that file for interactive
# shells only, so `docker run IMAGE CMD`, `bash -c`, scripts and the smoke test stay quiet; a shell
# started inside this one says nothing again (ACCEL_IMAGES_BANNER_SHOWN is inherited).
# ACCEL_IMAGES_DEVICE is what the entry point found (accel_images/smoke/guard.sh); `docker exec`
# starts without the entry point, so there the device is "not checked".
if [ -n "${PS1:-}" ] && [ -z "${ACCEL_IMAGES_BANNER_SHOWN:-}" ]; then
    export ACCEL_IMAGES_BANNER_SHOWN=1
    accel_images_torch="$(sed -n 's/^torch==//p' /opt/accel-images/constraints.txt 2>/dev/null)"
    printf 'accel-images %s: PyTorch %s, %s, device: %s\n' "${ACCEL_IMAGES_TAG:-image}" \
        "${accel_images_torch:-unknown}" "$(python --version 2> /dev/null || printf 'no python on PATH')" \
        "${ACCEL_IMAGES_DEVICE:-not checked (started without the entry point)}"
    unset accel_images_torch
    # The container's own shell (tini's child) stops on `docker stop`: an interactive bash ignores
    # SIGTERM unless it traps it, and would otherwise be killed after 10 s (exit 137).
    if [ "${PPID:-0}" = 1 ]; then
        trap 'exit 143' TERM
    fi
fi
