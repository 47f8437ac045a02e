"""node.cuda_driver: the CUDA driver API works on every GPU this process was given, proven without torch
(probe.cuda_driver): cuInit, the device count, and per GPU a context and a 1 MiB copy there and back.

A GPU another process holds is not touched (NVML's compute processes, read first): a context there would take
memory from another job, or be refused by an EXCLUSIVE_PROCESS GPU. A context refused with OUT_OF_MEMORY (2) or
DEVICES_UNAVAILABLE (46) is a busy GPU, not a broken one, when NVML shows who holds it (a process, most of the
memory, an exclusive or prohibited compute mode). Each real failure is a node finding with a stable code. Slow is
not hung: a cuInit still sleeping at its budget is a cold start (a warning naming persistence mode) the first time,
the node's when it repeats; one stuck in the kernel (D state) is `cuda.init_hang` with the kernel's view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.checks.cuda.codes import CUDA_CODES
from envcheck.checks.cuda.live_errors import GPU_UNUSABLE
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, errored, failed, passed, skipped, warned
from envcheck.probe.cuda_driver import CUDA_BUDGET_S, probe
from envcheck.probe.gpu_access import allocation, read_access
from envcheck.probe.gpu_usage import foreign, holder, read_usage
from envcheck.probe.hang import describe, stuck_in_kernel
from envcheck.probe.node_state import count_overrun
from envcheck.probe.nvml import NVML_BUDGET_S, init_budget, warmup
from envcheck.probe.pci import bus_key, pci_gpus

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
COPY_MISMATCH = "cuda.copy_mismatch"
DRIVER_CRASH = "cuda.driver_crash"
INIT_ERROR = "cuda.init_error"
INIT_HANG = "cuda.init_hang"
INIT_SLOW = "cuda.init_slow"
LIBCUDA_MISSING = "cuda.libcuda_missing"

HANG_FIX = (
    "the driver is wedged: drain the node; nvidia-smi -q (does it hang too?); dmesg | grep -iE 'NVRM|Xid'; "
    "reboot the node (a task in D state cannot be killed); RMA the GPU if it recurs"
)
SLOW_FIX = (
    "enable persistence mode so the GPUs stay initialised between jobs: sudo nvidia-smi -pm 1, or run "
    "nvidia-persistenced (systemctl enable --now nvidia-persistenced)"
)
LIBCUDA_FIX = (
    "install the driver's user-space libraries of the loaded kernel module's version (cat "
    "/proc/driver/nvidia/version; ldconfig -p | grep libcuda.so.1), or reinstall the driver"
)
GPU_FIX = (
    "drain; nvidia-smi -q -i {i} (ECC, retired pages, Xid in dmesg); nvidia-smi -r -i {i} (GPU reset) or "
    "reboot the node; RMA if it recurs"
)
BUSY_CODES = {2: "CUDA_ERROR_OUT_OF_MEMORY", 46: "CUDA_ERROR_DEVICES_UNAVAILABLE"}
NODE_MODES = ("prolog", "health", "npd")


def _gpu_label(gpu: Mapping[str, Any]) -> str:
    extra = [str(gpu[k]) for k in ("name", "pci") if gpu.get(k)]
    return f"GPU {gpu.get('index')}" + (f" ({', '.join(extra)})" if extra else "")


def _usage_of(data: Mapping[str, Any], pci: Any) -> Mapping[str, Any]:
    usage = data.get("usage")
    found = usage.get(bus_key(pci)) if isinstance(usage, dict) and isinstance(pci, str) else None
    return found if isinstance(found, dict) else {}


def _overrun(
    data: Mapping[str, Any], hang: dict[str, Any], budget_s: float, measured: dict[str, Any]
) -> Result:
    at = f" on GPU {hang['gpu']}" if isinstance(hang.get("gpu"), int) else ""
    if stuck_in_kernel(hang):
        return failed(
            f"the CUDA driver hangs{at}: {describe(hang)}",
            HANG_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=INIT_HANG,
        )
    count = data.get("overruns")
    if isinstance(count, int) and count >= 2:
        return failed(
            f"the CUDA driver was still working{at} when its budget ran out, in {count} runs in a row: "
            f"{describe(hang)}",
            f"{SLOW_FIX}; if it stays slow, {HANG_FIX}",
            measured=measured,
            fault_class=FaultClass.NODE,
            code=INIT_SLOW,
        )
    return warned(
        f"a slow start, not a hang{at}: {describe(hang)}; the process was working, not stuck in the "
        f"kernel (a cold GPU initialisation with persistence mode off takes seconds per GPU)",
        SLOW_FIX,
        measured=measured,
        fault_class=FaultClass.NODE,
        code=INIT_SLOW,
    )


def verdict(data: Mapping[str, Any], budget_s: float = CUDA_BUDGET_S) -> Result:
    """The node's verdict from a probe's output (probe.cuda_driver.probe) and NVML's usage (`usage`)."""
    dev = list(data.get("dev") or [])
    measured: dict[str, Any] = {"dev": dev, "budget_s": budget_s}
    if isinstance(data.get("hang"), dict):
        measured["hang"] = data["hang"]
        return _overrun(data, data["hang"], budget_s, measured)
    if data.get("error"):
        crashed = data.get("crashed_in")
        if isinstance(crashed, dict):  # the driver library killed the process inside one of its calls
            measured["crashed_in"] = crashed
            return failed(
                f"libcuda crashed the process in {crashed.get('call')}: {data['error']}",
                HANG_FIX,
                measured=measured,
                fault_class=FaultClass.NODE,
                code=DRIVER_CRASH,
            )
        return errored(str(data["error"]), measured=measured)  # envcheck's own (could not start a process)
    raw = data.get("done")
    done: dict[str, Any] = raw if isinstance(raw, dict) else {}
    measured.update({k: done.get(k) for k in ("libcuda", "driver_cuda", "count")})
    if not done.get("libcuda"):
        if not dev:
            return skipped("no NVIDIA driver here (no /dev/nvidia* node, no libcuda.so.1)", measured=measured)
        measured["dlopen_error"] = done.get("dlopen_error")
        return failed(
            f"the NVIDIA kernel module is loaded ({', '.join(dev[:3])}) but libcuda.so.1 cannot be "
            f"loaded: {done.get('dlopen_error')}",
            LIBCUDA_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=LIBCUDA_MISSING,
        )
    init = done.get("init")
    if isinstance(init, dict):
        code = int(init.get("code") or 0)
        problem, fix, _ = CUDA_CODES.get(
            code,
            (
                f"CUDA error {code}",
                "dmesg | grep -iE 'NVRM|Xid'; nvidia-smi; reload the driver or reboot the node",
                FaultClass.NODE,
            ),
        )
        if code == 999 and "nvidia-uvm" not in dev:
            problem += "; /dev/nvidia-uvm is missing: the nvidia_uvm module is not loaded"
            fix = "modprobe nvidia-uvm (or nvidia-modprobe -u -c0); " + fix
        measured["init"] = init
        return failed(
            f"{init.get('call')} returned {init.get('name')} ({code}): {problem}",
            fix,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=f"cuda.error.{code}" if code in CUDA_CODES else INIT_ERROR,
        )
    gpus = [g for g in done.get("gpus") or [] if isinstance(g, dict)]
    measured["gpus"] = gpus
    busy: list[str] = []
    broken: list[dict[str, Any]] = []
    unsure: list[str] = []
    for g in gpus:
        usage = _usage_of(data, g.get("pci"))
        if g.get("skipped"):
            busy.append(f"{_gpu_label(g)} not touched: held by {holder(usage) or 'another process'}")
            continue
        error = g.get("error")
        if not isinstance(error, dict):
            continue
        if error.get("code") in BUSY_CODES:
            held = holder(usage)
            if held:
                busy.append(f"{_gpu_label(g)}: {error.get('name')} ({error.get('code')}), held by {held}")
                continue
            if not isinstance(
                data.get("usage"), dict
            ):  # NVML could not say who holds it: no evidence either way
                unsure.append(
                    f"{_gpu_label(g)}: {error.get('call')} returned {error.get('name')} "
                    f"({error.get('code')}) and NVML cannot say who holds it ({data.get('usage')})"
                )
                continue
        broken.append(g)
    measured["busy"] = busy
    if broken:
        g = broken[0]
        e = g["error"]
        more = f" (+{len(broken) - 1} more GPU(s))" if len(broken) > 1 else ""
        idle = " with no other process on it" if e.get("code") in BUSY_CODES else ""
        return failed(
            f"{_gpu_label(g)}: {e.get('call')} returned {e.get('name')} ({e.get('code')}){idle}{more}",
            GPU_FIX.format(i=g.get("index")),
            measured=measured,
            fault_class=FaultClass.NODE,
            code=GPU_UNUSABLE,
        )
    wrong = [g for g in gpus if (g.get("copy") or {}).get("wrong")]
    if wrong:
        g = wrong[0]
        return failed(
            f"{_gpu_label(g)}: a 1 MiB copy to the GPU and back came back with {g['copy']['wrong']} wrong "
            "byte(s): its memory or PCIe path corrupts data",
            GPU_FIX.format(i=g.get("index")),
            measured=measured,
            fault_class=FaultClass.NODE,
            code=COPY_MISMATCH,
        )
    if unsure:
        return warned(
            unsure[0] + (f" (+{len(unsure) - 1} more)" if len(unsure) > 1 else ""),
            "nvidia-smi on that GPU shows who holds it; install nvidia-ml-py so envcheck can tell",
            measured=measured,
            fault_class=None,
        )  # no evidence either way: nobody's fault yet
    cuda = done.get("driver_cuda")
    version = (
        f"driver CUDA {cuda // 1000}.{cuda % 1000 // 10}"
        if isinstance(cuda, int) and cuda
        else "driver CUDA ?"
    )
    if not gpus:
        return skipped(f"cuInit succeeded but the driver lists no GPU ({version})", measured=measured)
    probed = len(gpus) - len(busy)
    tail = f"; {'; '.join(busy)}" if busy else ""
    return passed(
        f"{probed} GPU(s) take a context and a 1 MiB copy there and back through the driver API "
        f"({version}, no torch){tail}",
        measured=measured,
    )


