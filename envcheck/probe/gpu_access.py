"""Which of the node's GPUs this process was given, read from evidence (never from a GPU count alone).

sysfs is not namespaced: /sys/bus/pci/devices lists every GPU of the host, also inside a container, a pod or a
Slurm job given one of them. What a process was given shows elsewhere, and each source is read here:
- the device nodes it can use: `access(2)` on /dev/nvidia<N> passes the device cgroup check (cgroup v1
  `devices.list`, v2 eBPF) without reaching the driver, so EPERM is a cgroup's refusal (Slurm's
  ConstrainDevices=yes, a container runtime), and a node that is not there was not given (CDI, --device);
- /proc/driver/nvidia: on a host it is the driver's procfs, listing every GPU it took with its device minor; the
  NVIDIA container toolkit replaces it inside a container with a tmpfs holding only the given GPUs' entries
  (libnvidia-container, src/nvc_mount.c: mount_procfs mounts "tmpfs" at /proc/driver/nvidia, mount_procfs_gpu
  bind-mounts each given GPU's gpus/<bus>), so a tmpfs mounted exactly there is the toolkit's allocation;
- NVIDIA_VISIBLE_DEVICES (set by the toolkit and the device plugin) and CUDA_VISIBLE_DEVICES, as they are.
`allocation()` derives, from these facts and the PCI bus, the GPUs this process must answer for.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.probe.daemons import PERSISTENCED, daemon_state
from envcheck.probe.pci import bus_key
from envcheck.probe.system import host_pid_namespace, in_container

DEV = "/dev"
PROC_NVIDIA = "/proc/driver/nvidia"
MOUNTINFO = "/proc/self/mountinfo"
_MINOR = re.compile(r"^Device Minor:\s*(\d+)", re.M)
_UUID = re.compile(r"^GPU UUID:\s*(\S+)", re.M)
_MODEL = re.compile(r"^Model:\s*(.+?)\s*$", re.M)
# kernel-open/nvidia/nv-procfs.c (nv_procfs_read_gpu_info): "GPU Excluded:\t %s", Yes for a GPU the admin excluded
# (NVreg_ExcludedGpus): probed, never initialised, not the driver's to offer.
_EXCLUDED = re.compile(r"^GPU Excluded:\s*Yes", re.M)
_libc: Any = None


def _access(path: str) -> str:
    """'ok', or the errno name access(path, R_OK|W_OK) fails with (EPERM: a device cgroup; EACCES: the mode)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.access(os.fsencode(path), os.R_OK | os.W_OK) == 0:
        return "ok"
    code = ctypes.get_errno()
    return errno.errorcode.get(code, str(code))


def device_access(dev: str = DEV) -> dict[str, str]:
    """Each /dev/nvidia<N> character node by minor number: 'ok', or why this process may not use it."""
    try:
        names = os.listdir(dev)
    except OSError:
        return {}
    found: dict[str, str] = {}
    for name in sorted(names):
        if re.fullmatch(r"nvidia\d+", name):
            path = os.path.join(dev, name)
            try:
                minor = str(os.minor(os.stat(path).st_rdev))
            except OSError:
                continue
            found[minor] = _access(path)
    return found


def driver_gpus(proc: str = PROC_NVIDIA) -> dict[str, dict[str, Any]] | str:
    """The GPUs /proc/driver/nvidia/gpus lists, by PCI key ('0000:18:00'): device minor, UUID and model; or why
    it cannot be read (no driver loaded, or the directory is not there)."""
    folder = os.path.join(proc, "gpus")
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        return f"{folder}: {exc.strerror}"
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            with open(os.path.join(folder, name, "information"), encoding="utf-8", errors="replace") as f:
                text = f.read(4096)
        except OSError:
            text = ""
        minor, uuid, model = _MINOR.search(text), _UUID.search(text), _MODEL.search(text)
        out[bus_key(name)] = {
            "excluded": bool(_EXCLUDED.search(text)),
            "minor": int(minor.group(1)) if minor else None,
            "uuid": uuid.group(1) if uuid else None,
            "model": model.group(1) if model else None,
        }
    return out


def proc_view(proc: str = PROC_NVIDIA, mountinfo: str = MOUNTINFO) -> str:
    """'toolkit' when a tmpfs is mounted exactly at /proc/driver/nvidia (the container toolkit's view), 'host'
    when it is the driver's own procfs, 'absent' when there is none (no driver, or not given)."""
    if not os.path.isdir(proc):
        return "absent"
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return "host"
    for line in reversed(lines):  # the last mount at a point is the one that shows
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) >= 5 and fields[4] == proc:
            return "toolkit" if right.split()[:1] == ["tmpfs"] else "host"
    return "host"


