"""gpu.health: NVML hardware state and the kernel log's Xids, as warnings naming the GPU.

What is simulated, and only that: NVML. This machine has no NVIDIA GPU or driver, so NVML cannot exist here; the
one NVML fake (tests/staging/nvml.py: a stand-in `pynvml` loaded in this process or first on a child's PYTHONPATH)
answers from a JSON state with NVML's real error codes and texts (`NOT_SUPPORTED` = 3 "Not Supported", 15 "GPU is lost", 12 "NVML
Shared Library Not Found", as nvidia-ml-py defines them). Everything else is real: the engine, the worker, the
bundle and its replay, /dev/kmsg on this host (non-blocking reads), real FIFOs, and in one test a private mount
namespace where a file holding a real Xid 79 line is bind-mounted over /dev/kmsg.

Xid lines are real ones, each cited where it was seen. Meanings follow NVIDIA's Xid catalog
(https://docs.nvidia.com/deploy/xid-errors/index.html).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envcheck.checks import gpu_health
from envcheck.checks.gpu_health.bundle_shape import validate
from envcheck.checks.gpu_health.capture import capture
from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.checks.gpu_health.xid import pci_key
from envcheck.core.errors import UsageError
from envcheck.core.result import Status
from envcheck.probe.kernel_log import read_kernel_log
from envcheck.probe.nvml_fields import NOT_SUPPORTED
from tests.checks.gpu_health.gpu_states import (
    CTX,
    NODE_FINDING,
    UUID0,
    UUID1,
    healthy_gpu,
    held,
    judge,
    state,
)
from tests.helpers import ROOT, load_report, run_cli
from tests.staging import nvml

# Real kernel log lines, where they were seen:
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151 (RTX 5080; a journalctl line)
XID79 = "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."
# https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/nvidia/debug.md
XID63 = (
    "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to "
    "activate."
)
# https://github.com/leptonai/gpud/pull/46 (dmesg --ctime)
XID13 = [
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
    "Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter",
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM "
    "Global Exception on (GPC 7, TPC 7, SM 0): Multiple Warp Errors",
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics "
    "Exception: ESR 0x57c730=0xc04000b 0x57c734=0x24 0x57c728=0x1f81fb60 0x57c72c=0x1174",
]
XID109 = (
    "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, "
    "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"
)
# https://forums.developer.nvidia.com/t/xid-62-xid-154-gsp-pmu-halt-crash-on-rtx-pro-6000-blackwell-during-llm-inference/364958
XID120 = (
    "Mar 29 15:38:59 kernel: NVRM: Xid (PCI:0000:01:00): 120, GSP kernel exception: store access page "
    "fault (cause:0xf) @ pc:0xffffffff93003d42, partition:4#0"
)
XID154 = (
    "Mar 29 15:38:59 kernel: NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) "
    "to 0x1 (GPU Reset Required)"
)
XID45 = (
    "Mar 27 17:40:36 kernel: NVRM: Xid (PCI:0000:01:00): 45, pid=12542, name=VLLM::Worker, channel 0x00000002"
)
# https://github.com/leptonai/gpud/pull/1174 (a GB200 node: PCI domain 0019)
XID149 = (
    "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 "
    "0x00000000 0x00000000 0x00000000)"
)
# https://github.com/Bumblebee-Project/Bumblebee/issues/677 (dmesg)
XID31 = "[24128.834365] NVRM: Xid (PCI:0000:01:00): 31, Ch 00000003, engmask 00000101, intr 10000000"
# A /dev/kmsg record is "prio,seq,usec since boot,flags;text" plus " KEY=value" continuation lines
# (https://www.kernel.org/doc/Documentation/ABI/testing/dev-kmsg); the text is the line of
# NVIDIA/open-gpu-kernel-modules#1151.
KMSG79 = (
    "4,1311,1843308145,-;NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n SUBSYSTEM=pci\n"
    " DEVICE=+pci:0000:2b:00.0\n"
)


def test_healthy_gpus_pass_naming_what_was_checked() -> None:
    result = judge(state(healthy_gpu(0), healthy_gpu(1)))
    assert result.status is Status.PASS and result.fault_class is None
    assert result.summary.startswith(
        "2 GPU(s) healthy by NVML (persistence mode, ECC, remapped rows, PCIe link, clock slowdowns, NVLink "
        "fabric, NVLinks, recovery action, InfoROM); kernel log: no Xid"
    )


BUSY = 0x0  # no clock event reason: the GPU is running at full clocks


@pytest.mark.parametrize(
    "changes, xid, problem, fix",
    [
        (
            {},
            [XID79.replace("0000:2b:00", "0000:3b:00")],
            "Xid 79 (GPU has fallen off the bus), 1x in the kernel log since boot: GPU has fallen off the bus.",
            "drain the node and reboot it",
        ),
        (
            {"remapped_rows": {"corrected": 0, "uncorrected": 5, "pending": False, "failure": True}},
            [],
            "row remapping failed: the GPU memory has no spare rows left",
            "drain and RMA the GPU",
        ),
        (
            {"remapped_rows": {"corrected": 0, "uncorrected": 1, "pending": True, "failure": False}},
            [],
            "a memory row remap is pending: it takes effect at the next GPU reset",
            "drain, then nvidia-smi -r -i 0",
        ),
        (
            {"retired_pages_pending": True},
            [],
            "memory pages are pending retirement",
            "nvidia-smi -q -d PAGE_RETIREMENT -i 0",
        ),
        (
            {"ecc_volatile_uncorrected": 2},
            [],
            "2 uncorrectable ECC error(s) since the driver loaded",
            "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i 0",
        ),
        (
            {"pcie_width": 8},
            [],
            "PCIe link runs at x8, below its x16 maximum",
            "lspci -vv -s 0000:3b:00.0 | grep -E 'LnkCap|LnkSta'",
        ),
        # Busy with another job's process (not idle alone is not load: envcheck's own probe wakes the link).
        (
            {
                "pcie_gen": 3,
                "clock_events": BUSY,
                "processes": [{"pid": 4242, "used_mib": 70000, "name": "python"}],
            },
            [],
            "PCIe link runs at gen 3, below its gen 5 maximum while the GPU is busy (pid 4242)",
            "nvidia-smi -q -d PCIE -i 0",
        ),
        (
            {"clock_events": 0x40 | 0x8, "temperature_c": 91, "slowdown": held(0x40 | 0x8)},
            [],
            "clocks held down by HW thermal slowdown, HW slowdown through a 1.0 s window at 91 C",
            "check cooling",
        ),
        (
            {"clock_events": 0x80 | 0x8, "slowdown": held(0x80 | 0x8)},
            [],
            "clocks held down by HW power brake slowdown, HW slowdown",
            "check the PSUs and power delivery",
        ),
        (
            {"clock_events": 0x20, "slowdown": held(0x20)},
            [],
            "clocks held down by SW thermal slowdown",
            "check cooling",
        ),
        (
            {"clock_events": 0x8, "slowdown": held(0x8)},
            [],
            "clocks held down by HW slowdown",
            "nvidia-smi -q -d PERFORMANCE -i 0",
        ),
        (
            {"persistence": False},
            [],
            "persistence mode is off",
            "sudo nvidia-smi -pm 1, or run nvidia-persistenced",
        ),
        (
            {"temperature_c": {"absent": "nvmlDeviceGetTemperature: GPU is lost"}},
            [],
            "NVML cannot read it: nvmlDeviceGetTemperature: GPU is lost",
            "nvidia-smi -r -i 0 (GPU reset) or reboot the node",
        ),
    ],
)
def test_each_finding_names_the_gpu_cause_and_fix(
    changes: dict[str, Any], xid: list[str], problem: str, fix: str
) -> None:
    result = judge(state(healthy_gpu(0, **changes), xid=xid))
    assert result.status in NODE_FINDING and result.fault_class == "node"
    assert result.summary.startswith(
        f"GPU 0 (NVIDIA H100 80GB HBM3, {UUID0}, PCI 00000000:3B:00.0): {problem}"
    ), result.summary
    assert (
        result.remediation is not None
        and result.remediation.startswith("GPU 0: ")
        and fix in result.remediation
    )


@pytest.mark.parametrize(
    "line, problem, fix",
    [
        (
            XID120.replace("0000:01:00", "0000:3b:00"),
            "Xid 120 (GSP error",
            "nvidia-smi -r -i 0 (GPU reset) or reboot",
        ),
        (
            XID154.replace("0000:01:00", "0000:3b:00"),
            "Xid 154 (the driver asks for a GPU reset: GPU Reset Required)",  # the action it changed to
            "drain, then nvidia-smi -r -i 0 (GPU reset)",
        ),
        (
            XID63.replace("0000:10:1c", "0000:3b:00"),
            "Xid 63 (ECC page retirement or row remapping recorded",
            "nvidia-smi -r -i 0 (GPU reset) when convenient",
        ),
        (
            XID109.replace("0000:cb:00", "0000:3b:00"),
            "Xid 109 (Context Switch Timeout Error, ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR)",
            "reset the GPU (nvidia-smi -r -i 0)",
        ),
    ],
)
def test_real_xid_lines_become_findings_on_their_gpu(line: str, problem: str, fix: str) -> None:
    # A driver whose NVML has no recovery-action field (before 570): the log's Xid 154 is the only word on it
    # (where NVML reads it, NVML's current action decides: tests/checks/gpu_health/test_nvml_surface.py).
    unread = {"absent": "nvmlDeviceGetFieldValues: NVML error 3"}
    result = judge(state(healthy_gpu(0, recovery_action=unread), xid=[line]))
    assert result.status in NODE_FINDING and result.fault_class == "node"
    assert result.summary.startswith(
        f"GPU 0 (NVIDIA H100 80GB HBM3, {UUID0}, PCI 00000000:3B:00.0): {problem}"
    )
    assert fix in (result.remediation or "")


def test_the_most_severe_finding_comes_first_across_gpus() -> None:
    """GPU 0's persistence mode is off, GPU 1 fell off the bus: GPU 1's Xid 79 leads, GPU 0 follows."""
    result = judge(
        state(
            healthy_gpu(0, persistence=False), healthy_gpu(1), xid=[XID79.replace("0000:2b:00", "0000:3c:00")]
        )
    )
    assert result.status is Status.FAIL and result.code == "xid.79"  # GPU 1 fell off the bus: drains
    assert result.summary.startswith(f"GPU 1 (NVIDIA H100 80GB HBM3, {UUID1}, PCI 00000000:3C:00.0): Xid 79 ")
    assert result.summary.endswith("(+1 more)")
    fixes = (result.remediation or "").split(" | ")
    assert fixes[0].startswith("GPU 1: drain the node and reboot it") and fixes[1].startswith(
        "GPU 0: sudo nvidia"
    )
    assert [f["problem"][:10] for f in result.measured["findings"]] == ["Xid 79 (GP", "persistenc"]


def test_uncorrectable_ecc_outranks_a_degraded_link_and_throttling() -> None:
    result = judge(
        state(
            healthy_gpu(0, pcie_width=4, clock_events=0x40, slowdown=held(0x40), ecc_volatile_uncorrected=1)
        )
    )
    problems = [f["problem"] for f in result.measured["findings"]]
    assert problems[0].startswith("1 uncorrectable ECC") and problems[1].startswith("PCIe link runs at x4")
    assert problems[2].startswith("clocks held down by HW thermal")


@pytest.mark.parametrize(
    "changes, why",
    [
        ({"pcie_gen": 1, "clock_events": 0x1}, "an idle GPU drops its link to gen 1 to save power"),
        (
            {"pcie_gen": 3, "clock_events": BUSY},
            "not idle with no process on it: envcheck's own CUDA probe just woke "
            "the link, it retrains up in its own time",
        ),
        (
            {
                "pcie_gen": 1,
                "clock_events": {"absent": "nvmlDeviceGetCurrentClocksEventReasons: Unknown Error"},
            },
            "idle or not is unknown: no guess",
        ),
        (
            {"clock_events": 0x1 | 0x2 | 0x4 | 0x10 | 0x100},
            "idle, application clocks, SW power cap, sync boost, display clock are normal operation",
        ),
        (
            {"ecc_aggregate_uncorrected": 3, "ecc_aggregate_corrected": 120, "ecc_volatile_corrected": 7},
            "lifetime counts and corrected errors: the memory repaired itself",
        ),
        (
            {"retired_pages_dbe": 2, "retired_pages_sbe": 1, "retired_pages_pending": False},
            "pages already retired are the repair working, nothing pending",
        ),
        (
            {"remapped_rows": {"corrected": 1, "uncorrected": 2, "pending": False, "failure": False}},
            "rows already remapped, nothing pending",
        ),
        (
            {
                "temperature_c": {"absent": "nvmlDeviceGetTemperature: Unknown Error"},
                "persistence": {"absent": "nvmlDeviceGetPersistenceMode: Insufficient Permissions"},
            },
            "a field NVML could not read is recorded, not a fault",
        ),
    ],
)
def test_no_false_warnings(changes: dict[str, Any], why: str) -> None:
    result = judge(state(healthy_gpu(0, **changes)))
    assert result.status is Status.PASS, (why, result.summary)


def test_a_consumer_gpu_without_ecc_or_row_remapping_passes_and_says_so() -> None:
    nope = {"absent": NOT_SUPPORTED}
    gpu = healthy_gpu(
        0,
        name="NVIDIA GeForce RTX 4090",
        retired_pages_pending=nope,
        remapped_rows=nope,
        **{
            k: nope
            for k in (
                "ecc_volatile_corrected",
                "ecc_volatile_uncorrected",
                "ecc_aggregate_corrected",
                "ecc_aggregate_uncorrected",
                "retired_pages_sbe",
                "retired_pages_dbe",
            )
        },
    )
    result = judge(state(gpu))
    assert result.status is Status.PASS
    assert "not supported here: ECC, remapped rows, retired pages" in result.summary


def test_application_xids_are_noted_not_blamed_on_the_node() -> None:
    """Xid 13, 31, 45 are the job's own faults (NVIDIA's catalog: RESTART_APP): the node still passes."""
    lines = [x.replace("0000:cb:00", "0000:3b:00") for x in XID13] + [
        XID31.replace("0000:01:00", "0000:3b:00"),
        XID45.replace("0000:01:00", "0000:3b:00"),
    ]
    result = judge(state(healthy_gpu(0), xid=lines))
    assert result.status is Status.PASS
    assert "Xid 13 3x, Xid 31 1x, Xid 45 1x (application errors, not the node)" in result.summary


def test_a_kernel_log_that_cannot_be_read_is_said_not_hidden() -> None:
    why = "/dev/kmsg: Permission denied (needs root or sysctl kernel.dmesg_restrict=0)"
    result = judge(state(healthy_gpu(0), log_error=why))
    assert result.status is Status.PASS and f"Xid history unknown ({why})" in result.summary


def test_a_lost_gpu_is_named_even_when_nvml_cannot_open_it() -> None:
    result = judge(state(healthy_gpu(0), {"index": 1, "error": "nvmlDeviceGetHandleByIndex: GPU is lost"}))
    assert result.status in NODE_FINDING and result.fault_class == "node"
    assert result.summary == "GPU 1: NVML cannot read it: nvmlDeviceGetHandleByIndex: GPU is lost"
    assert (result.remediation or "").startswith(
        "GPU 1: drain; nvidia-smi -r -i 1 (GPU reset) or reboot the node"
    )


def test_an_xid_on_a_gpu_nvml_no_longer_lists_is_named_by_its_pci_address() -> None:
    result = judge(state(healthy_gpu(0), xid=[XID79]))
    assert result.status is Status.FAIL and result.code == "xid.79"
    assert result.summary.startswith("PCI 0000:2b:00 (no GPU that NVML lists): Xid 79 (GPU has fallen off")
    assert "PCI 0000:2b:00: drain the node and reboot it" in (result.remediation or "")


def test_an_xid_fix_off_nvmls_list_names_the_gpu_by_pci_address() -> None:
    """nvidia-smi -i takes a PCI bus id (domain:bus:device.function) where no index is known."""
    result = judge(state(healthy_gpu(0), xid=[XID120]))
    assert (result.remediation or "").startswith(
        "PCI 0000:01:00: drain; nvidia-smi -r -i 0000:01:00.0 (GPU reset)"
    )


@pytest.mark.parametrize(
    "nvml_error",
    [
        "NVML bindings not installed (pip install nvidia-ml-py)",
        "NVML could not start: NVML Shared Library Not Found (no NVIDIA driver here, or libnvidia-ml.so.1 is not "
        "mounted into the container)",
        "NVML could not start: Driver Not Loaded (the nvidia kernel module is not loaded)",
    ],
)
def test_without_nvml_the_check_skips_with_the_reason(nvml_error: str) -> None:
    result = judge(state(nvml_error=nvml_error))
    assert (
        result.status is Status.SKIP and result.reason == f"NVML cannot tell the GPUs' health: {nvml_error}"
    )


def test_without_nvml_an_xid_in_the_kernel_log_still_warns() -> None:
    """The driver no longer loads, but the log says why: a GPU fell off the bus."""
    result = judge(state(nvml_error="NVML could not start: Driver Not Loaded", xid=[XID79]))
    assert result.status in NODE_FINDING and result.fault_class == "node"
    assert result.summary.startswith("PCI 0000:2b:00 (no GPU that NVML lists): Xid 79")
    assert result.measured["nvml_error"] == "NVML could not start: Driver Not Loaded"


@pytest.mark.parametrize(
    "data, words",
    [
        ([], "gpu_health must be an object"),
        ({"gpus": {}}, "gpu_health.gpus must be list"),
        ({"gpus": [{"name": "x"}]}, "gpu_health.gpus[0] lacks 'index'"),
        ({"gpus": [{"index": 0, "persistence": 1}]}, "gpu_health.gpus[0].persistence must be bool or dict"),
        ({"gpus": [{"index": 0, "remapped_rows": {"pending": "yes"}}]}, "remapped_rows.pending must be bool"),
        ({"kernel_log": {"xid": [{"pci": "0000:3b:00"}]}}, "kernel_log.xid[0] needs 'pci' and 'xid'"),
        ({"kernel_log": {"xid": [{"pci": "0000:3b:00", "xid": "79"}]}}, "kernel_log.xid[0].xid must be int"),
    ],
)
def test_malformed_sections_are_refused_in_one_line(data: Any, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        validate(data, "gpu_health")
    assert words in caught.value.message and "\n" not in caught.value.message


# ---- Xid lines and the kernel log ----------------------------------------------------------------------------


def test_real_xid_lines_parse_by_gpu_and_code() -> None:
    events = scan([XID79, XID63, *XID13, XID109, XID120, XID154, XID45, XID149, XID31])["xid"]
    got = {(e["pci"], e["xid"]): e for e in events}
    assert set(got) == {
        ("0000:2b:00", 79),
        ("0000:10:1c", 63),
        ("0000:cb:00", 13),
        ("0000:cb:00", 109),
        ("0000:01:00", 120),
        ("0000:01:00", 154),
        ("0000:01:00", 45),
        ("0019:01:00", 149),
        ("0000:01:00", 31),
    }
    assert got[("0000:cb:00", 13)]["count"] == 3  # one entry per GPU and code, counted
    assert got[("0000:2b:00", 79)]["text"] == "GPU has fallen off the bus."
    assert got[("0000:10:1c", 63)]["text"].startswith("pid=1896, Row Remapper: New row marked for remapping")
    assert [e["xid"] for e in events][-3:] == [31, 45, 13]  # application Xids sort last


def test_a_kmsg_record_gives_the_time_since_boot_and_skips_continuation_lines(tmp_path: Path) -> None:
    log = tmp_path / "kmsg"
    log.write_text("6,1310,1843300000,-;nvidia 0000:2b:00.0: enabling device\n" + KMSG79)
    lines, why = read_kernel_log(str(log))
    assert why is None and len(lines) == 4
    assert scan(lines)["xid"] == [
        {
            "pci": "0000:2b:00",
            "xid": 79,
            "count": 1,
            "bursts": 1,
            "text": "GPU has fallen off the bus.",
            "boot_s": 1843.308,
        }
    ]


@pytest.mark.parametrize(
    "nvml, log, key",
    [
        ("00000000:3B:00.0", "0000:3b:00", "0000:3b:00"),
        ("00000019:01:00.0", "0019:01:00", "0019:01:00"),
    ],
)
def test_nvml_and_kernel_pci_addresses_meet(nvml: str, log: str, key: str) -> None:
    assert pci_key(nvml) == pci_key(log) == key
    assert pci_key("not-an-address") is None


def _returns_promptly(call: Callable[[], Any], seconds: float = 5.0) -> Any:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "reading the kernel log blocked"
    return box[0]


def test_reading_never_blocks_on_a_fifo_with_a_silent_writer(tmp_path: Path) -> None:
    """A writer holds the FIFO open and writes nothing: a blocking read would wait forever; EAGAIN ends it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(writer, (XID79 + "\n").encode())
        lines, why = _returns_promptly(lambda: read_kernel_log(str(fifo)))
    finally:
        os.close(writer)
    assert lines == [XID79] and why is None


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: p / "absent", "No such file or directory"),
        (lambda p: p, "Is a directory"),
    ],
)
def test_an_unreadable_kernel_log_says_why(tmp_path: Path, make: Callable[[Path], Path], words: str) -> None:
    lines, why = read_kernel_log(str(make(tmp_path)))
    assert lines == [] and why is not None and words in why


