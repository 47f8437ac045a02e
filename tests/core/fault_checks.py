"""Deliberately broken checks, importable by the spawned worker (module:function references)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time

from envcheck.core.check import Context
from envcheck.core.result import Result, failed, passed


def sleeps_forever(ctx: Context) -> Result:
    """Hangs, and starts a grandchild that would hang too (it must die with the group)."""
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])  # inherits ENVCHECK_TEST_MARKER
    print("about to hang", flush=True)
    time.sleep(3600)
    return passed("unreachable")


def holds_a_dataloader(ctx: Context) -> Result:
    """Takes one batch from a real 1-worker DataLoader, then hangs: its worker process holds the `pymp-*` dir
    multiprocessing made in the temp dir to pass the batch's shared memory (resource_sharer), which only that
    process's exit handler would remove."""
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Zeros(Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 1000

        def __getitem__(self, index: int) -> torch.Tensor:
            return torch.zeros(1024)

    batches = iter(DataLoader(Zeros(), batch_size=None, num_workers=1))
    next(batches)
    time.sleep(3600)
    return passed("unreachable")


def temp_dirs(ctx: Context) -> Result:
    """Reports the temp dirs this worker got: TMPDIR, what tempfile and Inductor use, the user's temp dir."""
    import tempfile

    from envcheck.core.rundir import user_temp_dir

    return passed(
        "temp dirs",
        measured={
            "TMPDIR": os.environ.get("TMPDIR"),
            "tempfile": tempfile.gettempdir(),
            "inductor": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
            "user": user_temp_dir(),
            "pid": os.getpid(),
        },
    )


def inductor_env(ctx: Context) -> Result:
    """Reports Inductor's cache variable as this worker found it (before it imported anything) and as the engine
    records the user's own (envcheck.core.rundir.user_env)."""
    from envcheck.core.rundir import user_env

    return passed(
        "inductor env",
        measured={
            "found": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
            "users": user_env("TORCHINDUCTOR_CACHE_DIR"),
        },
    )


def segfaults(ctx: Context) -> Result:
    """Dereferences NULL."""
    print("about to segfault", flush=True)
    ctypes.string_at(0)
    return passed("unreachable")


def exits_hard(ctx: Context) -> Result:
    """Leaves without cleanup."""
    print("about to os._exit(7)", flush=True)
    os._exit(7)


def raises(ctx: Context) -> Result:
    """Raises an ordinary exception."""
    raise ValueError("boom from a check")


def healthy(ctx: Context) -> Result:
    """Passes and prints something that must not reach the protocol stream."""
    print("noise on stdout from a check")
    return passed("fine", measured={"pid": os.getpid()})


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gpu_user(ctx: Context) -> Result:
    """Stands in for a check holding a CUDA context: records its interval and which earlier GPU workers live."""
    pids_file = os.path.join(os.environ["ENVCHECK_TEST_DIR"], "gpu-pids")
    with open(pids_file, "a+") as fh:
        fh.seek(0)
        earlier = {int(line) for line in fh.read().split()} - {os.getpid()}
        fh.write(f"{os.getpid()}\n")
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on the host
    time.sleep(0.3)
    return passed(
        "gpu",
        measured={
            "pid": os.getpid(),
            "start": start,
            "end": time.monotonic(),
            "earlier_alive": sorted(p for p in earlier if _alive(p)),
        },
    )


def _meet(ctx: Context, mine: str, theirs: str) -> Result:
    """Rendezvous: True only when the other side runs at the same time (bounded wait, no speed assertion)."""
    folder = os.environ["ENVCHECK_TEST_DIR"]
    open(os.path.join(folder, mine), "w").close()
    deadline = time.monotonic() + 15
    while not os.path.exists(os.path.join(folder, theirs)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return passed("met", measured={"met": os.path.exists(os.path.join(folder, theirs)), "pid": os.getpid()})


def gpu_meets_cpu(ctx: Context) -> Result:
    """GPU side of the rendezvous."""
    return _meet(ctx, "gpu-up", "cpu-up")


def cpu_meets_gpu(ctx: Context) -> Result:
    """CPU side of the rendezvous."""
    return _meet(ctx, "cpu-up", "gpu-up")


def sticky_cuda_error(ctx: Context) -> Result:
    """Fails the way a check does after cudaErrorLaunchFailure (the context is poisoned from here on)."""
    raise RuntimeError("CUDA error: unspecified launch failure")


def where_am_i(ctx: Context) -> Result:
    """Which process runs it, its parent and group, and whether torch was there before the check ran."""
    return passed(
        "here",
        measured={
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "torch_preloaded": "torch" in sys.modules,
            "json_tool_preloaded": "json.tool" in sys.modules,
        },
    )


def busy_gpu(ctx: Context) -> Result:
    """Crashes the way CUDA does on an EXCLUSIVE_PROCESS GPU another process holds."""
    raise RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable")


def budget(ctx: Context) -> Result:
    """Reports how much time the runner gave it."""
    return passed("budget", measured={"left": ctx.time_left()})


def echoes_options(ctx: Context) -> Result:
    """Reports the typed options as the worker received them."""
    return passed("options", measured={"type": type(ctx.options).__name__, **ctx.options.to_dict()})


def gpu_meets_facts(ctx: Context) -> Result:
    """GPU side of the rendezvous with the facts (a GPU group running while the facts are collected)."""
    return _meet(ctx, "gpu-up", "facts-up")


def facts_meet_gpu() -> dict[str, object]:
    """A facts hook that waits for a GPU group to be running: facts collected beside the GPU lane, not after it."""
    import torch

    met = _meet(Context(), "facts-up", "gpu-up").measured
    return {"met": met["met"], "pid": met["pid"], "cuda_initialized": bool(torch.cuda.is_initialized())}


def imports_half_way(ctx: Context) -> Result:
    """Imports a module that registers itself and then fails (a read-only temp dir), letting the error escape."""
    import tests.core.half_import.no_temp_dir  # noqa: F401

    return passed("imported")


def catches_a_failed_import(ctx: Context) -> Result:
    """Imports the same module, catches its failure and reports it: nothing escapes, yet the process is changed."""
    try:
        import tests.core.half_import.no_temp_dir  # noqa: F401
    except OSError as exc:
        return failed(f"caught: {exc}")
    return passed("imported")


def imports_user_module(ctx: Context) -> Result:
    """Imports a module that registers itself and then asks getpass.getuser()."""
    import tests.core.half_import.asks_the_user  # noqa: F401

    return passed("imported")


def tries_an_optional_import(ctx: Context) -> Result:
    """An optional dependency that is not installed: an ImportError caught, as libraries do; nothing was changed."""
    try:
        import envcheck_no_such_optional_module  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        pass
    return passed("optional import absent", measured={"pid": os.getpid()})


def reports_pid(ctx: Context) -> Result:
    """Which worker process ran it."""
    return passed("pid", measured={"pid": os.getpid()})
