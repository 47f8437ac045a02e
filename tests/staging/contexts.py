"""The deployment contexts a node verdict must survive, each with its broken twin, on the staged 8-GPU node
(tests/staging/gpu_node.py). One list drives the tests (tests/cluster/test_shared_nodes.py) and the before/after
matrix (bench/shared_node_matrix.py).

Kernel-log texts are real ones, cited where they are used. Which layers are staged: see gpu_node's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.checks.dcgm import documents as diag_docs
from tests.checks.dcgm import health_documents as health_docs
from tests.staging.gpu_node import Node, eight_gpus

# NVIDIA/NVSentinel#155 (a newer driver: no Xid line for it), for the GPU at 0000:b3:00.0 (GPU 6 here), as /dev/kmsg
# holds it: one printk of three lines (open-gpu-kernel-modules, osapi.c rm_is_supported_device), the newlines
# escaped as \x0a (Documentation/ABI/testing/dev-kmsg). The issue quoted it flattened onto one line.
FELL = (
    "NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) installed in this system has\\x0aNVRM: "
    "fallen off the bus and is not responding to commands."
)
# NVIDIA/gpu-operator#1146 (syslog form there): one GPU keeps failing its initialisation at every open.
RMINIT = "NVRM: GPU 0000:ab:00.0: RmInitAdapter failed! (0x24:0x72:1568)"
RMINIT_MINOR = "NVRM: GPU 0000:ab:00.0: rm_init_adapter failed, device minor number 5"
# The API mismatch record as journald showed it in a public report (field corpus case 020), one printk of four lines.
MISMATCH = (
    "NVRM: API mismatch: the client has the version 580.95.05, but\\x0aNVRM: this kernel module has the version "
    "580.82.07.  Please\\x0aNVRM: make sure that this kernel module and all NVIDIA driver\\x0aNVRM: components have "
    "the same version."
)
# field corpus case 061 (an HGX node): an NVSwitch's fatal SXid.
SXID = "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"
# kernel-open/nvidia/nv.c (nvidia_init_module): printed after the PCI probe, before the banner.
PROBE_FAILED = "NVRM: The NVIDIA probe routine failed for 1 device(s)."
# The first line of every load: the module's NVLink core starting (seen in public dmesg logs, e.g. before
# "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  615.71.09").
NVLINK_START = "nvidia-nvlink: Nvlink Core is being initialized, major device number 237"
LOAD = "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  Tue Sep 23 09:11:41 UTC 2025"
# leptonai/gpud#46 (dmesg --ctime): an application's Xid 13 on GPU 0000:18:00 (GPU 0 here), from other users' jobs.
XID13 = (
    "NVRM: Xid (PCI:0000:18:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, "
    "TPC 7, SM 0): Illegal Instruction Parameter"
)
# The forum thread of XID120 in tests/checks/gpu_health/test_gpu_health.py (NVIDIA developer forums, RTX PRO 6000
# Blackwell), re-addressed to GPU 3 (0000:5d:00) here: the driver asked for a GPU reset.
XID154 = (
    "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
)
# NVLink5 Xids as the driver prints them (field corpus 073 and 070: NVIDIA/NVSentinel's and leptonai/gpud's records),
# moved to GPU 2 here (0000:3a:00 on the staged node). NVIDIA's 'Xid 144-150 Decode' sheet: 0x025525c6 is row 81
# (NETIR_LINK_DOWN, RESET_GPU); 0x00086226/0x1 row 87 (NETIR_BER_EVENT, IGNORE); RLW_RXPIPE 0x8 row 26 (IGNORE);
# RLW_SRC_TRACK XC1 0x8 row 31 (XID_154_EVAL, no Xid 154: the application's).
XID149_LINK_DOWN = (
    "NVRM: Xid (PCI:0000:3a:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 09 (0x025525c6 0x00000000 0x00000000 "
    "0x00000000 0x00000000 0x00000000)"
)
NVLINK5_NONFATAL = (
    "NVRM: Xid (PCI:0000:3a:00): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001 0x00000000 "
    "0x00000000 0x00000000 0x00000000)",
    "NVRM: Xid (PCI:0000:3a:00): 145, pid=876767, name=ray::WorkerDict, RLW_RXPIPE Nonfatal XC0 i0 Link 13 "
    "(0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
    "NVRM: Xid (PCI:0000:3a:00): 145, RLW_SRC_TRACK Nonfatal XC1 i0 Link 12 (0x040988e2 0x00000008 0x00000000 "
    "0x00000000 0x00000000 0x00000000)",
)
# field corpus 075 (NVIDIA/NVSentinel's fixture): an NVSwitch's SOE halted, a free text with no Fatal/Non-fatal tag.
SOE_HALTED = "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED"
# field corpus 074 (NVIDIA/nvtrust#124): a non-fatal SXid group (tag, Severity 0, Data lines).
SXID_NONFATAL = (
    "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt",
    "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00",
    "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002c, 0x0000002c, 0x00000000, 0x0000002c, "
    "0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}",
)
# NVIDIA/open-gpu-kernel-modules#1118 (580.126.20): the driver marks a GPU for reset after back-to-back GSP timeouts.
MARKED_FOR_RESET = (
    "NVRM: nvAssertFailedNoLog: Assertion failed: Back to back GSP RPC timeout detected! GPU marked for reset @ "
    "kernel_gsp.c:2387"
)
# field corpus 077 (leptonai/gpud's incident signature): NVLink discovery failed after receiver detect.
POST_RXDET = "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!"
# A job holding a GPU as PyTorch's caching allocator leaves it: ~78 of 80 GiB in use by one python process.
JOB = {"processes": [{"pid": 4242, "used_mib": 79000}], "memory_used_mib": 79500}


def kmsg(*lines: str) -> list[str]:
    """/dev/kmsg records, one second apart."""
    return [f"6,{n + 1},{(n + 1) * 1_000_000},-;{text}" for n, text in enumerate(lines)]


BOOT = kmsg(NVLINK_START, LOAD)
HOST = ("--for", "prolog", "--expect-gpus", "8")
IN_POD = ("--for", "preflight", "--only")
NPD = ("--for", "npd")  # the node-problem-detector plugin: a DaemonSet's container given every GPU
# docs/cluster.md's epilog, after a job: the node a job broke, caught before the next job lands
EPILOG = (
    "--for",
    "prolog",
    "--level",
    "full",
    "--only",
    "gpu.health,dcgm.health,dcgm.diag",
    "--timeout",
    "250",
)
AGENT = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}


@dataclass(frozen=True)
class Case:
    """A context: the node, the command, and the verdict it must get (exit code; the code of each named check)."""

    name: str
    node: Node
    args: tuple[str, ...]
    exit_code: int
    codes: dict[str, str | None] = field(
        default_factory=dict
    )  # check -> finding code (None: no code, a pass)
    statuses: dict[str, str] = field(default_factory=dict)  # check -> status
    runs: int = 1  # run it this many times on the same node (a repeated overrun); the last run is judged
    twin_of: str = ""  # the healthy case this one breaks


def _dcgm(
    health: str | None, version: str = "4.6.0", diag: str = "diag -r 1 -j"
) -> dict[str, tuple[int, str] | str]:
    """The node's DCGM as its dcgmi answers (staged: tests/staging/dcgmi.py): health watches set on -g g with this
    document (None: set nowhere, NVIDIA/DCGM#176's answer on every group), and a diagnostic that passes (NVIDIA/DCGM#215's
    8-GPU document)."""
    unset = (health_docs.NOT_ENABLED_RC, health_docs.NOT_ENABLED_176)
    answers: dict[str, tuple[int, str] | str] = {f"health -g {g} -c -j": unset for g in "as"}
    answers["health -g g -c -j"] = unset if health is None else (0, health)
    answers["-v"] = (0, health_docs.version_output(version))
    answers[diag] = (0, diag_docs.DIAGNOSTIC_8_GPUS_4X)
    return answers


_I = health_docs.Incident
DCGM_HEALTHY = _dcgm(health_docs.HEALTHY_263)
# DCGM 4.5+'s Driver watch: NVML's recovery action for GPU 5 is GPU_RESET (DcgmHealthWatch.cpp MonitorGpuRecoveryAction).
DCGM_RESET = _dcgm(
    health_docs.report_24([_I(5, health_docs.DRIVER, health_docs.FAIL, health_docs.recovery_reset(5))])
)
DCGM_DBE = _dcgm(health_docs.report_24([_I(2, health_docs.MEM, health_docs.FAIL, health_docs.dbe(2))]))
DCGM_PENDING = _dcgm(
    health_docs.report_24([_I(3, health_docs.MEM, health_docs.WARN, health_docs.pending(3))])
)
DCGM_SWITCH = _dcgm(
    health_docs.report_24(
        [
            _I(
                1,
                health_docs.NVSWITCH_FATAL,
                health_docs.FAIL,
                health_docs.nvswitch_fatal(1),
                health_docs.FE_SWITCH,
            )
        ]
    )
)
# dcgmi 2.3.4 prints only Overall Health for one GPU's one incident (its writer drops an entity's last system).
DCGM_2X = _dcgm(
    health_docs.report_21([_I(4, health_docs.MEM, health_docs.FAIL, health_docs.dbe(4))]), "2.3.4"
)


def _vgpu_guest(licensed: bool) -> Node:
    """A VM given one vGPU (no NVSwitch in a guest), whose compute licence NVML reports as acquired or not."""
    lic = {"supported": True, "features": [{"enabled": True, "licensed": licensed}]}
    gpu = {"nvml": {"virtualization_mode": 2, "vgpu_license": lic}}
    return Node(eight_gpus(g0=gpu), given=(0,), how="toolkit", nvswitches=0, kmsg=BOOT)


def _after_boot(*texts: str) -> list[str]:
    """The boot's records, then `texts` as /dev/kmsg records one second apart."""
    return BOOT + [f"4,{20 + n},{(20 + n) * 1_000_000},-;{t}" for n, t in enumerate(texts)]


