"""A diagnosis bundle: everything the CUDA diagnosis reads, captured once, replayable on another machine.

`capture_cuda()` reads the live system (torch, libcuda, /dev, /proc, env); `load_bundle()` reads a bundle file
back and refuses anything malformed with one line. The diagnosis itself (`envcheck.checks.replay`) is a pure
function of what is captured here, so the live `cuda.available` check is capture followed by replay.
"""

from __future__ import annotations

import ctypes
import errno
import importlib
import importlib.util
import json
import os
import re
import stat
import threading
import warnings
from typing import Any

from envcheck import secrets
from envcheck.checks.cuda_diagnosis import IMPORT_FAILED
from envcheck.checks.probe import (
    driver_cuda_version,
    in_container,
    load_library,
    mapped_paths,
    nvidia_device_nodes,
    read_text,
    with_nvml,
)
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Result, passed
from envcheck.errors import UsageError

SCHEMA = "envcheck-bundle"
SCHEMA_VERSION = 1
MAX_BUNDLE_BYTES = 8 * 2**20
# What the diagnosis reads, with the JSON types each key may hold (None: JSON null allowed).
CUDA_KEYS: dict[str, tuple[type | None, ...]] = {
    "torch_installed": (bool,), "torch_cuda": (str, None), "available": (bool,), "gpus": (list,),
    "torch_error": (str, None), "visible_devices": (str, None), "device_nodes": (list,), "proc_driver": (bool,),
    "proc_driver_version": (str, None), "in_container": (bool,), "libcuda_error": (str, None),
    "driver_cuda": (int, None), "driver_capabilities": (str, None),
}
OPTIONAL_CUDA_KEYS: dict[str, tuple[type | None, ...]] = {"cu_init": (int, None), "libraries": (list,),
                                                           "nvml_error": (str, None), "nvml_gpus": (list, str),
                                                           "device_access": (dict, None),  # {"nvidia0": "EPERM"}
                                                           "char_symlinks_missing": (list, None)}
ENV_PREFIXES = ("NVIDIA_", "CUDA_", "NCCL_", "GLOO_", "TORCH_", "PYTORCH_", "LD_LIBRARY_PATH", "LD_PRELOAD",
                "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "ENVCHECK_")
_LIBS = re.compile(r"/lib(cuda|cudart|cudnn[a-z_]*|nccl|nvidia-ml|cublas|cublasLt|torch_cuda)\.so[.\d]*$")


def redact_env(environ: dict[str, str]) -> dict[str, str]:
    """The variables the diagnosis reads, secrets redacted by name and in URLs (envcheck.secrets)."""
    return secrets.redact_env(environ, ENV_PREFIXES)


def loaded_libraries(maps: str | None = None) -> list[str]:
    """Paths of the CUDA-stack libraries mapped into this process (/proc/self/maps): the ones that won."""
    return sorted(p for p in mapped_paths(maps) or () if _LIBS.search(p))


def capture_cuda() -> dict[str, Any]:
    """Read every input of the CUDA diagnosis from the live system (creates no CUDA context on failure)."""
    out: dict[str, Any] = {"torch_installed": importlib.util.find_spec("torch") is not None, "torch_cuda": None,
                           "available": False, "gpus": [], "torch_error": None}
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
    out.update(device_access=device_open_errors(),  # links are a host matter: a container's /dev has none
               char_symlinks_missing=None if contained else missing_char_symlinks())
    out.update(
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), device_nodes=nvidia_device_nodes(),
        proc_driver=os.path.isdir("/proc/driver/nvidia"), proc_driver_version=version.strip() if version else None,
        in_container=contained, libcuda_error=lib if isinstance(lib, str) else None,
        driver_cuda=None if isinstance(lib, str) else driver_cuda_version(lib),
        driver_capabilities=os.environ.get("NVIDIA_DRIVER_CAPABILITIES"), libraries=loaded_libraries(),
        cu_init=None if isinstance(lib, str) or out["available"] else cu_init(lib))
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


NVML_BUDGET_S = 15.0  # a GPU in a bad state can hang NVML calls: well under cuda.available's 60 s timeout


def nvml_gpus(budget_s: float = NVML_BUDGET_S) -> list[dict[str, Any]] | str:
    """Each GPU's UUID, MIG mode and MIG device UUIDs from NVML (an entry's `error` when NVML fails on that GPU,
    e.g. 'GPU is lost'); why NVML cannot tell, as text. NVML is asked in a thread with a time budget, so a hung
    NVML is named ('NVML did not answer within 15 s') rather than timing out the check that asked."""
    answer: list[list[dict[str, Any]] | str] = []
    reader = threading.Thread(target=lambda: answer.append(_nvml_gpus()), name="envcheck-nvml", daemon=True)
    reader.start()
    reader.join(budget_s)
    return answer[0] if answer else f"NVML did not answer within {budget_s:g} s (a GPU or the driver is hung)"


def _nvml_gpus() -> list[dict[str, Any]] | str:
    def gpus(pynvml: Any) -> list[dict[str, Any]] | str:
        try:
            return [_nvml_gpu(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:
            return f"NVML: {exc}"

    return with_nvml(gpus, lambda exc: "NVML bindings not installed (pip install nvidia-ml-py)"
                     if isinstance(exc, ImportError) else f"NVML init: {exc}")


def _nvml_gpu(pynvml: Any, i: int) -> dict[str, Any]:
    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        uuid = text(pynvml.nvmlDeviceGetUUID(h))
    except Exception as exc:
        return {"index": i, "error": str(exc) or type(exc).__name__}
    try:
        mig = bool(pynvml.nvmlDeviceGetMigMode(h)[0])
    except Exception:  # NOT_SUPPORTED: a GPU without MIG
        mig = False
    slices: list[str] = []
    for k in range(int(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)) if mig else 0):
        try:
            slices.append(text(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, k))))
        except Exception:  # that slot holds no MIG device
            continue
    return {"index": i, "uuid": uuid, "mig": mig, "mig_devices": slices}


