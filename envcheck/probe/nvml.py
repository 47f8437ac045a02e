"""NVML through nvidia-ml-py: THE one budgeted reader (`read_nvml`) used by the CUDA capture, the inventory and
gpu.health, and the per-GPU MIG reader.

A GPU in a bad state can hang NVML calls (ctypes releases the GIL while one waits), so every reader runs in a
daemon thread given up on after NVML_BUDGET_S, and the hang is evidence (probe.hang): the call that did not
return, the budget, and the thread's kernel state and wchan, rather than a timed-out check.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from envcheck.probe.hang import Budgeted, call_in_thread, hang_evidence
from envcheck.probe.pci import bus_key

T = TypeVar("T")
# One budget for every NVML reader: under gpu.health's 30 s and cuda.available's 60 s timeouts, and well inside
# slurmd's 60 s HealthCheckProgram limit, so a hung NVML is named by envcheck, not killed by its caller.
NVML_BUDGET_S = 15.0
# A GPU with persistence mode off is torn down when its last client closes it, and every new client pays its
# initialisation again (NVIDIA's Driver Persistence doc: "long load times ... on the order of seconds"; nvtrust#113
# measured cuInit at 6.5 s on one GPU): a cold budget grows with the GPUs to initialise.
COLD_S_PER_GPU = 6.0
COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}
FULL = 0.9  # a GPU with this share of its memory in use has no room for a context: held, not broken
_HUNG: dict[int, dict[str, Any]] = {}  # id(pynvml module) -> the evidence of a reader of it that did not return


def text(value: Any) -> str:
    """NVML strings arrive as bytes from older bindings and as str from newer ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def with_nvml(body: Callable[[Any], T], unavailable: Callable[[BaseException], T]) -> T:
    """`body(pynvml)` between nvmlInit and nvmlShutdown (a failing shutdown is ignored); `unavailable(exc)` when
    the bindings are not installed (ImportError) or NVML cannot start (NVML's own error, e.g. no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # ImportError, pynvml.NVMLError and its many subclasses
        return unavailable(exc)
    try:
        return body(pynvml)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def read_nvml(body: Callable[[Any, dict[str, Any]], T], unavailable: Callable[[BaseException], T],
              budget_s: float = NVML_BUDGET_S) -> Budgeted[T]:
    """`body(pynvml, progress)` inside an NVML session, in a thread within `budget_s`. The body records what it
    is doing in `progress` ('call', 'gpu'); on overrun `.hang` is the evidence (call, budget, thread state and
    wchan) and `.progress` holds what was read before."""
    def run(progress: dict[str, Any]) -> T:
        progress["call"] = "nvmlInit"
        return with_nvml(lambda pynvml: body(pynvml, progress), unavailable)

    bindings = id(sys.modules.get("pynvml"))
    if bindings in _HUNG and any(t.name == "envcheck-nvmlInit" and t.is_alive() for t in threading.enumerate()):
        # An earlier reader in this process is still stuck in the driver (through these same bindings): a second
        # one would wait the whole budget again behind the same lock, so the earlier evidence is the answer.
        return Budgeted(hang={**_HUNG[bindings], "earlier": True})
    got = call_in_thread(run, budget_s, "nvmlInit")
    if got.hang is not None:
        _HUNG[id(sys.modules.get("pynvml"))] = got.hang
    return got


def hang_text(hang: dict[str, Any]) -> str:
    """'NVML did not answer within 15 s (a GPU or the driver is hung)', plus the call, state and wchan when the
    reader is stuck in the kernel (D state)."""
    text = f"NVML did not answer within {hang['budget_s']:g} s (a GPU or the driver is hung)"
    if hang.get("state") == "D":
        text += f": {hang['call']} in uninterruptible sleep (D)" + (f", wchan {hang['wchan']}" if hang.get("wchan")
                                                                   else "")
    return text


def nvml_gpus(budget_s: float = NVML_BUDGET_S) -> list[dict[str, Any]] | str:
    """Each GPU's UUID, MIG mode and MIG device UUIDs from NVML (an entry's `error` when NVML fails on that GPU,
    e.g. 'GPU is lost'); why NVML cannot tell, as text (a hang: 'NVML did not answer within 15 s ...')."""
    def gpus(pynvml: Any, progress: dict[str, Any]) -> list[dict[str, Any]] | str:
        try:
            progress["call"] = "nvmlDeviceGetCount"
            return [_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:
            return f"NVML: {exc}"

    got = read_nvml(gpus, lambda exc: "NVML bindings not installed (pip install nvidia-ml-py)"
                    if isinstance(exc, ImportError) else f"NVML init: {exc}", budget_s)
    if got.hang is not None or got.value is None:
        return hang_text(got.hang or {"budget_s": budget_s})
    return got.value


def _nvml_gpu(pynvml: Any, i: int) -> dict[str, Any]:
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        uuid = text(pynvml.nvmlDeviceGetUUID(h))
    except Exception as exc:
        return {"index": i, "error": str(exc) or type(exc).__name__}
    try:
        mig = bool(pynvml.nvmlDeviceGetMigMode(h)[0])
    except Exception:  # NOT_SUPPORTED: a GPU without MIG
        mig = False
    slices: list[str] = []
    for k in range(int(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)) if mig else 0):
        try:
            slices.append(text(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, k))))
        except Exception:  # that slot holds no MIG device
            continue
    return {"index": i, "uuid": uuid, "mig": mig, "mig_devices": slices}


def init_budget(gpus: int, persistent: bool, base_s: float = NVML_BUDGET_S) -> float:
    """The time a first NVML or CUDA initialisation may take: `base_s` with persistence mode (the GPUs stay
    initialised), else base_s plus COLD_S_PER_GPU for each GPU the driver must bring up."""
    return base_s if persistent else base_s + COLD_S_PER_GPU * max(0, gpus)


def _process_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()[:64] or None
    except OSError:  # another PID namespace, or gone
        return None


def usage(pynvml: Any, handle: Any) -> dict[str, Any]:
    """Who uses one GPU: its compute processes (pid, MiB, name), memory total/used (MiB), compute mode and MIG
    mode; a field NVML cannot give is left out."""
    out: dict[str, Any] = {}
    try:
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        out["processes"] = [{"pid": int(p.pid), "used_mib": int((getattr(p, "usedGpuMemory", 0) or 0) // 2**20),
                             "name": _process_name(int(p.pid))} for p in procs]
    except Exception:  # NOT_SUPPORTED (MIG parents, old GPUs), an old binding
        pass
    try:
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        out["memory"] = {"total_mib": int(mem.total // 2**20), "used_mib": int(mem.used // 2**20)}
    except Exception:
        pass
    try:
        mode = int(pynvml.nvmlDeviceGetComputeMode(handle))
        out["compute_mode"] = COMPUTE_MODES.get(mode, str(mode))
    except Exception:
        pass
    try:
        out["mig"] = bool(pynvml.nvmlDeviceGetMigMode(handle)[0])
    except Exception:
        pass
    return out


def foreign(processes: Any, own: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """The processes of a usage record that are not this one (or `own`'s): another job's, another user's."""
    mine = own | {os.getpid()}
    return [p for p in processes or [] if isinstance(p, dict) and p.get("pid") not in mine]


def holder(usage: Mapping[str, Any]) -> str | None:
    """Who holds a GPU, by NVML's evidence ('pid 4242 (python), 76.0 of 79.6 GiB in use'), or None when nothing
    shows that another process has it."""
    others = foreign(usage.get("processes"))
    parts = [", ".join(f"pid {p.get('pid')}" + (f" ({p['name']})" if p.get("name") else "") for p in others[:3])]
    mem = usage.get("memory")
    used, total = (mem.get("used_mib"), mem.get("total_mib")) if isinstance(mem, dict) else (None, None)
    full = False
    if isinstance(used, int) and isinstance(total, int) and total > 0 and used >= FULL * total:
        full = True
        parts.append(f"{used / 1024:.1f} of {total / 1024:.1f} GiB in use")
    mode = usage.get("compute_mode")
    if mode in ("EXCLUSIVE_PROCESS", "EXCLUSIVE_THREAD", "PROHIBITED"):
        parts.append(f"compute mode {mode}")
    if not others and not full and mode not in ("EXCLUSIVE_PROCESS", "EXCLUSIVE_THREAD", "PROHIBITED"):
        return None
    return ", ".join(p for p in parts if p)


def read_usage(budget_s: float = NVML_BUDGET_S) -> dict[str, dict[str, Any]] | str:
    """Every GPU's usage by PCI key ('0000:18:00'), or why NVML cannot tell (not installed, no driver, a hang)."""
    def body(pynvml: Any, progress: dict[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        progress["call"] = "nvmlDeviceGetCount"
        for i in range(int(pynvml.nvmlDeviceGetCount())):
            progress.update(call=f"NVML reads of GPU {i}", gpu=i)
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                bus = text(pynvml.nvmlDeviceGetPciInfo(h).busId)
            except Exception:
                continue
            out[bus_key(bus)] = {"index": i, **usage(pynvml, h)}
        return out

    got = read_nvml(lambda pynvml, progress: _guarded(body, pynvml, progress), lambda exc: f"NVML: {exc}", budget_s)
    if got.hang is not None:
        return hang_text(got.hang)
    return got.value if got.value is not None else "NVML gave no answer"


def _guarded(body: Callable[[Any, dict[str, Any]], T], pynvml: Any, progress: dict[str, Any]) -> T | str:
    try:
        return body(pynvml, progress)
    except Exception as exc:  # NVMLError from the count itself
        return f"NVML: {exc}"


@dataclass
class Warmup:
    """The node path's hold on NVML: how long the first initialisation took (None: it did not finish within
    `budget_s`, and `hang` is the evidence: the thread's state, sleeping or stuck in the kernel)."""

    budget_s: float
    seconds: float | None = None
    hang: dict[str, Any] | None = None
    error: str | None = None  # NVML could not start at all (not installed, no driver): nothing to hold


_WARMUP: list[Warmup] = []  # the current hold (at most one)
_RELEASE = threading.Event()


def warm_up(budget_s: float) -> Warmup:
    """Initialise NVML once, in a thread that then holds it until `release()`: while one client holds a GPU the
    driver keeps it initialised, so the readers and the CUDA probe after this pay no cold start again. Waits at
    most `budget_s`; an initialisation still running then is recorded as the evidence (state, wchan) and later
    readers answer with it instead of waiting again."""
    state = Warmup(budget_s)
    done = threading.Event()
    began = time.monotonic()
    tid: list[int] = []
    _RELEASE.clear()

    def hold() -> None:
        tid.append(threading.get_native_id())
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError: no hold; the checks say why themselves
            state.error = str(exc) or type(exc).__name__
            done.set()
            return
        state.seconds = round(time.monotonic() - began, 3)
        _HUNG.pop(id(pynvml), None)  # slow, not hung: it finished, so later readers need not wait or give up
        done.set()
        _RELEASE.wait()
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass

    threading.Thread(target=hold, name="envcheck-nvmlInit", daemon=True).start()
    if not done.wait(budget_s):
        state.hang = hang_evidence("nvmlInit", budget_s, f"/proc/self/task/{tid[0]}" if tid else None)
        state.hang["where"] = "thread"
        _HUNG[id(sys.modules.get("pynvml"))] = state.hang
    _WARMUP[:] = [state]
    return state


def release() -> None:
    """End the hold started by `warm_up` (its thread shuts NVML down; a thread still stuck in the driver is left)."""
    _RELEASE.set()
    _WARMUP.clear()


def warmup() -> Warmup | None:
    """The current hold's record, or None when the node path did not warm up (a torch run, a test)."""
    return _WARMUP[0] if _WARMUP else None
