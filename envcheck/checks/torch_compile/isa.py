"""compile.cpu_isa: the vectorized CPU ISA Inductor picks for its C++ kernels, as PyTorch's release smoke test requires
one ("Can't detect vectorized ISA for CPU"). Without one, every compiled CPU kernel is scalar. How the pick is made
with one probe instead of one per ISA: settings.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envcheck.checks.torch_compile.causes import Cause, classify, preflight_cause
from envcheck.checks.torch_compile.inductor import error_text, evidence
from envcheck.checks.torch_compile.settings import apply_settings, pick
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, failed, passed, warned
from envcheck.core.rundir import user_paths

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
ISA_DISABLED = "compile.isa_disabled"
NO_VEC_ISA = "compile.no_vec_isa"

VECTOR_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "amx_tile",
    "asimd",
    "sve",
)  # x86 and aarch64 /proc/cpuinfo names


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """The vector-ISA flags the kernel reports for this CPU (/proc/cpuinfo 'flags' or 'Features')."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return [f for f in VECTOR_FLAGS if f in value.split()]
    return []


def isa_verdict(
    isa: str | None, bits: int, flags: list[str], capability: str | None, compiler_cause: Cause | None
) -> Result:
    """Pure: `isa` is the picked ISA's class name (None: Inductor found none)."""
    measured: dict[str, Any] = {
        "isa": isa,
        "bit_width": bits,
        "cpu_flags": flags,
        "ATEN_CPU_CAPABILITY": capability,
    }
    if isa:
        return passed(f"Inductor vectorizes CPU kernels with {isa} ({bits}-bit)", measured=measured)
    if (capability or "").lower() == "default":
        return warned(
            "Inductor found no vector ISA: ATEN_CPU_CAPABILITY=default turns vectorization off, so every "
            "compiled CPU kernel is scalar (several times slower)",
            "unset ATEN_CPU_CAPABILITY (or set it to avx2 / avx512)",
            fault_class=FaultClass.CONFIG,
            code=ISA_DISABLED,
            measured=measured,
        )
    if compiler_cause is not None:  # each ISA is proven by compiling a probe: no compiler, no ISA
        return failed(
            f"Inductor found no vector ISA because its probes cannot compile: {compiler_cause.summary}",
            compiler_cause.fix,
            fault_class=compiler_cause.fault_class,
            code=compiler_cause.code or NO_VEC_ISA,
            measured=measured,
        )
    return warned(
        f"Inductor found no vector ISA this CPU supports (CPU flags: {', '.join(flags) or 'none of '}"
        f"{'' if flags else ', '.join(VECTOR_FLAGS)}): compiled CPU kernels are scalar",
        "expected on CPUs without AVX2/AVX-512/NEON; GPU kernels are not affected",
        fault_class=FaultClass.NODE,
        code=NO_VEC_ISA,
        measured=measured,
    )


def compile_cpu_isa(ctx: Context) -> Result:
    """Inductor picks a vector ISA for CPU kernels (its probe compiles and runs here)."""
    import os

    apply_settings(probe_isa=False)
    try:
        isa, bits = pick()
        cause = None if isa else preflight_cause(evidence(0))
    except Exception as exc:  # InvalidCxxCompiler and the like: the probes could not even be built
        ev = evidence(0)
        named = classify(user_paths(error_text(exc)), ev)
        isa, bits, cause = None, 0, named if named.named else (preflight_cause(ev) or named)
    return isa_verdict(isa, bits, cpu_flags(), os.environ.get("ATEN_CPU_CAPABILITY"), cause)