def first_nvml_error(state: list[dict[str, Any]] | str) -> str | None:
    """'GPU 1: GPU is lost' for the first GPU NVML fails on, or NVML's own failure; None when it answers."""
    if isinstance(state, str):
        return state if state.startswith("NVML") else None
    return next((f"GPU {g['index']}: {g['error']}" for g in state if "error" in g), None)


def capture_host() -> dict[str, Any]:
    """The bundle's host part: the CUDA inputs (loaded libraries among them), every replayable section's inputs
    (envcheck.checks.sections), and the relevant env, redacted."""
    from envcheck.checks.sections import SECTIONS

    host: dict[str, Any] = {"cuda": capture_cuda(), "env": redact_env(dict(os.environ))}
    for section in SECTIONS:
        try:
            host[section.key] = section.capture()
        except Exception as exc:  # one section that cannot be read must not lose the rest of the bundle
            host[section.key] = {"capture_error": f"{type(exc).__name__}: {exc}"}
    return host


def capture_check(ctx: Context) -> Result:
    """Run in an isolated worker by `envcheck facts --bundle`: the captured inputs travel in `measured`."""
    return passed("captured the diagnosis inputs", measured={"bundle": capture_host()})


CAPTURE_SPEC = CheckSpec("bundle.capture", capture_check, "capture what the CUDA diagnosis reads", timeout_s=60)


def make_bundle(host: dict[str, Any], facts: dict[str, Any], version: str) -> dict[str, Any]:
    """The bundle document: schema header, the captured host part, and the facts (NVML state among them)."""
    if isinstance(facts.get("env"), dict):  # facts' own env list: redact it the bundle's way too (URL user:token@)
        facts = {**facts, "env": redact_env({str(k): str(v) for k, v in facts["env"].items()})}
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "envcheck_version": version, **host,
            "facts": facts}


def _type_name(types: tuple[type | None, ...]) -> str:
    return " or ".join("null" if t is None else t.__name__ for t in types)


def validate_bundle(data: Any, where: str = "bundle") -> dict[str, Any]:
    """The bundle if it has the schema's shape; UsageError naming the first thing wrong otherwise."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not an envcheck bundle (a JSON object is expected, got {type(data).__name__})")
    if data.get("schema") != SCHEMA:
        raise UsageError(f"{where}: not an envcheck bundle (schema is {data.get('schema')!r}, want {SCHEMA!r}; "
                         "make one with `envcheck facts --bundle FILE`)")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(f"{where}: bundle schema_version {data.get('schema_version')!r} is not supported "
                         f"(this envcheck reads version {SCHEMA_VERSION})")
    cuda = data.get("cuda")
    if not isinstance(cuda, dict):
        raise UsageError(f"{where}: bundle has no 'cuda' section")
    for key, types in {**CUDA_KEYS, **OPTIONAL_CUDA_KEYS}.items():
        if key not in cuda:
            if key in OPTIONAL_CUDA_KEYS:
                continue
            raise UsageError(f"{where}: bundle's cuda section lacks {key!r}")
        value = cuda[key]
        ok = any((value is None) if t is None else (isinstance(value, t) and not (t is int and
                                                                               isinstance(value, bool)))
                 for t in types)
        item = dict if key == "nvml_gpus" else str
        if ok and isinstance(value, list):
            ok = all(isinstance(v, item) for v in value)
        if ok and isinstance(value, dict):
            ok = all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        if not ok:
            of = f" of {item.__name__}" if isinstance(value, list) else " of str to str" if isinstance(value, dict) else ""
            raise UsageError(f"{where}: bundle's cuda.{key} must be {_type_name(types)}{of}, got {value!r:.60}")
    for key in ("env", "facts"):
        if key in data and not isinstance(data[key], dict):
            raise UsageError(f"{where}: bundle's {key!r} must be an object")
    from envcheck.checks.sections import SECTIONS

    for section in SECTIONS:
        if section.key in data:
            part = data[section.key]
            if isinstance(part, dict) and set(part) == {"capture_error"} and isinstance(part["capture_error"], str):
                continue
            section.validate(part, f"{where}: bundle's {section.key}")
    return data


def load_bundle(path: str) -> dict[str, Any]:
    """Read and validate a bundle file; one-line UsageError for a missing, special, huge or malformed file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"cannot read bundle {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path} is a directory; give the bundle file that `envcheck facts --bundle` wrote")
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
        raise UsageError(f"{path} is not a regular file; give the bundle file that `envcheck facts --bundle` wrote")
    if st.st_size > MAX_BUNDLE_BYTES:
        raise UsageError(f"{path} is {st.st_size / 2**20:.1f} MiB; a bundle is at most "
                         f"{MAX_BUNDLE_BYTES // 2**20} MiB (is this the right file?)")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BUNDLE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read bundle {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not JSON ({str(exc).splitlines()[0][:120]})") from None
    except RecursionError:
        raise UsageError(f"{path}: not a bundle (JSON nested too deeply)") from None
    return validate_bundle(data, path)