def test_this_hosts_kmsg_is_read_without_blocking() -> None:
    """Real /dev/kmsg: everything buffered comes back at once, and the read ends at EAGAIN instead of waiting."""
    start = time.monotonic()
    lines, why = _returns_promptly(read_kernel_log)
    assert time.monotonic() - start < 3
    if os.access("/dev/kmsg", os.R_OK):
        assert why is None and lines and all(";" in line or line.startswith(" ") for line in lines[:50])
    else:
        assert why is not None and lines == []


# ---- capture through the one NVML fake (simulated NVML: no driver can exist here) -----------------------------


def nvml_gpu(index: int = 0, **changes: Any) -> dict[str, Any]:
    """A healthy H100 as the one NVML fake answers it (tests/staging/nvml.py; its keys: ecc_<counter>_<kind> with
    counter 0 volatile / 1 aggregate and kind 0 corrected / 1 uncorrected, retired_<cause> 0 SBE / 1 DBE). None: NVML
    answers Not Supported (page retirement's pending status, and the usage fields this test leaves to others)."""
    gpu = nvml.gpu(
        index,
        name="NVIDIA H100 80GB HBM3",
        uuid=UUID1 if index else UUID0,
        persistence=1,
        ecc_0_0=0,
        ecc_0_1=0,
        ecc_1_0=0,
        ecc_1_1=0,
        retired_0=[],
        retired_1=[],
        retired_pending=None,
        remapped_rows=[0, 0, 0, 0],
        pcie_gen=5,
        pcie_gen_max=5,
        pcie_width=16,
        pcie_width_max=16,
        clock_events=1,
        throttle_reasons=1,
        temperature_c=33,
        processes=None,
        memory_total_mib=None,
        compute_mode=None,
        mig=None,
    )
    gpu.update(changes)
    return gpu


