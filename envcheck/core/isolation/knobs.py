"""The process-global state a check may change or read, each piece named with how it is read and how it is set
(envcheck.core.isolation.process_state puts it back after every check in a worker).

- torch.backends: whether the flags are frozen (torch.testing._internal.common_utils calls disable_global_flags at
  import); cuDNN enabled/benchmark/deterministic; TF32 through both APIs (`float32_matmul_precision`, every backend's
  and op's `fp32_precision`, and the legacy `allow_tf32` flags, read as probes: a mixed state makes them raise);
  cuBLAS's reduced-precision reductions; the SDPA backends; MKLDNN; opt_einsum; the preferred linear-algebra and BLAS
  libraries;
- torch: default dtype and device, grad mode, anomaly mode, deterministic algorithms (and their debug mode and fill of
  uninitialised memory), intra-op threads, autocast per device type and its cache, the CPU generator; read only (a
  change replaces the worker): inference mode and the torch-function and dispatch mode stacks (a context left open);
- Python: `random`'s and numpy's generators, the environment, the working directory, the warning filters;
- compile: Dynamo's and Inductor's config, once a check imported them (their first value is the one seen first).
CUDA's state (each initialised device's generator, the allocator's cache, peak statistics and memory fraction) is not
a knob: process_state.reset_cuda sets it back to a fresh process's.
"""

from __future__ import annotations

import os
import random
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FP32_PRECISION = (
    ("generic", "all"),
    ("cuda", "all"),
    ("cuda", "matmul"),
    ("cuda", "conv"),
    ("cuda", "rnn"),
    ("mkldnn", "all"),
    ("mkldnn", "matmul"),
    ("mkldnn", "conv"),
    ("mkldnn", "rnn"),
)
DEVICE_TYPES = ("cpu", "cuda")
FROZEN = "torch.backends flags frozen"


@dataclass(frozen=True)
class Knob:
    """One piece of process-global state: how to read it, and how to set it (None: read only)."""

    name: str
    get: Callable[[], Any]
    set: Callable[[Any], None] | None = None


def probe(get: Callable[[], Any]) -> Callable[[], Any]:
    """A getter that may raise: its error text is its value (a mixed TF32 state makes torch's getters raise)."""

    def read() -> Any:
        try:
            return get()
        except Exception as exc:
            return f"raises {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"

    return read


def _python_knobs() -> list[Knob]:
    knobs = [
        Knob("random state", random.getstate, random.setstate),
        Knob("os.environ", lambda: dict(os.environ), _set_environ),
        Knob("working directory", os.getcwd, os.chdir),
        Knob("warnings.filters", lambda: list(warnings.filters), _set_filters),
    ]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        knobs.append(Knob("numpy.random state", lambda: _numpy_state(numpy), lambda s: _set_numpy(numpy, s)))
    return knobs


