"""NVIDIA's Xid catalogue (Ampere and newer), as data: for each Xid its mnemonic, NVIDIA's description, and the
catalogue's resolution buckets (immediate action, investigatory action), with each bucket's meaning.

Source: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (the "Xids" and "Fault Resolution
Buckets" sheets of https://docs.nvidia.com/Xid-Catalog.xlsx). Codes the catalogue marks "Unused" (deprecated, or
Volta and older) are listed in UNUSED. Xids 162-172 have no bucket in the catalogue (columns I and J of rows 163-173
are empty): their buckets are empty here too, and TRIGGER keeps the catalogue's trigger text where it has one
(checks.gpu_health.xid judges them without inventing a bucket). The buckets only the "Xid 144-150 Decode" sheet uses
are defined here from the catalogue's "Resolution Buckets" sheet (checks.gpu_health.nvlink5 decodes those Xids).

Over 300 lines: one table of NVIDIA's data, kept whole in the sheet's order so it can be compared with its source
row by row.
"""

from __future__ import annotations

SOURCE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

BUCKETS: dict[str, str] = {
    "CONTACT_SUPPORT": "contact your support organization",
    "RESTART_APP": "restart the application (no GPU reset or reboot needed)",
    "IGNORE": "no action required",
    "RESET_GPU": "reset the GPU (nvidia-smi -r -i {i}); a reboot is not needed",
    "RESTART_BM": "restart the node (bare metal)",
    "RESTART_VM": "restart the VM owning the GPU",
    "CHECK_MECHANICALS": "check the GPU's seating and power connections",
    "UPDATE_SWFW": "update firmware and software (vGPU: guest and host drivers must match)",
    "CHECK_UVM": "reset the GPU if UVM/vGPU is in use, otherwise no action",
    "XID_154": "follow the recovery action that Xid 154 names",
    "WORKFLOW_XID_45": "alone: restart the fabric manager; with other Xids: follow those",
    "WORKFLOW_XID_48": "alone: reset the GPU; with Xid 63/64: drain and reset; then run field diagnostics",
    "WORKFLOW_NVLINK_ERR": "decode the Xid's registers (NVLink); reset the GPU or reboot to clear it",
    "WORKFLOW_NVLINK5_ERR": "decode the Xid's intrInfo/errorStatus per the catalogue's Xid 144-150 sheet",
    "WORKFLOW_XID_13": "repeating on the same GPC/TPC: run DCGM diagnostics (possible hardware); alone: the app",
    "WORKFLOW_XID_31": "repeating MMU faults on the same GPU: run DCGM diagnostics (possible hardware); else the app",
    "CHECK_APP/CUDA": "the application passed bad data or methods to the GPU (see the PID in the message)",
    "INVESTIGATE_SW": "investigate the user or NVIDIA software (see the PID in the message)",
    "INVESTIGATE_SW_USER": "investigate software or a user action if unexpected",
    "INVESTIGATE_LINK_SI": "investigate the link's signal integrity (GB200 resiliency service flow)",
    "IGNORE (sympathetic)": "a sympathetic error: resolve the other errors first",
    "XID_137_FLOW": "an illegal NVLink peer access, usually the application: run it under compute-sanitizer",
    "SYMPATHETIC_REPORT_SOLO": "a sympathetic error: resolve the others first; report it if seen alone",
    "N/A": "informational: follow the other Xid's action",
    # The decode sheet's buckets ("Resolution Buckets" rows 27-34).
    "XID_154_EVAL": "if an Xid 154 is seen along with this error, take that action; if not, restart the application",
    "CHECK_NVLINK_FAILURE_FLOW": "if a link went down in the partition within the last 30 seconds, a by-product of "
    "that: investigate it; if not, report the issue",
    "REPORT_ISSUE (if seen >1 per day)": "report the issue if it is seen more than once a day",
    "INVESTIGATE_SW_USER_LINK_SI": "investigate software or a user action if unexpected; then the link's signal "
    "integrity",
    "INVESTIGATE_PEER_DEVICE": "the peer device took the link down (peer reset, sleep, disable, thermal or force "
    "event): investigate the peer",
    "INVESTIGATE_HOST": "check other logs: likely a secondary indicator of an action or fault (possibly out of band)",
    "INVESTIGATE_LINK_SI_AND_CABLES": "a cable, temperature, transceiver or seating fault: check the link's signal "
    "integrity and cables (GB200 resiliency service flow)",
    "INVESTIGATE_SW/USER": "investigate software or a user action if unexpected",
}

