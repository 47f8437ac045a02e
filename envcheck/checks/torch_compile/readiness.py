"""compile.toolchain, the quick run's answer to "can torch.compile work here?": the pre-flight probes of
compile.inductor (a C++ compiler Inductor would pick answers, Python.h is there, the temp dir and Inductor's cache
are writable and allow exec; on GPUs: triton is installed, ptxas knows each GPU's architecture, Triton finds
libcuda), judged by the same causes, without compiling and without importing Inductor (about 1 s on 2 cores), so
the quick run stays cheap. `--level full` compiles for real (compile.inductor, compile.max_autotune)."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace

from envcheck.checks.torch_compile.causes import Cause, preflight_cause
from envcheck.checks.torch_compile.inductor import evidence
from envcheck.checks.torch_compile.isa import ISA_DISABLED
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, failed, passed, warned

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
NO_TRITON = "compile.no_triton"
TOOLCHAIN = "compile.toolchain"


def _no_triton() -> Cause:
    return Cause(
        "triton is not installed: torch.compile on a GPU generates Triton kernels",
        "pip install --force-reinstall torch==<your version> (its wheel pins the triton it was built "
        "with); do not install triton separately",
        fault_class=FaultClass.IMAGE,
        code=NO_TRITON,
    )


def toolchain_verdict(cause: Cause | None, ev_summary: str, isa_env: str | None) -> Result:
    """Pure: the first blocking cause (FAIL, its class and code), else a warning for ATEN_CPU_CAPABILITY=default
    (Inductor then emits scalar CPU code), else PASS."""
    if cause is not None:
        return failed(
            f"torch.compile cannot work here: {cause.summary}",
            cause.fix,
            fault_class=cause.fault_class,
            code=cause.code or TOOLCHAIN,
            details=ev_summary,
        )
    if (isa_env or "").lower() == "default":
        return warned(
            "torch.compile can work, but ATEN_CPU_CAPABILITY=default makes Inductor emit scalar CPU code "
            "(no AVX2/AVX-512 vectorization): compiled CPU kernels run several times slower",
            "unset ATEN_CPU_CAPABILITY (or set it to avx2 / avx512)",
            fault_class=FaultClass.CONFIG,
            code=ISA_DISABLED,
            details=ev_summary,
        )
    return passed(f"torch.compile can work here: {ev_summary} (nothing compiled: --level full compiles)")


def compile_toolchain(ctx: Context) -> Result:
    """The compile toolchain's pre-flight probes pass (no compile)."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    ev = evidence(gpus)
    cause = preflight_cause(ev)
    if cause is None and gpus and importlib.util.find_spec("triton") is None:
        cause = _no_triton()
    parts = [
        f"{ev.cxx.found} answers" if ev.cxx and ev.cxx.found else "no C++ compiler",
        "Python.h present" if not ev.headers_missing else "no Python.h",
        "temp dir and Inductor cache writable and exec"
        if not any(d.problems for d in ev.dirs)
        else "; ".join(p for d in ev.dirs for p in d.problems),
    ]
    if gpus:
        parts.append(
            f"{gpus} GPU(s): triton, ptxas, libcuda {'found' if ev.libcuda_found or ev.libcuda_env else 'missing'}"
        )
    result = toolchain_verdict(cause, ", ".join(parts), os.environ.get("ATEN_CPU_CAPABILITY"))
    measured = {
        "cxx": ev.cxx.found if ev.cxx else None,
        "cxx_version": ev.cxx.version if ev.cxx else None,
        "dirs": {d.role: d.path for d in ev.dirs},
        "python_headers": not ev.headers_missing,
        "gpus": gpus,
    }
    return replace(result, measured=measured)