NO_ECC = {f"ecc_{c}_{k}": {"nvml_error": 3} for c in (0, 1) for k in (0, 1)}


@pytest.fixture
def fake_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """install(gpus, **top) writes the one NVML fake's state and makes `import pynvml` find it (returns its dir)."""
    count = iter(range(100))

    def install(*gpus: dict[str, Any], **top: Any) -> Path:
        where = tmp_path / f"stub{next(count)}"
        nvml.install(monkeypatch, where, nvml.state(*gpus, **top))
        return where

    return install


def no_log(tmp_path: Path) -> str:
    (tmp_path / "empty-kmsg").write_text("")
    return str(tmp_path / "empty-kmsg")


def test_capture_reads_every_field_of_a_healthy_gpu(fake_nvml: Callable[..., Path], tmp_path: Path) -> None:
    fake_nvml(nvml_gpu(0))
    data = capture(no_log(tmp_path))
    assert isinstance(data.pop("access"), dict)  # what this process was given (probe.gpu_access), read live
    assert isinstance(
        data.pop("modules"), (dict, str)
    )  # this host's kernel module list (or why not), read live
    assert set(data.pop("daemons")) == {
        "nvidia-persistenced",
        "nv-hostengine",
        "nvidia-fabricmanager",
        "nvidia-imex",
    }
    absent = {"absent": NOT_SUPPORTED}
    assert data == state(healthy_gpu(0, retired_pages_pending=absent, mig=absent)) | {
        "kernel_log": {
            "source": no_log(tmp_path),
            "error": None,
            "xid": [],
            "bus": [],
            "driver": [],
            "window": {"after_seq": None, "since_s": None},
        },
        "nvml_hang": None,
        "pci_gpus": [],
        "pci_drivers": {},
        "nvswitches": [],
        "drained": {},
        "versions": {"kernel_module": None, "userspace": None},  # this machine has no NVIDIA driver
        "nvml_code": None,
    }
    assert verdict(data, CTX).status is Status.PASS


