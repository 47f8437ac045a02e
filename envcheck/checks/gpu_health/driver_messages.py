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

PCI = r"(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?"  # domain:bus:device[.function]
INDEX = r"(?:GPU(?P<gpu_index>\d+) )?"  # NV_PRINTF's "GPU%d " (the driver's GPU instance number), when it knows the GPU


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
        "runtime",
        r"NVRM: GPU at " + PCI + r" has fallen off the bus",
        "releases before the Xid printer named the GPU (300-series and older): 'GPU at %04x:%02x:%02x.%x has "
        "fallen off the bus.'",
    ),
    _m(
        "fell_off_bus",
        "probe",
        r"^(?:NVRM: )?fallen off the bus and is not responding to commands",
        "the last line of osapi.c's three-line message alone: a log filtered through grep, which names no GPU",
    ),
    _m(
        "open_module_required",
        "open",
        r"NVRM: The NVIDIA GPU "
        + PCI
        + r"\s*\(PCI ID: [0-9a-fA-F:]+\) installed in this system requires use of "
        r"the NVIDIA open kernel modules",
        "the proprietary module only (not in the open tree): at each open of a GPU that only the open modules "
        "drive (Blackwell and newer), one record of two lines, then 'RmInitAdapter failed! (0x22:0x56:...)'; "
        "worded as the field records it",
    ),
    _m(
        "open_module_unsupported",
        "probe",
        r"NVRM: The NVIDIA GPU "
        + PCI
        + r"\s*\(PCI ID: [0-9a-fA-F:]+\) installed in this system is not supported "
        r"by open nvidia\.ko",
        "kernel-open/nvidia/nv-pci.c / osapi.c (the open module's probe of a GPU without a GSP, i.e. before Turing): "
        "'The NVIDIA GPU %04x:%02x:%02x.%x (PCI ID: %04x:%04x)\\nNVRM: installed in this system is not supported by "
        "open\\nNVRM: nvidia.ko because it does not include the required GPU\\nNVRM: System Processor (GSP).'",
    ),
    _m(
        "not_supported",
        "probe",
        r"NVRM: The NVIDIA GPU " + PCI + r"\s*\(PCI ID: [0-9a-fA-F:]+\) installed in this system is not "
        r"supported by",
        "osapi.c (rm_is_supported_device) and the proprietary module's probe: 'The NVIDIA GPU %s (PCI ID: %s)\\n"
        "NVRM: installed in this system is not supported by the\\nNVRM: NVIDIA %s driver release.' (a legacy GPU, "
        "or one newer than the driver); releases before 300 print it line by line ('... installed\\nNVRM: in this "
        "system is not supported by the 280.13 NVIDIA Linux')",
    ),
    _m(
        "legacy_gpu",
        "probe",
        r"NVRM: The NVIDIA .{0,80}GPU installed in this system.{0,10}supported through the NVIDIA (?P<branch>\S+) Legacy "
        r"drivers|driver will ignore this GPU",
        "the proprietary module's probe, once a driver branch has dropped a GPU generation: 'The NVIDIA <model> GPU "
        "installed in this system is supported through the NVIDIA <branch> Legacy drivers. ... The <version> NVIDIA "
        "driver will ignore this GPU.  Continuing probe...' (names the model, not the PCI address)",
    ),
    _m(
        "legacy_gpu",
        "probe",
        r"NVRM: ignoring the legacy GPU " + PCI,
        "kernel-open/nvidia/nv-pci.c, nv_pci_probe: 'ignoring the legacy GPU %04x:%02x:%02x.%x'",
    ),
    _m(
        "open_module_unsupported",
        "open",
        r"NVRM: Open nvidia\.ko is only ready for use on Data Center GPUs",
        "osinit.c, 515 to 535.288.01 only: the open module refused a GPU that is not a data-center one (unless "
        "NVreg_OpenRmEnableUnsupportedGpus=1), then 'RmInitAdapter failed!'",
    ),
    _m(
        "no_power",
        "open",
        r"NVRM: GPU " + PCI + r": GPU does not have the necessary power cables connected",
        "src/nvidia/arch/nvalloc/unix/src/osinit.c, RmInitAdapter: NV_DEV_PRINTF 'GPU does not have the "
        "necessary power cables connected.'",
    ),
    _m(
        "firmware_missing",
        "open",
        r"NVRM:? " + INDEX + r"\w+: No firmware image found",
        "osinit.c, RmFetchGspRmImages: NV_PRINTF 'No firmware image found' (the driver's gsp_*.bin is missing; "
        "the kernel's firmware loader logs its own line before it)",
    ),
    _m(
        "excluded",
        "open",
        r"NVRM: GPU " + PCI + r": open\(\) not permitted for excluded GPU",
        "kernel-open/nvidia/nv.c, nv_open_device: an administrator excluded the GPU (NVreg_ExcludedGpus)",
    ),
    _m(
        "vfio_bound",
        "probe",
        r"NVRM: GPU " + PCI + r" is already bound to vfio-pci",
        "kernel-open/nvidia/nv-pci.c, nv_pci_probe: a GPU held for a virtual machine (passthrough), deliberately "
        "not this driver's",
    ),
    _m(
        "probe_error",
        "probe",
        r"^nvidia: probe of " + PCI + r" failed with error",
        "the kernel's driver core (drivers/base/dd.c, really_probe): '%s: probe of %s failed with error %d'",
    ),
    _m(
        "probe_error",
        "probe",
        r"^nvidia " + PCI + r": probe with driver nvidia failed",
        "the kernel's driver core since Linux 6.2 (drivers/base/dd.c): '%s %s: probe with driver %s failed with "
        "error %d'",
    ),
    _m(
        "probe_failed",
        "probe",
        r"NVRM: The NVIDIA probe routine failed for (?P<devices>\d+) device",
        "kernel-open/nvidia/nv.c, nvidia_init_module: 'The NVIDIA probe routine failed for %d device(s).'",
    ),
    _m(
        "probe_not_called",
        "probe",
        r"NVRM: The NVIDIA probe routine was not called for (?P<devices>\d+) device",
        "nv.c, nvidia_init_module: 'The NVIDIA probe routine was not called for %d device(s).' (another driver, "
        "e.g. nouveau or vfio-pci, owns them)",
    ),
    _m(
        "no_devices",
        "probe",
        r"NVRM: (?:No NVIDIA devices probed|None of the NVIDIA devices were initialized|No NVIDIA GPU found|"
        r"None of the NVIDIA graphics adapters were initialized|No NVIDIA graphics adapter probed)",
        "nv.c, nvidia_init_module: the load fails (-ENODEV) after these; no banner follows (releases before 300 "
        "said 'None of the NVIDIA graphics adapters were initialized!' and 'No NVIDIA graphics adapter probed!')",
    ),
    _m(
        "bar_invalid",
        "probe",
        r"NVRM: This PCI I/O region assigned to your NVIDIA device is invalid: BAR(?P<bar>\d+) is (?P<size_mib>\d+)M @ 0x[0-9a-fA-F]+ "
        r"\(PCI:" + PCI + r"\)",
        "kernel-open/nvidia/nv-pci.c, nv_pci_validate_bars: one nv_printf of two lines: 'This PCI I/O region "
        "assigned to your NVIDIA device is invalid:\\nNVRM: BAR%d is %lluM @ 0x%llx (PCI:%04x:%02x:%02x.%x)'",
    ),
    _m(
        "init_failed",
        "open",
        r"NVRM: (?:GPU "
        + PCI
        + r": )?RmInitAdapter failed! \((?P<status>0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:\d+)\)",
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
        r"number) (?P<minor>\d+)",
        "kernel-open/nvidia/nv.c, nv_start_device: 'rm_init_adapter failed, device minor number %d' "
        "(NV_DEV_PRINTF); older drivers: 'rm_init_adapter failed for device bearing minor number %d'",
    ),
    _m(
        "gsp_timeout",
        "runtime",
        r"^(?!NVRM: Xid).*Timeout after (?P<seconds>\d+)s of waiting for RPC response from GPU(?P<gpu_index>\d+) GSP!",
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
        r"NVRM: API mismatch: the client (?:'(?P<client>[^']*)' \(pid (?P<pid>\d+)\) )?has the version "
        r"(?P<client_version>\S+), but this kernel module has the version (?P<kernel_version>\S+?)\.?\s",
        "src/nvidia/arch/nvalloc/unix/src/osapi.c, RmPerformVersionCheck: one nv_printf of five lines: 'API "
        "mismatch: the client '%s' (pid %u)\\nNVRM: has the version %s, but this kernel module has\\nNVRM: the "
        "version %s.  Please make sure that this\\n...'; releases before 590 name no client: 'API mismatch: the "
        "client has the version %s, but\\nNVRM: this kernel module has the version %s.  Please ...'",
    ),
    _m(
        "gsp_boot",
        "open",
        r"NVRM: "
        + INDEX
        + r"\w+: (?:Cannot initialize GSP firmware RM|GSP-FMC reported an error while attempting "
        r"to boot GSP|Max GSP-RM boot attempts exceeded|unexpected WPR2 already up|Error preparing GSP-RM image|"
        r"Failed to boot GSP|failed to execute (?:Booter|FWSEC))",
        "osinit.c, RmInitAdapter: NV_PRINTF 'Cannot initialize GSP firmware RM' when kgspInitRm fails; "
        "src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c and arch/*: the boot steps' NV_PRINTF errors. NV_PRINTF "
        "writes 'NVRM <function>: ' (515 to 545), 'NVRM: <function>: ' (535.146, 550 to 580), 'NVRM: GPU%d "
        "<function>: ' (590 on, when it knows the GPU: its instance number, given at first open, not its minor)",
    ),
    _m(
        "gsp_heartbeat",
        "runtime",
        r"NVRM:? " + INDEX + r"\w+: Heartbeat timed out",
        "kernel_gsp.c, _kgspIsHeartbeatTimedOut: NV_PRINTF 'Heartbeat timed out, currentTimeMs %u heartbeat %u ...'",
    ),
    _m(
        "gsp_timeout",
        "runtime",
        r"NVRM:? " + INDEX + r"_kgspLogRpcTimeout: \*+ GSP Timeout",
        "kernel_gsp.c, _kgspLogRpcTimeout: the banner of an RPC timeout logged without an Xid",
    ),
    _m(
        "sxid",
        "runtime",
        r"nvidia-nvswitch\d+: SXid \(PCI:" + PCI + r"\): (?P<sxid>\d+), (?P<detail>.*)",
        "src/common/nvswitch/kernel/inc/common_nvswitch.h, NVSWITCH_PRINT_SXID: 'nvidia-%s: SXid (PCI:%04x:%02x:"
        "%02x.%x): %05d, <text>'; the text is 'Fatal, ...', 'Non-fatal, ...', 'Severity %d Engine instance ...' "
        "(severity 1 is NVSWITCH_ERROR_SEVERITY_FATAL, ctrl_dev_nvswitch.h) or 'Data {...}'",
    ),
    _m(
        "gpu_attach",
        "attach",
        r"NVRM: GPU at PCI:" + PCI + r": GPU-[0-9a-fA-F-]+",
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
