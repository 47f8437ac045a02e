"""NVSwitch SXids judged per NVIDIA's SXid catalogue whatever tags their lines carry (checks.gpu_health.sxid): the
line's own tag when it has one (the more direct source), else the Fabric Manager guide's class, else the driver's tag
for the number, else its free text; the guide's non-fatal SXids that still need action get that action.

Records, verbatim as their sources print them: leptonai/gpud components/accelerator/nvidia/sxid/README.md (an HGX
incident) and sxid/kmsg.go's comment at 2acd894ad714d367f384bb3e14bb6cd84fdf4565; gpud pull request #338
(dmesg -x, ISO times); NVIDIA/nvtrust#124 (570.195.03, H100); NVIDIA's NVSentinel sxid_handler_test.go (fork
rupalis-nv/NVSentinel at 0f6073182b2544cf696a81a7b03d37136f199b9e). Lines built from the driver's format strings are
marked so: no field record of them was found. Staged: the node around the log (NVML's GPU list).
"""

from __future__ import annotations

from typing import Any

import pytest

from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.sxid import judge as judge_sxid
from envcheck.checks.gpu_health.sxid_catalog import SXIDS
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import CheckOptions, Context
from envcheck.core.result import Result, Status

HEALTH = Context(options=CheckOptions(node_path=True, cluster_mode="health"))
IN_POD = Context(options=CheckOptions(cluster_mode="preflight"))

# gpud sxid/README.md: one incident on three switches (tag lines, Severity lines, a Data line).
LTSSM = [
    "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
    "[6781753.404587] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up",
    "[6781753.404848] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine "
    "instance 00",
]
# The same README's Data line of that SXid, alone (as a log keeps it when the tag line was lost: a grep for 'Data',
# a wrapped ring buffer): no tag, the catalogue decides.
LTSSM_DATA = (
    "[6781753.406566] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x10000000, 0x10000000, 0x00000000, "
    "0x10000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}"
)
# NVIDIA/nvtrust#124: a non-fatal SXid group.
DLREQ = [
    "[   38.178720] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt",
    "[   38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine "
    "instance 00",
    "[   38.183583] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002c, 0x0000002c, 0x00000000, "
    "0x0000002c, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}",
]
# gpud pull request #338: SXid 12028 as a lone Data line; gpud sxid/kmsg.go's comment: its tagged line.
PRIV_DATA = (
    "kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data "
    "{0x000001c0, 0x00bd5c8a, 0x00000500, 0x00000064, 0x00000000, 0x40008000, 0x5a001100, 0x00000000, 0x00000000}"
)
PRIV = (
    "[111111111.111] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV "
    "error (First)"
)
# NVSentinel sxid_handler_test.go
SOURCETRACK = "[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 sourcetrack timeout error (First)"
MCTO = (
    "[123] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal, Link 46 MC TS crumbstore MCTO (First)"
)
SHORT_RATE = (
    "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate"
)
SEVERITY1 = (
    "[38889.018130] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 12033, Severity 1 Engine instance 00 Sub-engine "
    "instance 00"
)
SOE = [
    "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26008, SOE Watchdog error",
    "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED",
    "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26007, SOE EXTERR",
    "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALT data[0] = 0x               0",
]


def kmsg(*texts: str) -> list[str]:
    return [f"3,{n},{n * 1000},-;{t}" for n, t in enumerate(texts, start=1)]


def judge(lines: list[str], ctx: Context = HEALTH, given: Any = None) -> Result:
    found = scan(lines)
    data: dict[str, Any] = {
        "nvml_error": None,
        "gpus": [
            {"index": i, "name": "NVIDIA H100 80GB HBM3", "pci": f"00000000:{b}:00.0", "persistence": True}
            for i, b in enumerate(("18", "2A"))
        ],
        "pci_gpus": ["0000:18:00.0", "0000:2a:00.0"],
        "kernel_log": {
            "source": "/dev/kmsg",
            "error": None,
            **{k: found[k] for k in ("xid", "bus", "driver")},
        },
    }
    if given is not None:
        data["access"] = given
    return verdict(data, ctx)


@pytest.mark.parametrize(
    ("lines", "code"),
    [
        (LTSSM, "nvswitch.fatal"),  # tagged Fatal / Severity 1
        ([SOURCETRACK], "nvswitch.fatal"),
        ([SEVERITY1], "nvswitch.fatal"),  # Severity 1 alone: NVSWITCH_ERROR_SEVERITY_FATAL
        ([LTSSM_DATA], "nvswitch.fatal"),  # no tag: the guide lists 20034 fatal (port)
        (SOE, "nvswitch.fatal"),  # the driver's free text: the SOE halted
    ],
    ids=["tagged-fatal", "fatal-first", "severity1-only", "data-only-fatal-by-guide", "soe-halted"],
)
def test_a_fatal_sxid_drains_whatever_its_lines_carry(lines: list[str], code: str) -> None:
    result = judge(lines)
    assert result.status is Status.FAIL and result.code == code, result.summary
    assert "NVSwitch PCI" in result.summary


