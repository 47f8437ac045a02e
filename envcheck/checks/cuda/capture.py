"""What the CUDA diagnosis reads, captured from the live system (torch, libcuda, /dev, /proc, NVML, env), and the
shape a bundle's `cuda` section must have. The verdicts (`envcheck.checks.cuda.verdict`) are pure functions of
this data, so the live `cuda.available` check is capture followed by the verdict `envcheck explain` replays.
"""

from __future__ import annotations

import ctypes
import errno
import importlib
import importlib.util
import os
import re
import stat
import warnings
from typing import Any

from envcheck.checks.cuda.layers import IMPORT_FAILED
from envcheck.core.errors import UsageError
from envcheck.core.section import is_one_of, type_names
from envcheck.probe.gpu_usage import nvml_gpus
from envcheck.probe.modules import nvidia_modules
from envcheck.probe.system import (
    driver_cuda_version,
    in_container,
    load_library,
    mapped_paths,
    nvidia_device_nodes,
    read_text,
)

# What the diagnosis reads, with the JSON types each key may hold (None: JSON null allowed).
CUDA_KEYS: dict[str, tuple[type | None, ...]] = {
    "torch_installed": (bool,),
    "torch_cuda": (str, None),
    "available": (bool,),
    "gpus": (list,),
    "torch_error": (str, None),
    "visible_devices": (str, None),
    "device_nodes": (list,),
    "proc_driver": (bool,),
    "proc_driver_version": (str, None),
    "in_container": (bool,),
    "libcuda_error": (str, None),
    "driver_cuda": (int, None),
    "driver_capabilities": (str, None),
}


OPTIONAL_CUDA_KEYS: dict[str, tuple[type | None, ...]] = {
    "cu_init": (int, None),
    "libraries": (list,),
    "nvml_error": (str, None),
    "nvml_gpus": (list, str),
    "device_access": (dict, None),  # {"nvidia0": "EPERM"}
    "char_symlinks_missing": (list, None),
    "kernel_modules": (
        dict,
        str,
    ),  # the kernel's NVIDIA modules by state (probe.modules), or why it cannot be read
}


_LIBS = re.compile(r"/lib(cuda|cudart|cudnn[a-z_]*|nccl|nvidia-ml|cublas|cublasLt|torch_cuda)\.so[.\d]*$")


def loaded_libraries(maps: str | None = None) -> list[str]:
    """Paths of the CUDA-stack libraries mapped into this process (/proc/self/maps): the ones that won."""
    return sorted(p for p in mapped_paths(maps) or () if _LIBS.search(p))


def capture_cuda() -> dict[str, Any]:
    """Read every input of the CUDA diagnosis from the live system (creates no CUDA context on failure)."""
    out: dict[str, Any] = {
        "torch_installed": importlib.util.find_spec("torch") is not None,
        "torch_cuda": None,
        "available": False,
        "gpus": [],
        "torch_error": None,
    }
    torch: Any = None
    try:
        torch = importlib.import_module("torch") if out["torch_installed"] else None
    except Exception as exc:  # a library torch links failed to load: libs.cuda names which
        out["torch_error"] = f"{IMPORT_FAILED} {type(exc).__name__}: {exc}"
    if torch is not None:
        out["torch_cuda"] = torch.version.cuda
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out["available"] = bool(torch.cuda.is_available())
            if out["available"]:
                out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        out["torch_error"] = " ".join(str(w.message) for w in caught) or None
    lib = load_library("libcuda.so.1")
    version = read_text("/proc/driver/nvidia/version")
    contained = in_container() is True
    out.update(
        device_access=device_open_errors(),  # links are a host matter: a container's /dev has none
        char_symlinks_missing=None if contained else missing_char_symlinks(),
    )
    out.update(
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        device_nodes=nvidia_device_nodes(),
        proc_driver=os.path.isdir("/proc/driver/nvidia"),
        proc_driver_version=version.strip() if version else None,
        in_container=contained,
        libcuda_error=lib if isinstance(lib, str) else None,
        driver_cuda=None if isinstance(lib, str) else driver_cuda_version(lib),
        driver_capabilities=os.environ.get("NVIDIA_DRIVER_CAPABILITIES"),
        libraries=loaded_libraries(),
        cu_init=None if isinstance(lib, str) or out["available"] else cu_init(lib),
        kernel_modules=nvidia_modules(),
    )
    nvml = nvml_gpus()
    out.update(nvml_gpus=nvml, nvml_error=first_nvml_error(nvml))
    return out


def _char_nodes(dev: str) -> list[tuple[str, os.stat_result]]:
    found = []
    for name in nvidia_device_nodes(dev):
        try:
            st = os.stat(os.path.join(dev, name))
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):  # /dev/nvidia-caps is a directory
            found.append((name, st))
    return found


def device_open_errors(dev: str = "/dev") -> dict[str, str]:
    """Each /dev/nvidia* character node that open() refuses, by errno name: EPERM is a device cgroup (a container's
    after `systemctl daemon-reload`), EACCES the node's mode or a nodev mount, ENXIO no driver behind the node."""
    refused: dict[str, str] = {}
    for name, _ in _char_nodes(dev):
        try:  # what CUDA and NVML do first; no ioctl is issued
            fd = os.open(os.path.join(dev, name), os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            refused[name] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            continue
        os.close(fd)
    return refused


def missing_char_symlinks(dev: str = "/dev") -> list[str]:
    """The /dev/nvidia* character nodes with no /dev/char/<major>:<minor> link resolving to them, as
    'nvidia0 (195:0)': runc finds devices through these links when systemd manages the container's cgroup."""
    missing: list[str] = []
    for name, st in _char_nodes(dev):
        number = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        try:
            link = os.stat(os.path.join(dev, "char", number))
            ok = stat.S_ISCHR(link.st_mode) and link.st_rdev == st.st_rdev
        except OSError:
            ok = False
        if not ok:
            missing.append(f"{name} ({number})")
    return missing


def cu_init(lib: ctypes.CDLL) -> int | None:
    """cuInit(0)'s CUresult (0 success, 100 no device, 999 unknown ...); None when libcuda has no cuInit."""
    try:
        return int(lib.cuInit(ctypes.c_uint(0)))
    except AttributeError:
        return None


def first_nvml_error(state: list[dict[str, Any]] | str) -> str | None:
    """'GPU 1: GPU is lost' for the first GPU NVML fails on, or NVML's own failure; None when it answers."""
    if isinstance(state, str):
        return state if state.startswith("NVML") else None
    return next((f"GPU {g['index']}: {g['error']}" for g in state if "error" in g), None)


def validate_cuda(cuda: Any, where: str) -> None:
    """Raise UsageError naming the first key of a bundle's cuda section that is missing or of the wrong type."""
    if not isinstance(cuda, dict):
        raise UsageError(f"{where} must be an object, got {type(cuda).__name__}")
    for key, types in {**CUDA_KEYS, **OPTIONAL_CUDA_KEYS}.items():
        if key not in cuda:
            if key in OPTIONAL_CUDA_KEYS:
                continue
            raise UsageError(f"{where} section lacks {key!r}")
        value = cuda[key]
        ok = is_one_of(value, types)
        item = dict if key == "nvml_gpus" else str
        if ok and isinstance(value, list):
            ok = all(isinstance(v, item) for v in value)
        if ok and isinstance(value, dict):
            ok = all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        if not ok:
            of = (
                f" of {item.__name__}"
                if isinstance(value, list)
                else " of str to str"
                if isinstance(value, dict)
                else ""
            )
            raise UsageError(f"{where}.{key} must be {type_names(types)}{of}, got {value!r:.60}")
