"""NVML through nvidia-ml-py: one session helper and the per-GPU MIG reader, each within a time budget.

A GPU in a bad state can hang NVML calls (ctypes releases the GIL while one waits), so readers run in a daemon
thread that is given up on after its budget, and the hang is named rather than timing out the check that asked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
NVML_BUDGET_S = 15.0  # a GPU in a bad state can hang NVML calls: well under cuda.available's 60 s timeout


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



def nvml_gpus(budget_s: float = NVML_BUDGET_S) -> list[dict[str, Any]] | str:
    """Each GPU's UUID, MIG mode and MIG device UUIDs from NVML (an entry's `error` when NVML fails on that GPU,
    e.g. 'GPU is lost'); why NVML cannot tell, as text. NVML is asked in a thread with a time budget, so a hung
    NVML is named ('NVML did not answer within 15 s') rather than timing out the check that asked."""
    answer: list[list[dict[str, Any]] | str] = []
    reader = threading.Thread(target=lambda: answer.append(_nvml_gpus()), name="envcheck-nvml", daemon=True)
    reader.start()
    reader.join(budget_s)
    return answer[0] if answer else f"NVML did not answer within {budget_s:g} s (a GPU or the driver is hung)"


def _nvml_gpus() -> list[dict[str, Any]] | str:
    def gpus(pynvml: Any) -> list[dict[str, Any]] | str:
        try:
            return [_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:
            return f"NVML: {exc}"

    return with_nvml(gpus, lambda exc: "NVML bindings not installed (pip install nvidia-ml-py)"
                     if isinstance(exc, ImportError) else f"NVML init: {exc}")


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
