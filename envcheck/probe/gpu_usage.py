"""Who uses each GPU and what NVML knows of its identity, read through the one budgeted NVML reader: usage (compute
processes, memory, compute mode, MIG mode) by PCI address, each GPU's UUID and MIG devices, each GPU's compute mode;
and who holds a GPU, by that evidence (a busy GPU is another job's, not a fault).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml
from envcheck.probe.nvml_fields import Fields, Missing, value
from envcheck.probe.pci import bus_key

FULL = 0.9  # a GPU with this share of its memory in use has no room for a context: held, not broken
HELD_MODES = ("EXCLUSIVE_PROCESS", "EXCLUSIVE_THREAD", "PROHIBITED")
# Memory in use beyond the least used GPU of the same model before a GPU counts as used by another process: a CUDA
# context alone takes about 500 MiB on an H100; the driver's reserve (480 MiB there, nvidia-smi -q in
# docs/gpu-evidence/2026-11-24-nvidia-h100-80gb-hbm3) is the same on every GPU of a model, so it cancels out.
IN_USE_MIB = 256


def usage(fields: Fields, handle: Any) -> dict[str, Any]:
    """Who uses one GPU: its compute processes (pid, MiB, name), memory total/used (MiB), compute mode and MIG
    mode; a field NVML cannot give is left out."""
    read = {
        "processes": fields.processes(handle),
        "memory": fields.memory(handle),
        "compute_mode": fields.compute_mode(handle),
        "mig": fields.mig(handle),
    }
    return {k: v for k, v in read.items() if not isinstance(v, Missing)}


def foreign(processes: Any, own: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """The processes of a usage record that are not this one (or `own`'s): another job's, another user's."""
    mine = own | {os.getpid()}
    return [p for p in processes or [] if isinstance(p, dict) and p.get("pid") not in mine]


def holder(usage: Mapping[str, Any]) -> str | None:
    """Who holds a GPU, by NVML's evidence ('pid 4242 (python), 76.0 of 79.6 GiB in use'), or None when nothing
    shows that another process has it."""
    others = foreign(usage.get("processes"))
    parts = [
        ", ".join(f"pid {p.get('pid')}" + (f" ({p['name']})" if p.get("name") else "") for p in others[:3])
    ]
    mem = usage.get("memory")
    used, total = (mem.get("used_mib"), mem.get("total_mib")) if isinstance(mem, dict) else (None, None)
    full = False
    if isinstance(used, int) and isinstance(total, int) and total > 0 and used >= FULL * total:
        full = True
        parts.append(f"{used / 1024:.1f} of {total / 1024:.1f} GiB in use")
    mode = usage.get("compute_mode")
    if mode in HELD_MODES:
        parts.append(f"compute mode {mode}")
    if not others and not full and mode not in HELD_MODES:
        return None
    return ", ".join(p for p in parts if p)


def others_use(usage: Mapping[str, Any], own: frozenset[int] = frozenset()) -> tuple[bool, int]:
    """(whether NVML lists another process on this GPU, the MiB of its memory in use beyond this process's own). In a
    container NVML lists only the container's processes, but another job's context still takes memory; NVML's v1
    `used` also counts the driver's reserve (480 MiB on an idle H100), so callers compare the MiB between GPUs of
    one model, never with zero. The compute mode says nothing here: an EXCLUSIVE_PROCESS GPU nobody uses is free."""
    procs = [p for p in usage.get("processes") or [] if isinstance(p, dict)]
    others = foreign(procs, own)
    own_mib = sum(
        int(p.get("used_mib") or 0) for p in procs if p not in others
    )  # this process's (and `own`'s)
    mem = usage.get("memory")
    used = mem.get("used_mib") if isinstance(mem, dict) else None
    other_mib = (
        max(0, used - own_mib) if isinstance(used, int) else sum(int(p.get("used_mib") or 0) for p in others)
    )
    return bool(others), other_mib


def read_usage(budget_s: float = NVML_BUDGET_S) -> dict[str, dict[str, Any]] | str:
    """Every GPU's usage by PCI key ('0000:18:00'), or why NVML cannot tell (not installed, no driver, a hang)."""

    def body(pynvml: Any, progress: dict[str, Any]) -> dict[str, dict[str, Any]] | str:
        fields = Fields(pynvml)
        progress["call"] = "nvmlDeviceGetCount"
        count = fields.count()
        if isinstance(count, Missing):
            return f"NVML: {count.error}"
        out: dict[str, dict[str, Any]] = {}
        for i in range(count):
            progress.update(call=f"NVML reads of GPU {i}", gpu=i)
            h = fields.handle(i)
            bus = fields.pci_bus(h) if not isinstance(h, Missing) else h
            if isinstance(bus, Missing):
                continue
            out[bus_key(bus)] = {"index": i, **usage(fields, h)}
        return out

    got = read_nvml(body, lambda exc: f"NVML: {exc}", budget_s)
    if got.hang is not None:
        return hang_text(got.hang)
    return got.value if got.value is not None else "NVML gave no answer"


def nvml_gpus(budget_s: float = NVML_BUDGET_S) -> list[dict[str, Any]] | str:
    """Each GPU's UUID, MIG mode and MIG device UUIDs from NVML (an entry's `error` when NVML fails on that GPU,
    e.g. 'GPU is lost'); why NVML cannot tell, as text (a hang: 'NVML did not answer within 15 s ...')."""

    def gpus(pynvml: Any, progress: dict[str, Any]) -> list[dict[str, Any]] | str:
        fields = Fields(pynvml)
        progress["call"] = "nvmlDeviceGetCount"
        count = fields.count()
        if isinstance(count, Missing):
            return f"NVML: {count.error}"
        return [_identity(fields, i) for i in range(count)]

    got = read_nvml(
        gpus,
        lambda exc: (
            "NVML bindings not installed (pip install nvidia-ml-py)"
            if isinstance(exc, ImportError)
            else f"NVML init: {exc}"
        ),
        budget_s,
    )
    if got.hang is not None or got.value is None:
        return hang_text(got.hang or {"budget_s": budget_s})
    return got.value


def _identity(fields: Fields, i: int) -> dict[str, Any]:
    h = fields.handle(i)
    uuid = fields.uuid(h) if not isinstance(h, Missing) else h
    if isinstance(uuid, Missing):
        return {"index": i, "error": uuid.error}
    mig = value(fields.mig(h)) or False  # NOT_SUPPORTED: a GPU without MIG
    handles = fields.mig_handles(h) if mig else []
    if isinstance(handles, Missing):  # the MIG devices cannot be listed: unknown, not "none"
        return {"index": i, "uuid": uuid, "mig": mig, "mig_error": f"{handles.call}: {handles.error}"}
    slices = [value(fields.uuid(mh)) for _, mh in handles]
    return {"index": i, "uuid": uuid, "mig": mig, "mig_devices": [s for s in slices if s is not None]}


def compute_modes() -> dict[int, str] | str:
    """Each physical GPU's compute mode by NVML index, or why NVML cannot tell."""

    def modes(pynvml: Any, progress: dict[str, Any]) -> dict[int, str] | str:
        fields = Fields(pynvml)
        count = fields.count()
        if isinstance(count, Missing):
            return f"compute mode unknown ({count.error})"
        found: dict[int, str] = {}
        for i in range(count):
            h = fields.handle(i)
            mode = fields.compute_mode(h) if not isinstance(h, Missing) else h
            found[i] = f"unknown ({mode.error})" if isinstance(mode, Missing) else mode
        return found

    got = read_nvml(modes, lambda exc: f"compute mode unknown (NVML unavailable: {exc})")
    if got.value is None:
        return f"compute mode unknown ({hang_text(got.hang or {'budget_s': NVML_BUDGET_S})})"
    return got.value
