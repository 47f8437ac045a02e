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

from envcheck.checks.cuda.codes import CUDA_CODES, uvm_missing
from envcheck.checks.cuda.live_errors import GPU_UNUSABLE
from envcheck.checks.node.config_causes import libcuda_cause, no_device_cause, no_gpu_given, uvm_cause
from envcheck.core.findings import Finding
from envcheck.core.result import FaultClass, Result, errored, failed, passed, skipped, warned
from envcheck.probe.cuda_driver import CUDA_BUDGET_S
from envcheck.probe.gpu_usage import holder
from envcheck.probe.hang import describe, stuck_in_kernel
from envcheck.probe.pci import bus_key

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
NO_DEVICE, UNKNOWN = 100, 999  # CUDA_ERROR_NO_DEVICE, CUDA_ERROR_UNKNOWN (cuda.h)


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
    access: dict[str, Any] = data["access"] if isinstance(data.get("access"), dict) else {}
    nvml = data.get("nvml")
    if not done.get("libcuda"):
        if not dev:
            given = no_gpu_given(access)
            if given:
                return _config(given, measured)
            return skipped("no NVIDIA driver here (no /dev/nvidia* node, no libcuda.so.1)", measured=measured)
        capabilities = libcuda_cause(access)
        if capabilities:
            return _config(capabilities, measured)
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
        problem, fix, fault = CUDA_CODES.get(
            code,
            (
                f"CUDA error {code}",
                "dmesg | grep -iE 'NVRM|Xid'; nvidia-smi; reload the driver or reboot the node",
                FaultClass.NODE,
            ),
        )
        measured["init"] = init
        said = f"{init.get('call')} returned {init.get('name')} ({code})"
        cause = no_device_cause(access, nvml) if code == NO_DEVICE else None
        cause = cause or (uvm_cause(access, dev) if code == UNKNOWN else None)
        if cause:
            return _config(cause, measured, said)
        if code == UNKNOWN and "nvidia-uvm" not in dev:
            uvm, uvm_fix, uvm_class = uvm_missing(data.get("modules"), access.get("in_container") is True)
            problem += f"; {uvm}"
            fix = f"{uvm_fix}; {fix}"
            fault = uvm_class or fault
        if code == NO_DEVICE:
            visible = access.get("cuda_visible_devices")
            seen = (
                f"CUDA_VISIBLE_DEVICES={visible!r} names GPUs that exist"
                if visible
                else "no CUDA_VISIBLE_DEVICES"
            )
            problem += f" (checked: {seen}, GPU device nodes present, no MIG without instances)"
        return failed(
            f"{said}: {problem}",
            fix,
            measured=measured,
            fault_class=fault,  # the class the CUDA error table gives the code
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
        cause = no_device_cause(access, nvml)
        if cause:
            return _config(cause, measured, f"cuInit succeeded but CUDA lists no GPU ({version})")
        return skipped(f"cuInit succeeded but the driver lists no GPU ({version})", measured=measured)
    probed = len(gpus) - len(busy)
    tail = f"; {'; '.join(busy)}" if busy else ""
    return passed(
        f"{probed} GPU(s) take a context and a 1 MiB copy there and back through the driver API "
        f"({version}, no torch){tail}",
        measured=measured,
    )


def _config(cause: Finding, measured: dict[str, Any], said: str = "") -> Result:
    """A failure that the process's configuration (or the GPUs' MIG setup) explains, with that cause's class."""
    return failed(
        f"{said}: {cause.problem}" if said else cause.problem,
        cause.fix,
        measured=measured,
        fault_class=cause.fault_class,
        code=cause.code,
    )
