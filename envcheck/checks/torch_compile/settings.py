"""The Inductor settings every compile check runs with, and the vector ISA Inductor's C++ kernels are built for,
found once per worker with one probe.

Inductor's own pick (torch._inductor.cpu_vec_isa.pick_vec_isa) builds and loads a probe for every ISA the CPU claims
(six here: 8-10 s cold on 2 cores; on torch 2.11 each load also imports torch in a child, about a minute on the H100
host of docs/gpu-evidence) and takes the first that builds, as ATEN_CPU_CAPABILITY selects it. `pick` makes the same
selection over the same candidates and builds only the chosen one (the next only if it does not build); where its
pick is the first candidate (Inductor's pick then, whatever the others would do), `apply_settings` tells Inductor so
(cpp.vec_isa_ok) and it builds no probe of its own; where Inductor already built its list in this process, its pick
is read as it is.
"""

from __future__ import annotations

import functools
import os
from typing import Any

# Inductor settings of the compile checks. They share one worker ("compile") and, within a run, one cache (the
# worker's private temp dir, or the user's TORCHINDUCTOR_CACHE_DIR): the vector-ISA probes, one precompiled header and
# about twenty kernels (this check's two, compile.max_autotune's three, compile.train_step's fourteen), so what one
# compile pays the next one reuses. Precompiled headers (torch's default): ATen's vectorisation header is parsed once
# into a .pch (8-20 s on 2 cores) and each kernel then compiles in about 1.3 s instead of 3-8 s.
COMPILE_SETTINGS: dict[str, Any] = {"cpp_cache_precompile_headers": True}
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def thread_settings(gpu: bool) -> dict[str, Any]:
    """How many C++ kernels of one graph (the training step's fourteen) compile at a time. With compile_threads above 1
    Inductor hands each to a thread of its compile pool (AsyncCompile.cpp: a ThreadPoolExecutor), and the thread
    waits for its compiler process; a CPU compile through torch.compile starts no worker process. On a small host two
    threads keep both cores busy while this lane traces in Python and the others are done: measured on 2 cores with
    torch 2.15, the full level cold took 72.4 s with one thread and 62-66 s with two, for the same CPU. Where a GPU
    is visible the first Triton kernel starts Inductor's process pool (a new process that imports torch: 50 s and 48 s
    of CPU for the group with a pool of 2 against 45 s and 45 s in-process, measured before), so a small GPU host keeps
    one thread; a host with cores to spare (8 or more) gives up to 8."""
    if _CORES >= 8:
        return {"compile_threads": min(8, _CORES // 2)}
    return {"compile_threads": 1 if gpu else 2}


def apply_settings(probe_isa: bool = True) -> dict[str, Any]:
    """Set COMPILE_SETTINGS and the thread settings in Inductor's config (set back after the check:
    envcheck.core.isolation.knobs) and return what was set; with `probe_isa`, spare Inductor its own ISA probes where
    `pick` proved Inductor's pick (cpp.vec_isa_ok)."""
    import torch
    from torch._inductor import config

    applied = COMPILE_SETTINGS | thread_settings(torch.cuda.is_available())
    for key, value in applied.items():
        setattr(config, key, value)
    if probe_isa and _proved_first():
        config.cpp.vec_isa_ok = True
    return applied


def _proved_first() -> bool:
    """Whether `pick` built the first candidate, with nothing (ATEN_CPU_CAPABILITY, simdlen) choosing another."""
    from torch._inductor import cpu_vec_isa

    try:
        if _built(cpu_vec_isa) or os.environ.get("ATEN_CPU_CAPABILITY"):
            return False
        chosen, first = _selection()
    except Exception:  # private API changed: Inductor probes as it always did, and names what fails
        return False
    return chosen is not None and chosen is first


def pick() -> tuple[str | None, int]:
    """What Inductor picks here: (ISA class name or None, bit width)."""
    from torch._inductor import cpu_vec_isa

    isa = cpu_vec_isa.pick_vec_isa() if _built(cpu_vec_isa) else _selection()[0]
    return (type(isa).__name__, int(isa.bit_width())) if isa else (None, 0)


@functools.cache
def _selection() -> tuple[Any, Any]:
    """(the ISA that builds and Inductor would select, the first candidate), once per process."""
    from torch._inductor import cpu_vec_isa

    flags = cpu_vec_isa.x86_isa_checker()
    candidates = [i for i in cpu_vec_isa.supported_vec_isa_list if all(f in flags for f in str(i).split())]
    return _first_that_builds(cpu_vec_isa, list(candidates)), candidates[0] if candidates else None


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


def _first_that_builds(isa_module: Any, candidates: list[Any]) -> Any:
    """Inductor's selection (the ISAs this CPU's flags allow, in Inductor's order, then ATEN_CPU_CAPABILITY's
    choice among them) over the candidates, building only the one selected; one that does not build is dropped and
    the selection made again, as Inductor would have left it out of its list."""
    import os

    capability = os.getenv("ATEN_CPU_CAPABILITY")
    while candidates:
        chosen = isa_module.get_isa_from_cpu_capability(capability, candidates, isa_module.invalid_vec_isa)
        if all(chosen is not c for c in candidates):  # switched off (ATEN_CPU_CAPABILITY=default)
            return chosen
        if chosen:  # builds and loads its probe (Inductor's VecISA.__bool__, cached per ISA)
            return chosen
        candidates.remove(chosen)
    return isa_module.invalid_vec_isa
