"""Driver and GPU inventory from NVML (nvidia-ml-py), falling back to nvidia-smi. UUIDs are left out.

Every field is read on its own: one NVML call that fails (NOT_SUPPORTED on a MIG slice, a GPU that fell off
the bus) leaves `absent: why` in that field alone, and the rest of the inventory stays.

torch's device index is not NVML's: CUDA_VISIBLE_DEVICES reorders and hides GPUs, and with MIG torch sees
slices, not boards. A torch device is matched to NVML by UUID only; without a match its NVML data is
"unknown", never another GPU's.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml
from envcheck.probe.nvml_fields import NOT_SUPPORTED, Fields, Missing
from envcheck.probe.nvml_fields import text as _text
from envcheck.probe.system import CommandOutput, CommandRunner, absent, nvidia_device_nodes, run_command

SMI_QUERY = "name,memory.total,compute_cap,driver_version"
T = TypeVar("T")


def field(read: Callable[[], T], what: str) -> T | dict[str, str]:
    """`read()`, or absent('<what> failed: <error>') for just this field."""
    try:
        return read()
    except Exception as exc:  # a fact's reader may raise anything; one field is lost, never the inventory
        return absent(f"{what} failed: {exc or type(exc).__name__}")


def nvml_field(got: T | Missing) -> T | dict[str, str]:
    """An NVML field's value, or absent for just this field: 'not supported', or '<call> failed: <error>'."""
    if not isinstance(got, Missing):
        return got
    return absent(NOT_SUPPORTED if got.not_supported else f"{got.call} failed: {got.error}")


def normal_uuid(uuid: Any) -> str:
    """A UUID without its GPU-/MIG- prefix, lower case: torch prints none, NVML prints one."""
    text = _text(uuid).strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def _smi_mib(text: str) -> int | dict[str, str]:
    try:
        return int(float(text))
    except ValueError as exc:
        return absent(f"memory.total {text!r} failed: {exc}")


def _total_mib(fields: Fields, h: Any) -> int | Missing:
    memory = fields.memory(h)
    return memory if isinstance(memory, Missing) else memory["total_mib"]


def _uuid(fields: Fields, h: Any) -> str | Missing:
    uuid = fields.uuid(h)
    return uuid if isinstance(uuid, Missing) else normal_uuid(uuid)


def _mig_slices(fields: Fields, h: Any) -> list[dict[str, Any]] | dict[str, str]:
    handles = fields.mig_handles(h)
    if isinstance(handles, Missing):
        return nvml_field(handles)
    return [
        {"slot": k, "_uuid": nvml_field(_uuid(fields, mh)), "memory_mib": nvml_field(_total_mib(fields, mh))}
        for k, mh in handles
    ]


def _gpu(fields: Fields, i: int) -> dict[str, Any]:
    h = fields.handle(i)
    if isinstance(h, Missing):
        return {"index": i, "absent": f"nvmlDeviceGetHandleByIndex({i}) failed: {h.error}"}
    gpu: dict[str, Any] = {
        "index": i,
        "name": nvml_field(fields.name(h)),
        "memory_mib": nvml_field(_total_mib(fields, h)),
        "compute_capability": nvml_field(fields.compute_capability(h)),
        "_uuid": nvml_field(_uuid(fields, h)),
    }
    mig = fields.mig(h)
    gpu["mig"] = (
        False if isinstance(mig, Missing) and mig.not_supported else nvml_field(mig)
    )  # False: a GPU without MIG
    if gpu["mig"] is True:
        gpu["mig_slices"] = _mig_slices(fields, h)
    return gpu


def torch_device_map(torch_uuids: list[str | None], gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Which NVML GPU (and MIG slice) each torch device is, by UUID; 'unknown' when no UUID matches."""
    out = []
    for t, uuid in enumerate(torch_uuids):
        entry: dict[str, Any] = {"torch_index": t, "nvml_index": absent("unknown: torch reports no UUID")}
        if uuid:
            key = normal_uuid(uuid)
            entry["nvml_index"] = absent("unknown: no NVML GPU or MIG slice has this device's UUID")
            for gpu in gpus:
                if gpu.get("_uuid") == key:
                    entry["nvml_index"] = gpu["index"]
                slices = gpu.get("mig_slices")
                for s in slices if isinstance(slices, list) else []:
                    if s.get("_uuid") == key:
                        entry.update(nvml_index=gpu["index"], mig_slot=s["slot"], memory_mib=s["memory_mib"])
        out.append(entry)
    return out


def _torch_uuids() -> list[str | None] | None:
    """UUIDs of the devices torch sees (device properties only, no CUDA context); None without CUDA torch."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    try:
        if not torch.cuda.is_available():
            return None
        uuids: list[str | None] = []
        for i in range(torch.cuda.device_count()):
            value = getattr(torch.cuda.get_device_properties(i), "uuid", None)
            uuids.append(None if value is None else str(value))
        return uuids
    except Exception:
        return None


def _strip_uuids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_uuids(v) for k, v in value.items() if k != "_uuid"}
    if isinstance(value, list):
        return [_strip_uuids(v) for v in value]
    return value


def nvml_inventory(torch_uuids: Callable[[], list[str | None] | None] = _torch_uuids) -> dict[str, Any] | str:
    """Inventory through NVML; the reason as a string when NVML cannot be used at all."""

    def inventory(pynvml: Any) -> dict[str, Any] | str:
        fields = Fields(pynvml)
        count = nvml_field(fields.count())
        gpus = [_gpu(fields, i) for i in range(count)] if isinstance(count, int) else count
        facts: dict[str, Any] = {
            "source": "nvml",
            "driver_version": nvml_field(fields.driver_version()),
            "driver_cuda": nvml_field(fields.driver_cuda()),
            "gpus": gpus,
        }
        uuids = torch_uuids()
        if uuids is not None and isinstance(gpus, list):
            facts["torch_devices"] = torch_device_map(uuids, gpus)
        return dict(_strip_uuids(facts))

    got = read_nvml(
        lambda pynvml, progress: inventory(pynvml),
        lambda exc: (
            "NVML not installed (pip install nvidia-ml-py)"
            if isinstance(exc, ImportError)
            else f"NVML could not start ({exc}): no NVIDIA driver loaded"
        ),
    )
    return got.value if got.value is not None else hang_text(got.hang or {"budget_s": NVML_BUDGET_S})


def smi_inventory(run: CommandRunner = run_command) -> dict[str, Any] | str:
    """Inventory through nvidia-smi; the reason as a string when it cannot be used."""
    out = run(["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"], 10.0)
    if not isinstance(out, CommandOutput):
        return out["absent"]
    if out.returncode != 0:
        return f"nvidia-smi failed: {(out.stderr or out.stdout).strip().splitlines()[-1:] or ['no output']}"
    gpus: list[dict[str, Any]] = []
    driver: str | None = None
    for i, line in enumerate(row for row in out.stdout.splitlines() if row.strip()):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            gpus.append({"index": i, "absent": f"unparsable nvidia-smi line: {line.strip()!r}"})
            continue
        name, mem, cap, driver = parts
        gpus.append({"index": i, "name": name, "memory_mib": _smi_mib(mem), "compute_capability": cap})
    return {
        "source": "nvidia-smi",
        "driver_version": driver or absent("nvidia-smi listed no GPU"),
        "driver_cuda": absent("nvidia-smi query does not report it"),
        "gpus": gpus,
    }


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
