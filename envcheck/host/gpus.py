"""The host's driver, its CUDA and each GPU's compute capability, without torch: NVML, else nvidia-smi, else libcuda."""

from __future__ import annotations

from typing import Any

from envcheck.core.versions import cuda_version_text, release
from envcheck.host.rows import HostGpus


def _capability(text: Any) -> tuple[int, int] | None:
    numbers = release(str(text))
    return (numbers[0], numbers[1]) if numbers and len(numbers) >= 2 else None


def read_host_gpus() -> HostGpus:
    """The driver, its CUDA and each GPU's compute capability: NVML, else nvidia-smi, else libcuda."""
    from envcheck.probe.inventory import nvml_inventory, smi_inventory
    from envcheck.probe.system import driver_cuda_version, is_absent, load_library, run_command

    reasons: list[str] = []
    nvml = nvml_inventory(torch_uuids=lambda: None)
    smi = nvml if isinstance(nvml, dict) else smi_inventory(run_command)
    if isinstance(nvml, str):
        reasons.append(nvml)
    if isinstance(smi, str):
        reasons.append(smi)
    lib = load_library("libcuda.so.1")
    lib_cuda = driver_cuda_version(lib) if not isinstance(lib, str) else None
    if isinstance(lib, str):
        reasons.append(lib)
    if isinstance(smi, dict) and isinstance(smi.get("gpus"), list) and smi["gpus"]:
        gpus = [g for g in smi["gpus"] if isinstance(g, dict)]
        caps = [c for c in (_capability(g.get("compute_capability")) for g in gpus) if c]
        driver_cuda = smi.get("driver_cuda")
        if is_absent(driver_cuda) or not isinstance(driver_cuda, str):
            driver_cuda = cuda_version_text(lib_cuda) if lib_cuda else None
        driver = smi.get("driver_version")
        listed: list[dict[str, Any]] = [
            {
                "name": g.get("name") if isinstance(g.get("name"), str) else "GPU",
                "compute_capability": g.get("compute_capability")
                if _capability(g.get("compute_capability"))
                else None,
            }
            for g in gpus
        ]
        return HostGpus(
            source=str(smi.get("source")),
            driver=driver if isinstance(driver, str) else None,
            driver_cuda=driver_cuda,
            capabilities=caps,
            names=[str(g["name"]) for g in listed],
            listed=listed,
        )
    if lib_cuda:
        return HostGpus(
            source="libcuda",
            driver_cuda=cuda_version_text(lib_cuda),
            why_none="libcuda loads but no GPU was listed (" + "; ".join(reasons) + ")",
        )
    return HostGpus(why_none="; ".join(reasons) or "no NVIDIA driver answered")
