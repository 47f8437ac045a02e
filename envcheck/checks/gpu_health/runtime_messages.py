"""What the NVIDIA driver says once it is loaded: at a GPU's first open (RmInitAdapter and its causes, GSP boot), at
run time (GSP timeouts, API mismatches, NVSwitch SXids) and before a GPU's first Xid (its UUID line). Each pattern
from the driver's source or, for the proprietary module's own messages, from field records; see driver_messages for
the model and the load-time messages."""

from __future__ import annotations

from envcheck.checks.gpu_health.driver_messages import INDEX, PCI, DriverMessage, message

OPEN_AND_RUNTIME: tuple[DriverMessage, ...] = (
    message(
        "fell_off_bus",
        "runtime",
        r"NVRM: GPU " + PCI + r": GPU has fallen off the bus",
        "src/nvidia/arch/nvalloc/unix/src/osinit.c, osHandleGpuLost: NV_DEV_PRINTF 'GPU has fallen off the "
        "bus.' beside Xid 79 (NV_DEV_PRINTF prefixes 'NVRM: GPU %04x:%02x:%02x.%x: ', os-interface.h)",
    ),
    message(
        "fell_off_bus",
        "runtime",
        r"NVRM: GPU at " + PCI + r" has fallen off the bus",
        "releases before the Xid printer named the GPU (300-series and older): 'GPU at %04x:%02x:%02x.%x has "
        "fallen off the bus.'",
    ),
    message(
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
    message(
        "open_module_unsupported",
        "open",
        r"NVRM: Open nvidia\.ko is only ready for use on Data Center GPUs",
        "osinit.c, 515 to 535.288.01 only: the open module refused a GPU that is not a data-center one (unless "
        "NVreg_OpenRmEnableUnsupportedGpus=1), then 'RmInitAdapter failed!'",
    ),
    message(
        "no_power",
        "open",
        r"NVRM: GPU " + PCI + r": GPU does not have the necessary power cables connected",
        "src/nvidia/arch/nvalloc/unix/src/osinit.c, RmInitAdapter: NV_DEV_PRINTF 'GPU does not have the "
        "necessary power cables connected.'",
    ),
    message(
        "firmware_missing",
        "open",
        r"NVRM:? " + INDEX + r"\w+: No firmware image found",
        "osinit.c, RmFetchGspRmImages: NV_PRINTF 'No firmware image found' (the driver's gsp_*.bin is missing; "
        "the kernel's firmware loader logs its own line before it)",
    ),
    message(
        "excluded",
        "open",
        r"NVRM: GPU " + PCI + r": open\(\) not permitted for excluded GPU",
        "kernel-open/nvidia/nv.c, nv_open_device: an administrator excluded the GPU (NVreg_ExcludedGpus)",
    ),
    message(
        "init_failed",
        "open",
        r"NVRM: (?:GPU "
        + PCI
        + r": )?RmInitAdapter failed! \((?P<status>0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:\d+)\)",
        "src/nvidia/arch/nvalloc/unix/src/osinit.c, RmInitAdapter: NV_DEV_PRINTF 'RmInitAdapter failed! "
        "(0x%x:0x%x:%d)' (initStatus, rmStatus, source line); older drivers print it without the 'GPU "
        "<address>: ' prefix",
    ),
    message(
        "init_failed_minor",
        "open",
        r"NVRM: (?:GPU "
        + PCI
        + r": )?rm_init_adapter failed(?:, device minor number| for device bearing minor "
        r"number) (?P<minor>\d+)",
        "kernel-open/nvidia/nv.c, nv_start_device: 'rm_init_adapter failed, device minor number %d' "
        "(NV_DEV_PRINTF); older drivers: 'rm_init_adapter failed for device bearing minor number %d'",
    ),
    message(
        "gsp_timeout",
        "runtime",
        r"^(?!NVRM: Xid).*Timeout after (?P<seconds>\d+)s of waiting for RPC response from GPU(?P<gpu_index>\d+) GSP!",
        "src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c, _kgspLogXid119: reaches the log as Xid 119 through the Xid "
        "printer, or on its own in drivers that print it with NV_PRINTF",
    ),
    message(
        "gsp_rate_limited",
        "runtime",
        r"NVRM: Rate limiting GSP RPC error prints for GPU at PCI:" + PCI,
        "kernel_gsp.c, _kgspRpcRecvPoll: 'Rate limiting GSP RPC error prints for GPU at PCI:%04x:%02x:%02x "
        "(printing 1 of every %d).  The GPU likely needs to be reset.'",
    ),
    message(
        "api_mismatch",
        "runtime",
        r"NVRM: API mismatch: the client (?:'(?P<client>[^']*)' \(pid (?P<pid>\d+)\) )?has the version "
        r"(?P<client_version>\S+), but this kernel module has the version (?P<kernel_version>\S+?)\.?\s",
        "src/nvidia/arch/nvalloc/unix/src/osapi.c, RmPerformVersionCheck: one nv_printf of five lines: 'API "
        "mismatch: the client '%s' (pid %u)\\nNVRM: has the version %s, but this kernel module has\\nNVRM: the "
        "version %s.  Please make sure that this\\n...'; releases before 590 name no client: 'API mismatch: the "
        "client has the version %s, but\\nNVRM: this kernel module has the version %s.  Please ...'",
    ),
    message(
        "gsp_boot",
        "open",
        r"NVRM: "
        + INDEX
        + r"\w+: (?:Cannot initialize GSP firmware RM|cannot bootstrap (?:riscv/)?gsp|GSP-FMC reported an error while attempting "
        r"to boot GSP|Max GSP-RM boot attempts exceeded|unexpected WPR2 already up|Error preparing GSP-RM image|"
        r"Failed to boot GSP|failed to execute (?:Booter|FWSEC))",
        "osinit.c, RmInitAdapter: NV_PRINTF 'Cannot initialize GSP firmware RM' when kgspInitRm fails; "
        "src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c and arch/*: the boot steps' NV_PRINTF errors. NV_PRINTF "
        "writes 'NVRM <function>: ' (515 to 545), 'NVRM: <function>: ' (535.146, 550 to 580), 'NVRM: GPU%d "
        "<function>: ' (590 on, when it knows the GPU: its instance number, given at first open, not its minor)",
    ),
    message(
        "gsp_heartbeat",
        "runtime",
        r"NVRM:? " + INDEX + r"\w+: (?:GSP RM |LibOS )?[Hh]eartbeat timed out",
        "kernel_gsp.c, _kgspIsHeartbeatTimedOut: NV_PRINTF 'Heartbeat timed out, currentTimeMs %u heartbeat %u ...'; "
        "_kgspRpcRecvPoll: 'GSP RM heartbeat timed out', 'LibOS heartbeat timed out'",
    ),
    message(
        "gsp_timeout",
        "runtime",
        r"NVRM:? " + INDEX + r"_kgspLogRpcTimeout: \*+ GSP Timeout",
        "kernel_gsp.c, _kgspLogRpcTimeout: the banner of an RPC timeout logged without an Xid",
    ),
    message(
        "sxid",
        "runtime",
        r"nvidia-nvswitch\d+: SXid \(PCI:" + PCI + r"\): (?P<sxid>\d+), (?P<detail>.*)",
        "src/common/nvswitch/kernel/inc/common_nvswitch.h, NVSWITCH_PRINT_SXID: 'nvidia-%s: SXid (PCI:%04x:%02x:"
        "%02x.%x): %05d, <text>'; the text is 'Fatal, ...', 'Non-fatal, ...', 'Severity %d Engine instance ...' "
        "(severity 1 is NVSWITCH_ERROR_SEVERITY_FATAL, ctrl_dev_nvswitch.h) or 'Data {...}'",
    ),
    message(
        "gpu_attach",
        "attach",
        r"NVRM: GPU at PCI:" + PCI + r": GPU-[0-9a-fA-F-]+",
        "src/nvidia/src/kernel/gpu/rc/kernel_rc.c, _krcLogUuidOnce: 'GPU at PCI:%04x:%02x:%02x: %s', once per "
        "GPU object, right before its first Xid",
    ),
)
