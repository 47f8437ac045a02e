"""NVML through nvidia-ml-py: THE one budgeted reader (`read_nvml`). Every NVML read of envcheck runs inside it,
through the typed fields of `envcheck.probe.nvml_fields`: the CUDA capture, the inventory, gpu.health, node.profile,
the GPU usage reads (`envcheck.probe.gpu_usage`) and cuda.available's compute modes.

A GPU in a bad state can hang NVML calls (ctypes releases the GIL while one waits), so every reader runs in a
daemon thread given up on after NVML_BUDGET_S, and the hang is evidence (probe.hang): the call that did not
return, the budget, and the thread's kernel state and wchan, rather than a timed-out check.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from envcheck.probe.hang import Budgeted, call_in_thread, hang_evidence

T = TypeVar("T")
# One budget for every NVML reader: under gpu.health's 30 s and cuda.available's 60 s timeouts, and well inside
# slurmd's 60 s HealthCheckProgram limit, so a hung NVML is named by envcheck, not killed by its caller.
NVML_BUDGET_S = 15.0
# A GPU with persistence mode off is torn down when its last client closes it, and every new client pays its
# initialisation again (NVIDIA's Driver Persistence doc: "long load times ... on the order of seconds"; nvtrust#113
# measured cuInit at 6.5 s on one GPU): a cold budget grows with the GPUs to initialise.
COLD_S_PER_GPU = 6.0
_HUNG: dict[
    int, dict[str, Any]
] = {}  # id(pynvml module) -> the evidence of a reader of it that did not return


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


def read_nvml(
    body: Callable[[Any, dict[str, Any]], T],
    unavailable: Callable[[BaseException], T],
    budget_s: float = NVML_BUDGET_S,
) -> Budgeted[T]:
    """`body(pynvml, progress)` inside an NVML session, in a thread within `budget_s`. The body records what it
    is doing in `progress` ('call', 'gpu'); on overrun `.hang` is the evidence (call, budget, thread state and
    wchan) and `.progress` holds what was read before."""

    def run(progress: dict[str, Any]) -> T:
        progress["call"] = "nvmlInit"
        return with_nvml(lambda pynvml: body(pynvml, progress), unavailable)

    bindings = id(sys.modules.get("pynvml"))
    if bindings in _HUNG and any(
        t.name == "envcheck-nvmlInit" and t.is_alive() for t in threading.enumerate()
    ):
        # An earlier reader in this process is still stuck in the driver (through these same bindings): a second
        # one would wait the whole budget again behind the same lock, so the earlier evidence is the answer.
        return Budgeted(hang={**_HUNG[bindings], "earlier": True})
    got = call_in_thread(run, budget_s, "nvmlInit")
    if got.hang is not None:
        _HUNG[id(sys.modules.get("pynvml"))] = got.hang
    return got


def unavailable(budget_s: float = NVML_BUDGET_S) -> str | None:
    """Why NVML cannot be used here (not installed, no driver, a hang), or None when it starts."""
    got = read_nvml(
        lambda pynvml, progress: None,
        lambda exc: (
            "NVML bindings not installed (pip install nvidia-ml-py)"
            if isinstance(exc, ImportError)
            else f"NVML could not start: {exc} (no NVIDIA driver loaded?)"
        ),
        budget_s,
    )
    return hang_text(got.hang) if got.hang is not None else got.value


def hang_text(hang: dict[str, Any]) -> str:
    """'NVML did not answer within 15 s (a GPU or the driver is hung)', plus the call, state and wchan when the
    reader is stuck in the kernel (D state)."""
    text = f"NVML did not answer within {hang['budget_s']:g} s (a GPU or the driver is hung)"
    if hang.get("state") == "D":
        text += f": {hang['call']} in uninterruptible sleep (D)" + (
            f", wchan {hang['wchan']}" if hang.get("wchan") else ""
        )
    return text


def init_budget(gpus: int, persistent: bool, base_s: float = NVML_BUDGET_S) -> float:
    """The time a first NVML or CUDA initialisation may take: `base_s` with persistence mode (the GPUs stay
    initialised), else base_s plus COLD_S_PER_GPU for each GPU the driver must bring up."""
    return base_s if persistent else base_s + COLD_S_PER_GPU * max(0, gpus)


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