def test_capture_records_not_supported_and_per_field_errors_each_on_its_own(
    fake_nvml: Callable[..., Path], tmp_path: Path
) -> None:
    """A GeForce-like GPU: no ECC, no page retirement, no row remapping (NOT_SUPPORTED); its temperature read
    fails with Unknown Error and persistence with Insufficient Permissions. Every other field is still read."""
    consumer = nvml_gpu(
        0,
        name="NVIDIA GeForce RTX 4090",
        **NO_ECC,
        retired_0={"nvml_error": 3},
        retired_1={"nvml_error": 3},
        remapped_rows={"nvml_error": 3},
        temperature_c={"nvml_error": 999},
        persistence={"nvml_error": 4},
        fabric=None,  # no NVLink fabric, no NVLink
        nvlinks=None,
    )
    fake_nvml(consumer)
    gpu = capture(no_log(tmp_path))["gpus"][0]
    assert (
        gpu["ecc_volatile_uncorrected"]
        == gpu["remapped_rows"]
        == gpu["retired_pages_dbe"]
        == {"absent": "not supported"}
    )
    assert gpu["temperature_c"] == {"absent": "nvmlDeviceGetTemperature: Unknown Error"}
    assert gpu["persistence"] == {"absent": "nvmlDeviceGetPersistenceMode: Insufficient Permissions"}
    assert (gpu["name"], gpu["pcie_width"], gpu["clock_events"]) == ("NVIDIA GeForce RTX 4090", 16, 1)
    result = verdict(capture(no_log(tmp_path)), CTX)
    assert (
        result.status is Status.PASS
        and "not supported here: ECC, MIG, NVLink fabric, remapped rows, retired pages" in result.summary
    )


