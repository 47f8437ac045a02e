"""What envcheck reads of the kernel log, declared for the evidence map: one Source per catalogue or message class of
the NVIDIA driver (the codes each can lead to, the field source of its rule, its tests), and coverage rows, one per
number of NVIDIA's Xid and SXid catalogues, saying how envcheck judges each. Pure data and functions: the map is
rendered elsewhere (docs/reference/evidence.md)."""

from __future__ import annotations

from typing import NamedTuple

from envcheck.checks.gpu_health import driver_causes as causes
from envcheck.checks.gpu_health import node, nvml_down, reset_messages, sxid
from envcheck.checks.gpu_health.nvlink5 import NVLINK5
from envcheck.checks.gpu_health.sxid_catalog import SXIDS
from envcheck.checks.gpu_health.xid import ESCALATING, XID_CATALOG, meaning_of
from envcheck.checks.gpu_health.xid_catalog import CATALOG, SOURCE, UNUSED, XID_154_LINKED
from envcheck.core.evidence import Kind, Source

_CORPUS = "tests/checks/gpu_health/test_field_corpus.py"
_EVENTS = "tests/checks/gpu_health/test_kernel_events.py"
_CONTEXTS = "tests/cluster/test_shared_nodes.py"

LOG_SOURCES: tuple[Source, ...] = (
    Source(
        "NVIDIA Xid catalogue",
        Kind.KERNEL_LOG,
        "'NVRM: Xid (PCI:...): N, ...' records in every log form: the Xid, its GPU (and MIG instance), the Xid that "
        "caused it; judged by the catalogue row's resolution buckets (or envcheck's curated meaning), application "
        "Xids escalated when they repeat on one GPU within a window",
        ("xid.<xid>", "xid.<xid>.repeated"),
        f"{SOURCE} (Xid-Catalog.xlsx, sheets 'Xids' and 'Resolution Buckets'); the Xid printer, "
        "src/nvidia/src/kernel/gpu/rc/kernel_rc.c",
        (_EVENTS, _CORPUS, "tests/checks/gpu_health/test_xid_catalogue.py"),
        key="xid",
    ),
    Source(
        "NVIDIA Xid 144-150 Decode sheet",
        Kind.KERNEL_LOG,
        "an NVLink5 Xid's own fields: unit, Fatal/Nonfatal, XC, injected, link, IntrInfo, errorStatus, matched to "
        "the sheet's V1 (< R575) or V2 IntrInfo masks; the row's bucket is the verdict; without fields or a "
        "matching row, the driver's Xid 154 on that GPU, else a warning",
        ("xid.<xid>", "xid.<xid>.undecoded"),
        "Xid-Catalog.xlsx sheet 'Xid 144-150 Decode' (checks.gpu_health.nvlink5_sheet); the record format "
        "NVLINK_MSE_LEGACY_XID_MESSAGE_FMT; field records from leptonai/gpud and NVIDIA/NVSentinel",
        ("tests/checks/gpu_health/test_nvlink5.py", _CORPUS, _CONTEXTS),
        key="144-150 Decode",
    ),
    Source(
        "Xid 154 (the driver's recovery action)",
        Kind.KERNEL_LOG,
        "'GPU recovery action changed from 0x%x (%s) to 0x%x (%s)': the GPU's last action, by its code (the label "
        "differs between releases: 'PF FLR', 'OS Reboot'); None: nothing left to do",
        ("xid.154",),
        "src/nvidia/src/kernel/gpu/gpu.c (_gpuRefreshRecoveryActionInLock, _gpuRecoveryActionName); "
        "ctrl2080gpu.h NV2080_CTRL_GPU_RECOVERY_ACTION_*",
        (_EVENTS, "tests/checks/gpu_health/test_nvlink5.py", _CORPUS),
        key="recovery action",
    ),
    Source(
        "NVIDIA SXid catalogue (NVSwitch)",
        Kind.KERNEL_LOG,
        "'nvidia-nvswitchN: SXid (PCI:...): NNNNN, ...' lines of one SXid together: the line's own tag (Fatal, "
        "Non-fatal, Correctable, Severity N), else the Fabric Manager guide's class, else the driver's tag for the "
        "number, else its free text (SOE halted, ALI training failure, thermal shutdown, firmware recovery mode)",
        (causes.NVSWITCH_FATAL, sxid.NVSWITCH_RESET, sxid.NVSWITCH_WARNING),
        "Fabric Manager user guide DU-09883-001 v1.3 SXid tables (via leptonai/gpud sxid.go); "
        "src/common/nvswitch (595.45.04): ctrl_dev_nvswitch.h, intr_nvswitch.h, error_nvswitch.c",
        ("tests/checks/gpu_health/test_sxid.py", _CORPUS, _CONTEXTS),
    ),
    Source(
        "the driver's load and probe messages",
        Kind.KERNEL_LOG,
        "the NVLink core's start, the load banner, a GPU refused at probe (unsupported, the wrong module flavour, "
        "an invalid BAR, fallen off the bus), the probe's counts; which load they belong to",
        (
            node.FELL_OFF_BUS,
            causes.UNSUPPORTED,
            causes.PROPRIETARY_MODULE,
            causes.BAR_INVALID,
            causes.PROBE_FAILED,
            causes.CLAIMED,
            causes.LOAD_FAILED,
        ),
        "kernel-open/nvidia/nv.c, nv-pci.c; src/nvidia/arch/nvalloc/unix/src/osapi.c (checks.gpu_health."
        "driver_messages)",
        (_EVENTS, _CORPUS, _CONTEXTS),
        key="probe",
    ),
    Source(
        "the driver's open and runtime messages",
        Kind.KERNEL_LOG,
        "RmInitAdapter failures and their causes (GSP boot, GFW boot, firmware, power, the open-module "
        "requirement), GSP timeouts and heartbeats, API mismatches, a GPU's UUID line (a new GPU object)",
        (
            causes.INIT_FAILED,
            causes.GSP_BOOT,
            causes.FIRMWARE_MISSING,
            causes.POWER,
            causes.OPEN_MODULE,
            causes.GSP_TIMEOUT,
            nvml_down.API_MISMATCH,
            nvml_down.FOREIGN_CLIENT,
        ),
        "src/nvidia/arch/nvalloc/unix/src/osinit.c, osapi.c; src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c "
        "(checks.gpu_health.runtime_messages)",
        (_EVENTS, _CORPUS, _CONTEXTS),
        key="RmInitAdapter",
    ),
    Source(
        "reset-required assertions",
        Kind.KERNEL_LOG,
        "'GPU marked for reset' (575-590 and 595 wordings), NV_ERR_RESET_REQUIRED, a failed reset mark, the PMU "
        "halted, the RC watchdog's 'GPU is probably locked', Xid 94/95's 'RST: Yes' / 'D-RST: Yes'",
        (reset_messages.RESET_REQUIRED, "xid.94", "xid.95"),
        "kernel_gsp.c (_kgspHandleFatalTimeout, _kgspRpcGspEventPmuHalted), nvassert.c, nvstatuscodes.h, "
        "kernel_rc_watchdog_callback.c, kern_gpu_error_cont_ga100.c (_gpuGenerateErrorLog); field records "
        "NVIDIA/open-gpu-kernel-modules#1045, #1118",
        ("tests/checks/gpu_health/test_reset_messages.py", _CORPUS, _CONTEXTS),
        key="PMU has halted",
    ),
    Source(
        "NVLink discovery and training failures",
        Kind.KERNEL_LOG,
        "post-RxDet link-mask failures, receiver-detect and ALI pre-training errors, Xid 74 'Failed to train link "
        "N to remote PCI:...', Xid 136 per-link and link-mask forms, 'Fabric Probe failed: 0x%x'",
        (reset_messages.NVLINK_TRAINING, reset_messages.FABRIC_PROBE, "xid.74", "xid.136"),
        "src/nvidia/src/kernel/gpu/nvlink (kernel_nvlink.c, kernel_nvlinkcorelibtrain.c, arch/hopper, "
        "arch/blackwell), gpu_fabric_probe.c; field records leptonai/gpud nvlink/kmsg_test.go",
        ("tests/checks/gpu_health/test_reset_messages.py", _CORPUS, _CONTEXTS),
        key="postRxDetLinkMask",
    ),
)

