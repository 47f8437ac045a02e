"""Name a hardened runtime's restriction in a check's crash: read-only temp, no passwd entry, low process limits.

A hardened container (`docker run --read-only`, `--user 123456:0`, `--pids-limit`, `--ulimit nofile=`, Kubernetes'
restricted Pod Security Standard, OpenShift's arbitrary uid) takes away what PyTorch's own code quietly assumes.
What breaks is the container's configuration, never the node: every finding here is `config`, with a stable code.
"""

from __future__ import annotations

import errno
import os
import resource
import traceback

from envcheck.core.result import FaultClass, Result, failed

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
NO_PASSWD_ENTRY = "runtime.no_passwd_entry"
SHM_SMALL = "shm.small"  # emitted by container.shm and the dist checks, which share this module's shm rule
NOFILE_LOW = "runtime.nofile_low"
NPROC_LOW = "runtime.nproc_low"
TMP_FULL = "runtime.tmp_full"
TMP_READONLY = "runtime.tmp_readonly"

NO_PASSWD = "getpwuid(): uid not found"
NO_TEMP = "No usable temporary directory found"
NO_THREAD = "can't start new thread"
WRITE_FIX = (
    "give it a writable place: `docker run --tmpfs /tmp` (or `-e TMPDIR=` a writable mount), a Kubernetes "
    "`emptyDir` on /tmp; move caches with TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, XDG_CACHE_HOME, HOME"
)
PASSWD_FIX = (
    "set USER and LOGNAME (getpass.getuser reads them first), or add a passwd entry for the uid (nss_wrapper; "
    "envcheck's images make /etc/passwd group-0 writable for OpenShift's arbitrary uid)"
)
# /dev/shm: DataLoader workers pass batches through it and NCCL's SHM transport keeps its buffers there; Docker's
# default is 64 MiB. Under 1 GiB is the container's setting (shm.small), never the node's.
MIN_SHM_BYTES = 1 << 30
SHM_FIX = "docker run --ipc=host ... (or --shm-size=8g; in compose: ipc: host or shm_size: 8gb)"
NOFILE_NEED = (
    4096  # what to raise an exhausted limit to: room for many DataLoader workers, NCCL's sockets, shm fds
)
# Below this soft limit container.runtime warns before anything ran out. Measured (bench/nofile_need.py, two runs on
# a 2-core machine): a DataLoader with 8 workers (prefetch 2, 4 tensors a batch) peaks at 74-98 fds in the main
# process and needs a soft limit of 91-103; 16 workers peak at 146, 32 at 302; a gloo rank of 4 holds 30. NCCL raises its own soft limit to the hard
# one at init (NVIDIA/nccl src/bootstrap.cc, setFilesLimit). 1024, the soft default of Docker >= 25 and containerd
# >= 2.0 (1024:524288, moby/moby#45534, containerd/containerd#8924) and of systemd hosts, is therefore healthy.
NOFILE_SOFT_FLOOR = 256
NPROC_NEED = 512  # torch's intra-op threads, DataLoader workers, NCCL's proxy threads, one rank per GPU


def limit_text(which: int) -> str:
    """`soft/hard` of an rlimit, `unlimited` spelled out."""
    soft, hard = resource.getrlimit(which)
    return "/".join("unlimited" if v == resource.RLIM_INFINITY else str(v) for v in (soft, hard))


def pids_max() -> str | None:
    """The cgroup's pids.max (v2 or v1), or None where it is unlimited or unreadable."""
    for path in ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"):
        try:
            with open(path) as fh:
                value = fh.read().strip()
        except OSError:
            continue
        return None if value == "max" else value
    return None


def nofile_low(what: str) -> Result:
    """The open-file limit ran out."""
    return failed(
        f"{what}: the open-file limit (nofile {limit_text(resource.RLIMIT_NOFILE)}) ran out",
        f"raise it to at least {NOFILE_NEED} (a PyTorch job with DataLoader workers and NCCL needs "
        f"thousands): `docker run --ulimit nofile=65536:65536`, `ulimit -n 65536`, or the container "
        "runtime's default in Kubernetes",
        fault_class=FaultClass.CONFIG,
        code=NOFILE_LOW,
    )


def nproc_low(what: str) -> Result:
    """The process/thread limit ran out (RLIMIT_NPROC counts threads of the uid; cgroup pids.max of the pod)."""
    pids = pids_max()
    where = f"nproc {limit_text(resource.RLIMIT_NPROC)} for uid {os.getuid()}" + (
        f", cgroup pids.max {pids}" if pids else ""
    )
    return failed(
        f"{what}: the process/thread limit ({where}) ran out",
        f"allow at least {NPROC_NEED} processes+"
        "threads (torch's intra-op threads, DataLoader workers, NCCL's threads, one rank per GPU): "
        "`docker run --pids-limit 4096 --ulimit nproc=65536`, `ulimit -u`, the pod's pids limit",
        fault_class=FaultClass.CONFIG,
        code=NPROC_LOW,
    )


def no_passwd(what: str) -> Result:
    """The uid has no passwd entry and USER/LOGNAME are unset."""
    return failed(
        f"{what}: uid {os.getuid()} has no passwd entry and USER/LOGNAME are unset, so "
        "getpass.getuser() raises KeyError",
        PASSWD_FIX,
        fault_class=FaultClass.CONFIG,
        code=NO_PASSWD_ENTRY,
    )


def tmp_unwritable(what: str, detail: str, full: bool = False) -> Result:
    """A temp/cache/HOME dir a check writes to is read-only or full."""
    state = "full" if full else "read-only"
    return failed(
        f"{what}: a temp/cache dir is {state} ({detail})",
        WRITE_FIX,
        fault_class=FaultClass.CONFIG,
        code=TMP_FULL if full else TMP_READONLY,
    )


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def runtime_cause(
    exc: BaseException, what: str = "the check could not run", trace: bool = True
) -> Result | None:
    """The hardened-runtime restriction behind `exc` (or anything it wraps), or None when it is none of them."""
    for link in _chain(exc):
        text = str(link)
        if isinstance(link, OSError):
            if link.errno in (errno.EMFILE, errno.ENFILE):
                return _with_details(trace, nofile_low(what), exc)
            if link.errno == errno.EAGAIN:  # fork/clone refused: RLIMIT_NPROC or pids.max
                return _with_details(trace, nproc_low(what), exc)
            if link.errno in (errno.EROFS, errno.EACCES) and link.filename:
                return _with_details(trace, tmp_unwritable(what, f"{link.strerror}: {link.filename}"), exc)
            if link.errno == errno.ENOSPC:
                return _with_details(
                    trace, tmp_unwritable(what, f"{link.strerror}: {link.filename}", full=True), exc
                )
        if NO_TEMP in text:
            return _with_details(trace, tmp_unwritable(what, text.splitlines()[0][:300]), exc)
        if any(
            t in text for t in (NO_THREAD, "Resource temporarily unavailable", "process limit is reached")
        ):
            return _with_details(trace, nproc_low(what), exc)
        if NO_PASSWD in text:
            return _with_details(trace, no_passwd(what), exc)
        if "Too many open files" in text:
            return _with_details(trace, nofile_low(what), exc)
        if "Read-only file system" in text:
            return _with_details(trace, tmp_unwritable(what, text.splitlines()[0][:300]), exc)
    return None


def _with_details(trace: bool, result: Result, exc: BaseException) -> Result:
    from dataclasses import replace

    return (
        result if not trace else replace(result, details="".join(traceback.format_exception(exc))[-20_000:])
    )
