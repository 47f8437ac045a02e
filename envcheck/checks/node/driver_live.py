"""node.cuda_driver, live: the driver API probed without torch within a budget (probe.cuda_driver), beside NVML's
view of who holds each GPU and, when CUDA sees no GPU, of MIG; judged by driver_api.verdict."""

from __future__ import annotations

from envcheck.checks.node.driver_api import NODE_MODES, verdict
from envcheck.core.check import Context
from envcheck.core.result import Result, skipped
from envcheck.probe.cuda_driver import CUDA_BUDGET_S, probe
from envcheck.probe.gpu_access import allocation, read_access
from envcheck.probe.gpu_usage import foreign, nvml_gpus, read_usage
from envcheck.probe.hang import stuck_in_kernel
from envcheck.probe.modules import nvidia_modules
from envcheck.probe.node_state import count_overrun
from envcheck.probe.nvml import NVML_BUDGET_S, init_budget, warmup
from envcheck.probe.pci import pci_gpus


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
    data["access"] = read_access()
    data["modules"] = nvidia_modules()
    done = data.get("done")
    if isinstance(done, dict) and (done.get("init") or not done.get("gpus")):  # why CUDA sees no GPU: MIG?
        data["nvml"] = nvml_gpus(min(NVML_BUDGET_S, max(1.0, budget))) if probe_nvml() else None
    if ctx.options.cluster_mode in NODE_MODES:
        slow = isinstance(data.get("hang"), dict) and not stuck_in_kernel(data["hang"])
        data["overruns"], _ = count_overrun("cuda-init", slow)
    return verdict(data, budget)


def probe_nvml() -> bool:
    """Whether NVML's bindings are importable here (a torch-free node has them with envcheck[nvml])."""
    import importlib.util

    return importlib.util.find_spec("pynvml") is not None