# Xids the driver defines beyond the catalogue (src/common/sdk/nvidia/inc/nverror.h at 595.45.04).
DRIVER_ONLY = {
    173: "C2C_FATAL_LINK_FAILURE",
    174: "ROBUST_CHANNEL_RESETCHANNEL_KILL_PROCESS_SILENT",
    175: "MEMORY_SUBSYSTEM_ERROR",
    176: "PCIE_CORRECTABLE_ERROR_FAULT",
}


class CoverageRow(NamedTuple):
    """One number of a catalogue: NVIDIA's name, NVIDIA's class or resolution bucket, and envcheck's verdict."""

    number: int
    name: str
    nvidia: str
    verdict: str

    @property
    def how(self) -> str:
        """envcheck's verdict, as the evidence map's 'how' column."""
        return self.verdict

    @property
    def status(self) -> str:
        """'judged' (a finding can drain or warn), 'read' (the application's: never a node finding) or 'not'."""
        if self.verdict.startswith("read"):
            return "read"
        return "not" if self.verdict.startswith("not judged") else "judged"


def _verdict(rank: int | None) -> str:
    if rank is None:
        return "not judged"
    return "drains (a node FAIL)" if rank <= 1 else "warns (a node WARN)"


def xid_coverage() -> list[CoverageRow]:
    """One row per Xid of NVIDIA's catalogue (1-172) and of the driver beyond it (173-176): (number, NVIDIA's name,
    NVIDIA's buckets (immediate / investigatory), envcheck's verdict)."""
    rows = []
    for xid in range(1, 177):
        if xid in CATALOG:
            name, _, now, later = CATALOG[xid]
            bucket = (
                f"{now} / {later or '(no investigatory bucket)'}"
                if now
                else "no bucket (catalogue rows 163-173 leave it empty)"
            )
        elif xid in UNUSED:
            name, bucket = "unused", "Unused (deprecated, or Volta and older)"
        else:
            name, bucket = DRIVER_ONLY.get(xid, "?"), "not in the catalogue (the driver's nverror.h only)"
        rank = meaning_of(xid).rank
        if xid in NVLINK5:
            verdict = (
                "decoded per the sheet's row: RESET_GPU drains, IGNORE and XID_154_EVAL do not; no fields or no "
                "row: the driver's Xid 154, else warns"
            )
        elif xid == 154:
            verdict = (
                "the driver's recovery action: a reset, a reboot or a P2P drain drains; IMEX recovery warns"
            )
        elif xid in ESCALATING:
            verdict = (
                "read: the application's; repeating on one GPU within a window: warn (NVIDIA's workflow)"
            )
        elif rank is None:
            label = CATALOG[xid][2] if xid in CATALOG else ""
            verdict = (
                "read: the application's"
                if label in ("RESTART_APP", "WORKFLOW_XID_45") or xid in XID_CATALOG
                else f"not judged: NVIDIA says {label}"
                if label
                else "not judged: no NVIDIA bucket, and the event is a capability coming back"
            )
        else:
            verdict = _verdict(rank)
            if xid in CATALOG and not CATALOG[xid][2]:
                verdict += ", no NVIDIA bucket: never a drain"
        if xid in (94, 95):
            verdict += "; 'RST: Yes' or 'D-RST: Yes' in the record drains"
        if xid in (74, 136):
            verdict += "; names the link(s) that did not train"
        if xid in XID_154_LINKED:
            verdict += "; followed by Xid 154 from R565"
        rows.append(CoverageRow(xid, name, bucket, verdict))
    return rows


_SAID = {"fatal": "drains", "reset": "drains (reset every GPU and NVSwitch)", "warn": "warns"}


def _sxid_words(number: int, tags: set[str]) -> str:
    judged = sxid.judge(number, tags, "")
    return _SAID[judged.verdict] if judged else "no finding"


def sxid_coverage() -> list[CoverageRow]:
    """One row per SXid of the driver's list: (number, NVIDIA's name, NVIDIA's class (the Fabric Manager guide's, and
    the driver's tag), envcheck's verdict by what the line carries)."""
    rows = []
    for number, row in sorted(SXIDS.items()):
        name = row.fm_name or row.name
        cls = "; ".join(
            part
            for part in (
                f"FM guide: {row.fm_class}" if row.fm_class else "",
                f"driver: {row.driver_tag}" if row.driver_tag else "",
                "free text" if row.free_text else "",
            )
            if part
        )
        verdict = (
            f"tagged Fatal or Severity 1: drains; tagged Non-fatal: {_sxid_words(number, {'Non-fatal'})}; "
            f"untagged: {_sxid_words(number, set())}"
        )
        rows.append(CoverageRow(number, name, cls or "not classed by NVIDIA", verdict))
    return rows
