"""The driver's messages that say a GPU needs a reset, and its NVLink discovery and training failures: each pattern from
the driver's source (NVIDIA/open-gpu-kernel-modules 595.45.04 unless noted) or a verbatim field record, and what each
means for the node (the Cause the driver findings judge with).

The RM prints these with NV_PRINTF, "NVRM: <function>: " (550 to 580; "NVRM <function>: " before), "NVRM: GPU%d
<function>: " from 590 when it knows the GPU (its instance number: driver_messages.INDEX), and its assertions through
src/nvidia/src/libraries/utils/nvassert.c: "Assertion failed: %s @ %s:%d", "Assertion failed: %s (0x%08X) returned from
%s @ %s:%d" and the "Check failed: " twins, the status as "<text> [<NAME>]" (nvstatus.c). Xids are not here: the Xid
printer's records are read by checks.gpu_health.xid (Xid 74/136 training failures, Xid 94/95's reset fields, Xid 154
by checks.gpu_health.xid_fields).
"""

from __future__ import annotations

from envcheck.checks.gpu_health.driver_causes import Cause
from envcheck.checks.gpu_health.driver_messages import INDEX, DriverMessage, message

# Finding codes this module's causes lead to (each one is in envcheck.cluster.finding_codes.TABLE).
RESET_REQUIRED = "gpu.reset_required"
NVLINK_TRAINING = "nvlink.training_failed"
FABRIC_PROBE = "nvlink.fabric_probe_failed"

_RM = r"NVRM:? " + INDEX + r"(?:\w+: )?"  # NV_PRINTF's prefix in every release's form

RESET_AND_NVLINK: tuple[DriverMessage, ...] = (
    message(
        "reset_required",
        "runtime",
        _RM + r"(?:Assertion|Check) failed: (?:Back to back GSP RPC timeout detected! )?GPU marked for reset",
        "src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c: 575 to 590 'NV_ASSERT_FAILED(\"Back to back GSP RPC timeout "
        "detected! GPU marked for reset\")', 595 _kgspHandleFatalTimeout 'NV_ASSERT_FAILED(\"GPU marked for reset\")', "
        "each before gpuMarkDeviceForReset; field: 'NVRM: nvAssertFailedNoLog: Assertion failed: Back to back GSP RPC "
        "timeout detected! GPU marked for reset @ kernel_gsp.c:2387' (NVIDIA/open-gpu-kernel-modules#1118)",
    ),
    message(
        "reset_required",
        "runtime",
        _RM + r"(?:Assertion|Check) failed: Reset required \[NV_ERR_RESET_REQUIRED\]",
        "kernel-open/common/inc/nvstatuscodes.h: NV_ERR_RESET_REQUIRED (0x00000062, 'Reset required'), returned e.g. "
        "by _kgspRpcDrainEvents once GSP-RM died; nvassert.c prints 'Assertion failed: Reset required "
        "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from ...' (field: NVIDIA/open-gpu-kernel-modules#1118)",
    ),
    message(
        "reset_required",
        "runtime",
        _RM + r"Failed to mark GPU for pending (?:drain and )?reset",
        "src/nvidia/src/kernel/gpu/arch/ampere/kern_gpu_error_cont_ga100.c: the driver meant to mark the GPU for "
        "reset (or drain and reset) after an error and could not, so no Xid 154 follows",
    ),
    message(
        "pmu_halted",
        "runtime",
        _RM + r"Received signal from GSP that PMU has halted",
        "kernel_gsp.c, _kgspRpcGspEventPmuHalted: 'PMU cannot be recovered at this point and the GPU was marked for "
        "reset'; field: 'NVRM: GPU3 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.' "
        "(NVIDIA/open-gpu-kernel-modules#1045)",
    ),
    message(
        "rc_watchdog",
        "runtime",
        _RM + r"RC watchdog: GPU is probably locked",
        "src/nvidia/src/kernel/gpu/rc/kernel_rc_watchdog_callback.c, krcWatchdog: 'RC watchdog: GPU is probably "
        "locked!  Notify Timeout Seconds: %d' (the GPU has not processed the watchdog's work for that long)",
    ),
    message(
        "gsp_boot",
        "open",
        _RM + r"failed to wait for GFW boot complete",
        "src/nvidia/src/kernel/gpu/gsp/arch/turing/kernel_gsp_tu102.c, kgspWaitForGfwBootOk_TU102: 'failed to wait "
        "for GFW boot complete: 0x%x VBIOS version %s', then '(the GPU may be in a bad state and may need to be "
        "reset)'",
    ),
    message(
        "nvlink_training",
        "open",
        _RM + r"(?:Getting peer\d+(?:'s)? postRxDetLinkMask failed|Failed to update Rx Detect Link mask|"
        r"Error performing RXDET \(Receiver Detect\) on link|Failed to execute Pre Link Training ALI steps)",
        "src/nvidia/src/kernel/gpu/nvlink: arch/hopper/kernel_nvlink_gh100.c knvlinkDiscoverPostRxDetLinks_GH100 "
        "(\"Getting peer0's postRxDetLinkMask failed!\"), kernel_nvlink.c knvlinkUpdatePostRxDetectLinkMask ('Failed "
        "to update Rx Detect Link mask!') and knvlinkPreTrainLinksToActiveAli ('Failed to execute Pre Link Training "
        "ALI steps!'), kernel_nvlinkcorelibcallback.c ('Error performing RXDET (Receiver Detect) on link!'); field: "
        "leptonai/gpud components/accelerator/nvidia/nvlink/kmsg_test.go (an incident), which marks the node for "
        "a reboot (post_rx_detect_failure.go)",
    ),
    message(
        "fabric_probe",
        "runtime",
        _RM + r"Fabric Probe failed: (?P<probe_status>0x[0-9a-fA-F]+)",
        "src/nvidia/src/kernel/gpu/gpu_fabric_probe.c, _gpuFabricProbeFullSanityCheck: 'Fabric Probe failed: 0x%x' "
        "(the fabric manager's answer to the GPU's registration is a failure)",
    ),
)

RESET_FIX = "drain; nvidia-smi -r -i {pci} (GPU reset) or reboot the node; update the driver if it recurs"
RESET_CAUSES: dict[str, Cause] = {
    "reset_required": Cause(
        "the driver says it needs a reset (an RM assertion: GPU marked for reset / NV_ERR_RESET_REQUIRED)",
        RESET_FIX,
        RESET_REQUIRED,
        1,
    ),
    "pmu_halted": Cause(
        "its PMU micro-controller halted: the driver marked it for reset", RESET_FIX, RESET_REQUIRED, 1
    ),
    "rc_watchdog": Cause(
        "the driver's watchdog found it locked (it stopped processing work)", RESET_FIX, RESET_REQUIRED, 1
    ),
    "nvlink_training": Cause(
        "its NVLinks were not discovered or trained (the driver's NVLink discovery/training failed): NVLink "
        "peer-to-peer with it is lost",
        "drain; reboot the node; nvidia-smi nvlink -s -i {pci}; if it recurs, check the NVLink bridges or baseboard "
        "and update the driver",
        NVLINK_TRAINING,
        1,
    ),
    "fabric_probe": Cause(
        "its NVLink fabric registration failed (Fabric Probe failed: {probe_status}): NVLink peer-to-peer through "
        "the NVSwitches is lost",
        "drain; check nvidia-fabricmanager (systemctl status nvidia-fabricmanager, its log); nvidia-smi -q -i {pci} "
        "| grep -A3 -i fabric; once the fabric manager runs, reset the GPU or reboot the node",
        FABRIC_PROBE,
        1,
    ),
}
