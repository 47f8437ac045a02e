"""container.runtime: what the hardened runtime takes away that a PyTorch job needs; quiet about what breaks nothing.

Read-only root, dropped capabilities, no_new_privs and a seccomp filter break nothing in a PyTorch job by
themselves: they are reported as measured facts only. Named (config, with a stable code and the fix): no writable
temp dir, noexec temp (Inductor's CPU kernels are .so files it dlopens from its cache), a uid without passwd entry,
a nofile soft limit below NOFILE_SOFT_FLOOR (1024, Docker's and containerd's default, is
healthy), low nproc/pids limits, a CPU quota below the threads torch starts.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import resource

from envcheck.checks.runtime.probes import creatable, mount_options, status_fields, writable
from envcheck.core.check import CheckSpec, Context
from envcheck.core.findings import Finding
from envcheck.core.hardening import (
    NO_PASSWD_ENTRY,
    NOFILE_LOW,
    NOFILE_NEED,
    NOFILE_SOFT_FLOOR,
    NPROC_LOW,
    NPROC_NEED,
    PASSWD_FIX,
    TMP_READONLY,
    WRITE_FIX,
    limit_text,
)
from envcheck.core.result import FaultClass, Result, first_of, passed, warned
from envcheck.probe.cgroup import Limits, own_limits

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
CPU_QUOTA_BELOW_THREADS = "runtime.cpu_quota_below_threads"
HOME_READONLY = "runtime.home_readonly"
TMP_NOEXEC = "runtime.tmp_noexec"


def temp_dir() -> str:
    """The directory tempfile would use, without creating anything (TMPDIR first, as Python and torch do)."""
    return os.environ.get("TMPDIR") or "/tmp"


def temp_findings() -> list[Finding]:
    """No writable temp/cache dir; noexec on the one Inductor compiles into."""
    tmp = temp_dir()
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or tmp
    out: list[Finding] = []
    if not writable(tmp):
        out.append(
            Finding(
                f"the temp dir {tmp} is not writable: torch.compile (Inductor's cache), "
                "DataLoader workers (multiprocessing's resource sharer needs a socket there: the loader hangs) and "
                "tempfile users fail",
                WRITE_FIX,
                FaultClass.CONFIG,
                code=TMP_READONLY,
            )
        )
    elif not writable(cache):
        out.append(
            Finding(
                f"TORCHINDUCTOR_CACHE_DIR={cache} is not writable: torch.compile fails",
                WRITE_FIX,
                FaultClass.CONFIG,
                code=TMP_READONLY,
            )
        )
    elif "noexec" in mount_options(cache):
        out.append(
            Finding(
                f"{cache} is mounted noexec: Inductor's compiled CPU kernels (.so files "
                "in its cache) cannot be loaded, torch.compile fails",
                "mount it exec (`--tmpfs /tmp:exec`) or "
                "point TORCHINDUCTOR_CACHE_DIR at an exec mount (an emptyDir)",
                FaultClass.CONFIG,
                code=TMP_NOEXEC,
            )
        )
    if importlib.util.find_spec("triton") is not None:
        given = os.environ.get("TRITON_CACHE_DIR")
        triton = given or os.path.join(os.environ.get("HOME") or "/", ".triton", "cache")
        if not creatable(triton):
            where = (
                f"TRITON_CACHE_DIR={given}"
                if given
                else f"HOME={os.environ.get('HOME') or '/'} (TRITON_CACHE_DIR unset)"
            )
            out.append(
                Finding(
                    f"{where} is not writable for uid {os.getuid()}: Triton cannot "
                    "write the GPU kernels and launchers it compiles, torch.compile fails on GPU",
                    "set TRITON_CACHE_DIR (or HOME) to a writable mount (`--tmpfs /home/dev/.cache:exec` in "
                    "envcheck's images, an emptyDir), or run in group 0 (`--user UID:0`) in envcheck's images",
                    FaultClass.CONFIG,
                    code=HOME_READONLY,
                )
            )
    return out


def passwd_findings() -> list[Finding]:
    """A uid with no passwd entry and no USER/LOGNAME: getpass.getuser() raises KeyError."""
    try:
        pwd.getpwuid(os.getuid())
        return []
    except KeyError:
        pass
    if any(os.environ.get(v) for v in ("LOGNAME", "USER", "LNAME", "USERNAME")):
        return []
    return [
        Finding(
            f"uid {os.getuid()} has no passwd entry and USER/LOGNAME are unset: "
            "getpass.getuser() raises KeyError in every library that asks for the user name",
            PASSWD_FIX,
            FaultClass.CONFIG,
            code=NO_PASSWD_ENTRY,
        )
    ]


def limit_findings(threads: int, cgroup: Limits | str) -> list[Finding]:
    """nofile/nproc/pids.max below what a PyTorch job needs; a CPU quota below the intra-op thread count (the limits
    of this process's own cgroup and its ancestors: a Slurm job's, a systemd slice's, a container's)."""
    out: list[Finding] = []
    pids = cgroup.pids_max if isinstance(cgroup, Limits) else None
    quota = cgroup.cpu_quota if isinstance(cgroup, Limits) else None
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile != resource.RLIM_INFINITY and nofile < NOFILE_SOFT_FLOOR:
        out.append(
            Finding(
                f"open files limited to {nofile} (a DataLoader with 16 workers alone holds "
                f"about 150; below {NOFILE_SOFT_FLOOR} workers and NCCL run out)",
                f"docker run --ulimit nofile={NOFILE_NEED}:524288 (ulimit -n {NOFILE_NEED})",
                FaultClass.CONFIG,
                code=NOFILE_LOW,
            )
        )
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    lows = [
        f"nproc {nproc}"
        for _ in [0]
        if nproc != resource.RLIM_INFINITY and nproc < NPROC_NEED and os.getuid()
    ]
    lows += [f"cgroup pids.max {pids}" for _ in [0] if pids is not None and pids < NPROC_NEED]
    if lows:
        out.append(
            Finding(
                f"processes+threads limited ({', '.join(lows)}; a job needs {NPROC_NEED}+ "
                "for intra-op threads, DataLoader workers, NCCL threads)",
                "docker run --pids-limit 4096 --ulimit nproc=65536, or the pod's pids limit",
                FaultClass.CONFIG,
                code=NPROC_LOW,
            )
        )
    if quota is not None and quota + 0.5 < threads and not os.environ.get("OMP_NUM_THREADS"):
        out.append(
            Finding(
                f"the cgroup CPU quota is {quota:g} CPUs but torch starts "
                f"{threads} intra-op threads: they are throttled and CPU ops slow down (measured: a matmul loop under "
                "a 0.5-CPU quota took 4.6x as long with torch's 2 threads as with 1; bench/cpu_quota.py)",
                f"export OMP_NUM_THREADS={max(1, int(quota))} or call torch.set_num_threads({max(1, int(quota))})",
                FaultClass.CONFIG,
                code=CPU_QUOTA_BELOW_THREADS,
            )
        )
    return out


def runtime_profile(ctx: Context) -> Result:
    """Name what the runtime's restrictions break in a PyTorch job; list the harmless ones as facts."""
    status = status_fields()
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    measured = {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "root_readonly": "ro" in mount_options("/"),
        "no_new_privs": status.get("NoNewPrivs", "?").strip(),
        "seccomp": status.get("Seccomp", "?").strip(),
        "cap_eff": status.get("CapEff", "?").strip(),
        "temp_dir": temp_dir(),
        "shm_options": sorted(mount_options("/dev/shm") & {"noexec", "nosuid", "nodev", "ro"}),
        "nofile": limit_text(resource.RLIMIT_NOFILE),
    }
    cgroup = own_limits()
    if isinstance(cgroup, Limits):
        measured["cgroup"] = cgroup.cgroups.get("cpu") or cgroup.cgroups.get("pids") or "?"
    findings = temp_findings() + passwd_findings() + limit_findings(threads, cgroup)
    if not findings:
        return passed("the runtime's restrictions break nothing a PyTorch job needs", measured=measured)
    codes = [f.code for f in findings]
    return warned(
        first_of([f.problem for f in findings]),
        "; ".join(f.fix for f in findings),
        measured={**measured, "codes": codes},
        fault_class=FaultClass.CONFIG,
        code=codes[0],
    )


CHECKS = (
    CheckSpec(
        "container.runtime",
        runtime_profile,
        "hardened runtime (read-only, uid, limits) leaves a job what it needs",
        isolated=False,
        timeout_s=5,
    ),
)
