"""What the NVIDIA kernel driver says in the kernel log, message by message, each pattern from the driver's own source.

Sources: NVIDIA/open-gpu-kernel-modules (release 595.45.04 read; the formats below have not changed in the releases
the field quotes, 470 to 590, except where noted) and, for messages only the proprietary module prints, verbatim field
records. The patterns match a record's `flat` text (probe.log_records: one printk, its further lines joined without
their "NVRM: " prefixes). `nv_printf` is one printk per call, so a message printed with embedded "\\nNVRM: " is one
record (/dev/kmsg escapes those newlines as \\x0a).

Each message has a phase, which decides which driver instance it belongs to (checks.gpu_health.kernel_events):
- start: the module begins to load (before any probe): nvidia.ko's NVLink core and the kernel's taint notes;
- probe: printed while the module probes the PCI devices, BEFORE its load banner (nvidia_init_module prints the banner
  last, kernel-open/nvidia/nv.c), or when a GPU is probed later (hot plug, a rescan);
- banner: "NVRM: loading NVIDIA UNIX ..." (nv.c, nvidia_init_module: `nv_printf(NV_DBG_ERRORS, "NVRM: loading %s\\n",
  pNVRM_ID)`), the end of a successful load;
- open: printed when a client first opens a GPU, after the load (rm_init_adapter runs at the first open, e.g. by
  nvidia-smi or nvidia-persistenced, not at probe) and at every later failed open;
- runtime: any time while the driver runs;
- attach: "NVRM: GPU at PCI:%04x:%02x:%02x: GPU-<uuid>" (src/nvidia/src/kernel/gpu/rc/kernel_rc.c, _krcLogUuidOnce):
  printed once per GPU object, just before its first Xid; a second one for the same GPU means the GPU was
  initialised again (a reset or a reload) after the events before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PCI = r"([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?"  # domain:bus:device[.function]


@dataclass(frozen=True)
class DriverMessage:
    """One message of the driver: what it is (`kind`), when it is printed (`phase`), its pattern and its source."""

    kind: str
    phase: str
    pattern: re.Pattern[str]
    source: str


def _m(kind: str, phase: str, pattern: str, source: str) -> DriverMessage:
    return DriverMessage(kind, phase, re.compile(pattern), source)


MESSAGES: tuple[DriverMessage, ...] = (
    _m(
        "load_start",
        "start",
        r"nvidia-nvlink: Nvlink Core is being initialized|^nvidia-nvswitch: Probing device|"
        r"^nvidia: loading out-of-tree module|^nvidia: module (?:license|verification)|^nvidia: Unknown symbol",
        "nvidia.ko's init begins with nvlink_drivers_init (kernel-open/nvidia/nv.c): nvlink_core_init prints "
        "'Nvlink Core is being initialized, major device number %d' (nvlink_linux.c), then nvswitch_init probes "
        "each NVSwitch, 'nvidia-nvswitch: Probing device %04x:%02x:%02x.%x, ...' (linux_nvswitch.c), all before "
        "the GPUs are probed; the kernel's module loader prints its taint notes before the module's init runs",
    ),
    _m(
        "load_banner",
        "banner",
        r"NVRM: loading NVIDIA UNIX",
        "kernel-open/nvidia/nv.c, nvidia_init_module: 'NVRM: loading %s' with pNVRM_ID ('NVIDIA UNIX x86_64 "
        "Kernel Module  <version>  <date>' or 'NVIDIA UNIX Open Kernel Module for x86_64  <version>  Release "
        "Build ...'), printed after every device was probed",
    ),
    _m(
        "fell_off_bus",
        "probe",
        r"NVRM: The NVIDIA GPU "
        + PCI
        + r"\s*\(PCI ID: [0-9a-fA-F:]+\) installed in this system has fallen off "
        r"the bus",
        "src/nvidia/arch/nvalloc/unix/src/osapi.c, rm_is_supported_device: one nv_printf of three lines: "
        "'NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\\nNVRM: (PCI ID: %04x:%04x) installed in this system has\\nNVRM: "
        "fallen off the bus and is not responding to commands.' (PMC_BOOT_0 and PMC_BOOT_42 read 0xFFFFFFFF)",
    ),
    _m(
        "fell_off_bus",
        "runtime",
        r"NVRM: GPU " + PCI + r": GPU has fallen off the bus",
        "src/nvidia/arch/nvalloc/unix/src/osinit.c, osHandleGpuLost: NV_DEV_PRINTF 'GPU has fallen off the "
        "bus.' beside Xid 79 (NV_DEV_PRINTF prefixes 'NVRM: GPU %04x:%02x:%02x.%x: ', os-interface.h)",
    ),
    _m(
        "fell_off_bus",
        "probe",
        r"^(?:NVRM: )?fallen off the bus and is not responding to commands",
        "the last line of osapi.c's three-line message alone: a log filtered through grep, which names no GPU",
    ),
    _m(
        "open_module_required",
        "probe",
        r"NVRM: The NVIDIA GPU "
        + PCI
        + r"\s*\(PCI ID: [0-9a-fA-F:]+\) installed in this system requires use of "
        r"the NVIDIA open kernel modules",
        "the proprietary module only (not in the open tree): its probe refuses a GPU that only the open modules "
        "drive (Blackwell and newer), worded as the field records it",
    ),
    _m(
        "not_supported",
        "probe",
        r"NVRM: The NVIDIA GPU " + PCI + r"\s*\(PCI ID: [0-9a-fA-F:]+\) installed in this system is not "
        r"supported by the",
        "osapi.c / the proprietary module's probe: a GPU this driver release does not support (a legacy GPU, or "
        "a GPU newer than the driver)",
    ),
    _m(
        "probe_failed",
        "probe",
        r"NVRM: The NVIDIA probe routine failed for (\d+) device",
        "kernel-open/nvidia/nv.c, nvidia_init_module: 'The NVIDIA probe routine failed for %d device(s).'",
    ),
    _m(
        "probe_not_called",
        "probe",
        r"NVRM: The NVIDIA probe routine was not called for (\d+) device",
        "nv.c, nvidia_init_module: 'The NVIDIA probe routine was not called for %d device(s).' (another driver, "
        "e.g. nouveau or vfio-pci, owns them)",
    ),
    _m(
        "no_devices",
        "probe",
        r"NVRM: (?:No NVIDIA devices probed|None of the NVIDIA devices were initialized|No NVIDIA GPU found)",
        "nv.c, nvidia_init_module: the load fails (-ENODEV) after these; no banner follows",
    ),
    _m(
        "bar_invalid",
        "probe",
        r"NVRM: This PCI I/O region assigned to your NVIDIA device is invalid: BAR(\d+) is (\d+)M @ (0x[0-9a-fA-F]+) "
        r"\(PCI:" + PCI + r"\)",
        "kernel-open/nvidia/nv-pci.c, nv_pci_validate_bars: one nv_printf of two lines: 'This PCI I/O region "
        "assigned to your NVIDIA device is invalid:\\nNVRM: BAR%d is %lluM @ 0x%llx (PCI:%04x:%02x:%02x.%x)'",
    ),
    _m(
        "init_failed",
        "open",
        r"NVRM: (?:GPU " + PCI + r": )?RmInitAdapter failed! \((0x[0-9a-fA-F]+):(0x[0-9a-fA-F]+):(\d+)\)",
        "src/nvidia/arch/nvalloc/unix/src/osinit.c, RmInitAdapter: NV_DEV_PRINTF 'RmInitAdapter failed! "
        "(0x%x:0x%x:%d)' (initStatus, rmStatus, source line); older drivers print it without the 'GPU "
        "<address>: ' prefix",
    ),
    _m(
        "init_failed_minor",
        "open",
        r"NVRM: (?:GPU "
        + PCI
        + r": )?rm_init_adapter failed(?:, device minor number| for device bearing minor "
        r"number) (\d+)",
        "kernel-open/nvidia/nv.c, nv_start_device: 'rm_init_adapter failed, device minor number %d' "
        "(NV_DEV_PRINTF); older drivers: 'rm_init_adapter failed for device bearing minor number %d'",
    ),
    _m(
        "gsp_timeout",
        "runtime",
        r"Timeout after (\d+)s of waiting for RPC response from GPU(\d+) GSP!",
        "src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c, _kgspLogXid119: reaches the log as Xid 119 through the Xid "
        "printer, or on its own in drivers that print it with NV_PRINTF",
    ),
    _m(
        "gsp_rate_limited",
        "runtime",
        r"NVRM: Rate limiting GSP RPC error prints for GPU at PCI:" + PCI,
        "kernel_gsp.c, _kgspRpcRecvPoll: 'Rate limiting GSP RPC error prints for GPU at PCI:%04x:%02x:%02x "
        "(printing 1 of every %d).  The GPU likely needs to be reset.'",
    ),
    _m(
        "api_mismatch",
        "runtime",
        r"NVRM: API mismatch: the client '([^']*)' \(pid (\d+)\) has the version (\S+), but this kernel module "
        r"has the version (\S+?)\.?\s",
        "src/nvidia/arch/nvalloc/unix/src/osapi.c, RmCheckVersion: one nv_printf of five lines: 'API mismatch: "
        "the client '%s' (pid %u)\\nNVRM: has the version %s, but this kernel module has\\nNVRM: the version %s.  "
        "Please make sure that this\\nNVRM: kernel module and all NVIDIA driver components\\nNVRM: have the same "
        "version.'",
    ),
    _m(
        "gpu_attach",
        "attach",
        r"NVRM: GPU at PCI:" + PCI + r": (GPU-[0-9a-fA-F-]+)",
        "src/nvidia/src/kernel/gpu/rc/kernel_rc.c, _krcLogUuidOnce: 'GPU at PCI:%04x:%02x:%02x: %s', once per "
        "GPU object, right before its first Xid",
    ),
)


def match(text: str) -> tuple[DriverMessage, re.Match[str]] | None:
    """The first driver message `text` (a record's flat text) is, with its match; None for any other text."""
    if "NVRM" not in text and "nvidia" not in text and "fallen off" not in text:
        return None
    for message in MESSAGES:
        found = message.pattern.search(text)
        if found:
            return message, found
    return None
