"""The shape of a bundle's gpu_health section: one-line UsageErrors for what `envcheck explain` cannot replay."""

from __future__ import annotations

from typing import Any

from envcheck.core.errors import UsageError
from envcheck.core.section import require
from envcheck.probe.system import is_absent

_FIELDS: dict[str, tuple[type | None, ...]] = {
    "index": (int,),
    "error": (str,),
    "name": (str, dict),
    "uuid": (str, dict),
    "pci": (str, dict),
    "persistence": (bool, dict),
    "retired_pages_pending": (bool, dict),
    "remapped_rows": (dict,),
    **{f"ecc_{c}_{e}": (int, dict) for c in ("volatile", "aggregate") for e in ("corrected", "uncorrected")},
    **{
        k: (int, dict)
        for k in (
            "retired_pages_sbe",
            "retired_pages_dbe",
            "pcie_gen",
            "pcie_gen_max",
            "pcie_width",
            "pcie_width_max",
            "clock_events",
            "temperature_c",
        )
    },
    "processes": (list,),
    "memory": (dict,),
    "compute_mode": (str,),
    "mig": (bool, dict),
    "fabric": (dict,),
    "nvlink": (dict,),
    "virtualization": (str, dict),
    "vgpu_license": (dict,),
    "recovery_action": (int, dict),
    "inforom_valid": (bool, dict),
    "repair_pending": (dict,),
    "slowdown": (dict,),
}

# One driver message's entry (checks.gpu_health.kernel_events): the kind, the GPU it names if any, and its details.
_DRIVER_EVENT: dict[str, tuple[type | None, ...]] = {
    "kind": (str,),
    "pci": (str, None),
    "count": (int,),
    "bursts": (int,),
    "text": (str,),
    "boot_s": (float, int, None),
    "minor": (int,),
    "gpu_index": (int,),
    "devices": (int,),
    "status": (str,),
    "bar": (int,),
    "size_mib": (int,),
    "seconds": (int,),
    "client": (str,),
    "pid": (int,),
    "client_version": (str,),
    "kernel_version": (str,),
}


def validate(data: Any, where: str) -> None:
    """One-line UsageError naming the first thing malformed in a bundle's gpu_health section."""
    require(
        data,
        where,
        {
            "nvml_error": (str, None),
            "nvml_code": (int, None),
            "reader_error": (bool,),
            "driver_version": (str, dict, None),
            "gpus": (list,),
            "kernel_log": (dict,),
            "nvml_hung": (int, None),
            "nvml_hang": (dict, None),
            "pci_gpus": (list, str),
            "access": (dict,),
            "warmup": (dict,),
            "overruns": (int,),
            "pci_drivers": (dict,),
            "versions": (dict,),
            "drained": (dict,),
            "nvswitches": (list, str),
            "modules": (dict, str),
            "daemons": (dict,),
        },
    )
    require(
        data.get("versions") or {},
        f"{where}.versions",
        {"kernel_module": (str, None), "userspace": (str, None)},
    )
    for n, gpu in enumerate(data.get("gpus") or []):
        require(gpu, f"{where}.gpus[{n}]", _FIELDS)
        if "index" not in gpu:
            raise UsageError(f"{where}.gpus[{n}] lacks 'index'")
        if isinstance(gpu.get("remapped_rows"), dict) and not is_absent(gpu["remapped_rows"]):
            require(
                gpu["remapped_rows"],
                f"{where}.gpus[{n}].remapped_rows",
                {"corrected": (int,), "uncorrected": (int,), "pending": (bool,), "failure": (bool,)},
            )
    log = data.get("kernel_log")
    if log is not None:
        require(
            log,
            f"{where}.kernel_log",
            {
                "source": (str,),
                "error": (str, None),
                "xid": (list,),
                "bus": (list,),
                "driver": (list,),
                "window": (dict,),
                "cursor_error": (str,),
            },
        )
        for n, event in enumerate(log.get("xid") or []):
            require(
                event,
                f"{where}.kernel_log.xid[{n}]",
                {
                    "pci": (str,),
                    "xid": (int,),
                    "count": (int,),
                    "text": (str,),
                    "boot_s": (float, int, None),
                    "bursts": (int,),
                    "mig": (str,),
                    "cause": (int,),
                    "action": (str,),
                    "action_code": (int,),
                },
            )
            if "pci" not in event or "xid" not in event:
                raise UsageError(f"{where}.kernel_log.xid[{n}] needs 'pci' and 'xid'")
        for n, event in enumerate(log.get("bus") or []):
            require(
                event, f"{where}.kernel_log.bus[{n}]", {"pci": (str, None), "count": (int,), "text": (str,)}
            )
        for n, event in enumerate(log.get("driver") or []):
            require(event, f"{where}.kernel_log.driver[{n}]", _DRIVER_EVENT)
            if not isinstance(event.get("kind"), str):
                raise UsageError(f"{where}.kernel_log.driver[{n}] needs 'kind' (a string)")
