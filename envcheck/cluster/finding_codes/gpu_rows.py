"""The finding-code rows of a GPU's hardware and driver state: NVML's fields, the kernel log (Xids, GPUs that fell
off the bus or failed to start, the driver's two halves), NVSwitch, DCGM."""

from __future__ import annotations

from envcheck.checks.dcgm import CONFIG as DCGM_CONFIG
from envcheck.checks.dcgm import HOSTENGINE_DOWN, HOSTENGINE_HANG, HOSTENGINE_UNREACHABLE, NO_RESULT
from envcheck.checks.dcgm.health_verdict import OVERALL_ONLY as DCGM_HEALTH_OVERALL
from envcheck.checks.dcgm.health_verdict import UNREAD as DCGM_HEALTH_UNREAD
from envcheck.checks.gpu_health import driver_causes as driver
from envcheck.checks.gpu_health import node as gpu_node
from envcheck.checks.gpu_health import nvml_down
from envcheck.checks.gpu_health.gpu_findings import PERSISTENCE_OFF
from envcheck.checks.gpu_health.verdict import KERNEL_LOG_FIX, KERNEL_LOG_UNREADABLE
from envcheck.checks.node import config_causes
from envcheck.cluster.finding_codes.common_fixes import CONFIG, DRAIN, IMAGE, NODE
from envcheck.core.findings import Code

_GPU = [
    Code(
        gpu_node.GPU_LOST,
        "a GPU on the PCI bus that NVML no longer lists, or fewer GPUs than the node must have",
        NODE,
        gpu_node.BUS_FIX,
    ),
    Code(gpu_node.FELL_OFF_BUS, "a GPU fell off the bus (the kernel log says so)", NODE, gpu_node.BUS_FIX),
    Code(
        gpu_node.GPU_INIT_SLOW,
        "NVML's initialisation overran its budget (twice in a row: the node's)",
        NODE,
        gpu_node.PERSISTENCE_FIX,
    ),
    Code(gpu_node.NVML_HANG, "an NVML call did not return: a GPU in a bad state hangs NVML", NODE, DRAIN),
    Code(
        KERNEL_LOG_UNREADABLE,
        "the kernel log cannot be read, so Xid errors go unseen",
        CONFIG,
        KERNEL_LOG_FIX,
    ),
    Code(
        PERSISTENCE_OFF,
        "persistence mode is off: every client pays the GPUs' initialisation",
        NODE,
        gpu_node.PERSISTENCE_FIX,
    ),
    Code(
        "xid.<xid>",
        "an Xid error in the kernel log within the window (NVIDIA's catalogue decides fail or warn)",
        NODE,
        "per Xid: NVIDIA's resolution in the result's remediation",
    ),
    Code(
        "xid.<xid>.repeated",
        "an Xid that recurred within the window: escalated",
        NODE,
        "per Xid: NVIDIA's resolution in the result's remediation",
    ),
    Code(
        "dcgm.diag.<test>",
        "a DCGM diagnostic test failed (the test's name, lower-case)",
        NODE,
        "dcgmi diag -r 3 -i <i> and NVIDIA's guidance for the test; drain the node",
    ),
    Code(
        DCGM_CONFIG,
        "DCGM flagged a setting of the node, not its hardware (an error DCGM rates DCGM_ERROR_CONFIG: persistence "
        "mode, ECC off, a power limit, a test disabled): a warning, never a drain",
        NODE,
        "apply DCGM's own suggestion in its message (e.g. nvidia-smi -pm 1), then rerun dcgmi diag -r 1",
    ),
    Code(
        HOSTENGINE_HANG,
        "dcgmi did not answer within its budget: the host engine hangs",
        NODE,
        "systemctl restart nvidia-dcgm; drain the node if it hangs again",
    ),
    Code(
        HOSTENGINE_DOWN,
        "the DCGM host engine is not running: dcgmi cannot connect and no nv-hostengine process is among the "
        "host's processes",
        CONFIG,
        "systemctl enable --now nvidia-dcgm (nv-hostengine)",
    ),
    Code(
        HOSTENGINE_UNREACHABLE,
        "dcgmi cannot connect to the DCGM host engine, yet an nv-hostengine process runs (another address, still "
        "starting) or this PID namespace cannot show whether one does (a container)",
        CONFIG,
        "compare nv-hostengine's address (-b/-p, --domain-socket) with dcgmi's --host; systemctl status nvidia-dcgm",
    ),
    Code(
        "dcgm.health.<system>",
        "an incident of a DCGM health-watch system (pcie, nvlink, memory, inforom, thermal, power, driver, "
        "nvswitch_nonfatal, nvswitch_fatal, connectx; xid: a devastating XID DCGM reports under no one system): "
        "DCGM's Failure fails and drains, its Warning warns",
        NODE,
        "DCGM's own next step, from its message (in the result); on a Failure drain until dcgmi health -c reads "
        "Healthy",
    ),
    Code(
        DCGM_HEALTH_OVERALL,
        "DCGM's overall health is Warning or Failure and dcgmi printed no incident for it (dcgmi 2.1-2.3 drops "
        "each entity's last system)",
        NODE,
        "read the incidents with a newer dcgmi (dcgmi health -g g -c) or run dcgmi diag -r 2",
    ),
    Code(
        DCGM_HEALTH_UNREAD,
        "dcgmi gave no health report envcheck could read (an error on every group, or a result word it does not "
        "know)",
        None,
        "run dcgmi health -g g -c by hand and read its output",
    ),
    Code(
        NO_RESULT,
        "dcgmi gave no diagnostic result",
        None,
        "rerun dcgmi diag -r 1 by hand and read its output",
    ),
]


