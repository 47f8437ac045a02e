"""Checks that change process-global state and leave it changed, and one that reads it all (importable by the worker:
module:function references). Each changer is the real call a check or a library it imports makes."""

from __future__ import annotations

import os

from envcheck.core.check import Context
from envcheck.core.result import Result, passed

LEFT_OPEN: list[object] = []


def reads_state(ctx: Context) -> Result:
    """Every knob's value as this check finds it (text), a random draw, and this worker's pid."""
    import random

    import torch

    from envcheck.core.isolation.knobs import knobs

    return passed(
        "state read",
        measured={
            "knobs": {k.name: repr(k.get()) for k in knobs() if k.name != "os.environ"},
            "environ": sorted(os.environ),
            "draws": [float(torch.rand(1)), random.random()],
            "pid": os.getpid(),
        },
    )


def imports_common_utils(ctx: Context) -> Result:
    """What ops.opdb and the module_db/optim_db loaders do: import torch.testing._internal.common_utils, which calls
    torch.backends.disable_global_flags() at import and patches torch._C.ScriptFunction.__call__."""
    import torch

    from envcheck.reference.torch_db import load_internal

    load_internal("common_utils", "TestCase", (".".join(torch.__version__.split(".")[:2]),))
    torch.backends.disable_global_flags()  # as a failed import leaves it: frozen, never unfrozen
    return passed("common_utils imported", measured={"frozen": torch.backends.flags_frozen()})


def sets_tf32_flags(ctx: Context) -> Result:
    """What numerics_mode does first: set the legacy TF32 flags (raises once the flags are frozen)."""
    import torch

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    return passed("TF32 flags set")


def mixes_tf32_apis(ctx: Context) -> Result:
    """A matmul precision set through the legacy API and cuBLAS's through the new one: mixed (the getter raises)."""
    import torch

    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.fp32_precision = "none"
    return passed("TF32 APIs mixed")


def changes_everything(ctx: Context) -> Result:
    """Leaves restorable knobs changed: dtype, device, grad and anomaly mode, threads, generators, autocast, SDPA,
    cuDNN and MKLDNN flags, the environment, the working directory and the warning filters. (Not deterministic
    algorithms: switching them on imports torch.utils._cxx_pytree, which fails without optree, and a failed import
    replaces the worker whatever the state: test_process_state sets them in this process instead.)"""
    import random
    import warnings

    import torch

    torch.set_default_dtype(torch.float64)
    torch.set_default_device("meta")
    torch.set_grad_enabled(False)
    torch.set_anomaly_enabled(True)
    torch.set_num_threads(1 if torch.get_num_threads() > 1 else 2)
    torch.manual_seed(12345)
    random.seed(12345)
    torch.set_autocast_enabled("cpu", True)
    torch.set_autocast_dtype("cpu", torch.float16)
    torch.backends.cuda.enable_flash_sdp(False)
    torch._C._set_cudnn_benchmark(True)
    torch._C._set_mkldnn_enabled(False)
    os.environ["ENVCHECK_LEFT_BEHIND"] = "1"
    os.chdir("/")
    warnings.simplefilter("error")
    return passed("everything changed")


def leaves_inference_mode_open(ctx: Context) -> Result:
    """Enters inference mode and never leaves it (a context manager's __enter__ without its __exit__)."""
    import torch

    mode = torch.inference_mode()
    mode.__enter__()
    LEFT_OPEN.append(mode)  # a reference: its guard would close the mode when collected
    return passed("inference mode left open", measured={"pid": os.getpid()})


def probes_optree(ctx: Context) -> Result:
    """What torch.compile does on a host without optree: import torch.utils._cxx_pytree, which fails at its first line
    (`import optree`) and torch goes on without it."""
    import importlib.util

    try:
        import torch.utils._cxx_pytree  # noqa: F401
    except ImportError:
        pass
    return passed(
        "optree probed",
        measured={"pid": os.getpid(), "optree": importlib.util.find_spec("optree") is not None},
    )
