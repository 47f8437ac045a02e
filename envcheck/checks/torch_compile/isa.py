"""compile.cpu_isa: the vectorized CPU ISA Inductor picks for its C++ kernels, as PyTorch's release smoke test requires
one ("Can't detect vectorized ISA for CPU"). Without one, every compiled CPU kernel is scalar.

Inductor's own pick (torch._inductor.cpu_vec_isa.pick_vec_isa) compiles and loads a probe for every ISA the CPU
claims (six here: 8-10 s cold on 2 cores; on torch 2.11 each load also imports torch in a child, about a minute on
the H100 host of docs/gpu-evidence) and then takes the first that builds, as ATEN_CPU_CAPABILITY selects it. This
check reads the same CPU flags and makes the same selection, but builds only the ISA it selects (one probe; the next
candidate only if that one does not build), so it needs no model compiled and no probe it will not use; where
Inductor already built its list in this process (compile.inductor ran before it), its pick is read as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envcheck.checks.torch_compile.causes import Cause, classify, preflight_cause
from envcheck.checks.torch_compile.inductor import COMPILE_SETTINGS, error_text, evidence
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


def pick() -> tuple[str | None, int]:
    """What Inductor picks here: (ISA class name or None, bit width)."""
    from torch._inductor import cpu_vec_isa

    isa = cpu_vec_isa.pick_vec_isa() if _built(cpu_vec_isa) else _first_that_builds(cpu_vec_isa)
    return (type(isa).__name__, int(isa.bit_width())) if isa else (None, 0)


def _built(isa_module: Any) -> bool:
    """Whether Inductor's own pick is at hand without building every probe: its list is built in this process
    already, or this is a platform or setting whose pick this check does not reproduce (it then builds the list)."""
    import platform

    from torch._inductor import config

    listing = isa_module.valid_vec_isa_list
    return (
        listing.cache_info().currsize > 0
        or platform.machine() not in ("x86_64", "AMD64")
        or config.cpp.simdlen is not None
        or config.is_fbcode()
        or not all(
            hasattr(isa_module, a)
            for a in ("x86_isa_checker", "supported_vec_isa_list", "get_isa_from_cpu_capability")
        )
    )


def _first_that_builds(isa_module: Any) -> Any:
    """Inductor's selection (the ISAs this CPU's flags allow, in Inductor's order, then ATEN_CPU_CAPABILITY's
    choice among them) over the candidates, building only the one selected; one that does not build is dropped and
    the selection made again, as Inductor would have left it out of its list."""
    import os

    flags = isa_module.x86_isa_checker()
    candidates = [i for i in isa_module.supported_vec_isa_list if all(f in flags for f in str(i).split())]
    capability = os.getenv("ATEN_CPU_CAPABILITY")
    while candidates:
        chosen = isa_module.get_isa_from_cpu_capability(capability, candidates, isa_module.invalid_vec_isa)
        if all(chosen is not c for c in candidates):  # switched off (ATEN_CPU_CAPABILITY=default)
            return chosen
        if chosen:  # builds and loads its probe (Inductor's VecISA.__bool__, cached per ISA)
            return chosen
        candidates.remove(chosen)
    return isa_module.invalid_vec_isa


def compile_cpu_isa(ctx: Context) -> Result:
    """Inductor picks a vector ISA for CPU kernels (its probes compile and run here)."""
    import os

    from torch._inductor import config as inductor_config

    for key, value in COMPILE_SETTINGS.items():
        setattr(inductor_config, key, value)
    try:
        isa, bits = pick()
        cause = None if isa else preflight_cause(evidence(0))
    except Exception as exc:  # InvalidCxxCompiler and the like: the probes could not even be built
        ev = evidence(0)
        named = classify(user_paths(error_text(exc)), ev)
        isa, bits, cause = None, 0, named if named.named else (preflight_cause(ev) or named)
    return isa_verdict(isa, bits, cpu_flags(), os.environ.get("ATEN_CPU_CAPABILITY"), cause)