def _budget(left: float | None) -> float:
    """CUDA_BUDGET_S once the node path's NVML hold has initialised the GPUs; else scaled like a cold start."""
    warm = warmup()
    if warm is not None and warm.seconds is not None:
        budget = CUDA_BUDGET_S
    else:
        access = read_access()
        bus = pci_gpus()
        alloc = allocation(access, bus)
        count = alloc.count if alloc.count is not None else (len(bus) if isinstance(bus, list) else 0)
        budget = init_budget(count, bool(access.get("persistenced")), CUDA_BUDGET_S)
    return budget if left is None else max(1.0, min(budget, left - 1.0))


def cuda_driver(ctx: Context) -> Result:
    """cuInit, the device count, a context and a small copy per GPU no other process holds, within a budget."""
    if not ctx.options.node_path:
        return skipped(
            "a torch run proves CUDA through torch (cuda.available, cuda.devices); this torch-free probe "
            "runs with --for prolog|npd, or --only node.cuda_driver"
        )
    budget = _budget(ctx.time_left())
    usage = read_usage(min(NVML_BUDGET_S, budget)) if probe_nvml() else "NVML bindings not installed"
    skip = [key for key, u in usage.items() if foreign(u.get("processes"))] if isinstance(usage, dict) else []
    data = probe(budget, skip=skip)
    data["usage"] = usage
    if ctx.options.cluster_mode in NODE_MODES:
        slow = isinstance(data.get("hang"), dict) and not stuck_in_kernel(data["hang"])
        data["overruns"], _ = count_overrun("cuda-init", slow)
    return verdict(data, budget)


def probe_nvml() -> bool:
    """Whether NVML's bindings are importable here (a torch-free node has them with envcheck[nvml])."""
    import importlib.util

    return importlib.util.find_spec("pynvml") is not None
