"""Bounded probes of the system: commands with timeouts (never a shell), files, libraries.

Every probe returns a value or an `absent(reason)` marker, so a missing value always says why.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

PROBE_TIMEOUT_S = 10.0


T = TypeVar("T")


def absent(reason: str) -> dict[str, str]:
    """The marker for a value that could not be had, with the reason."""
    return {"absent": reason}


def is_absent(value: Any) -> bool:
    """True for an `absent(...)` marker."""
    return isinstance(value, dict) and set(value) == {"absent"}


@dataclass(frozen=True)
class CommandOutput:
    """What a probed command printed."""

    returncode: int
    stdout: str
    stderr: str


CommandRunner = Callable[[list[str], float], "CommandOutput | dict[str, str]"]


def run_command(argv: list[str], timeout_s: float = PROBE_TIMEOUT_S) -> CommandOutput | dict[str, str]:
    """Run a command with a timeout; absent(reason) when it is missing, hangs or cannot start."""
    if shutil.which(argv[0]) is None:
        return absent(f"{argv[0]} not found on PATH")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return absent(f"{argv[0]} did not answer within {timeout_s:g}s")
    except OSError as exc:
        return absent(f"{argv[0]} could not start: {exc.strerror}")
    return CommandOutput(done.returncode, done.stdout, done.stderr)


def read_text(path: str) -> str | None:
    """A small file's text, or None when it cannot be read."""
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def mapped_paths(maps: str | None = None) -> set[str] | None:
    """The files mapped into this process (`/proc/self/maps`, or `maps` given as text); None when unreadable."""
    text = read_text("/proc/self/maps") if maps is None else maps
    if text is None:
        return None
    return {parts[5].strip() for line in text.splitlines() if len(parts := line.split(None, 5)) == 6}


def load_library(name: str) -> ctypes.CDLL | str:
    """dlopen a library; the error text when it cannot be loaded."""
    try:
        return ctypes.CDLL(name)
    except OSError as exc:
        return str(exc)


def driver_cuda_version(lib: ctypes.CDLL) -> int | None:
    """cuDriverGetVersion() from a loaded libcuda, e.g. 12080; None when the call fails."""
    version = ctypes.c_int(0)
    try:
        rc = lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError:
        return None
    return int(version.value) if rc == 0 else None


def nvidia_device_nodes(dev: str = "/dev") -> list[str]:
    """The /dev/nvidia* nodes present (nvidiactl, nvidia0, nvidia-uvm ...)."""
    try:
        return sorted(n for n in os.listdir(dev) if n.startswith("nvidia"))
    except OSError:
        return []


def host_pid_namespace() -> bool:
    """True when this process sees the host's processes (kthreadd is pid 2 only in the initial PID namespace):
    only then does NVML's process list show every process on a GPU, and a daemon's absence from /proc mean it is
    not running."""
    try:
        with open("/proc/2/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() == "kthreadd"
    except OSError:
        return False


def in_container() -> bool | dict[str, str]:
    """Whether this process runs inside a container (docker, podman, containerd, kubernetes).

    Each runtime leaves its own mark: /.dockerenv (Docker), /run/.containerenv (Podman), the `container`
    variable (systemd-nspawn, Podman, LXC), a pod's service variables and service-account mount (every Kubernetes
    pod: the kubelet sets KUBERNETES_SERVICE_HOST), a runtime's name in pid 1's cgroup path (cgroup v1, or v2 with
    the host's cgroup namespace). With cgroup v2 and a private cgroup namespace (Docker's and containerd's default
    there) pid 1's cgroup reads `0::/`, which tells nothing, so it is never the only mark looked for."""
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    if os.environ.get("container") is not None or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    if os.path.isdir("/var/run/secrets/kubernetes.io"):
        return True
    cgroup = read_text("/proc/1/cgroup")
    if cgroup is None:
        return absent("/proc/1/cgroup not readable")
    markers = ("docker", "kubepods", "containerd", "libpod", "lxc", "crio")
    return any(m in cgroup for m in markers)


def process_cpu_seconds(pid: int, proc_root: str = "/proc") -> float | None:
    """CPU time (user + system) process `pid` has used so far, from /proc/<pid>/stat (proc(5): utime and stime,
    fields 14 and 15, in clock ticks); None when it is gone or not visible."""
    text = read_text(f"{proc_root}/{pid}/stat")
    if text is None:
        return None
    try:
        fields = text.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError):
        return None


def process_age_s(proc_root: str = "/proc") -> float | None:
    """Seconds since this process started: /proc/uptime's boot clock less /proc/self/stat's starttime (proc(5):
    field 22, clock ticks after boot); None when either cannot be read."""
    uptime, stat = read_text(f"{proc_root}/uptime"), read_text(f"{proc_root}/self/stat")
    if uptime is None or stat is None:
        return None
    try:
        started = int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, float(uptime.split()[0]) - started)
    except (IndexError, ValueError, OSError):
        return None
