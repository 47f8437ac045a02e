"""Driver and GPU inventory from NVML (nvidia-ml-py), falling back to nvidia-smi. UUIDs are left out."""

from __future__ import annotations

import importlib.util
from typing import Any

from envcheck.checks.probe import CommandOutput, CommandRunner, absent, nvidia_device_nodes, run_command

SMI_QUERY = "name,memory.total,compute_cap,driver_version"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_inventory() -> dict[str, Any] | str:
    """Inventory through NVML; the reason as a string when NVML cannot be used."""
    if importlib.util.find_spec("pynvml") is None:
        return "NVML not installed (pip install nvidia-ml-py)"
    import pynvml

    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML could not start ({exc}): no NVIDIA driver loaded"
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append({"index": i, "name": _text(pynvml.nvmlDeviceGetName(h)),
                         "memory_mib": int(pynvml.nvmlDeviceGetMemoryInfo(h).total) // 2**20,
                         "compute_capability": f"{major}.{minor}"})
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {"source": "nvml", "driver_version": _text(pynvml.nvmlSystemGetDriverVersion()),
                "driver_cuda": f"{cuda // 1000}.{(cuda % 1000) // 10}", "gpus": gpus}
    finally:
        pynvml.nvmlShutdown()


def smi_inventory(run: CommandRunner = run_command) -> dict[str, Any] | str:
    """Inventory through nvidia-smi; the reason as a string when it cannot be used."""
    out = run(["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"], 10.0)
    if not isinstance(out, CommandOutput):
        return out["absent"]
    if out.returncode != 0:
        return f"nvidia-smi failed: {(out.stderr or out.stdout).strip().splitlines()[-1:] or ['no output']}"
    gpus, driver = [], None
    for i, line in enumerate(row for row in out.stdout.splitlines() if row.strip()):
        name, mem, cap, driver = (p.strip() for p in line.split(","))
        gpus.append({"index": i, "name": name, "memory_mib": int(float(mem)), "compute_capability": cap})
    return {"source": "nvidia-smi", "driver_version": driver or absent("nvidia-smi listed no GPU"),
            "driver_cuda": absent("nvidia-smi query does not report it"), "gpus": gpus}


def gpu_inventory(run: CommandRunner = run_command) -> dict[str, Any]:
    """NVML first, then nvidia-smi; when both fail, say why each did."""
    nvml = nvml_inventory()
    if isinstance(nvml, dict):
        return nvml
    smi = smi_inventory(run)
    if isinstance(smi, dict):
        return smi
    nodes = nvidia_device_nodes()
    hint = "no /dev/nvidia* device nodes" if not nodes else f"device nodes present: {', '.join(nodes)}"
    return {"source": absent(f"{nvml}; {smi}; {hint}")}
