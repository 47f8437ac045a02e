"""This process's own cgroup and the limits that bind it, read as the kernel documents them. No verdicts.

- /proc/self/cgroup (Documentation/admin-guide/cgroup-v2.rst, "Processes"; cgroup-v1/cgroups.rst): one line per
  hierarchy, "hierarchy-ID:controller-list:cgroup-path"; v2's is always "0::$PATH"; a v1 named hierarchy lists
  "name=systemd". A path may hold colons (Kubernetes' containerd names), so a line splits at its first two; a
  removed cgroup ends in " (deleted)". Under a cgroup namespace the path is relative to the namespace's root ("0::/"
  in a container with its own namespace; cgroup-v2.rst, "Namespace").
- /proc/self/mountinfo (Documentation/filesystems/proc.rst, "/proc/<pid>/mountinfo"): field 4 is the mount's root
  inside the hierarchy, field 5 the mount point (octal escapes such as \\040 decoded); after the "-" separator, the
  filesystem type (cgroup, cgroup2) and the super options, which name a v1 hierarchy's controllers. The hybrid layout
  mounts v2 at /sys/fs/cgroup/unified beside the v1 controllers; a controller is bound to one hierarchy at a time.
- A cgroup's directory is the mount point plus the path below the mount's root (a container without a namespace of
  its own has its own cgroup mounted as the root: "/docker/<id>" at /sys/fs/cgroup/cpu,cpuacct). Where the path is
  not below the root (a namespace made after the mount shows the root as "/../.."), this process's pid in
  cgroup.procs finds it.
- Limits apply hierarchically (cgroup-v2.rst, "Top-down Constraint"): the effective one is the smallest along the
  ancestors up to the mount. cpu.max is "max 100000" or "$QUOTA $PERIOD" and v1's cpu.cfs_quota_us -1 is none;
  memory.max "max", v1's memory.limit_in_bytes near LONG_MAX (PAGE_COUNTER_MAX pages) is none and its memory.stat
  `hierarchical_memory_limit` holds the ancestors' above the mount too; pids.max "max"; cpuset.cpus.effective (v1:
  cpuset.effective_cpus, else cpuset.cpus) lists the CPUs the process may run on.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from envcheck.probe.system import absent

T = TypeVar("T", int, float)

LIMITED = ("cpu", "memory", "pids", "cpuset")
UNLIMITED_V1 = 2**62  # v1 writes "no limit" as LONG_MAX rounded down to a page
SCAN_MAX = 4000  # cgroup directories searched for this pid, at most
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """One mounted hierarchy: v1 or v2, where, its root inside the hierarchy, and v1's super options."""

    version: int
    mountpoint: str
    root: str
    options: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Member:
    """One line of /proc/self/cgroup."""

    hierarchy: int
    controllers: tuple[str, ...]
    path: str


@dataclass
class Limits:
    """What binds this process: CPUs its CFS quota allows, memory and pids limits, the CPUs of its cpuset (None: no
    limit); the cgroup directory read for each controller, and why one could not be read."""

    layout: str  # "v2", "v1", or "hybrid": v1 controllers beside a v2 mount
    cpu_quota: float | None = None
    memory_bytes: int | None = None
    pids_max: int | None = None
    cpuset_cpus: int | None = None
    cgroups: dict[str, str] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def mounts(mountinfo: str) -> list[Mount]:
    """The cgroup and cgroup2 mounts of a mountinfo text."""
    out = []
    for line in mountinfo.splitlines():
        fields = line.split()
        sep = fields.index("-", 6) if "-" in fields[6:] else -1
        if sep < 0 or len(fields) < sep + 2 or fields[sep + 1] not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(fields[sep + 3].split(",")) if len(fields) > sep + 3 else frozenset()
        version = 2 if fields[sep + 1] == "cgroup2" else 1
        out.append(Mount(version, _unescape(fields[4]), _unescape(fields[3]), options))
    return out


def members(proc_cgroup: str) -> list[Member]:
    """The lines of a /proc/<pid>/cgroup text."""
    out = []
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0].isdigit():
            path = parts[2].removesuffix(" (deleted)")
            out.append(Member(int(parts[0]), tuple(c for c in parts[1].split(",") if c), path))
    return out