def test_capture_of_a_sick_gpu_warns_with_its_findings(
    fake_nvml: Callable[..., Path], tmp_path: Path
) -> None:
    sick = nvml_gpu(
        1,
        remapped_rows=[0, 3, 0, 1],
        persistence=0,
        ecc_0_0=4,
        ecc_0_1=2,
        ecc_1_0=9,
        ecc_1_1=3,
        pcie_width=8,
        clock_events=0x48,
        temperature_c=94,
    )
    fake_nvml(nvml_gpu(0), sick)
    result = verdict(capture(no_log(tmp_path)), CTX)
    assert result.status in NODE_FINDING and result.fault_class == "node"
    assert [f["problem"] for f in result.measured["findings"]] == [
        "row remapping failed: the GPU memory has no spare rows left for new errors",
        "2 uncorrectable ECC error(s) since the driver loaded",
        "PCIe link runs at x8, below its x16 maximum",
        "clocks held down by HW thermal slowdown, HW slowdown through a 1.0 s window at 94 C",
        "persistence mode is off: the driver tears the GPU down between clients, so every job start pays its "
        "initialisation",
    ]
    assert all(
        f["gpu"] == f"GPU 1 (NVIDIA H100 80GB HBM3, {UUID1}, PCI 00000000:3C:00.0)"
        for f in result.measured["findings"]
    )


