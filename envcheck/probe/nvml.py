"""NVML through nvidia-ml-py: THE one budgeted reader (`read_nvml`) used by the CUDA capture, the inventory and
gpu.health, and the per-GPU MIG reader.

A GPU in a bad state can hang NVML calls (ctypes releases the GIL while one waits), so every reader runs in a
daemon thread given up on after NVML_BUDGET_S, and the hang is evidence (probe.hang): the call that did not
return, the budget, and the thread's kernel state and wchan, rather than a timed-out check.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from envcheck.probe.hang import Budgeted, call_in_thread

T = TypeVar("T")
# One budget for every NVML reader: under gpu.health's 30 s and cuda.available's 60 s timeouts, and well inside
# slurmd's 60 s HealthCheckProgram limit, so a hung NVML is named by envcheck, not killed by its caller.
NVML_BUDGET_S = 15.0
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