@pytest.mark.parametrize(
    "lines",
    [DLREQ, [MCTO], [SHORT_RATE], [DLREQ[2]]],
    ids=["nonfatal-group", "nonfatal-first", "nonfatal-gpud-added", "data-only-nonfatal-by-guide"],
)
def test_a_non_fatal_sxid_does_not_drain(lines: list[str]) -> None:
    result = judge(lines)
    assert result.status is Status.PASS, result.summary


@pytest.mark.parametrize("lines", [[PRIV], [PRIV_DATA]], ids=["tagged", "data-only"])
def test_a_non_fatal_sxid_the_guide_still_acts_on_warns_with_that_action(lines: list[str]) -> None:
    result = judge(lines)
    assert result.status is Status.WARN and result.code == "nvswitch.warning", result.summary
    assert "Restart Guest VM" in result.summary


def test_the_line_tag_is_followed_and_the_catalogue_said_when_they_disagree() -> None:
    """19055 (HDR RAM single-bit ECC limit): the guide lists it non-fatal, the driver reports it Fatal
    (NVSWITCH_REPORT_FATAL in ls10); 11001 (ingress invalid command): the guide lists it fatal, the driver tags it
    Non-fatal when the error is not contained. Lines built from the driver's format 'Fatal, Link %02d %s%s' / 'Non-
    fatal, Link %02d %s%s' (intr_nvswitch.h): no field record of either was found."""
    fatal = judge(
        ["nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 19055, Fatal, Link 12 RX HDR RAM ECC limit error"]
    )
    assert fatal.status is Status.FAIL and "the line's own tag is followed" in fatal.summary
    assert "lists it non-fatal" in fatal.summary
    soft = judge(
        ["nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 11001, Non-fatal, Link 12 ingress invalid command"]
    )
    assert soft.status is Status.WARN and "lists it fatal (port/partition)" in soft.summary


def test_the_guides_reset_all_sxid_drains_although_its_line_says_non_fatal() -> None:
    """19084 AN1 heartbeat timeout: 'Reset all GPUs and all NVSwitches' (the guide); the line is the driver's format
    (NVSWITCH_REPORT_NONFATAL), no field record found."""
    result = judge(
        ["nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 19084, Non-fatal, Link 05 AN1 Heartbeat Timeout Error"]
    )
    assert result.status is Status.FAIL and result.code == "nvswitch.reset_required", result.summary


def test_an_sxid_of_a_partial_allocation_warns() -> None:
    """A job given 1 of the node's 2 GPUs (its device cgroup refuses /dev/nvidia1): whether it crosses that switch is
    not known from the line, so a warning; the whole node's twin drains."""
    given = {
        "device_nodes": {"0": "ok", "1": "EPERM"},
        "driver_gpus": {"0000:18:00": {"minor": 0}, "0000:2a:00": {"minor": 1}},
        "proc_view": "host",
    }
    partial = judge(LTSSM, IN_POD, given)
    assert partial.status is Status.WARN and partial.code == "nvswitch.fatal", partial.summary
    assert judge(LTSSM, IN_POD).status is Status.FAIL


def test_the_catalogue_holds_every_sxid_of_the_driver_with_the_guides_classes() -> None:
    assert len(SXIDS) == 399
    assert SXIDS[20034].fm_class == "fatal (port/partition)" and SXIDS[20034].tag_class == "fatal"
    assert SXIDS[22013].fm_class == "non-fatal" and SXIDS[22003].fm_class == "always fatal"
    assert SXIDS[11001].tag_class == "contained" and SXIDS[26006].free_text
    assert SXIDS[12028].recovery == "Restart Guest VM."


@pytest.mark.parametrize(
    ("number", "text", "verdict"),
    [
        (10006, "TSENSE OVERT Threshold reached. Shutting Down", "fatal"),
        (10004, "Thermal Slowdown Engaged", "warn"),
        (10004, "PMGR OVERT Threshold reached. Shutting Down", "fatal"),
        (10005, "Thermal Slowdown Disengaged", None),
        (25010, "ALI Training failure. Info 0x1234567", "fatal"),
        (10009, "Fatal, Firmware recovery mode (0x0/0x0, 0x0, 0x0, 0x0/0x0, 0x0, 0x0, 0x0, 0x0", "fatal"),
    ],
)
def test_free_text_sxids_are_recognised(number: int, text: str, verdict: str | None) -> None:
    """The driver's own free texts (src/common/nvswitch/kernel, 595.45.04: therm_ls10.c, link_ls10.c, ls10.c); no
    field record of them was found, so the texts are its format strings."""
    tags = {"Fatal"} if text.startswith("Fatal,") else {"text"}
    judged = judge_sxid(number, tags, text)
    assert (judged.verdict if judged else None) == verdict