# code: (mnemonic, NVIDIA's description, immediate bucket, investigatory bucket)
CATALOG: dict[int, tuple[str, str, str, str]] = {
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP", "CONTACT_SUPPORT"),
    11: (
        "ROBUST_CHANNEL_GR_ERROR_MISSING_HW",
        "Invalid or corrupted push buffer stream",
        "RESTART_APP",
        "CHECK_APP/CUDA",
    ),
    13: (
        "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
        "Graphics Engine Exception",
        "RESTART_APP",
        "WORKFLOW_XID_13",
    ),
    14: (
        "ROBUST_CHANNEL_FAKE_ERROR",
        "Unused (fake or injected error from userspace)",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    25: (
        "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY",
        "Invalid or illegal push buffer stream",
        "RESTART_APP",
        "CHECK_APP/CUDA",
    ),
    31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP", "WORKFLOW_XID_31"),
    32: (
        "ROBUST_CHANNEL_PBDMA_ERROR",
        "Invalid or corrupted push buffer stream (PCIe quality, not the app)",
        "RESTART_APP",
        "CHECK_APP/CUDA",
    ),
    37: (
        "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD",
        "Driver firmware error",
        "IGNORE",
        "CHECK_APP/CUDA",
    ),
    38: ("ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE", "CONTACT_SUPPORT"),
    **{
        n: (f"ROBUST_CHANNEL_CE{n - 39}_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT")
        for n in (39, 40, 41)
    },
    43: (
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        "GPU stopped processing (the application faulted; the GPU stays healthy)",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    44: (
        "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW",
        "Graphics Engine fault during context switch",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    45: (
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
        "Preemptive cleanup, due to previous errors",
        "WORKFLOW_XID_45",
        "WORKFLOW_XID_45",
    ),
    46: ("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU", "CONTACT_SUPPORT"),
    48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48", "WORKFLOW_XID_48"),
    54: (
        "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
        "Auxiliary power is not connected to the GPU board",
        "CHECK_MECHANICALS",
        "CONTACT_SUPPORT",
    ),
    60: ("ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP", "INVESTIGATE_SW"),
    62: ("PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU", "CONTACT_SUPPORT"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE", "IGNORE"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU", "CONTACT_SUPPORT"),
    66: (
        "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION",
        "Illegal access by driver",
        "IGNORE",
        "INVESTIGATE_SW",
    ),
    67: ("ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE", "CONTACT_SUPPORT"),
    68: ("ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    69: ("ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP", "CHECK_APP/CUDA"),
    **{
        n: (f"ROBUST_CHANNEL_CE{c}_ERROR", f"CE{c}: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT")
        for n, c in (
            (70, 3),
            (71, 4),
            (72, 5),
            (75, 6),
            (76, 7),
            (77, 8),
            (85, 9),
            (126, 10),
            (127, 11),
            (128, 12),
            (129, 13),
            (130, 14),
            (131, 15),
            (132, 16),
            (133, 17),
            (134, 18),
            (135, 19),
        )
    },
    74: ("NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
    78: ("VGPU_START_ERROR", "vGPU Start Error", "UPDATE_SWFW", "UPDATE_SWFW"),
    79: (
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        "GPU has fallen off the bus",
        "RESTART_BM",
        "CONTACT_SUPPORT",
    ),
    80: ("PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP", "CHECK_APP/CUDA"),
    **{
        n: (f"ROBUST_CHANNEL_{e}_ERROR", f"{e} Error", "RESTART_APP", "CONTACT_SUPPORT")
        for n, e in (
            (82, "NVJPG0"),
            (83, "NVDEC1"),
            (84, "NVDEC2"),
            (88, "NVDEC3"),
            (89, "NVDEC4"),
            (96, "NVDEC5"),
            (97, "NVDEC6"),
            (98, "NVDEC7"),
            (99, "NVJPG1"),
            (100, "NVJPG2"),
            (101, "NVJPG3"),
            (102, "NVJPG4"),
            (103, "NVJPG5"),
            (104, "NVJPG6"),
            (105, "NVJPG7"),
            (139, "OFA1"),
        )
    },
    86: ("ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "RESTART_APP", "CONTACT_SUPPORT"),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", "CONTACT_SUPPORT"),
    93: (
        "INFOROM_ERASE_LIMIT_EXCEEDED",
        "Non-fatal violation of provisioned InfoROM wear limit",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    94: ("ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP", "IGNORE (sympathetic)"),
    95: ("ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU", "IGNORE (sympathetic)"),
    106: ("SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "IGNORE", "IGNORE"),
    107: ("SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "IGNORE", "IGNORE"),
    108: ("NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", "IGNORE", "XID_137_FLOW"),
    109: (
        "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR",
        "Context Switch Timeout Error",
        "RESET_GPU",
        "CONTACT_SUPPORT",
    ),
    110: ("SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU", "INVESTIGATE_SW"),
    119: ("GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU", "INVESTIGATE_SW"),
    120: ("GSP_ERROR", "GSP Error", "RESET_GPU", "INVESTIGATE_SW"),
    121: (
        "C2C_ERROR",
        "C2C Error (corrected errors on the C2C NVLink to a Grace CPU)",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    136: ("ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU", "INVESTIGATE_LINK_SI"),
    137: ("NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE", "XID_137_FLOW"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU", "CONTACT_SUPPORT"),
    141: ("ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "IGNORE", "CONTACT_SUPPORT"),
    142: ("ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "CONTACT_SUPPORT", ""),  # no investigatory bucket
    143: ("GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU", "CONTACT_SUPPORT"),
    **{
        n: (f"NVLINK_{u}_ERROR", f"NVLINK: {u} Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR")
        for n, u in (
            (144, "SAW"),
            (145, "RLW"),
            (146, "TLW"),
            (147, "TREX"),
            (148, "NVLPW_CTRL"),
            (149, "NETIR"),
            (150, "MSE"),
        )
    },
    151: ("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM", "CONTACT_SUPPORT"),
    152: ("ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "IGNORE", "CONTACT_SUPPORT"),
    153: ("ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "IGNORE", "CONTACT_SUPPORT"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154", "N/A"),
    155: (
        "NVLINK_SW_DEFINED_ERROR",
        "NVLINK: SW Defined Error (an intentional link down)",
        "RESET_GPU",
        "INVESTIGATE_SW_USER",
    ),
    156: ("RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU", "IGNORE"),
    157: (
        "RESOURCE_RETIREMENT_FAILURE",
        "Resource Retirement Failure (no repair possible: the Xid may recur)",
        "IGNORE",
        "CONTACT_SUPPORT",
    ),
    158: ("GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU", "CONTACT_SUPPORT"),
    159: ("ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", "CHECK_UVM", "SYMPATHETIC_REPORT_SOLO"),
    160: ("CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "IGNORE", "INVESTIGATE_SW"),
    161: ("CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "IGNORE", "INVESTIGATE_SW"),
    # 162-172: the catalogue gives no bucket (TRIGGER has its trigger text, where there is one).
    162: ("PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", "", ""),
    163: ("PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", "", ""),
    164: ("PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", "", ""),
    165: ("PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", "", ""),
    166: (
        "NVLINK_SECURE_CRYPTO_ERR",
        "CC traffic seen prior to link properly being configured for encrypted traffic",
        "",
        "",
    ),
    167: ("PCIE_FATAL_TIMEOUT", "PCIE_FATAL_TIMEOUT", "", ""),
    168: ("REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", "", ""),
    169: ("SEC2_HALT_ERROR", "Internal micro-controller halt", "", ""),
    170: ("NVLINK_SECURE_OTHER", "Interrupt seen in CC mode", "", ""),
    171: ("UNCORRECTABLE_DRAM_ERROR", "Additional to Xid 48: details of the fault (DRAM)", "", ""),
    172: ("UNCORRECTABLE_SRAM_ERROR", "Additional to Xid 48: details of the fault (SRAM)", "", ""),
}

UNUSED: tuple[int, ...] = (
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    9,
    10,
    12,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    26,
    27,
    28,
    29,
    30,
    33,
    34,
    35,
    36,
    42,
    47,
    49,
    50,
    51,
    52,
    53,
    55,
    56,
    57,
    58,
    59,
    61,
    65,
    73,
    81,
    87,
    90,
    91,
    111,
    112,
    113,
    114,
    115,
    116,
    117,
    118,
    122,
    123,
    124,
    125,
    138,
)

# The immediate bucket decides the rank: 0 the node must be rebooted, 1 drain (the GPU needs a reset or a
# repair), 2 warn, None the application's own fault or nothing to do.
BUCKET_RANK: dict[str, int | None] = {
    "RESTART_BM": 0,
    "XID_154": 0,
    "RESET_GPU": 1,
    "WORKFLOW_XID_48": 1,
    "WORKFLOW_NVLINK_ERR": 1,
    "WORKFLOW_NVLINK5_ERR": 2,  # the number alone; each record is decoded (checks.gpu_health.nvlink5)
    "CHECK_MECHANICALS": 1,
    "RESTART_VM": 2,
    "UPDATE_SWFW": 2,
    "CHECK_UVM": 3,
    "CONTACT_SUPPORT": 3,
    "RESTART_APP": None,
    "IGNORE": None,
    "WORKFLOW_XID_45": None,
    "XID_154_EVAL": None,  # the Xid 154 the driver logs with it is judged on its own; without one: the application
}

# The catalogue's trigger text for the Xids it gives no bucket (Xids sheet, column L, rows 164-167, 169, 171).
TRIGGER: dict[int, str] = {
    163: "No GPU reset required. If power smoothing functionality is desired, the customer needs to resolve the "
    "thermal events. If disabled due to timeout, reload the driver or reset the GPU.",
    164: "Monitor power swings and expect to replace GPUs if power smoothing is desired. Power smoothing "
    "functionality will be disabled soon. Investigate if power swings are acceptable, and if not, take action.",
    165: "Replace GPUs if power swings are not acceptable, and power smoothing is desired. Power smoothing will be "
    "disabled by the driver and power swings will occur. Analyze datacenter infrastructure to ensure ability to "
    "absorb power swings.",
    166: "Applicable to CC (confidential computing) mode only.",
    168: "Should only be seen when ECC is disabled. Either ECC should be enabled (to enable row-remapping) or boot "
    "re-attempted with shifted WPR.",
    170: "Applicable to CC (confidential computing) mode only.",
}

# The catalogue's "Xid 154 linkage" (Xids sheet, column K; "Customer User Guide" row 9: "if the Code is also expected
# to trigger an Xid 154 condition representing the derived Data Center resolution"): from driver R565 (CUDA 12.7)
# unless noted, 109/143/160/161 from R570/R575, 158/159 with the Xid itself.
XID_154_LINKED: frozenset[int] = frozenset(
    (48, 62, 63, 64, 74, 79, 94, 95, 109, 110, 120, 136, 143, *range(144, 151), 155, 156, 158, 159, 160, 161)
)