def read_access(dev: str = DEV, proc: str = PROC_NVIDIA, mountinfo: str = MOUNTINFO) -> dict[str, Any]:
    """Every fact `allocation()` reads, as JSON-able data (a bundle section can replay it)."""
    contained = in_container()
    return {
        "device_nodes": device_access(dev),
        "driver_gpus": driver_gpus(proc),
        "proc_view": proc_view(proc, mountinfo),
        "nvidia_visible_devices": os.environ.get("NVIDIA_VISIBLE_DEVICES"),
        "visible_list": visible_list(os.environ.get("NVIDIA_VISIBLE_DEVICES")),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "driver_capabilities": os.environ.get("NVIDIA_DRIVER_CAPABILITIES"),
        "in_container": contained is True,
        "host_pid_namespace": host_pid_namespace(),
        # alive by its process or a socket that accepts (probe.daemons), not by a socket file a dead daemon left
        "persistenced": daemon_state(PERSISTENCED)["alive"] is True,
    }


@dataclass(frozen=True)
class Allocation:
    """The GPUs this process must answer for. `whole_node`: every GPU on the PCI bus; else `buses` (PCI keys)
    when the evidence names them, and `count` when it says only how many; `source` says which evidence."""

    whole_node: bool
    source: str
    buses: frozenset[str] | None = None
    count: int | None = None

    def ours(self, key: str) -> bool:
        """Whether the GPU at PCI key `key` was given to this process (unknown buses: yes, judge it)."""
        return self.whole_node or self.buses is None or key in self.buses

    def describe(self) -> str:
        """'the whole node' or 'GPUs given by <source>'."""
        return "the whole node" if self.whole_node else self.source


WHOLE_NODE = Allocation(True, "the whole node")


def visible_list(value: str | None, listdir: Any = os.listdir) -> list[str] | None:
    """The GPUs NVIDIA_VISIBLE_DEVICES names ('0,3', 'GPU-<uuid>,...'; [] for none/void), or None for all/unset.
    The device plugin's volume-mounts strategy sets it to /var/run/nvidia-container-devices and lists the GPUs
    as entries of that directory (k8s-device-plugin, DEVICE_LIST_STRATEGY=volume-mounts)."""
    if value is None or value.strip().lower() in ("", "all"):
        return None
    if value.strip().lower() in ("none", "void"):
        return []
    if value.startswith("/"):
        try:
            return sorted(listdir(value))
        except OSError:
            return None
    return [v.strip() for v in value.split(",") if v.strip()]


def allocation(access: Mapping[str, Any], pci_gpus: Sequence[str] | str) -> Allocation:
    """Which GPUs this process was given, from the first source with evidence of a restriction (see the module
    docstring); the whole node when there is none. Fewer device nodes than GPUs on the PCI bus is never taken
    as a restriction on a host, nor in a container given all GPUs: a GPU lost at boot has no node and no
    driver entry either, and must be judged as lost."""
    nodes: Mapping[str, str] = access.get("device_nodes") or {}
    known = access.get("driver_gpus")
    by_minor = {info.get("minor"): key for key, info in known.items()} if isinstance(known, dict) else {}
    usable = sorted(int(m) for m, state in nodes.items() if state == "ok")
    denied = sorted(int(m) for m, state in nodes.items() if state == "EPERM")
    listed = access.get("visible_list")

    def buses(minors: list[int]) -> frozenset[str] | None:
        keys = [by_minor.get(m) for m in minors]
        return frozenset(k for k in keys if k) if all(keys) else None

    if denied:
        names = ", ".join(f"/dev/nvidia{m}" for m in denied)
        return Allocation(
            False,
            f"the device cgroup ({names} refused: EPERM; e.g. Slurm ConstrainDevices)",
            buses(usable),
            len(usable),
        )
    if access.get("proc_view") == "toolkit" and isinstance(known, dict) and isinstance(listed, list):
        return Allocation(
            False,
            f"the container toolkit (NVIDIA_VISIBLE_DEVICES="
            f"{access.get('nvidia_visible_devices')}; /proc/driver/nvidia lists {len(known)} GPU(s))",
            frozenset(known),
            len(known),
        )
    if access.get("in_container"):
        driver_minors = {m for m in by_minor if isinstance(m, int)}
        pci_count = 0 if isinstance(pci_gpus, str) else len(pci_gpus)
        if (driver_minors and set(usable) < driver_minors) or (
            not driver_minors and usable and len(usable) < pci_count
        ):
            return Allocation(
                False,
                f"this container's device nodes ({', '.join(f'/dev/nvidia{m}' for m in usable)})",
                buses(usable) if driver_minors else None,
                len(usable),
            )
        if isinstance(listed, list) and len(listed) < pci_count:
            return Allocation(
                False, f"NVIDIA_VISIBLE_DEVICES={access.get('nvidia_visible_devices')}", None, len(listed)
            )
    return WHOLE_NODE


def not_given(alloc: Allocation, pci_gpus: Sequence[str] | str) -> list[str]:
    """The node's GPUs (PCI addresses) this process was not given: reported as not visible here, never judged."""
    if alloc.whole_node or alloc.buses is None or isinstance(pci_gpus, str):
        return []
    return [a for a in pci_gpus if bus_key(a) not in alloc.buses]