def _below(path: str, root: str) -> str | None:
    """`path`'s part below `root` ('' for the root itself), or None when it is not below it."""
    if ".." in path.split("/") or ".." in root.split("/"):
        return None
    root = root.rstrip("/")
    if not root or path.rstrip("/") == root:
        return path.strip("/") if not root else ""
    return path[len(root) + 1 :].strip("/") if path.startswith(root + "/") else None


def _holding(base: Path, pid: int) -> Path | None:
    """The directory under `base` whose cgroup.procs lists `pid` (at most SCAN_MAX directories looked at)."""
    queue, seen = [base], 0
    while queue and seen < SCAN_MAX:
        folder = queue.pop(0)
        seen += 1
        if str(pid) in (_read(folder / "cgroup.procs") or "").split():
            return folder
        try:
            queue += sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            continue
    return None


def locate(member: Member, mount: Mount, prefix: str = "", pid: int | None = None) -> Path | None:
    """This process's cgroup directory in `mount` (`prefix` stands for '/' under a staged tree)."""
    base = Path(prefix + mount.mountpoint)
    rel = _below(member.path, mount.root)
    if rel is not None and (base / rel).is_dir():
        return base / rel
    return _holding(base, os.getpid() if pid is None else pid)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _cpus(listing: str | None) -> int | None:
    """How many CPUs a cpuset list ('0-3,8,10-11') names."""
    if not listing:
        return None
    count = 0
    for part in listing.split(","):
        low, _, high = part.partition("-")
        if not low.strip().isdigit() or (high and not high.strip().isdigit()):
            return None
        count += int(high or low) - int(low) + 1
    return count


def _quota(folder: Path, version: int) -> float | None:
    if version == 2:
        cpu = (_read(folder / "cpu.max") or "max").split()
        quota, period = _int(cpu[0]), _int(cpu[1]) if len(cpu) > 1 else 100000
    else:
        quota, period = _int(_read(folder / "cpu.cfs_quota_us")), _int(_read(folder / "cpu.cfs_period_us"))
    return quota / period if quota is not None and quota > 0 and period else None


def _memory(folder: Path, version: int) -> int | None:
    if version == 2:
        return _int(_read(folder / "memory.max"))
    value = _int(_read(folder / "memory.limit_in_bytes"))
    return value if value is not None and 0 < value < UNLIMITED_V1 else None


def _smallest(values: list[T | None]) -> T | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _read_limits(limits: Limits, controller: str, folder: Path, top: Path, version: int) -> None:
    """Fill `limits` for one controller from `folder` and its ancestors up to the mount point `top`."""
    chain = [folder, *[p for p in folder.parents if p == top or top in p.parents]]
    if controller == "cpu":
        limits.cpu_quota = _smallest([_quota(f, version) for f in chain])
    elif controller == "memory":
        stat = dict(
            line.split(" ", 1) for line in (_read(folder / "memory.stat") or "").splitlines() if " " in line
        )
        above = _int(stat.get("hierarchical_memory_limit")) if version == 1 else None
        above = above if above is not None and above < UNLIMITED_V1 else None
        limits.memory_bytes = _smallest([above, *[_memory(f, version) for f in chain]])
    elif controller == "pids":
        limits.pids_max = _smallest([_int(_read(f / "pids.max")) for f in chain])
    else:
        names = ("cpuset.cpus.effective",) if version == 2 else ("cpuset.effective_cpus", "cpuset.cpus")
        limits.cpuset_cpus = next((n for n in (_cpus(_read(folder / x)) for x in names) if n), None)