def _set_environ(saved: dict[str, str]) -> None:
    for key in [k for k in os.environ if k not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _set_filters(saved: list[Any]) -> None:
    filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list at runtime
    filters[:] = saved
    warnings._filters_mutated()  # type: ignore[attr-defined]  # the module's own cache of the filters


def _numpy_state(numpy: Any) -> Any:
    name, keys, pos, has_gauss, cached = numpy.random.get_state()
    return (name, keys.tobytes(), pos, has_gauss, cached)


def _set_numpy(numpy: Any, state: Any) -> None:
    name, keys, pos, has_gauss, cached = state
    numpy.random.set_state((name, numpy.frombuffer(keys, dtype=numpy.uint32), pos, has_gauss, cached))


def _frozen_flag(torch: Any) -> Knob:
    """torch.backends' freeze (common_utils' disable_global_flags), set back through the module's own global (the
    real module's: `torch.backends` in sys.modules is a wrapper of it)."""
    flags_frozen = torch.backends.flags_frozen
    module_globals = flags_frozen.__globals__

    def set_frozen(frozen: bool) -> None:
        module_globals["__allow_nonbracketed_mutation_flag"] = not frozen

    return Knob(FROZEN, flags_frozen, set_frozen)


def _tf32_knobs(torch: Any) -> list[Knob]:
    """TF32 through both APIs. The legacy flags are probes only (set through the new API, they follow); the
    matmul precision is set first because setting it also sets cuBLAS's and oneDNN's matmul fp32_precision."""
    c = torch._C
    knobs = [
        Knob("float32 matmul precision", c._get_float32_matmul_precision, c._set_float32_matmul_precision)
    ]
    knobs += [_fp32_precision(c, backend, op) for backend, op in FP32_PRECISION]
    knobs += [
        Knob("cuBLAS allow_tf32 (probe)", probe(c._get_cublas_allow_tf32)),
        Knob("cuDNN allow_tf32 (probe)", probe(c._get_cudnn_allow_tf32)),
    ]
    return knobs


def _fp32_precision(c: Any, backend: str, op: str) -> Knob:
    """One backend's and op's fp32_precision ('none', 'ieee', 'tf32'...), through torch's own getter and setter."""

    def get() -> Any:
        return c._get_fp32_precision_getter(backend, op)

    def set_value(value: Any) -> None:
        c._set_fp32_precision_setter(backend, op, value)

    return Knob(f"fp32_precision {backend}.{op}", probe(get), set_value)


def _backend_knobs(torch: Any) -> list[Knob]:
    c = torch._C
    cuda = torch.backends.cuda
    knobs = [
        Knob("cudnn.enabled", c._get_cudnn_enabled, c._set_cudnn_enabled),
        Knob("cudnn.benchmark", c._get_cudnn_benchmark, c._set_cudnn_benchmark),
        Knob("cudnn.deterministic", c._get_cudnn_deterministic, c._set_cudnn_deterministic),
        Knob("mkldnn.enabled", c._get_mkldnn_enabled, c._set_mkldnn_enabled),
        Knob("mkldnn.deterministic", c._get_mkldnn_deterministic, c._set_mkldnn_deterministic),
        Knob("sdp flash", cuda.flash_sdp_enabled, cuda.enable_flash_sdp),
        Knob("sdp mem_efficient", cuda.mem_efficient_sdp_enabled, cuda.enable_mem_efficient_sdp),
        Knob("sdp math", cuda.math_sdp_enabled, cuda.enable_math_sdp),
        Knob("sdp cudnn", cuda.cudnn_sdp_enabled, cuda.enable_cudnn_sdp),
        Knob("linalg preferred backend", c._get_linalg_preferred_backend, c._set_linalg_preferred_backend),
        Knob("blas preferred backend", c._get_blas_preferred_backend, c._set_blas_preferred_backend),
        Knob(
            "opt_einsum.enabled",
            torch.backends.opt_einsum._get_enabled,
            torch.backends.opt_einsum._set_enabled,
        ),
    ]
    for name in ("fp16", "bf16"):
        getter = getattr(c, f"_get_cublas_allow_{name}_reduced_precision_reduction", None)
        setter = getattr(c, f"_set_cublas_allow_{name}_reduced_precision_reduction", None)
        if getter is not None and setter is not None:
            knobs.append(Knob(f"cuBLAS {name} reduced-precision reduction", probe(getter), _star(setter)))
    return knobs


def _star(setter: Callable[..., None]) -> Callable[[Any], None]:
    """A setter that takes a getter's tuple as its arguments (cuBLAS's (allow, allow_splitk))."""

    def set_value(value: Any) -> None:
        setter(*value) if isinstance(value, tuple) else setter(value)

    return set_value


def _torch_knobs(torch: Any) -> list[Knob]:
    knobs = [
        Knob("default dtype", torch.get_default_dtype, torch.set_default_dtype),
        Knob(
            "default device",
            lambda: str(torch.get_default_device()),
            lambda d: torch.set_default_device(None if d == "cpu" else d),
        ),
        Knob("grad mode", torch.is_grad_enabled, torch.set_grad_enabled),
        Knob(
            "anomaly mode",
            lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
            lambda s: torch.set_anomaly_enabled(*s),
        ),
        Knob(
            "deterministic algorithms",
            lambda: (
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
            ),
            lambda s: torch.use_deterministic_algorithms(s[0], warn_only=s[1]),
        ),
        Knob(
            "deterministic debug mode", torch.get_deterministic_debug_mode, torch.set_deterministic_debug_mode
        ),
        Knob("intra-op threads", torch.get_num_threads, torch.set_num_threads),
        Knob(
            "CPU generator", lambda: bytes(torch.get_rng_state().tolist()), lambda s: _set_cpu_rng(torch, s)
        ),
        Knob("inference mode (a context left open)", torch.is_inference_mode_enabled),
        Knob("torch function modes (left open)", torch._C._len_torch_function_stack),
        Knob("torch dispatch modes (left open)", torch._C._len_torch_dispatch_stack),
    ]
    fill = getattr(getattr(torch.utils, "deterministic", None), "fill_uninitialized_memory", None)
    if fill is not None:
        knobs.append(
            Knob(
                "deterministic fill_uninitialized_memory",
                lambda: torch.utils.deterministic.fill_uninitialized_memory,
                lambda v: setattr(torch.utils.deterministic, "fill_uninitialized_memory", v),
            )
        )
    knobs += [_autocast(torch, device_type) for device_type in DEVICE_TYPES]
    knobs.append(Knob("autocast cache", torch.is_autocast_cache_enabled, torch.set_autocast_cache_enabled))
    return knobs


def _set_cpu_rng(torch: Any, state: bytes) -> None:
    torch.set_rng_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))


def _autocast(torch: Any, device_type: str) -> Knob:
    """Autocast's switch and dtype for one device type (a `with torch.autocast` left open leaves both)."""

    def get() -> Any:
        return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)

    def set_value(state: tuple[bool, Any]) -> None:
        torch.set_autocast_enabled(device_type, state[0])
        torch.set_autocast_dtype(device_type, state[1])

    return Knob(f"autocast {device_type}", get, set_value)


def _compile_knobs() -> list[Knob]:
    """Dynamo's and Inductor's config, where a check imported them (a compile sets compile_threads and the like)."""
    knobs = []
    for module in ("torch._dynamo.config", "torch._inductor.config"):
        config = sys.modules.get(module)
        if config is not None and hasattr(config, "get_config_copy") and hasattr(config, "load_config"):
            knobs.append(Knob(module, _config_reader(config), config.load_config))
    return knobs


def _config_reader(config: Any) -> Callable[[], Any]:
    def read() -> Any:
        return {k: v for k, v in config.get_config_copy().items() if _plain(v)}

    return read


def _plain(value: Any) -> bool:
    """A config value that compares by value (functions and objects are left as they are)."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def knobs() -> list[Knob]:
    """Every knob this process has now (torch's only once torch is imported, compile's once a check imported it)."""
    found = _python_knobs()
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "_C"):
        found += [_frozen_flag(torch), *_tf32_knobs(torch), *_backend_knobs(torch), *_torch_knobs(torch)]
        found += _compile_knobs()
    return found
