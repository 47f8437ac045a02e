"""What the bench runs on (bench.device): the device, its entry in the peak table, the PCIe link NVML reports, the idle
state and the CPU load; and the peaks the GPU units compare with."""

from __future__ import annotations

import os
import socket
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, passed
from envcheck.perf import memory
from envcheck.perf.gpu_state import NvmlSampler, nvml_handle
from envcheck.perf.peaks import GpuPeak, lookup, pcie_peak_gbps
from envcheck.perf.unit_run import root_pid, set_threads


def gpu_peaks() -> GpuPeak | None:
    """The peaks of GPU 0 (a MIG slice's scaled to its SMs and memory slices, or None)."""
    import torch

    sms = getattr(torch.cuda.get_device_properties(0), "multi_processor_count", None)
    return lookup(str(torch.cuda.get_device_name(0)), int(sms) if sms else None)


def device_probe(ctx: Context) -> Result:
    """What the bench runs on: device, peak-table entry, PCIe link, idle state, CPU load."""
    import torch

    set_threads(ctx)
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "loadavg": list(os.getloadavg()),
    }
    if not info["cuda"]:
        return passed(f"CPU only ({info['threads']} threads, load {info['loadavg'][0]:.1f})", measured=info)
    name = torch.cuda.get_device_name(0)
    peak = gpu_peaks()
    info.update(
        name=name,
        cuda_version=torch.version.cuda,
        gpus=torch.cuda.device_count(),
        peak=None
        if peak is None
        else {"model": peak.model, "tflops": peak.tflops, "mem_gbps": peak.mem_gbps, "source": peak.source},
    )
    sampler = NvmlSampler(root_pid=root_pid(ctx))
    with sampler:
        pass
    info["gpu_state"] = sampler.summary()
    unknown = (
        "peak unknown (a MIG slice we cannot scale)"
        if " mig" in name.lower()
        else "peak unknown (not in the table)"
    )
    summary = f"{name}: " + (f"peak table entry {peak.model}" if peak else unknown)
    return passed(summary, measured=info)


def pcie_gbps() -> float | None:
    from envcheck.probe.nvml import read_nvml
    from envcheck.probe.nvml_fields import Fields

    got = read_nvml(
        lambda pynvml, progress: memory.pcie_link(Fields(pynvml), nvml_handle(0)), lambda exc: None
    )
    link = (
        got.value
    )  # None: NVML is absent, failed or hung (then the evidence is in got.hang; no peak is claimed)
    return pcie_peak_gbps(link["max_gen"], link["max_width"]) if link is not None else None


def peak_of(dtype_or_mem: str) -> float | None:
    peak = gpu_peaks()
    if peak is None:
        return None
    value: float | None = peak.mem_gbps if dtype_or_mem == "mem" else peak.tflops.get(dtype_or_mem)
    return value


def tflops_peaks() -> dict[str, float] | None:
    peak = gpu_peaks()
    return None if peak is None else dict(peak.tflops)