def own_limits(proc: str = "/proc/self", prefix: str = "", pid: int | None = None) -> Limits | str:
    """The limits of this process's own cgroup (`proc`: its /proc directory; `prefix` stands for '/' under a staged
    tree), or why they cannot be read."""
    cgroup_text, mountinfo = _read(Path(proc, "cgroup")), _read(Path(proc, "mountinfo"))
    if cgroup_text is None or mountinfo is None:
        return f"{proc}/cgroup or {proc}/mountinfo not readable"
    found, lines = mounts(mountinfo), members(cgroup_text)
    v1 = [m for m in found if m.version == 1]
    v2 = next((m for m in found if m.version == 2), None)
    if not found:
        return "no cgroup filesystem is mounted here"
    limits = Limits("hybrid" if v1 and v2 else "v1" if v1 else "v2")
    for controller in LIMITED:
        mount = next((m for m in v1 if controller in m.options), None)
        member = next((m for m in lines if m.hierarchy > 0 and controller in m.controllers), None)
        if mount is None:
            mount, member = v2, next((m for m in lines if m.hierarchy == 0), None)
        if mount is None or member is None:
            limits.unread[controller] = "not in any mounted hierarchy"
            continue
        top = Path(prefix + mount.mountpoint)
        if mount.version == 2 and controller not in (_read(top / "cgroup.controllers") or "").split():
            limits.unread[controller] = f"the {controller} controller is not enabled in {mount.mountpoint}"
            continue
        folder = locate(member, mount, prefix, pid)
        if folder is None:
            limits.unread[controller] = f"{member.path} not found under {mount.mountpoint}"
            continue
        limits.cgroups[controller] = str(folder)[len(prefix) :]
        _read_limits(limits, controller, folder, top, mount.version)
    return limits


def limits_facts(proc: str = "/proc/self", prefix: str = "") -> dict[str, Any]:
    """The facts' view of own_limits: CPUs the quota allows ("max": none) and the CPUs usable (the quota rounded up,
    within this process's affinity), the memory and pids limits, the cgroup read for each controller. What `docker
    run --cpus 1 --memory 3g` or a Slurm job's cgroup sets; os.cpu_count() and /proc/meminfo show the whole host."""
    limits = own_limits(proc, prefix)
    if isinstance(limits, str):
        return {"version": absent(limits)}
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 1
    cpus, memory = limits.cpu_quota, limits.memory_bytes
    return {
        "version": 2 if limits.layout == "v2" else 1,
        "layout": limits.layout,
        "cpu_quota": round(cpus, 3) if cpus is not None else "max",
        "cpus_usable": max(1, min(affinity, int(-(-cpus // 1)))) if cpus is not None else affinity,
        "memory_limit_bytes": memory if memory is not None else "max",
        "memory_limit_gib": round(memory / 2**30, 2) if memory is not None else "max",
        "pids_max": limits.pids_max if limits.pids_max is not None else "max",
        "cpuset_cpus": limits.cpuset_cpus if limits.cpuset_cpus is not None else absent("no cpuset read"),
        "cgroups": limits.cgroups,
        **({"unread": limits.unread} if limits.unread else {}),
    }


def cpu_throttling(pid: int, proc_root: str = "/proc", prefix: str = "") -> dict[str, Any] | str:
    """CFS bandwidth control of process `pid`'s cpu cgroup: its quota in CPUs (None: none along the chain) and the
    cgroup's cpu.stat counters since it was made (cgroup-v2.rst "cpu.stat": nr_periods, nr_throttled,
    throttled_usec; v1's cfs-bandwidth: throttled_time in ns), or why they cannot be read."""
    limits = own_limits(f"{proc_root}/{pid}", prefix, pid)
    if isinstance(limits, str):
        return limits
    folder = limits.cgroups.get("cpu")
    if folder is None:
        return limits.unread.get("cpu", "no cpu cgroup")
    stat = dict(
        (line.split(" ", 1)[0], _int(line.split(" ", 1)[1]))
        for line in (_read(Path(prefix + folder) / "cpu.stat") or "").splitlines()
        if " " in line
    )
    usec = stat.get("throttled_usec")
    ns = stat.get("throttled_time")
    return {
        "cgroup": folder,
        "quota_cpus": limits.cpu_quota,
        "periods": stat.get("nr_periods") or 0,
        "throttled_periods": stat.get("nr_throttled") or 0,
        "throttled_s": (usec / 1e6) if usec is not None else (ns / 1e9) if ns is not None else 0.0,
    }
