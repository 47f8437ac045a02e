"""What gpu.health reads on a node, source by source (envcheck.core.evidence): each NVML query (nvml_sources), each
file under /proc, /sys and /dev, the kernel log's catalogues, each daemon."""

from __future__ import annotations

from envcheck.checks.gpu_health import driver_causes as causes
from envcheck.checks.gpu_health import fabric_findings as fabric
from envcheck.checks.gpu_health import node, nvml_down
from envcheck.checks.gpu_health.log_evidence import LOG_SOURCES
from envcheck.checks.gpu_health.nvml_sources import HEALTH_TESTS, NODE_TESTS, NVML_SOURCES
from envcheck.checks.gpu_health.verdict import KERNEL_LOG_UNREADABLE
from envcheck.core.evidence import Kind, Source

FILE_SOURCES: tuple[Source, ...] = (
    Source(
        "/sys/bus/pci/devices/*/{vendor,class,driver}",
        Kind.FILE,
        "the NVIDIA GPUs (class 0x0300, 0x0302) and NVSwitches (0x0680) on the PCI bus, and the driver bound to each",
        (node.GPU_LOST, nvml_down.NOT_LOADED),
        "sysfs is not namespaced: the hardware's own list, whatever the driver says; vfio-pci GPUs are a VM's",
        (*HEALTH_TESTS, *NODE_TESTS),
        qualifies=f"{fabric.NVLINK_DOWN}: NVSwitches say the node's NVLinks are wired",
        key="pci_gpus",
    ),
    Source(
        "/proc/driver/nvidia/version, /proc/driver/nvidia/gpus/*/information",
        Kind.FILE,
        "the loaded kernel module's version; each GPU the driver took (minor, UUID, excluded)",
        (nvml_down.API_MISMATCH,),
        "kernel-open/nvidia/nv-procfs.c; the container toolkit's tmpfs over it lists only the given GPUs "
        "(libnvidia-container nvc_mount.c)",
        ("tests/checks/gpu_health/test_kernel_events.py", *NODE_TESTS),
        key="kernel_module",
    ),
    Source(
        "/sys/module/<name>/initstate (else /proc/modules)",
        Kind.FILE,
        "the kernel's own list of loaded modules (nvidia, nvidia_uvm, ...)",
        (nvml_down.NOT_LOADED,),
        "Documentation/ABI/testing/sysfs-module, kernel/module/procfs.c m_show; not namespaced (a container reads "
        "the host's); the direct source for "
        "'not loaded', where a missing /proc/driver/nvidia or /dev node is a proxy",
        ("tests/probe/test_modules_daemons.py",),
        key="modules",
    ),
    Source(
        "/dev/nvidia*, /proc/self/mountinfo, NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES",
        Kind.FILE,
        "which GPUs this process was given: access(2) on each device node (EPERM: a device cgroup), the toolkit's "
        "tmpfs at /proc/driver/nvidia, the toolkit's variables",
        (node.GPU_LOST,),
        "probe.gpu_access: a GPU not given is never judged, never lost",
        ("tests/probe/test_gpu_access.py", *NODE_TESTS),
        key="given",
    ),
    Source(
        "/dev/kmsg (or a saved dmesg, journal or syslog)",
        Kind.FILE,
        "the kernel log's records, read without blocking after the last run's cursor",
        (KERNEL_LOG_UNREADABLE, node.FELL_OFF_BUS, causes.INIT_FAILED),
        "Documentation/ABI/testing/dev-kmsg; the catalogues each record is judged by are listed as kernel-log "
        "sources",
        ("tests/probe/test_log_records.py", "tests/checks/gpu_health/test_field_corpus.py"),
        key="kmsg",
    ),
)

DAEMON_SOURCES: tuple[Source, ...] = (
    Source(
        "nvidia-fabricmanager (an nv-fabricmanager process)",
        Kind.DAEMON,
        "whether the fabric manager runs: its process where the host's processes are visible",
        (),
        "a daemon is alive when its process is (gpud's proxy is port 6666 open)",
        ("tests/checks/gpu_health/test_nvml_surface.py", "tests/probe/test_modules_daemons.py"),
        qualifies=f"{fabric.FABRIC_NOT_STARTED}: names the fabric manager's state",
        key="nv-fabricmanager",
    ),
    Source(
        "nvidia-persistenced (its process, or its socket accepting a connection)",
        Kind.DAEMON,
        "whether the persistence daemon keeps the GPUs initialised: a live process or a socket that accepts",
        (),
        "a socket file outlives a daemon killed without cleanup (connect(2): ECONNREFUSED)",
        ("tests/probe/test_modules_daemons.py",),
        qualifies=f"{node.GPU_INIT_SLOW}: the first initialisation's budget (cold without the daemon)",
        key="nvidia-persistenced",
    ),
)

EVIDENCE: tuple[Source, ...] = (*NVML_SOURCES, *FILE_SOURCES, *LOG_SOURCES, *DAEMON_SOURCES)
