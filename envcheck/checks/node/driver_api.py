"""node.cuda_driver: the CUDA driver API works on every GPU, proven without torch (probe.cuda_driver): cuInit,
the device count, and per GPU a context and a 1 MiB copy there and back. Each failure is a node finding with a
stable code; a cuInit (or any driver call) that does not return is `cuda.init_hang` with the kernel's view."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.checks.cuda.layers import CUDA_CODES
from envcheck.core.check import Context
from envcheck.core.result import Result, errored, failed, passed, skipped
from envcheck.probe.cuda_driver import CUDA_BUDGET_S, probe
from envcheck.probe.hang import describe

HANG_FIX = ("the driver is wedged: drain the node; nvidia-smi -q (does it hang too?); dmesg | grep -iE 'NVRM|Xid'; "
            "reboot the node (a task in D state cannot be killed); RMA the GPU if it recurs")
LIBCUDA_FIX = ("install the driver's user-space libraries of the loaded kernel module's version (cat "
               "/proc/driver/nvidia/version; ldconfig -p | grep libcuda.so.1), or reinstall the driver")
GPU_FIX = ("drain; nvidia-smi -q -i {i} (ECC, retired pages, Xid in dmesg); nvidia-smi -r -i {i} (GPU reset) or "
           "reboot the node; RMA if it recurs")


def _gpu_label(gpu: Mapping[str, Any]) -> str:
    extra = [str(gpu[k]) for k in ("name", "pci") if gpu.get(k)]
    return f"GPU {gpu.get('index')}" + (f" ({', '.join(extra)})" if extra else "")


def verdict(data: Mapping[str, Any], budget_s: float = CUDA_BUDGET_S) -> Result:
    """The node's verdict from a probe's output (see probe.cuda_driver.probe)."""
    dev = list(data.get("dev") or [])
    measured: dict[str, Any] = {"dev": dev}
    if isinstance(data.get("hang"), dict):
        hang = data["hang"]
        measured["hang"] = hang
        at = f" on GPU {hang['gpu']}" if isinstance(hang.get("gpu"), int) else ""
        return failed(f"the CUDA driver hangs{at}: {describe(hang)}", HANG_FIX, measured=measured, fault_class="node",
                      code="cuda.init_hang")
    if data.get("error"):
        crashed = data.get("crashed_in")
        if isinstance(crashed, dict):  # the driver library killed the process inside one of its calls
            measured["crashed_in"] = crashed
            return failed(f"libcuda crashed the process in {crashed.get('call')}: {data['error']}", HANG_FIX,
                          measured=measured, fault_class="node", code="cuda.driver_crash")
        return errored(str(data["error"]), measured=measured)  # envcheck's own (could not start a process)
    raw = data.get("done")
    done: dict[str, Any] = raw if isinstance(raw, dict) else {}
    measured.update({k: done.get(k) for k in ("libcuda", "driver_cuda", "count")})
    if not done.get("libcuda"):
        if not dev:
            return skipped("no NVIDIA driver here (no /dev/nvidia* node, no libcuda.so.1)", measured=measured)
        measured["dlopen_error"] = done.get("dlopen_error")
        return failed(f"the NVIDIA kernel module is loaded ({', '.join(dev[:3])}) but libcuda.so.1 cannot be "
                      f"loaded: {done.get('dlopen_error')}", LIBCUDA_FIX, measured=measured, fault_class="node",
                      code="cuda.libcuda_missing")
    init = done.get("init")
    if isinstance(init, dict):
        code = int(init.get("code") or 0)
        problem, fix, _ = CUDA_CODES.get(code, (f"CUDA error {code}", "dmesg | grep -iE 'NVRM|Xid'; nvidia-smi; "
                                                "reload the driver or reboot the node", "node"))
        if code == 999 and "nvidia-uvm" not in dev:
            problem += "; /dev/nvidia-uvm is missing: the nvidia_uvm module is not loaded"
            fix = "modprobe nvidia-uvm (or nvidia-modprobe -u -c0); " + fix
        measured["init"] = init
        return failed(f"{init.get('call')} returned {init.get('name')} ({code}): {problem}", fix, measured=measured,
                      fault_class="node", code=f"cuda.error.{code}" if code in CUDA_CODES else "cuda.init_error")
    gpus = [g for g in done.get("gpus") or [] if isinstance(g, dict)]
    measured["gpus"] = gpus
    broken = [g for g in gpus if isinstance(g.get("error"), dict)]
    if broken:
        g = broken[0]
        e = g["error"]
        more = f" (+{len(broken) - 1} more GPU(s))" if len(broken) > 1 else ""
        return failed(f"{_gpu_label(g)}: {e.get('call')} returned {e.get('name')} ({e.get('code')}){more}",
                      GPU_FIX.format(i=g.get("index")), measured=measured, fault_class="node", code="cuda.gpu_unusable")
    wrong = [g for g in gpus if (g.get("copy") or {}).get("wrong")]
    if wrong:
        g = wrong[0]
        return failed(f"{_gpu_label(g)}: a 1 MiB copy to the GPU and back came back with {g['copy']['wrong']} wrong "
                      "byte(s): its memory or PCIe path corrupts data", GPU_FIX.format(i=g.get("index")),
                      measured=measured, fault_class="node", code="cuda.copy_mismatch")
    cuda = done.get("driver_cuda")
    version = f"driver CUDA {cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) and cuda else "driver CUDA ?"
    if not gpus:
        return skipped(f"cuInit succeeded but the driver lists no GPU ({version})", measured=measured)
    return passed(f"{len(gpus)} GPU(s) take a context and a 1 MiB copy there and back through the driver API "
                  f"({version}, no torch)", measured=measured)


def cuda_driver(ctx: Context) -> Result:
    """cuInit, the device count, a context and a small copy per GPU, through the driver API, within a budget."""
    if not ctx.options.node_path:
        return skipped("a torch run proves CUDA through torch (cuda.available, cuda.devices); this torch-free probe "
                       "runs with --for prolog|npd, or --only node.cuda_driver")
    left = ctx.time_left()
    budget = CUDA_BUDGET_S if left is None else max(1.0, min(CUDA_BUDGET_S, left - 1.0))
    return verdict(probe(budget), budget)