def test_a_gpu_nvml_cannot_open_does_not_lose_the_others(
    fake_nvml: Callable[..., Path], tmp_path: Path
) -> None:
    fake_nvml(nvml_gpu(0), nvml_gpu(1, handle={"nvml_error": 15}))
    data = capture(no_log(tmp_path))
    assert data["gpus"][1] == {"index": 1, "error": "nvmlDeviceGetHandleByIndex: GPU is lost"}
    assert data["gpus"][0]["uuid"] == UUID0
    assert verdict(data, CTX).summary == "GPU 1: NVML cannot read it: nvmlDeviceGetHandleByIndex: GPU is lost"


def test_nvml_that_hangs_on_a_gpu_is_named_and_the_rest_still_comes_back(
    fake_nvml: Callable[..., Path], tmp_path: Path
) -> None:
    """NVML blocks for 3 s on GPU 1 (as it can on a GPU in a bad state); the budget is 0.5 s."""
    log = tmp_path / "kmsg"
    log.write_text(KMSG79.replace("0000:2b:00", "0000:3c:00"))
    fake_nvml(nvml_gpu(0), nvml_gpu(1, hang_s=3))
    start = time.monotonic()
    data = capture(str(log), nvml_budget_s=0.5)
    assert time.monotonic() - start < 2
    assert [g["index"] for g in data["gpus"]] == [0] and data["nvml_hung"] == 1
    assert data["kernel_log"]["xid"][0]["xid"] == 79
    result = judge(data)
    assert result.status in NODE_FINDING and result.fault_class == "node"
    assert result.summary.startswith(
        "GPU 1: NVML did not answer within 0.5 s (a GPU or the driver is hung) "
        "(reading GPU 1): a GPU in a bad state hangs NVML [NVML reads of GPU 1 did not "
        "return within 0.5 s (sleeping"
    )
    assert result.code == "nvml.hang" and result.status is Status.FAIL
    assert (result.remediation or "").startswith(
        "GPU 1: nvidia-smi -q (does it hang too?); dmesg | grep -i xid; "
        "nvidia-smi -r -i 1 (GPU reset) or reboot the node"
    )