def _cause(kind: str, meaning: str) -> Code:
    """A row for a driver message's cause (checks.gpu_health.driver_findings.CAUSES): its code, class and fix."""
    cause = {**driver.CAUSES, **driver.RUNTIME}[kind]
    return Code(cause.code, meaning, NODE, cause.fix.replace("{pci}", "<pci>"))


# What the kernel log says of GPUs that failed to start, and of the driver's two halves (checks.gpu_health).
_DRIVER = [
    _cause(
        "open_module_required",
        "the loaded proprietary module cannot drive the GPU: it needs the open modules",
    ),
    _cause(
        "open_module_unsupported", "the loaded open module cannot drive the GPU: it needs the proprietary one"
    ),
    _cause(
        "not_supported", "the loaded driver release does not support the GPU (too old, too new, or legacy)"
    ),
    _cause("bar_invalid", "a PCI BAR of the GPU got no address: the BIOS did not map it (Above 4G Decoding)"),
    _cause("no_power", "the GPU's auxiliary power cables are not connected"),
    _cause("firmware_missing", "the driver's GSP firmware file is missing: an incomplete driver install"),
    _cause("gsp_boot", "the GPU's GSP firmware failed to boot, so the driver could not initialise it"),
    _cause("init_failed", "the driver could not initialise the GPU (RmInitAdapter failed)"),
    _cause("probe_error", "the driver's probe of the GPU failed (the kernel log names the cause)"),
    _cause("gsp_timeout", "the GPU's GSP firmware stopped answering the driver (RPC or heartbeat timeout)"),
    Code(
        driver.CLAIMED,
        "another kernel driver (nouveau, vfio-pci) owns an NVIDIA GPU, so the nvidia module never probed it",
        NODE,
        "blacklist nouveau (/etc/modprobe.d), or unbind vfio-pci from a GPU that is not meant for a VM; reboot",
    ),
    Code(
        driver.LOAD_FAILED,
        "the nvidia module's load failed: it initialised no GPU",
        NODE,
        "dmesg | grep NVRM says why; fix that cause and reboot",
    ),
    Code(
        driver.NVSWITCH_FATAL,
        "an NVSwitch reported a fatal SXid: the NVLink fabric the node's GPUs share is degraded",
        NODE,
        "drain; restart nvidia-fabricmanager; reset the GPUs and NVSwitches or reboot; service the baseboard",
    ),
    Code(
        nvml_down.API_MISMATCH,
        "the loaded kernel module and the user-space driver are different versions (an upgrade without a reboot)",
        NODE,
        nvml_down.REBOOT_FIX,
    ),
    Code(
        nvml_down.FOREIGN_CLIENT,
        "the kernel refused a client whose own bundled driver libraries are another version than the node's",
        IMAGE,
        "remove the NVIDIA driver libraries from that image or venv: the container toolkit mounts the host's",
    ),
    Code(
        nvml_down.NOT_LOADED,
        "the nvidia kernel module is not loaded while NVIDIA GPUs are on the PCI bus",
        NODE,
        nvml_down.NOT_LOADED_FIX,
    ),
    Code(
        nvml_down.USERSPACE_MISSING,
        "the nvidia kernel module is loaded but its user-space driver (libnvidia-ml) is missing",
        NODE,
        "install the user-space driver of the loaded module's version, or reinstall the driver",
    ),
    Code(
        config_causes.MIG_NO_INSTANCE,
        "MIG is enabled on the GPUs but no GPU instance exists, so CUDA sees no device",
        NODE,
        config_causes.MIG_FIX.replace("{i}", "<i>"),
    ),
]

ROWS = [*_GPU, *_DRIVER]
