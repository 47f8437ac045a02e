"""When NVML cannot start on a node path: the cause from what explains it, never a silent skip.

Read in order, each from its own evidence: the two halves of the driver at different versions (/proc/driver/nvidia/version
against the user-space library: an upgrade without a reboot; NVML says "Driver/library version mismatch", the kernel
"NVRM: API mismatch"), no kernel module while NVIDIA GPUs sit on the PCI bus, no user-space driver, and envcheck's own
deployment (a container given no GPU, NVIDIA_DRIVER_CAPABILITIES without `utility`, no NVML bindings). What none of
them explains is "cannot judge": an ERROR, which npd reports as unknown and a prolog never drains for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.checks.cuda.finding import CAPABILITIES, CONTAINER
from envcheck.checks.gpu_health.driver_findings import quiet as passed_through
from envcheck.checks.gpu_health.node import GpuFinding
from envcheck.checks.gpu_health.xid import pci_key
from envcheck.core.result import FaultClass
from envcheck.probe.modules import module_loaded

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
API_MISMATCH = "driver.api_mismatch"
FOREIGN_CLIENT = "driver.client_mismatch"
NOT_LOADED = "driver.not_loaded"
USERSPACE_MISSING = "driver.userspace_missing"

REBOOT_FIX = (
    "reboot the node so the loaded kernel module is the installed driver's (or reload it: rmmod nvidia_uvm "
    "nvidia_drm nvidia_modeset nvidia; modprobe nvidia); cat /proc/driver/nvidia/version and nvidia-smi must agree"
)
NOT_LOADED_FIX = (
    "modprobe nvidia (dmesg | grep NVRM says why it fails); after a kernel update rebuild the module (dkms "
    "autoinstall, or reinstall the driver for this kernel); then reboot"
)
ACCESS_FIX = (
    "start envcheck's container with the GPUs: docker run --gpus all (the nvidia runtime), or in Kubernetes "
    "runtimeClassName: nvidia with NVIDIA_VISIBLE_DEVICES=all (a DaemonSet that judges the node needs every GPU)"
)
CAPABILITIES_FIX = (
    "set NVIDIA_DRIVER_CAPABILITIES=compute,utility (or all) in envcheck's container: without 'utility' the toolkit "
    "mounts no libnvidia-ml, without 'compute' no libcuda and no /dev/nvidia-uvm"
)
# NVML's return codes (nvml.h): NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIBRARY_NOT_FOUND,
# NVML_ERROR_LIB_RM_VERSION_MISMATCH; the words are nvmlErrorString's, for a capture that kept only the text.
NOT_LOADED_CODE, NO_LIBRARY_CODE, MISMATCH_CODE = 9, 12, 18
_MISMATCH_WORDS = ("version mismatch", "NVML/RM version")
_NOT_LOADED_WORDS = ("Driver Not Loaded", "not loaded")
_NO_LIBRARY_WORDS = ("Shared Library Not Found", "libnvidia-ml")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _node(problem: str, fix: str, code: str, who: str = "the node") -> GpuFinding:
    return GpuFinding(problem, fix, FaultClass.NODE, code=code, rank=0, gpu="driver", who=who)


def _config(problem: str, fix: str, code: str) -> GpuFinding:
    return GpuFinding(
        problem, fix, FaultClass.CONFIG, code=code, rank=2, gpu="envcheck's container", who="envcheck"
    )


def mismatch_findings(data: Mapping[str, Any]) -> list[GpuFinding]:
    """The kernel module and the user-space driver at different versions, and the kernel log's API mismatches.

    A mismatch record is this node's unless this process's own user-space driver is known to be the kernel
    module's version: then the refused client brought other libraries (an image that ships its own driver), and it
    is that image's fault, not the node's."""
    versions = _dict(data.get("versions"))
    kernel, user = versions.get("kernel_module"), versions.get("userspace")
    if user is None and not data.get("nvml_error") and isinstance(data.get("driver_version"), str):
        user = data[
            "driver_version"
        ]  # NVML refuses to start across a mismatch: a started NVML is the module's
    log = _dict(data.get("kernel_log"))
    records = [e for e in log.get("driver") or [] if isinstance(e, dict) and e.get("kind") == "api_mismatch"]
    nvml = str(data.get("nvml_error") or "")
    said = f"; kernel log: {records[-1].get('text', '')}" if records else ""
    if isinstance(kernel, str) and isinstance(user, str) and kernel != user:
        return [
            _node(
                f"the loaded kernel module is {kernel} (/proc/driver/nvidia/version) but the user-space driver is "
                f"{user}: the driver was upgraded without a reboot{said}",
                REBOOT_FIX,
                API_MISMATCH,
            )
        ]
    if data.get("nvml_code") == MISMATCH_CODE or any(w in nvml for w in _MISMATCH_WORDS):
        return [_node(f"NVML refuses the loaded kernel module: {nvml}{said}", REBOOT_FIX, API_MISMATCH)]
    if not records:
        return []
    last = records[-1]
    module = kernel if isinstance(kernel, str) else last.get("kernel_version")
    if not (isinstance(user, str) and user == module):
        return [
            _node(
                f"the kernel module ({last.get('kernel_version')}) refused a client of the user-space driver "
                f"{last.get('client_version')}: the driver's two halves differ (an upgrade without a reboot){said}",
                REBOOT_FIX,
                API_MISMATCH,
            )
        ]
    return [
        GpuFinding(
            f"a client{_client(r)} with user-space driver {r.get('client_version')} was refused by the kernel "
            f"module {r.get('kernel_version')}, while this node's own driver libraries are {user}: it ships its "
            f"own driver libraries; kernel log: {r.get('text', '')}",
            "remove the NVIDIA driver libraries from that image or venv (the container toolkit mounts the "
            "host's): they must be the host driver's version",
            FaultClass.IMAGE,
            code=FOREIGN_CLIENT,
            rank=5,
            gpu="driver",
            who="the client's image",
        )
        for r in records
    ]


def _client(record: Mapping[str, Any]) -> str:
    return f" ('{record['client']}', pid {record.get('pid')})" if record.get("client") else ""


def nvml_down_findings(data: Mapping[str, Any]) -> list[GpuFinding]:
    """Why NVML cannot start, where the evidence says (an empty list: nothing here explains it)."""
    nvml = str(data.get("nvml_error") or "")
    access = _dict(data.get("access"))
    quiet = passed_through(data)
    listed = data.get("pci_gpus")
    bus = (
        [a for a in listed if isinstance(a, str) and pci_key(a) not in quiet]
        if isinstance(listed, list)
        else []
    )
    nodes = _dict(access.get("device_nodes"))
    contained = access.get("in_container") is True
    caps = access.get("driver_capabilities")
    if (
        contained
        and isinstance(caps, str)
        and not ({"utility", "all"} & set(caps.replace(" ", "").split(",")))
    ):
        return [
            _config(
                f"NVML cannot start: NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks 'utility', so the toolkit mounted no "
                f"libnvidia-ml into this container ({nvml})",
                CAPABILITIES_FIX,
                CAPABILITIES,
            )
        ]
    if contained and not nodes:
        return [
            _config(
                f"NVML cannot start: this container was given no GPU (no /dev/nvidia<N>; NVIDIA_VISIBLE_DEVICES="
                f"{access.get('nvidia_visible_devices')}) ({nvml})",
                ACCESS_FIX,
                CONTAINER,
            )
        ]
    code = data.get("nvml_code")
    # The kernel's own module list decides "not loaded"; NVML's code 9 and a missing /proc/driver/nvidia are proxies
    # that a module loaded but unreachable (a container, a broken procfs) also shows.
    loaded = module_loaded(data.get("modules"), "nvidia")
    if loaded is not True and (
        code == NOT_LOADED_CODE
        or any(w in nvml for w in _NOT_LOADED_WORDS)
        or (not nodes and access.get("proc_view") == "absent")
    ):
        if bus and not contained:
            listed = _dict(data.get("modules")).get("nvidia")
            said = (
                f"the kernel lists the nvidia module as {listed}, not live"
                if isinstance(listed, str)
                else "the kernel lists no nvidia module"
                if loaded is False
                else f"{nvml or 'no /proc/driver/nvidia'}; the kernel's module list was not read"
            )
            return [
                _node(
                    f"the nvidia kernel module is not loaded, but {len(bus)} NVIDIA GPU(s) are on the PCI bus "
                    f"({', '.join(bus[:4])}{', ...' if len(bus) > 4 else ''}): {said}",
                    NOT_LOADED_FIX,
                    NOT_LOADED,
                )
            ]
        return []
    if (
        (code == NO_LIBRARY_CODE or any(w in nvml for w in _NO_LIBRARY_WORDS))
        and (nodes or bus)
        and not contained
    ):
        return [
            _node(
                f"the nvidia kernel module is loaded but its user-space driver is missing: {nvml}",
                "install the user-space driver of the loaded module's version (cat /proc/driver/nvidia/version; "
                "the distribution's nvidia-utils / libnvidia-compute package), or reinstall the driver",
                USERSPACE_MISSING,
            )
        ]
    return []
