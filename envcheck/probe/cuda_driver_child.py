"""Run as a script (`python -I -S cuda_driver_child.py`, stdlib only): the CUDA driver API through ctypes, one JSON
line per step on stdout (`{"call": ...}` before each driver call, so a parent that gives up names the call that did
not return), then `{"done": {...}}`. cuInit, cuDeviceGetCount, and per GPU a context and a 1 MiB host-device-host
copy that is compared byte for byte. Never imported by envcheck: it runs in the child that probe.cuda_driver
budgets, kills and, when the driver holds it in D state, leaves."""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

COPY_BYTES = 1 << 20


def say(**message: Any) -> None:
    """One JSON line, flushed (the parent reads it even when the next call hangs)."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    """Probe libcuda and print the result."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        say(done={"libcuda": None, "dlopen_error": str(exc)})
        return

    def error_name(rc: int) -> str:
        text = ctypes.c_char_p()
        fn = getattr(cuda, "cuGetErrorName", None)
        if fn is None or fn(rc, ctypes.byref(text)) != 0 or not text.value:
            return f"CUresult {rc}"
        return text.value.decode(errors="replace")

    def call(name: str, *args: Any, gpu: int | None = None) -> int:
        say(call=name, gpu=gpu)
        rc = int(getattr(cuda, name)(*args))
        return rc

    done: dict[str, Any] = {"libcuda": getattr(cuda, "_name", "libcuda.so.1"), "gpus": []}
    version = ctypes.c_int(0)
    if call("cuDriverGetVersion", ctypes.byref(version)) == 0:
        done["driver_cuda"] = version.value
    rc = call("cuInit", 0)
    if rc != 0:
        done["init"] = {"call": "cuInit", "code": rc, "name": error_name(rc)}
        say(done=done)
        return
    count = ctypes.c_int(0)
    rc = call("cuDeviceGetCount", ctypes.byref(count))
    if rc != 0:
        done["init"] = {"call": "cuDeviceGetCount", "code": rc, "name": error_name(rc)}
        say(done=done)
        return
    done["count"] = count.value
    skip = {k for k in os.environ.get("ENVCHECK_SKIP_PCI", "").split(",") if k}
    for i in range(count.value):
        done["gpus"].append(probe_gpu(cuda, i, call, error_name, skip))
    say(done=done)


def pci_key(bus_id: str) -> str:
    """'0000:18:00' for cuDeviceGetPCIBusId's '00000000:18:00.0' (the parent's probe.pci.bus_key form)."""
    parts = bus_id.strip().lower().split(":")
    try:
        return f"{int(parts[0], 16):04x}:{int(parts[1], 16):02x}:{int(parts[2].split('.')[0], 16):02x}"
    except (ValueError, IndexError):
        return bus_id


def probe_gpu(
    cuda: Any, i: int, call: Any, error_name: Any, skip: set[str] | frozenset[str] = frozenset()
) -> dict[str, Any]:
    """One GPU: its name and PCI address, a context, a 1 MiB copy there and back, compared; no context on a GPU
    whose PCI key is in `skip` (another process holds it)."""
    gpu: dict[str, Any] = {"index": i}
    dev, ctx, ptr = ctypes.c_int(0), ctypes.c_void_p(), ctypes.c_uint64(0)

    def call_failed(name: str, rc: int) -> dict[str, Any]:
        gpu["error"] = {"call": name, "code": rc, "name": error_name(rc)}
        return gpu

    if (rc := call("cuDeviceGet", ctypes.byref(dev), i, gpu=i)) != 0:
        return call_failed("cuDeviceGet", rc)
    text = ctypes.create_string_buffer(256)
    if call("cuDeviceGetName", text, 256, dev, gpu=i) == 0:
        gpu["name"] = text.value.decode(errors="replace")
    if call("cuDeviceGetPCIBusId", text, 64, dev, gpu=i) == 0:
        gpu["pci"] = text.value.decode(errors="replace")
        if pci_key(gpu["pci"]) in skip:
            gpu["skipped"] = "held by another process"
            return gpu
    if (rc := call("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev, gpu=i)) != 0:
        return call_failed("cuCtxCreate_v2", rc)
    try:
        if (rc := call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(COPY_BYTES), gpu=i)) != 0:
            return call_failed("cuMemAlloc_v2", rc)
        pattern = bytes((k * 131 + i) & 0xFF for k in range(256)) * (COPY_BYTES // 256)
        sent = ctypes.create_string_buffer(pattern, COPY_BYTES)
        back = ctypes.create_string_buffer(COPY_BYTES)
        if (rc := call("cuMemcpyHtoD_v2", ptr, sent, ctypes.c_size_t(COPY_BYTES), gpu=i)) != 0:
            return call_failed("cuMemcpyHtoD_v2", rc)
        if (rc := call("cuMemcpyDtoH_v2", back, ptr, ctypes.c_size_t(COPY_BYTES), gpu=i)) != 0:
            return call_failed("cuMemcpyDtoH_v2", rc)
        got = back.raw
        wrong = 0 if got == pattern else sum(1 for a, b in zip(pattern, got, strict=True) if a != b)
        gpu["copy"] = {"bytes": COPY_BYTES, "wrong": wrong}
        call("cuMemFree_v2", ptr, gpu=i)
    finally:
        call("cuCtxDestroy_v2", ctx, gpu=i)
    return gpu


if __name__ == "__main__":
    main()