@pytest.mark.parametrize(
    "lack, event_error",
    [
        (["nvmlDeviceGetCurrentClocksEventReasons"], None),  # nvidia-ml-py older than the rename
        ([], 13),  # bindings know the name, the driver does not: Function Not Found
    ],
)
def test_clock_events_fall_back_to_the_throttle_reasons_call(
    fake_nvml: Callable[..., Path], tmp_path: Path, lack: list[str], event_error: int | None
) -> None:
    gpu = nvml_gpu(0, throttle_reasons=0x40)
    if event_error:
        gpu["clock_events"] = {"nvml_error": event_error}
    fake_nvml(gpu, bindings_lack=lack)
    assert capture(no_log(tmp_path))["gpus"][0]["clock_events"] == 0x40


@pytest.mark.parametrize(
    "code, words",
    [
        (12, "NVML Shared Library Not Found (no NVIDIA driver here"),
        # beside NVML's word, what the kernel's own list says (this machine has no NVIDIA module)
        (9, "Driver Not Loaded (the kernel lists no nvidia module)"),
    ],
)
def test_nvml_that_cannot_start_skips_naming_why(
    fake_nvml: Callable[..., Path], tmp_path: Path, code: int, words: str
) -> None:
    fake_nvml(init={"nvml_error": code})
    data = capture(no_log(tmp_path))
    assert data["gpus"] == [] and words in data["nvml_error"]
    result = verdict(data, CTX)
    assert result.status is Status.SKIP and words in (result.reason or "")


def test_missing_bindings_skip_naming_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(
        sys.modules, "pynvml", None
    )  # `import pynvml` raises ImportError, as without the package
    result = verdict(capture(no_log(tmp_path)), CTX)
    assert result.status is Status.SKIP
    assert result.reason == (
        "NVML cannot tell the GPUs' health: NVML bindings not installed (pip install nvidia-ml-py); no NVIDIA GPU "
        "on this node's PCI bus"  # this machine's sysfs lists none
    )


def test_real_nvidia_ml_py_without_a_driver_says_the_library_is_missing(tmp_path: Path) -> None:
    """This venv has the real nvidia-ml-py and this host has no driver: the real message comes through."""
    if importlib.util.find_spec("pynvml") is None:
        pytest.skip("nvidia-ml-py is not installed in this venv")
    data = capture(no_log(tmp_path))
    assert data["nvml_error"].startswith("NVML could not start: NVML Shared Library Not Found")


# ---- the live check and the bundle, through the real CLI and engine -----------------------------------------


def test_live_check_on_this_host_skips_naming_why() -> None:
    done = run_cli("run", "--only", "gpu.health", "--json", "-")
    assert done.returncode == 0, done.stderr
    result = load_report(done.stdout)["results"][0]
    assert result["name"] == "gpu.health" and result["status"] == "skip"
    why = (
        "NVML Shared Library Not Found"
        if importlib.util.find_spec("pynvml")
        else "NVML bindings not installed (pip install nvidia-ml-py)"
    )
    assert result["reason"].startswith("NVML cannot tell the GPUs' health: ") and why in result["reason"]


def _stub_env(where: Path) -> dict[str, str]:
    # run_cli puts the tree first, the stand-in before site-packages
    return {**os.environ, "PYTHONPATH": str(nvml.STUB), "STUB_NVML_STATE": str(where / "nvml.json")}


def test_live_check_through_the_engine_warns_on_a_simulated_sick_gpu(fake_nvml: Callable[..., Path]) -> None:
    where = fake_nvml(nvml_gpu(0, pcie_gen=2, clock_events=0, processes=[{"pid": 4242, "used_mib": 8192}]))
    done = run_cli("run", "--only", "gpu.health", "--json", "-", env=_stub_env(where))
    assert done.returncode == 0, done.stderr  # a warning does not fail the run
    result = load_report(done.stdout)["results"][0]
    assert result["status"] == "warn" and result["fault_class"] == "node"
    assert result["summary"] == (
        f"GPU 0 (NVIDIA H100 80GB HBM3, {UUID0}, PCI 00000000:3B:00.0): PCIe link runs at "
        "gen 2, below its gen 5 maximum while the GPU is busy (pid 4242)"
    )


