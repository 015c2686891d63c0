# max_series: how many of the Intel render devices are Data Center GPU Max (sysfs PCI ids under
# /sys/class/drm/renderD*/device, vendor 0x8086; ids: vendors/xpu.py DATA_CENTER_MAX_IDS), and of
# how many Intel devices. Sets `max_ids`, `max_count`, `intel_count`.
max_series() {
    max_ids="" max_count=0 intel_count=0
    for device in "${ACCEL_IMAGES_DEV_ROOT:-}"/sys/class/drm/renderD*/device; do
        [ -r "$device/vendor" ] && [ -r "$device/device" ] || continue
        [ "$(cat "$device/vendor")" = 0x8086 ] || continue
        intel_count=$((intel_count + 1))
        id=$(tr 'A-F' 'a-f' < "$device/device")
        case " @MAX_IDS@ " in
            *" ${id#0x} "*) max_count=$((max_count + 1)); max_ids="$max_ids $id" ;;
        esac
    done
}

# intel_render_node: a render node is Intel's by the PCI vendor sysfs gives for it
# (/sys/class/drm/renderD*/device/vendor: the kernel's Documentation/ABI/testing/sysfs-bus-pci; Intel's is
# 0x8086, include/linux/pci_ids.h PCI_VENDOR_ID_INTEL). A node whose vendor cannot be read counts, as in
# recommend (vendors/xpu.py accelerator_present). Sets `other_vendors` to the other vendors seen.
intel_render_node() {
    other_vendors=""
    for node in "$dev"/dri/renderD*; do
        vendor_file="${ACCEL_IMAGES_DEV_ROOT:-}/sys/class/drm/${node##*/}/device/vendor"
        [ -r "$vendor_file" ] || return 0
        vendor=$(cat "$vendor_file")
        [ "$vendor" = @INTEL@ ] && return 0
        case " $other_vendors " in *" $vendor "*) ;; *) other_vendors="$other_vendors $vendor" ;; esac
    done
    return 1
}

check_vendor() {
    if ! any_exists "$dev"/dri/renderD*; then
        missing "no /dev/dri render node: run with --device /dev/dri"
        return
    fi
    if ! intel_render_node; then
        missing "no Intel GPU among the render nodes (PCI vendor${other_vendors}; Intel's is @INTEL@)"
        return
    fi
    open_or_group_add "$dev"/dri/renderD*
    max_series
    [ "$max_count" -gt 0 ] || return 0
    if [ "$max_count" -lt "$intel_count" ]; then
        warn "Intel Data Center GPU Max (PCI device${max_ids}) @REASON@; only the other GPUs can use it"
        return 0
    fi
    refuse "Intel Data Center GPU Max (PCI device${max_ids}) @REASON@"
}