HEALTH = ("--for", "health", "--expect-gpus", "8")


def _busy(exclusive: bool = False) -> dict[str, dict[str, object]]:
    nvml = {**JOB, "compute_mode": 3} if exclusive else JOB
    return {f"g{i}": {"nvml": nvml, "ctx_code": 46 if exclusive else 2} for i in range(4)}


CASES: tuple[Case, ...] = (
    Case(
        "whole node, healthy",
        Node(eight_gpus(), kmsg=BOOT),
        HOST,
        0,
        statuses={"node.cuda_driver": "pass", "gpu.health": "pass", "node.profile": "pass"},
    ),
    Case(
        "whole node, a GPU lost at boot (probe failure before the banner)",
        Node(eight_gpus(g6={"in_driver": False}), kmsg=kmsg(NVLINK_START, FELL, PROBE_FAILED, LOAD)),
        HOST,
        1,
        codes={"gpu.health": "gpu.fell_off_bus", "node.profile": "node.gpu_count"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, a GPU lost while idle (NVML: GPU is lost)",
        Node(eight_gpus(g5={"nvml": {"lost": True}}), kmsg=BOOT),
        HOST,
        1,
        codes={"gpu.health": "gpu.lost"},
        twin_of="whole node, healthy",
    ),
    Case(
        "shared node, a job holds 4 GPUs (78 GiB each, contexts refused OUT_OF_MEMORY)",
        Node(eight_gpus(**_busy()), kmsg=BOOT),
        HOST,
        0,
        statuses={"node.cuda_driver": "pass", "gpu.health": "pass", "node.profile": "pass"},
    ),
    Case(
        "shared node, a job holds 4 EXCLUSIVE_PROCESS GPUs (DEVICES_UNAVAILABLE)",
        Node(eight_gpus(**_busy(exclusive=True)), kmsg=BOOT),
        HOST,
        0,
        statuses={"node.cuda_driver": "pass"},
    ),
    Case(
        "shared node, health check beside the job",
        Node(eight_gpus(**_busy()), kmsg=BOOT),
        ("--for", "health", "--expect-gpus", "8"),
        0,
        statuses={"node.cuda_driver": "pass", "gpu.health": "pass"},
    ),
    Case(
        "shared node, an idle GPU refuses contexts (DEVICES_UNAVAILABLE in DEFAULT mode)",
        Node(eight_gpus(**_busy(), g6={"ctx_code": 46}), kmsg=BOOT),
        HOST,
        1,
        codes={"node.cuda_driver": "cuda.gpu_unusable"},
        twin_of="shared node, a job holds 4 GPUs (78 GiB each, contexts refused OUT_OF_MEMORY)",
    ),
    Case(
        "shared node, an idle GPU fails (CUDA_ERROR_ECC_UNCORRECTABLE)",
        Node(eight_gpus(**_busy(), g7={"ctx_code": 214}), kmsg=BOOT),
        HOST,
        1,
        codes={"node.cuda_driver": "cuda.gpu_unusable"},
        twin_of="shared node, a job holds 4 GPUs (78 GiB each, contexts refused OUT_OF_MEMORY)",
    ),
    Case(
        "cold node, persistence off (0.4 s per GPU, 8 GPUs)",
        Node(eight_gpus(), persistence=False, cold_ms_per_gpu=400, kmsg=BOOT),
        HOST,
        0,
        statuses={"node.cuda_driver": "pass", "node.profile": "pass"},
    ),
    # The shortest --timeout that still proves each point: 8 s gives the first initialisation 4.8 s (WARMUP_SHARE),
    # under the 8 s a cold start of 8 GPUs at 1 s each takes, and leaves the other checks 3 s (passes with the 2 cores
    # overloaded 2.5 times); a wedged driver is judged by its thread's state, not by how long it was waited for.
    Case(
        "cold node over a tight --timeout, first run (sleeping, not stuck)",
        Node(eight_gpus(), persistence=False, cold_ms_per_gpu=1000, kmsg=BOOT),
        (*HOST, "--timeout", "8"),
        0,
        codes={"gpu.health": "gpu.init_slow"},
        statuses={"gpu.health": "warn"},
    ),
    Case(
        "cold node over a tight --timeout, second run in a row",
        Node(eight_gpus(), persistence=False, cold_ms_per_gpu=1000, kmsg=BOOT),
        (*HOST, "--timeout", "8"),
        1,
        codes={"gpu.health": "gpu.init_slow"},
        statuses={"gpu.health": "fail"},
        runs=2,
        twin_of="cold node over a tight --timeout, first run (sleeping, not stuck)",
    ),
    Case(
        "wedged driver: NVML's init stuck in the kernel (D)",
        Node(eight_gpus(), nvml_init_hang="D", kmsg=BOOT),
        (*HOST, "--timeout", "8"),
        1,
        codes={"gpu.health": "nvml.hang"},
        twin_of="cold node, persistence off (0.4 s per GPU, 8 GPUs)",
    ),
    Case(
        "wedged driver: cuInit stuck in the kernel (D)",
        Node(eight_gpus(), cuinit_hang=True, kmsg=BOOT),
        (*HOST, "--timeout", "8"),
        1,
        codes={"node.cuda_driver": "cuda.init_hang"},
        twin_of="cold node, persistence off (0.4 s per GPU, 8 GPUs)",
    ),
    Case(
        "MIG node (CUDA sees one MIG device)",
        Node(eight_gpus(), mig=True, kmsg=BOOT),
        HOST,
        0,
        statuses={"node.cuda_driver": "pass", "node.profile": "pass"},
    ),
    Case(
        "no GPU at all, the driver gone (8 GPUs on the PCI bus, none bound)",
        Node(eight_gpus(), driver=False, kmsg=[]),
        HOST,
        1,
        codes={"node.profile": "node.gpu_count"},
    ),
    Case(
        "no driver, 8 GPUs on the PCI bus, nothing expected",
        Node(eight_gpus(), driver=False, kmsg=[]),
        ("--for", "prolog"),
        1,
        codes={"gpu.health": "driver.not_loaded"},
        twin_of="8 GPUs passed through to VMs (vfio-pci), no nvidia driver",
    ),
    Case(
        "8 GPUs passed through to VMs (vfio-pci), no nvidia driver",
        Node(
            eight_gpus(**{f"g{i}": {"bound": "vfio-pci", "in_driver": False} for i in range(8)}),
            driver=False,
            kmsg=[],
        ),
        ("--for", "prolog"),
        0,
        statuses={"node.cuda_driver": "skip", "gpu.health": "skip", "node.profile": "skip"},
    ),
    Case(
        "kernel log unreadable (no /dev/kmsg)",
        Node(eight_gpus(), kmsg=None),
        HOST,
        0,
        codes={"gpu.health": "gpu.kernel_log_unreadable"},
        statuses={"gpu.health": "warn"},
    ),
    Case(
        "other users' application Xid 13, 9 bursts since boot, no window set",
        Node(
            eight_gpus(), kmsg=BOOT + [f"4,{10 + n},{(10 + n * 60) * 1_000_000},-;{XID13}" for n in range(9)]
        ),
        HOST,
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "container given GPU 3 (toolkit), healthy",
        Node(eight_gpus(), given=(3,), how="toolkit", kmsg=BOOT),
        (*IN_POD, "gpu.health", "--expect-gpus", "1"),
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "container given GPU 3 (toolkit), GPU 3 lost",
        Node(eight_gpus(g3={"nvml": {"lost": True}}), given=(3,), how="toolkit", kmsg=BOOT),
        (*IN_POD, "gpu.health", "--expect-gpus", "1"),
        10,
        codes={"gpu.health": "gpu.lost"},
        twin_of="container given GPU 3 (toolkit), healthy",
    ),
    Case(
        "container given all GPUs (toolkit), one lost at boot",
        Node(
            eight_gpus(g6={"in_driver": False}),
            how="toolkit",
            env={"NVIDIA_VISIBLE_DEVICES": "all"},
            kmsg=BOOT,
        ),
        (*IN_POD, "gpu.health"),
        10,
        codes={"gpu.health": "gpu.lost"},
        twin_of="container given GPU 3 (toolkit), healthy",
    ),
    Case(
        "CDI container given GPUs 2 and 5, driver API",
        Node(eight_gpus(), given=(2, 5), how="cdi", kmsg=BOOT),
        (*IN_POD, "node.cuda_driver,node.profile", "--expect-gpus", "2"),
        0,
        statuses={"node.cuda_driver": "pass", "node.profile": "pass"},
    ),
    Case(
        "CDI container given GPUs 2 and 5, NVML",
        Node(eight_gpus(), given=(2, 5), how="cdi", kmsg=BOOT),
        (*IN_POD, "gpu.health"),
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "CDI container given GPUs 2 and 5, GPU 5 lost",
        Node(eight_gpus(g5={"nvml": {"lost": True}}), given=(2, 5), how="cdi", kmsg=BOOT),
        (*IN_POD, "gpu.health"),
        10,
        codes={"gpu.health": "gpu.lost"},
        twin_of="CDI container given GPUs 2 and 5, NVML",
    ),
    Case(
        "Slurm job, ConstrainDevices, given GPUs 0 and 1",
        Node(eight_gpus(), given=(0, 1), how="cgroup", kmsg=BOOT),
        (*IN_POD, "gpu.health"),
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "Slurm job, ConstrainDevices, given GPUs 0 and 1, driver API",
        Node(eight_gpus(), given=(0, 1), how="cgroup", kmsg=BOOT),
        (*IN_POD, "node.cuda_driver"),
        0,
        statuses={"node.cuda_driver": "pass"},
    ),
    Case(
        "Slurm job, ConstrainDevices, given GPUs 0 and 1, GPU 1 lost",
        Node(eight_gpus(g1={"nvml": {"lost": True}}), given=(0, 1), how="cgroup", kmsg=BOOT),
        (*IN_POD, "gpu.health"),
        10,
        codes={"gpu.health": "gpu.lost"},
        twin_of="Slurm job, ConstrainDevices, given GPUs 0 and 1",
    ),
    Case(
        "Slurm job, ConstrainDevices, expecting the whole node's 8",
        Node(eight_gpus(), given=(0, 1), how="cgroup", kmsg=BOOT),
        (*IN_POD, "node.profile", "--expect-gpus", "8"),
        0,
        codes={"node.profile": "node.gpu_count_scope"},
    ),
    Case(
        "whole node, a GPU fails its initialisation at every open (RmInitAdapter)",
        Node(
            eight_gpus(g5={"nvml": {"handle": {"nvml_error": 999}}, "ctx_code": 999}),
            kmsg=BOOT
            + [f"4,{10 + n},{(10 + n) * 1_000_000},-;{t}" for n, t in enumerate([RMINIT, RMINIT_MINOR] * 3)],
        ),
        HOST,
        1,
        codes={"gpu.health": "gpu.init_failed"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, driver upgraded without a reboot (API mismatch, NVML refuses)",
        Node(eight_gpus(), kmsg=BOOT + [f"4,20,20000000,-;{MISMATCH}"], nvml_init_code=18),
        HOST,
        1,
        codes={"gpu.health": "driver.api_mismatch"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, an NVSwitch reports a fatal SXid",
        Node(eight_gpus(), kmsg=BOOT + [f"3,20,20000000,-;{SXID}"]),
        HOST,
        1,
        codes={"gpu.health": "nvswitch.fatal"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, NVLink5 Xid 149 link down (decode sheet: RESET_GPU)",
        Node(eight_gpus(), kmsg=_after_boot(XID149_LINK_DOWN)),
        HOST,
        1,
        codes={"gpu.health": "xid.149"},
        twin_of="whole node, NVLink5 Xids 149/145 non-fatal (decode sheet: IGNORE, XID_154_EVAL)",
    ),
    Case(
        "whole node, NVLink5 Xids 149/145 non-fatal (decode sheet: IGNORE, XID_154_EVAL)",
        Node(eight_gpus(), kmsg=_after_boot(*NVLINK5_NONFATAL)),
        HOST,
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "health check, NVLink5 Xid 149 link down",
        Node(eight_gpus(), kmsg=_after_boot(XID149_LINK_DOWN)),
        HEALTH,
        1,
        codes={"gpu.health": "xid.149"},
        twin_of="health check, NVLink5 Xids 149/145 non-fatal",
    ),
    Case(
        "health check, NVLink5 Xids 149/145 non-fatal",
        Node(eight_gpus(), kmsg=_after_boot(*NVLINK5_NONFATAL)),
        HEALTH,
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "node agent (npd), an NVSwitch's SOE halted (SXid without a tag)",
        Node(eight_gpus(), how="toolkit", env=AGENT, kmsg=_after_boot(SOE_HALTED)),
        NPD,
        1,
        codes={"gpu.health": "nvswitch.fatal"},
        twin_of="node agent (npd), an NVSwitch's non-fatal SXid 22013",
    ),
    Case(
        "node agent (npd), an NVSwitch's non-fatal SXid 22013",
        Node(eight_gpus(), how="toolkit", env=AGENT, kmsg=_after_boot(*SXID_NONFATAL)),
        NPD,
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "whole node, the driver marks a GPU for reset (RM assertion)",
        Node(eight_gpus(), kmsg=_after_boot(MARKED_FOR_RESET)),
        HOST,
        1,
        codes={"gpu.health": "gpu.reset_required"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, NVLink discovery failed (post-RxDet link mask)",
        Node(eight_gpus(), kmsg=_after_boot(POST_RXDET)),
        HOST,
        1,
        codes={"gpu.health": "nvlink.training_failed"},
        twin_of="whole node, healthy",
    ),
    Case(
        "MIG enabled, no GPU instance created",
        Node(eight_gpus(), mig=True, mig_instances=False, kmsg=BOOT),
        HOST,
        1,
        codes={"node.cuda_driver": "gpu.mig_no_instance"},
        twin_of="MIG node (CUDA sees one MIG device)",
    ),
    Case(
        "node agent (npd DaemonSet), every GPU, healthy",
        Node(eight_gpus(), how="toolkit", env=AGENT, kmsg=BOOT),
        NPD,
        0,
        statuses={"node.cuda_driver": "pass", "gpu.health": "pass"},
    ),
    # NVML's health surface (probe.nvml_health): each node state with the deployment that must see it, and a twin.
    Case(
        "whole node, NVLink fabric registration not started (fabric manager down)",
        Node(eight_gpus(**{f"g{i}": {"nvml": {"fabric": {"state": 1}}} for i in range(8)}), kmsg=BOOT),
        HOST,
        1,
        codes={"gpu.health": "gpu.fabric_not_started"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, fabric completed with an error status (Insufficient Resources)",
        Node(eight_gpus(g2={"nvml": {"fabric": {"state": 3, "status": 23}}}), kmsg=BOOT),
        ("--for", "health", "--expect-gpus", "8"),
        1,
        codes={"gpu.health": "gpu.fabric_failed"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, two NVLinks of GPU 2 down, no profile given",
        Node(eight_gpus(g2={"nvml": {"nvlinks": [1, 1, 1, 0] + [1] * 13 + [0]}}), kmsg=BOOT),
        ("--for", "prolog"),
        1,
        codes={"gpu.health": "gpu.nvlink_down"},
        twin_of="whole node, healthy",
    ),
    Case(
        "PCIe node without NVLink bridges (no NVSwitch, no fabric, every link inactive)",
        Node(
            eight_gpus(**{f"g{i}": {"nvml": {"fabric": None, "nvlinks": [0] * 12}} for i in range(8)}),
            nvswitches=0,
            kmsg=BOOT,
        ),
        ("--for", "prolog"),
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "container given GPU 3 (toolkit), its NVLinks all down on an NVSwitch board",
        Node(eight_gpus(g3={"nvml": {"nvlinks": [0] * 18}}), given=(3,), how="toolkit", kmsg=BOOT),
        (*IN_POD, "gpu.health", "--expect-gpus", "1"),
        10,  # preflight: a node fault is exit 10 (the pod's node is broken)
        codes={"gpu.health": "gpu.nvlink_down"},
        twin_of="container given GPU 3 (toolkit), healthy",
    ),
    Case(
        "whole node, NVML's recovery action on GPU 4 is Drain and Reset",
        Node(eight_gpus(g4={"nvml": {"fields": {"230": 4}}}), kmsg=BOOT),
        NPD,
        1,
        codes={"gpu.health": "gpu.recovery_action"},
        twin_of="whole node, healthy",
    ),
    Case(
        "whole node, the log's Xid 154 asked for a reset, NVML's action now None (reset since)",
        Node(eight_gpus(), kmsg=kmsg(NVLINK_START, LOAD, XID154)),
        HOST,
        0,
        statuses={"gpu.health": "pass"},
        twin_of="whole node, NVML's recovery action on GPU 4 is Drain and Reset",
    ),
    Case(
        "epilog after a job, the driver asks to drain GPU 6 and reset it (NVML's recovery action)",
        Node(eight_gpus(g6={"nvml": {"fields": {"230": 4}}}), kmsg=BOOT),
        EPILOG,
        1,
        codes={"gpu.health": "gpu.recovery_action"},
        twin_of="epilog after a job, healthy",
    ),
    Case(
        "epilog after a job, healthy",
        Node(eight_gpus(), kmsg=BOOT),
        EPILOG,
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "vGPU guest, the licence not acquired",
        _vgpu_guest(licensed=False),
        (*IN_POD, "gpu.health", "--expect-gpus", "1"),
        10,  # preflight: a node fault is exit 10 (the pod's node is broken)
        codes={"gpu.health": "gpu.vgpu_unlicensed"},
        twin_of="vGPU guest, licensed",
    ),
    Case(
        "vGPU guest, licensed",
        _vgpu_guest(licensed=True),
        (*IN_POD, "gpu.health", "--expect-gpus", "1"),
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "whole node, GPU 7 drained by the operator (NVML lists 7)",
        Node(eight_gpus(g7={"nvml": {"drained": True}}), kmsg=BOOT),
        ("--for", "prolog"),
        0,
        statuses={"gpu.health": "pass"},
        twin_of="whole node, a GPU lost while idle (NVML: GPU is lost)",
    ),
    Case(
        "health check beside a job, a slowdown seen once (a clock change), not again",
        Node(eight_gpus(**_busy(), g5={"nvml": {"clock_events": [0x8, 0x0]}}), kmsg=BOOT),
        ("--for", "health", "--expect-gpus", "8"),
        0,
        statuses={"gpu.health": "pass"},
    ),
    Case(
        "health check beside a job, a HW thermal slowdown that holds",
        Node(eight_gpus(**_busy(), g5={"nvml": {"clock_events": 0x48, "temperature_c": 93}}), kmsg=BOOT),
        ("--for", "health", "--expect-gpus", "8"),
        0,
        codes={"gpu.health": "gpu.clocks_slowdown"},
        statuses={"gpu.health": "warn"},
        twin_of="health check beside a job, a slowdown seen once (a clock change), not again",
    ),
    Case(
        "node agent with NVIDIA_DRIVER_CAPABILITIES=utility (no libcuda, no /dev/nvidia-uvm)",
        Node(
            eight_gpus(),
            how="toolkit",
            env={**AGENT, "NVIDIA_DRIVER_CAPABILITIES": "utility"},
            libcuda=False,
            uvm=False,
            kmsg=BOOT,
        ),
        NPD,
        2,
        codes={"node.cuda_driver": "cuda.capabilities"},
        statuses={"gpu.health": "pass"},
        twin_of="node agent (npd DaemonSet), every GPU, healthy",
    ),
    Case(
        "node agent with CUDA_VISIBLE_DEVICES=0,0 copied into it",
        Node(eight_gpus(), how="toolkit", env={**AGENT, "CUDA_VISIBLE_DEVICES": "0,0"}, kmsg=BOOT),
        NPD,
        2,
        codes={"node.cuda_driver": "cuda.visible_devices"},
        twin_of="node agent (npd DaemonSet), every GPU, healthy",
    ),
    Case(
        "node agent with CUDA_VISIBLE_DEVICES naming another host's GPU UUID",
        Node(
            eight_gpus(),
            how="toolkit",
            env={**AGENT, "CUDA_VISIBLE_DEVICES": "GPU-6f1c2a9e-0000-4d5e-8f90-a1b2c3d4e5f6"},
            kmsg=BOOT,
        ),
        NPD,
        2,
        codes={"node.cuda_driver": "cuda.visible_devices"},
        twin_of="node agent (npd DaemonSet), every GPU, healthy",
    ),
    Case(
        "node agent given no GPU (NVIDIA_VISIBLE_DEVICES=void, no devices)",
        Node(
            eight_gpus(), given=(), how="toolkit", env={**AGENT, "NVIDIA_VISIBLE_DEVICES": "void"}, kmsg=BOOT
        ),
        NPD,
        2,
        codes={"node.cuda_driver": "cuda.container"},
        twin_of="node agent (npd DaemonSet), every GPU, healthy",
    ),
    # DCGM's health watches beside its diagnostic, on the node path of each node mode.
    Case(
        "whole node, DCGM healthy (watches set) and its diagnostic passing",
        Node(eight_gpus(), kmsg=BOOT, dcgmi=DCGM_HEALTHY),
        HOST,
        0,
        statuses={"dcgm.health": "pass", "dcgm.diag": "pass"},
    ),
    Case(
        "whole node, DCGM's Driver watch fails GPU 5 (reset required) while its short diagnostic passes",
        Node(eight_gpus(), kmsg=BOOT, dcgmi=DCGM_RESET),
        HOST,
        1,
        codes={"dcgm.health": "dcgm.health.driver"},
        statuses={"dcgm.diag": "pass"},
        twin_of="whole node, DCGM healthy (watches set) and its diagnostic passing",
    ),
    Case(
        "whole node, DCGM 2.3.4's dcgmi: Overall Health Failure, no incident row",
        Node(eight_gpus(), kmsg=BOOT, dcgmi=DCGM_2X),
        HOST,
        1,
        codes={"dcgm.health": "dcgm.health.overall"},
        twin_of="whole node, DCGM healthy (watches set) and its diagnostic passing",
    ),
    Case(
        "whole node, DCGM's health watches not set",
        Node(eight_gpus(), kmsg=BOOT, dcgmi=_dcgm(None)),
        HOST,
        0,
        statuses={"dcgm.health": "skip", "dcgm.diag": "pass"},
    ),
    Case(
        "busy node, a job holds all 8 GPUs, health check, DCGM healthy",
        Node(
            eight_gpus(**{f"g{i}": {"nvml": JOB, "ctx_code": 2} for i in range(8)}),
            kmsg=BOOT,
            dcgmi=DCGM_HEALTHY,
        ),
        ("--for", "health", "--expect-gpus", "8"),
        0,
        statuses={"dcgm.health": "pass", "dcgm.diag": "skip"},
    ),
    Case(
        "busy node, a job holds all 8 GPUs, health check, DCGM's memory watch fails GPU 2 (DBE)",
        Node(
            eight_gpus(**{f"g{i}": {"nvml": JOB, "ctx_code": 2} for i in range(8)}), kmsg=BOOT, dcgmi=DCGM_DBE
        ),
        ("--for", "health", "--expect-gpus", "8"),
        1,
        codes={"dcgm.health": "dcgm.health.memory"},
        statuses={"dcgm.diag": "skip"},
        twin_of="busy node, a job holds all 8 GPUs, health check, DCGM healthy",
    ),
    Case(
        "node agent (npd DaemonSet), DCGM healthy",
        Node(eight_gpus(), how="toolkit", env=AGENT, kmsg=BOOT, dcgmi=DCGM_HEALTHY),
        NPD,
        0,
        statuses={"dcgm.health": "pass", "dcgm.diag": "pass"},
    ),
    Case(
        "node agent (npd DaemonSet), DCGM warns of a pending page retirement",
        Node(eight_gpus(), how="toolkit", env=AGENT, kmsg=BOOT, dcgmi=DCGM_PENDING),
        NPD,
        0,
        codes={"dcgm.health": "dcgm.health.memory"},
        statuses={"dcgm.health": "warn"},
        twin_of="node agent (npd DaemonSet), DCGM healthy",
    ),
    Case(
        "node agent (npd DaemonSet), DCGM's NVSwitch watch reports fatal errors",
        Node(eight_gpus(), how="toolkit", env=AGENT, kmsg=BOOT, dcgmi=DCGM_SWITCH),
        NPD,
        1,
        codes={"dcgm.health": "dcgm.health.nvswitch_fatal"},
        twin_of="node agent (npd DaemonSet), DCGM healthy",
    ),
    Case(
        "node agent (npd DaemonSet), DCGM's health watches not set",
        Node(eight_gpus(), how="toolkit", env=AGENT, kmsg=BOOT, dcgmi=_dcgm(None)),
        NPD,
        0,
        statuses={"dcgm.health": "skip"},
    ),
    Case(
        "a process given one MIG instance (CUDA_VISIBLE_DEVICES=MIG-...)",
        Node(
            eight_gpus(),
            mig=True,
            kmsg=BOOT,
            env={"CUDA_VISIBLE_DEVICES": "MIG-00000000-1c2b-4d5e-8f90-a1b2c3d4e5f6"},
        ),
        ("--for", "prolog"),
        0,
        statuses={"node.cuda_driver": "pass"},
    ),
)
