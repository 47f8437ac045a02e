"""What the NVIDIA kernel driver says in the kernel log, message by message, each pattern from the driver's own source:
the model, and the messages of a module load and of the PCI probe (runtime_messages has those printed later).

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


def message(kind: str, phase: str, pattern: str, source: str) -> DriverMessage:
    """A DriverMessage with its pattern compiled."""
    return DriverMessage(kind, phase, re.compile(pattern), source)


LOAD_AND_PROBE: tuple[DriverMessage, ...] = (
    message(
        "load_start",
        "start",
        r"nvidia-nvlink: Nvlink Core is being initialized|^nvidia-nvswitch: Probing device|"
        r"^nvidia: loading out-of-tree module|^nvidia: module (?:license|verification)|^nvidia: Unknown symbol",
        "nvidia.ko's init begins with nvlink_drivers_init (kernel-open/nvidia/nv.c): nvlink_core_init prints "
        "'Nvlink Core is being initialized, major device number %d' (nvlink_linux.c), then nvswitch_init probes "
        "each NVSwitch, 'nvidia-nvswitch: Probing device %04x:%02x:%02x.%x, ...' (linux_nvswitch.c), all before "
        "the GPUs are probed; the kernel's module loader prints its taint notes before the module's init runs",
    ),
    message(
        "load_banner",
        "banner",
        r"NVRM: loading NVIDIA UNIX",
        "kernel-open/nvidia/nv.c, nvidia_init_module: 'NVRM: loading %s' with pNVRM_ID ('NVIDIA UNIX x86_64 "
        "Kernel Module  <version>  <date>' or 'NVIDIA UNIX Open Kernel Module for x86_64  <version>  Release "
        "Build ...'), printed after every device was probed",
    ),
    message(
        "fell_off_bus",
        "probe",
        r"NVRM: The NVIDIA GPU "
        + PCI
        + r"\s*(?:\(PCI ID: [0-9a-fA-F:]+\) )?installed in this system has fallen off "
        r"the bus",
        "src/nvidia/arch/nvalloc/unix/src/osapi.c, rm_is_supported_device: one nv_printf of three lines: "
        "'NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\\nNVRM: (PCI ID: %04x:%04x) installed in this system has\\nNVRM: "
        "fallen off the bus and is not responding to commands.' (PMC_BOOT_0 and PMC_BOOT_42 read 0xFFFFFFFF)",
    ),
    message(
        "fell_off_bus",
        "probe",
        r"(?:^|NVRM: )fallen off the bus and is not responding to commands",
        "the last line of osapi.c's three-line message alone: a log filtered through grep, which names no GPU",
    ),
    message(
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
    message(
        "not_supported",
        "probe",
        r"NVRM: The NVIDIA GPU " + PCI + r"\s*\(PCI ID: [0-9a-fA-F:]+\) installed in this system is not "
        r"supported by",
        "osapi.c (rm_is_supported_device) and the proprietary module's probe: 'The NVIDIA GPU %s (PCI ID: %s)\\n"
        "NVRM: installed in this system is not supported by the\\nNVRM: NVIDIA %s driver release.' (a legacy GPU, "
        "or one newer than the driver); releases before 300 print it line by line ('... installed\\nNVRM: in this "
        "system is not supported by the 280.13 NVIDIA Linux')",
    ),
    message(
        "legacy_gpu",
        "probe",
        r"NVRM: The NVIDIA .{0,80}GPU installed in this system.{0,10}supported through the NVIDIA (?P<branch>\S+) Legacy "
        r"drivers|driver will ignore this GPU",
        "the proprietary module's probe, once a driver branch has dropped a GPU generation: 'The NVIDIA <model> GPU "
        "installed in this system is supported through the NVIDIA <branch> Legacy drivers. ... The <version> NVIDIA "
        "driver will ignore this GPU.  Continuing probe...' (names the model, not the PCI address)",
    ),
    message(
        "legacy_gpu",
        "probe",
        r"NVRM: ignoring the legacy GPU " + PCI,
        "kernel-open/nvidia/nv-pci.c, nv_pci_probe: 'ignoring the legacy GPU %04x:%02x:%02x.%x'",
    ),
    message(
        "vfio_bound",
        "probe",
        r"NVRM: GPU " + PCI + r" is already bound to vfio-pci",
        "kernel-open/nvidia/nv-pci.c, nv_pci_probe: a GPU held for a virtual machine (passthrough), deliberately "
        "not this driver's",
    ),
    message(
        "probe_error",
        "probe",
        r"^nvidia: probe of " + PCI + r" failed with error",
        "the kernel's driver core (drivers/base/dd.c, really_probe): '%s: probe of %s failed with error %d'",
    ),
    message(
        "probe_error",
        "probe",
        r"^nvidia " + PCI + r": probe with driver nvidia failed",
        "the kernel's driver core since Linux 6.2 (drivers/base/dd.c): '%s %s: probe with driver %s failed with "
        "error %d'",
    ),
    message(
        "probe_failed",
        "probe",
        r"NVRM: The NVIDIA probe routine failed for (?P<devices>\d+) device",
        "kernel-open/nvidia/nv.c, nvidia_init_module: 'The NVIDIA probe routine failed for %d device(s).'",
    ),
    message(
        "probe_not_called",
        "probe",
        r"NVRM: The NVIDIA probe routine was not called for (?P<devices>\d+) device",
        "nv.c, nvidia_init_module: 'The NVIDIA probe routine was not called for %d device(s).' (another driver, "
        "e.g. nouveau or vfio-pci, owns them)",
    ),
    message(
        "no_devices",
        "probe",
        r"NVRM: (?:No NVIDIA devices probed|None of the NVIDIA devices were initialized|No NVIDIA GPU found|"
        r"None of the NVIDIA graphics adapters were initialized|No NVIDIA graphics adapter probed)",
        "nv.c, nvidia_init_module: the load fails (-ENODEV) after these; no banner follows (releases before 300 "
        "said 'None of the NVIDIA graphics adapters were initialized!' and 'No NVIDIA graphics adapter probed!')",
    ),
    message(
        "bar_invalid",
        "probe",
        r"NVRM: This PCI I/O region assigned to your NVIDIA device is invalid: BAR(?P<bar>\d+) is (?P<size_mib>\d+)M @ 0x[0-9a-fA-F]+ "
        r"\(PCI:" + PCI + r"\)",
        "kernel-open/nvidia/nv-pci.c, nv_pci_validate_bars: one nv_printf of two lines: 'This PCI I/O region "
        "assigned to your NVIDIA device is invalid:\\nNVRM: BAR%d is %lluM @ 0x%llx (PCI:%04x:%02x:%02x.%x)'",
    ),
)
