"""The driver's messages that say a GPU needs a reset, and its NVLink discovery and training failures
(checks.gpu_health.reset_messages, xid_fields): each injected as the driver prints it, with its healthy twin.

Field records, verbatim: NVIDIA/open-gpu-kernel-modules#1118 and #446 (580.126.20 on Talos, remote syslog of the
kmsg reader), #1045 (dmesg -T), leptonai/gpud components/accelerator/nvidia/nvlink/kmsg_test.go (an incident's
signatures, e0efb328178b2710043dfae2c2c55aecfb782888). Where no field record was found the line is the driver's own
format string filled in (open-gpu-kernel-modules 595.45.04; file and function named at the constant), and says so.
Staged: the node around the log (NVML's GPU list, the PCI bus); real: the reader, the scan and the verdict."""

from __future__ import annotations

from typing import Any

import pytest

from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import CheckOptions, Context
from envcheck.core.result import Result, Status

HEALTH = Context(options=CheckOptions(node_path=True, cluster_mode="health"))
BUSES = ("0b", "48", "3e", "18")

# open-gpu-kernel-modules#1118 / #446 (Talos): the assertion, and the 580 Xid 119 naming the GPU instance number.
MARKED = (
    "192.168.11.119: kern: warning: [2026-04-22T21:30:51.526447914Z]: NVRM: nvAssertFailedNoLog: Assertion failed: "
    "Back to back GSP RPC timeout detected! GPU marked for reset @ kernel_gsp.c:2387"
)
# the same log's NV_ERR_RESET_REQUIRED assertion, as far as the stored copy shows it (cut after 'pRmApi')
RESET_REQUIRED = (
    "192.168.11.119: kern: warning: [2026-04-22T21:37:31.524565304Z]: NVRM: nvAssertOkFailedNoLog: Assertion failed: "
    "Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from pRmApi"
)
XID119_GPU3 = (
    "192.168.11.119: kern: warning: [2026-04-22T21:29:21.342163186Z]: NVRM: Xid (PCI:0000:0b:00): 119, pid=11431, "
    "name=gpu-feature-dis, Timeout after 45s of waiting for RPC response from GPU3 GSP! Expected function 76 "
    "(GSP_RM_CONTROL) sequence 4128 (0x20803039 0xb0)."
)
# field corpus 051 (the same node): the GPU at 0b:00 initialised again (a new GPU object, after a reset)
ATTACH_0B = (
    "192.168.11.119: kern: warning: [2026-04-22T21:47:51.288755476Z]: NVRM: GPU at PCI:0000:0b:00: "
    "GPU-ff3dfd6d-7042-cc8c-f3a6-84d9d6eb3a4b"
)
# open-gpu-kernel-modules#1045 (dmesg -T): the PMU halted (the driver marked the GPU for reset)
PMU_HALTED = "[Mon May  4 14:09:23 2026] NVRM: GPU3 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted."
# leptonai/gpud nvlink/kmsg_test.go: NVLink discovery failed after receiver detect
POST_RXDET = "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!"
RXDET_MASK = "NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx Detect Link mask!"
# The driver's formats (no field record found):
WATCHDOG = (
    "NVRM: krcWatchdog_IMPL: RC watchdog: GPU is probably locked!  Notify Timeout Seconds: 7"  # krcWatchdog
)
FABRIC = "NVRM: GPU1 _gpuFabricProbeFullSanityCheck: Fabric Probe failed: 0x82"  # gpu_fabric_probe.c
GFW = (  # kernel_gsp_tu102.c, kgspWaitForGfwBootOk_TU102, then RmInitAdapter's failure line (osinit.c)
    "NVRM: GPU2 kgspWaitForGfwBootOk_TU102: failed to wait for GFW boot complete: 0x65 VBIOS version 96.00.74.00.01",
    "NVRM: GPU 0000:3e:00.0: RmInitAdapter failed! (0x62:0x65:1843)",
)
XID74_TRAIN = (  # kernel_nvlinkcorelibtrain.c, knvlinkTrainP2pLinksToActive, through the Xid printer
    "NVRM: Xid (PCI:0000:18:00): 74, pid='<unknown>', name=<unknown>, NVLink: Failed to train link 3 to remote "
    "PCI:0000:48:00"
)
XID136_MASK = (  # arch/blackwell/kernel_nvlink_gb100.c, knvlinkLogAliDebugMessages_GB100: a mask of links
    "NVRM: Xid (PCI:0000:18:00): 136, NVLink: Link training failed for links 0x30(0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)"
)
# kern_gpu_error_cont_ga100.c's own examples (source comment), and its format with RST: Yes for a contained error
XID95_RST = "NVRM: Xid (PCI:0000:48:00): 95, pid=7062, Uncontained: LTC TAG (0x2, 0x1). RST: Yes, D-RST: No"
XID94_NO_RST = (
    "NVRM: Xid (PCI:0000:48:00): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"
)
XID94_DRST = "NVRM: Xid (PCI:0000:48:00): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: Yes"


def kmsg(*texts: str) -> list[str]:
    return [f"4,{n},{n * 1000},-;{t}" for n, t in enumerate(texts, start=1)]


