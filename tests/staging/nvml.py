"""The one NVML fake (tests/staging/pynvml_stub/pynvml.py), for tests that need NVML without a staged node.

`install` writes a state and makes `import pynvml` in this process the stand-in (a fresh module, so no reader's
record of an earlier hang carries over); `child_env` gives a child process (the real CLI and engine) the same one.
The state's keys are the stand-in's own (its docstring): per GPU name, uuid, bus, persistence, ecc_<counter>_<kind>,
retired_<cause>, retired_pending, remapped_rows, pcie_*, clock_events, throttle_reasons, temperature_c, processes,
memory_*_mib, compute_mode, mig, mig_devices, compute_capability, nvlinks, utilization, clocks, power_w; any value
may be `{"nvml_error": code}` and None means NVML answers Not Supported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

STUB = Path(__file__).with_name("pynvml_stub")
DRIVER = "580.95.05"


def gpu(index: int = 0, **fields: Any) -> dict[str, Any]:
    """One GPU of the state: at PCI 0000:<3b+index>:00.0 unless `bus` is given; every other field as given."""
    return {"minor": index, "bus": f"0000:{0x3B + index:02x}:00.0", **fields}


def state(*gpus: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A whole state: these GPUs, whatever /dev holds, the driver 580.95.05 unless `driver` is given."""
    return {"device_nodes": False, "driver": DRIVER, "persistence_daemon": True, "gpus": list(gpus), **top}


def write(folder: Path, nvml: dict[str, Any]) -> Path:
    """Write the state (its holder records go to `folder` too, never to /run); the state file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvml.json"
    path.write_text(json.dumps({"warm_dir": str(folder / "warm"), **nvml}))
    return path


def install(monkeypatch: pytest.MonkeyPatch, folder: Path, nvml: dict[str, Any]) -> ModuleType:
    """`import pynvml` in this process answers from `nvml` (until the test ends)."""
    monkeypatch.setenv("STUB_NVML_STATE", str(write(folder, nvml)))
    spec = importlib.util.spec_from_file_location("pynvml", STUB / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def child_env(folder: Path, nvml: dict[str, Any], base: dict[str, str] | None = None) -> dict[str, str]:
    """A child's environment in which `import pynvml` answers from `nvml` (the stand-in first on PYTHONPATH)."""
    env = dict(os.environ if base is None else base)
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (str(STUB), env.get("PYTHONPATH", "")) if p),
        STUB_NVML_STATE=str(write(folder, nvml)),
    )
    return env