def test_an_xid_79_in_this_hosts_kernel_log_is_found_by_the_live_check(
    fake_nvml: Callable[..., Path], tmp_path: Path
) -> None:
    """In a private mount namespace, a file holding NVIDIA/open-gpu-kernel-modules#1151's real Xid 79 record
    is bind-mounted over /dev/kmsg; the simulated NVML lists the GPU at that PCI address. The live check reads
    the real path."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    log = tmp_path / "kmsg"
    log.write_text(KMSG79)
    where = fake_nvml(nvml_gpu(0, bus="0000:2b:00.0"), nvml_gpu(1))
    script = (
        f"mount --bind {log} /dev/kmsg && exec {sys.executable} -m envcheck run --only gpu.health --json -"
    )
    env = _stub_env(where)
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{nvml.STUB}"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no private mount namespace here: {done.stderr.strip()}")
    result = load_report(done.stdout)["results"][0]
    assert result["status"] == "fail" and result["code"] == "xid.79", done.stderr
    assert result["summary"] == (
        f"GPU 0 (NVIDIA H100 80GB HBM3, {UUID0}, PCI 00000000:2B:00.0): Xid 79 (GPU has "
        "fallen off the bus), 1x in the kernel log since boot: GPU has fallen off the bus."
    )
    assert result["measured"]["xid"] == [
        {
            "pci": "0000:2b:00",
            "xid": 79,
            "count": 1,
            "bursts": 1,
            "text": "GPU has fallen off the bus.",
            "boot_s": 1843.308,
        }
    ]


def _results(stdout: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in load_report(stdout)["results"]}


def test_bundle_captures_nvml_state_and_explain_replays_it(
    fake_nvml: Callable[..., Path], tmp_path: Path
) -> None:
    """`facts --bundle` on a (simulated) sick host; `explain` then gives run's gpu.health verdict, here and
    without the stub: the verdict comes from the bundle, not from this machine."""
    where = fake_nvml(nvml_gpu(0, remapped_rows=[0, 1, 1, 0], persistence=0))
    bundle = tmp_path / "bundle.json"
    start = time.monotonic()
    made = run_cli("facts", "--bundle", str(bundle), env=_stub_env(where))
    assert made.returncode == 0, made.stderr
    assert time.monotonic() - start < 30
    section = json.loads(bundle.read_text())["gpu_health"]
    assert section["gpus"][0]["remapped_rows"] == {
        "corrected": 0,
        "uncorrected": 1,
        "pending": True,
        "failure": False,
    }
    ran = _results(run_cli("run", "--only", "gpu.health", "--json", "-", env=_stub_env(where)).stdout)
    for env in (_stub_env(where), None):
        replayed = _results(run_cli("explain", str(bundle), "--json", "-", env=env).stdout)["gpu.health"]
        want = ran["gpu.health"]
        assert (
            replayed["status"],
            replayed["summary"],
            replayed["remediation"],
            replayed["fault_class"],
        ) == (want["status"], want["summary"], want["remediation"], want["fault_class"])
    assert want["summary"].startswith(
        f"GPU 0 (NVIDIA H100 80GB HBM3, {UUID0}, PCI 00000000:3B:00.0): a memory row remap is pending"
    ) and want["summary"].endswith("(+1 more)")


def test_a_hand_edited_bundle_replays_an_xid_anywhere(tmp_path: Path) -> None:
    """This host's own bundle with its gpu_health replaced by a sick one (the forum's real Xid 120 line on GPU 0):
    explain judges the bundle's contents, not this machine."""
    bundle = tmp_path / "bundle.json"
    assert run_cli("facts", "--bundle", str(bundle)).returncode == 0
    doc = json.loads(bundle.read_text())
    doc["gpu_health"] = state(healthy_gpu(0, pcie_width=8), xid=[XID120.replace("0000:01:00", "0000:3b:00")])
    bundle.write_text(json.dumps(doc))
    done = run_cli("explain", str(bundle), "--json", "-")
    result = _results(done.stdout)["gpu.health"]
    assert result["status"] == "fail" and result["summary"].endswith("partition:4#0 (+1 more)")


def test_a_malformed_gpu_health_section_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.json"
    assert run_cli("facts", "--bundle", str(bundle)).returncode == 0
    doc = json.loads(bundle.read_text())
    doc["gpu_health"]["gpus"] = [{"index": "0"}]
    bundle.write_text(json.dumps(doc))
    done = run_cli("explain", str(bundle))
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"envcheck: error: {bundle}: bundle's gpu_health.gpus[0].index must be int, got '0'"
    )


def test_the_section_is_registered_for_capture_and_replay() -> None:
    from envcheck.checks.check_registry import SECTIONS, registry

    assert gpu_health.SECTION in SECTIONS and registry()["gpu.health"].func is gpu_health.gpu_health
    assert not registry()["gpu.health"].gpu  # NVML only: no CUDA context, so it never waits for a GPU group
