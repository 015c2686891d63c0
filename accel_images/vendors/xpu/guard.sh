# max_series: how many of the Intel render devices are Data Center GPU Max (sysfs PCI ids under
# /sys/class/drm/renderD*/device, vendor 0x8086; ids: vendors/xpu/decision.py DATA_CENTER_MAX_IDS), and of
# how many Intel devices that are not integrated graphics. Sets `max_ids`, `max_count`, `intel_count`.
max_series() {
    max_ids="" max_count=0 intel_count=0
    for device in "${ACCEL_IMAGES_DEV_ROOT:-}"/sys/class/drm/renderD*/device; do
        { [ -r "$device/vendor" ] && [ -r "$device/device" ]; } || continue
        [ "$(cat "$device/vendor")" = 0x8086 ] || continue
        integrated_graphics "$device" && continue
        intel_count=$((intel_count + 1))
        id=$(tr 'A-F' 'a-f' < "$device/device")
        max_ids_known=" @MAX_IDS@ "
        case "$max_ids_known" in
            *" ${id#0x} "*) max_count=$((max_count + 1)); max_ids="$max_ids $id" ;;
        esac
    done
}

# integrated_graphics DEVICE: the sysfs PCI device is the processor's own graphics, no accelerator for
# these images, as host detection decides (vendors/xpu/detect.py integrated): it sits at slot 00:02.0
# (PCI_SLOT_NAME in its uevent, the kernel's Documentation/ABI/testing/sysfs-bus-pci) and its device id is
# not of a family PyTorch's XPU guide validates (xpu.yaml validated_gpus, ids from the kernel's
# include/drm/intel/pciids.h: Meteor Lake, Arrow Lake and Lunar Lake graphics count). Sets `slot`, `id`.
integrated_graphics() {
    slot="" id=""
    { [ -r "$1/uevent" ] && [ -r "$1/device" ]; } || return 1
    while IFS='=' read -r key value; do
        [ "$key" = PCI_SLOT_NAME ] && slot=$value
    done < "$1/uevent"
    case "$slot" in *@INTEGRATED_SLOT@) ;; *) return 1 ;; esac
    id=$(tr 'A-F' 'a-f' < "$1/device")
    validated=" @VALIDATED_IDS@ "
    case "$validated" in *" ${id#0x} "*) return 1 ;; esac
    return 0
}

# intel_render_node: a render node is Intel's by the PCI vendor sysfs gives for it
# (/sys/class/drm/renderD*/device/vendor: the kernel's Documentation/ABI/testing/sysfs-bus-pci; Intel's is
# 0x8086, include/linux/pci_ids.h PCI_VENDOR_ID_INTEL), unless it is integrated graphics. A node whose
# vendor cannot be read counts, as in recommend (vendors/xpu/host.py accelerator_present). Sets
# `other_vendors` to the other vendors seen and `not_counted` to the integrated graphics passed over.
intel_render_node() {
    other_vendors="" not_counted=""
    for node in "$dev"/dri/renderD*; do
        device="${ACCEL_IMAGES_DEV_ROOT:-}/sys/class/drm/${node##*/}/device"
        [ -r "$device/vendor" ] || return 0
        vendor=$(cat "$device/vendor")
        if [ "$vendor" = @INTEL@ ]; then
            integrated_graphics "$device" || return 0
            not_counted="$not_counted; integrated graphics $id at ${slot#0000:} is not counted"
            continue
        fi
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
        seen="$not_counted"
        [ -z "$other_vendors" ] || seen="; PCI vendor${other_vendors}; Intel's is @INTEL@$seen"
        missing "no Intel GPU among the render nodes (${seen#; })"
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