def judge(lines: list[str], given: dict[str, Any] | None = None, unopened: str = "") -> Result:
    """The verdict on `lines`; the GPU on bus `unopened` is one NVML counts but cannot open (its init failed)."""
    found = scan(lines)
    data: dict[str, Any] = {
        "nvml_error": None,
        "gpus": [
            {"index": i, "error": "nvmlDeviceGetHandleByIndex: Unknown Error"}
            if b == unopened
            else {
                "index": i,
                "name": "NVIDIA A100-SXM4-80GB",
                "pci": f"00000000:{b.upper()}:00.0",
                "persistence": True,
            }
            for i, b in enumerate(BUSES)
        ],
        "pci_gpus": [f"0000:{b}:00.0" for b in BUSES],
        "kernel_log": {
            "source": "/dev/kmsg",
            "error": None,
            **{k: found[k] for k in ("xid", "bus", "driver")},
        },
    }
    if given is not None:
        data["access"] = given
    return verdict(data, HEALTH)


@pytest.mark.parametrize(
    ("lines", "code"),
    [
        ([MARKED], "gpu.reset_required"),
        ([RESET_REQUIRED], "gpu.reset_required"),
        ([PMU_HALTED], "gpu.reset_required"),
        (kmsg(WATCHDOG), "gpu.reset_required"),
        (kmsg(POST_RXDET, RXDET_MASK), "nvlink.training_failed"),
        (kmsg(FABRIC), "nvlink.fabric_probe_failed"),
    ],
    ids=[
        "marked-for-reset",
        "nv-err-reset-required",
        "pmu-halted",
        "rc-watchdog",
        "post-rxdet",
        "fabric-probe",
    ],
)
def test_a_reset_or_nvlink_failure_the_driver_reports_drains_the_node(lines: list[str], code: str) -> None:
    result = judge(lines)
    assert result.status is Status.FAIL and result.code == code, result.summary


def test_their_healthy_twin_passes() -> None:
    """The same node and log forms without the failure lines: nothing to judge."""
    quiet = [ATTACH_0B, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.126.20  Release Build"]
    assert judge(quiet).status is Status.PASS


def test_an_assertion_that_names_no_gpu_warns_on_a_partial_allocation() -> None:
    """The 580 assertion names no GPU: given 1 of 4 GPUs, whether it is this process's GPU is not known."""
    given = {
        "device_nodes": {"0": "ok", "1": "EPERM", "2": "EPERM", "3": "EPERM"},
        "driver_gpus": {f"0000:{b}:00": {"minor": i} for i, b in enumerate(BUSES)},
        "proc_view": "host",
    }
    result = judge([MARKED], given)
    assert result.status is Status.WARN and result.code == "gpu.reset_required", result.summary


def test_the_instance_number_names_the_gpu_and_its_reinitialisation_clears_it() -> None:
    """Composed from two of the records above to exercise the rule: an Xid 119 ties GPU3 to 0000:0b:00, so the PMU
    line names that GPU; its UUID line printed again afterwards (a new GPU object: it was reset) clears it."""
    named = judge(kmsg(XID119_GPU3.split(": ", 1)[1], PMU_HALTED.split("] ", 1)[1]))
    pmu = [f for f in named.measured["findings"] if f["code"] == "gpu.reset_required"]
    assert pmu and pmu[0]["gpu"] == "PCI 0000:0b:00.0", named.measured["findings"]
    after = scan(
        kmsg(XID119_GPU3.split(": ", 1)[1], PMU_HALTED.split("] ", 1)[1], ATTACH_0B.split(": ", 1)[1])
    )
    assert not [e for e in after["driver"] if e["kind"] == "pmu_halted"]


def test_a_gfw_boot_failure_is_the_gpus_gsp_boot_failure() -> None:
    """With RmInitAdapter's line it names the GPU; alone (a log grepped for 'GFW') it is still the cause of the GPU
    NVML cannot open, not a GPU lost."""
    result = judge(kmsg(*GFW), unopened="3e")
    assert result.status is Status.FAIL and result.code == "gpu.gsp_boot", result.summary
    alone = judge(kmsg(GFW[0]), unopened="3e")
    assert alone.status is Status.FAIL and alone.code == "gpu.gsp_boot", alone.summary
    assert "GFW boot" in alone.summary


def test_xid74_and_xid136_name_the_links_that_did_not_train() -> None:
    p2p = judge(kmsg(XID74_TRAIN))
    assert p2p.status is Status.FAIL and "link 3 did not train to the GPU at PCI 0000:48:00" in p2p.summary
    ali = judge(kmsg(XID136_MASK))
    assert ali.status is Status.FAIL and "link(s) 4, 5" in ali.summary, ali.summary


def test_xid94_drains_when_its_record_asks_for_a_reset() -> None:
    assert (
        judge(kmsg(XID94_NO_RST)).status is Status.WARN
    )  # contained, no reset asked: the application restarts
    drst = judge(kmsg(XID94_DRST))
    assert drst.status is Status.FAIL and "D-RST: Yes" in drst.summary
    assert judge(kmsg(XID95_RST)).status is Status.FAIL
