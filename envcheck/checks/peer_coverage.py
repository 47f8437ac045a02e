"""What other GPU health checkers cover, signal by signal, beside what envcheck reads and judges: leptonai/gpud's
components (v0.13.0-alpha.4, commit 4a8de33a) and DCGM's health-watch systems (DCGM 4.6.0, modules/health/
DcgmHealthWatch.cpp). The peers' columns are data read from their sources; envcheck's column is derived from the
declared evidence (envcheck.checks.check_registry.EVIDENCE): a row is "judged" when it names finding codes envcheck's sources lead
to, "read" when it names only sources read to qualify other findings, "not" otherwise, with why not. The evidence
map (docs/reference/evidence.md) renders these rows; a test holds every code and key named here to the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

GPUD = "leptonai/gpud"
DCGM_HEALTH = "DCGM health watches"


@dataclass(frozen=True)
class PeerRow:
    """One signal of a peer: what it reads and concludes, and envcheck's codes (judged) or source keys (read) for
    the same signal, or why envcheck does not read it."""

    peer: str
    signal: str
    they_read: str
    they_judge: str
    codes: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    why_not: str = ""

    @property
    def status(self) -> str:
        """'judged', 'read' or 'not'."""
        return "judged" if self.codes else "read" if self.reads else "not"


_NO_WINDOW = (
    "needs a rate over a window (a minute or more); a one-shot check has none, DCGM's watch judges it"
)

GPUD_ROWS: tuple[PeerRow, ...] = (
    PeerRow(
        GPUD,
        "accelerator-nvidia-error-xid",
        "/dev/kmsg Xid lines; 144-150 decoded by the sheet's fields",
        "Fatal Xids unhealthy, escalation after 2 reboots",
        codes=("xid.<xid>", "xid.<xid>.repeated", "xid.<xid>.undecoded"),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-error-sxid",
        "/dev/kmsg SXid lines",
        "by SXid number only (the line's tag not read)",
        codes=("nvswitch.fatal", "nvswitch.reset_required", "nvswitch.warning"),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-fabric-manager",
        "NVML fabric info; nv-fabricmanager binary, TCP port 6666; its log",
        "state, status, summary, 4 mask bits (not incorrect configuration); FM 'active' = port open",
        codes=(
            "gpu.fabric_not_started",
            "gpu.fabric_in_progress",
            "gpu.fabric_failed",
            "gpu.fabric_degraded",
        ),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-nvlink",
        "NVML link state for links up to NVLINK_MAX_LINKS, DL counters, P2P status per pair; post-Rx-detect kmsg",
        "no GPU with all links up, no P2P pair; counters are metrics only",
        codes=("gpu.nvlink_down", "gpu.nvlink_errors", "nvlink.training_failed"),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-remapped-rows",
        "NVML remapped rows",
        "pending: reboot; failed: hardware inspection",
        codes=("gpu.row_remap_pending", "gpu.row_remap_failed"),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-hw-slowdown",
        "NVML clock-event reasons each minute",
        "HW slowdown in 6 of 10 minutes",
        codes=("gpu.clocks_slowdown",),
    ),
    PeerRow(GPUD, "accelerator-nvidia-clock-speed", "NVML clocks", "nothing (metrics)", reads=("slowdown",)),
    PeerRow(
        GPUD,
        "accelerator-nvidia-ecc",
        "NVML ECC counts",
        "nothing (metrics)",
        codes=("gpu.ecc_uncorrectable",),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-power",
        "NVML power usage and limit",
        "nothing (metrics)",
        why_not="a draw against its limit is not a fault by itself; power-brake slowdowns are judged (clock events)",
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-temperature",
        "NVML GPU and HBM temperature, thresholds, margin",
        "over a max threshold: degraded",
        reads=("slowdown",),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-gpu-counts",
        "NVML device count",
        "against an operator's expected count",
        codes=("gpu.lost", "node.gpu_count"),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-persistence-mode",
        "NVML persistence mode",
        "off: unhealthy",
        codes=("gpu.persistence_off",),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-processes",
        "NVML processes",
        "the query failing 3 times",
        reads=("processes",),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-memory, -utilization, -gpm",
        "NVML memory, utilization, GPM metrics",
        "nothing (metrics)",
        reads=("processes",),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-peermem",
        "lsmod for nvidia_peermem; kmsg 'invalid context'",
        "always healthy",
        reads=("modules",),
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-nccl",
        "kmsg segfaults in libnccl.so",
        "events only",
        why_not="a job's crash is the job's; envcheck runs NCCL itself (dist.* checks) instead",
    ),
    PeerRow(
        GPUD,
        "accelerator-nvidia-infiniband",
        "/sys/class/infiniband ports, rates; mlx5 kmsg",
        "ports below an operator's threshold, drops, flaps",
        why_not="the network fabric is the cross-node checks' (envcheck.distributed); the node path judges GPUs",
    ),
    PeerRow(
        GPUD,
        "kernel-module",
        "/etc/modules (the boot-time list, not the kernel's)",
        "configured modules missing from that file",
        reads=("modules",),
    ),
    PeerRow(
        GPUD,
        "library, fuse, pci (ACS), containerd, docker, cpu, memory, disk, os, nfs, network-latency",
        "files, services, sysfs",
        "service inactive, resources over thresholds",
        why_not="host services and resources outside the GPU stack; envcheck's container and runtime checks "
        "cover what a job needs of them",
    ),
)

DCGM_ROWS: tuple[PeerRow, ...] = (
    PeerRow(
        DCGM_HEALTH,
        "PCIe (0x1)",
        "PCIe replay counter; link generation and width only to scale its limit",
        "replays per minute over ceil(rate x lanes) for the generation: WARN",
        why_not=f"envcheck reads no replay counter: {_NO_WINDOW}; a link below its maximum width or generation "
        "is judged instead (gpu.pcie_degraded), a signal DCGM's PCIe watch does not judge",
    ),
    PeerRow(
        DCGM_HEALTH,
        "NVLink (0x2)",
        "DL and NVLink5 counters, link state, fabric health mask and FM status, IMEX",
        "errors in the last minute, a link down, fabric mask bits, FM not started: FAIL",
        codes=("gpu.nvlink_down", "gpu.nvlink_errors", "gpu.fabric_degraded", "gpu.fabric_not_started"),
    ),
    PeerRow(
        DCGM_HEALTH,
        "PMU (0x4)",
        "nothing",
        "no rule at any version",
        why_not="DCGM has no rule for it either",
    ),
    PeerRow(
        DCGM_HEALTH,
        "MCU (0x8)",
        "nothing",
        "no rule at any version",
        why_not="DCGM has no rule for it either",
    ),
    PeerRow(
        DCGM_HEALTH,
        "Memory (0x10)",
        "volatile DBE, retired pages, pending retirement, row remap failure, unrepairable flag, Xids",
        "DBE, remap failure, retired-page limits: FAIL; pending retirement: WARN",
        codes=("gpu.ecc_uncorrectable", "gpu.retirement_pending", "gpu.row_remap_failed"),
    ),
    PeerRow(
        DCGM_HEALTH,
        "SM (0x20)",
        "nothing",
        "no rule at any version",
        why_not="DCGM has no rule for it either",
    ),
    PeerRow(
        DCGM_HEALTH,
        "InfoROM (0x40)",
        "InfoROM validity, hourly",
        "invalid: WARN",
        codes=("gpu.inforom_corrupt",),
    ),
    PeerRow(
        DCGM_HEALTH,
        "Thermal (0x80)",
        "thermal violation time",
        "violation time grew in the last minute: WARN",
        codes=("gpu.clocks_slowdown",),
    ),
    PeerRow(
        DCGM_HEALTH,
        "Power (0x100)",
        "power violation time (NVML field 74: the SW power cap's), board power",
        "violation time grew: WARN; power unreadable: WARN",
        reads=("slowdown",),
        why_not="the SW power cap is read with the clock-event reasons but never judged: nvml.h, clocks "
        "'optimized to ensure not to exceed currently set power limits' (policy; a busy GPU at its limit is "
        "healthy); envcheck judges the HW power brake (bit 0x80, field 271) instead, which this watch does not",
    ),
    PeerRow(
        DCGM_HEALTH,
        "Driver (0x200)",
        "NVML's GPU recovery action",
        "reset, reboot, drain and reset: FAIL; drain P2P: WARN",
        codes=("gpu.recovery_action",),
    ),
    PeerRow(
        DCGM_HEALTH,
        "NVSwitch non-fatal (0x400)",
        "SXid non-fatal counts on switch entities",
        "WARN",
        codes=("nvswitch.warning",),
    ),
    PeerRow(
        DCGM_HEALTH,
        "NVSwitch fatal (0x800)",
        "SXid fatal counts, switch links down",
        "FAIL",
        codes=("nvswitch.fatal",),
    ),
    PeerRow(
        DCGM_HEALTH,
        "ConnectX (0x1000)",
        "ConnectX health and uncorrectable error status",
        "not OK: WARN; fatal bits: FAIL",
        why_not="network adapters are the cross-node checks' (envcheck.distributed); the node path judges GPUs",
    ),
)
