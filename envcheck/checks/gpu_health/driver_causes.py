"""What each kind of driver message means for the GPU it names (the problem, the fix, the stable code, how severe),
and RmInitAdapter's numbers in words: the tables checks.gpu_health.driver_findings judges with."""

from __future__ import annotations

from dataclasses import dataclass

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
BAR_INVALID = "gpu.bar_invalid"
CLAIMED = "gpu.claimed_by_other_driver"
FIRMWARE_MISSING = "driver.firmware_missing"
GSP_BOOT = "gpu.gsp_boot"
GSP_TIMEOUT = "gpu.gsp_timeout"
INIT_FAILED = "gpu.init_failed"
LOAD_FAILED = "driver.load_failed"
NVSWITCH_FATAL = "nvswitch.fatal"
OPEN_MODULE = "gpu.open_module_required"
POWER = "gpu.power_cables"
PROBE_FAILED = "gpu.probe_failed"
PROPRIETARY_MODULE = "gpu.proprietary_module_required"
UNSUPPORTED = "gpu.unsupported_by_driver"

RESET = "nvidia-smi -r -i {pci} (GPU reset)"
REBOOT_FIX = "drain; reboot the node; if it recurs reseat the GPU, check its power and riser, RMA it"


@dataclass(frozen=True)
class Cause:
    """What one kind of driver message means for the GPU it names: the problem, the fix, the code, the rank."""

    problem: str
    fix: str
    code: str
    rank: int = 0


# Most specific first: a GPU's finding comes from the first of its kinds in this order.
CAUSES: dict[str, Cause] = {
    "open_module_required": Cause(
        "the loaded NVIDIA module cannot drive it: it requires the NVIDIA open kernel modules",
        "install the NVIDIA open kernel modules of the same driver version (the '-open' driver package, or the "
        ".run installer's -m=kernel-open), then reboot",
        OPEN_MODULE,
    ),
    "open_module_unsupported": Cause(
        "the open kernel module cannot drive it (a GPU without a GSP, before Turing, or not a data-center GPU "
        "on drivers 515 to 535)",
        "install the proprietary kernel module of the same driver version (not the '-open' package), then reboot",
        PROPRIETARY_MODULE,
    ),
    "not_supported": Cause(
        "the loaded driver release does not support this GPU",
        "install a driver release that supports it (NVIDIA's supported-products list for the release); "
        "lspci -nn -s {pci} gives its PCI ID",
        UNSUPPORTED,
    ),
    "legacy_gpu": Cause(
        "the loaded driver release no longer supports this GPU generation: it ignores the GPU",
        "install the legacy driver branch the message names (e.g. the 580.xx legacy driver), then reboot",
        UNSUPPORTED,
    ),
    "bar_invalid": Cause(
        "its PCI BAR{bar} got no usable address ({size_mib} MiB): the driver refused to probe it",
        "in the system BIOS enable 'Above 4G Decoding' (and 'Resizable BAR' / a larger MMIO window where "
        "offered) so the GPU's BARs get an address, or boot Linux with pci=realloc; then reboot",
        BAR_INVALID,
    ),
    "no_power": Cause(
        "its auxiliary power cables are not connected (the driver will not start it)",
        "connect the GPU's PCIe/12V-2x6 power cables (check the PSU and the riser), then reboot",
        POWER,
    ),
    "firmware_missing": Cause(
        "the driver's GSP firmware file is missing, so it cannot start the GPU",
        "install the driver's firmware of the loaded version (/lib/firmware/nvidia/<version>/gsp_*.bin, the "
        "distribution's nvidia firmware package), or reinstall the driver; then reboot",
        FIRMWARE_MISSING,
    ),
    "gsp_boot": Cause(
        "its GSP firmware failed to boot, so the driver could not initialise it",
        f"drain; {RESET} or power-cycle the node (a warm reboot can leave the GSP up: 'WPR2 already up'); "
        "update the driver and the GPU's firmware; RMA if it persists",
        GSP_BOOT,
    ),
    "init_failed": Cause(
        "the driver could not initialise it (RmInitAdapter failed{status})",
        "drain; dmesg | grep NVRM (the lines before it name the cause); reboot the node; if it persists reseat "
        "the GPU, check its power, RMA it",
        INIT_FAILED,
    ),
    "probe_error": Cause("the driver's probe failed for it", REBOOT_FIX, PROBE_FAILED),
}
RUNTIME: dict[str, Cause] = {
    "gsp_timeout": Cause(
        "its GSP firmware stopped answering the driver (RPC timeout)",
        f"drain; {RESET} or reboot the node; update the driver if it recurs",
        GSP_TIMEOUT,
        1,
    ),
    "gsp_heartbeat": Cause(
        "its GSP firmware stopped sending heartbeats (hung)",
        f"drain; {RESET} or reboot the node; update the driver if it recurs",
        GSP_TIMEOUT,
        1,
    ),
    "gsp_rate_limited": Cause(
        "the driver rate-limits its GSP RPC errors: the GPU likely needs a reset",
        f"drain; {RESET} or reboot the node",
        GSP_TIMEOUT,
        1,
    ),
}
# RmInitAdapter's first number (osinit.c rm_init_status, the 525+ numbering) and second (nvstatuscodes.h NV_STATUS).
INIT_STATUS = {
    0x11: "system environment",
    0x20: "GPU allocation",
    0x22: "GPU attach",
    0x23: "GPU pre-init",
    0x24: "GPU state init",
    0x25: "GPU load",
    0x30: "VBIOS",
    0x31: "VBIOS POST",
    0x60: "firmware policy",
    0x61: "firmware fetch",
    0x62: "GSP firmware init",
}
RM_STATUS = {
    0x0F: "GPU lost from the bus",
    0x1C: "insufficient power",
    0x40: "invalid state",
    0x45: "IRQ not firing",
    0x51: "out of memory",
    0x56: "not supported",
    0x59: "operating system error",
    0x62: "reset required",
    0x65: "timed out",
    0x72: "memory error",
    0x79: "RISC-V (GSP) error",
    0xFFFF: "generic error",
}

# The fixes of the probe's counts and of a load that failed, by message kind.
COUNT_FIX = {
    "probe_failed": REBOOT_FIX + "; lspci -vv -s {pci}",
    "probe_not_called": (
        "another kernel driver owns the GPU (lspci -k -s {pci}: 'Kernel driver in use'): blacklist nouveau "
        "(/etc/modprobe.d/blacklist-nouveau.conf, update-initramfs -u) or unbind vfio-pci, then reboot"
    ),
    "no_devices": "the nvidia module did not load: dmesg | grep NVRM says why; fix that cause and reboot",
}


def count_problem(kind: str, devices: int, driver: str | None) -> str:
    """The problem a probe count (failed, not called) or a failed load states."""
    if kind == "probe_failed":
        return f"the driver's probe failed for {devices} GPU(s): on the PCI bus, not taken by the driver"
    if kind == "probe_not_called":
        owner = f" ({driver} owns it)" if driver else ""
        return (
            f"another kernel driver owns {devices} NVIDIA GPU(s){owner}: the nvidia module never probed them"
        )
    return "the nvidia module's load failed: it initialised no GPU"
