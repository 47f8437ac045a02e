"""compile.inductor: torch.compile (Inductor) compiles a function and its backward on CPU and every GPU.

It compiles in the cache directories this process inherited (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) when the
user set them, because those are what a user's job would use; redirecting them would test nothing. Inductor's
default cache (<TMPDIR>/torchinductor_<user>) goes in the worker's private temp dir (envcheck.core.rundir), made
inside the user's temp dir, so on the same mount, and removed with the run: nothing of this check stays behind.
The pre-flight probes name the user's own directories.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from envcheck.checks.torch_compile import toolchain as probes
from envcheck.checks.torch_compile.causes import Cause, Evidence, classify, preflight_cause
from envcheck.checks.torch_compile.settings import apply_settings
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, failed, passed
from envcheck.core.rundir import user_paths
from envcheck.reference.devices import check_devices, on_device

# What Inductor reports of its own compile time (torch._dynamo.utils.calculate_time_spent), kept per device.
PHASES = (
    "entire_frame_compile",
    "backend_compile",
    "inductor_compile",
    "code_gen",
    "entire_backward_compile",
)
SHAPE = (
    256,
    512,
)  # small: compile time does not depend on it (dynamic=False), the timing is not all overhead
TOLERANCE = 1e-4


def _fn(x: Any, w: Any) -> Any:
    """One pointwise+reduction kernel forward and one backward under Inductor."""
    import torch

    return torch.relu((torch.sin(x) * w).sum(dim=-1))


def evidence(gpus: int) -> Evidence:
    """The pre-flight probes, GPU parts only when there are GPUs."""
    ev = Evidence(
        cxx=probes.cxx_compiler(),
        dirs=tuple(probes.directories(gpu=gpus > 0)),
        headers_missing=probes.python_headers(),
    )
    if not gpus:
        return ev
    import torch

    env, found = probes.libcuda_paths()
    ptxas = probes.ptxas_path()
    archs = sorted({"sm_{}{}".format(*torch.cuda.get_device_capability(i)) for i in range(gpus)})
    problems = tuple(p for p in (probes.ptxas_arch_problem(ptxas, a) for a in archs) if p) if ptxas else ()
    return Evidence(
        cxx=ev.cxx,
        cc=probes.c_compiler(),
        dirs=ev.dirs,
        headers_missing=ev.headers_missing,
        libcuda_env=env,
        libcuda_found=tuple(found),
        ptxas_problems=problems,
    )


def error_text(exc: BaseException) -> str:
    """The exception and its causes, as text (Inductor wraps the real error)."""
    parts, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        parts.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    return "\n".join(parts)


def _step(fn: Any, x0: Any, w0: Any) -> tuple[Any, Any, Any]:
    x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    y = fn(x, w)
    y.sum().backward()
    return y.detach(), x.grad, w.grad


def _timed(fn: Any, x0: Any, w0: Any, cuda: bool, reps: int) -> float:
    """Seconds per fwd+bwd step, over `reps` steps."""
    import torch

    start = time.perf_counter()
    for _ in range(reps):
        _step(fn, x0, w0)
    if cuda:
        torch.cuda.synchronize(
            x0.device
        )  # this GPU's work, not the current device's (GPU 0 may be another job's)
    return (time.perf_counter() - start) / reps


def speed(fns: dict[str, Any], x0: Any, w0: Any, cuda: bool, rounds: int = 7) -> dict[str, float]:
    """Median ms per step of each fn: interleaved rounds (drift hits all alike), each round >= ~20 ms."""
    reps = {
        name: max(3, min(200, int(0.02 / max(_timed(fn, x0, w0, cuda, 2), 1e-6)))) for name, fn in fns.items()
    }
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(_timed(fn, x0, w0, cuda, reps[name]))
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def run_on(device: str) -> dict[str, Any]:
    """Compile fwd+bwd on `device`, compare with eager, time both. Raises what torch.compile raises."""
    import torch

    torch._dynamo.reset()  # a fresh compile per device, never the recompile limit's silent eager fallback
    spent_before = _time_spent()
    cuda = device.startswith("cuda")
    gen = torch.Generator().manual_seed(0)
    x0, w0 = torch.randn(*SHAPE, generator=gen).to(device), torch.randn(SHAPE[1], generator=gen).to(device)
    compiled = torch.compile(_fn, backend="inductor", dynamic=False, fullgraph=True)
    start = time.perf_counter()
    got = _step(compiled, x0, w0)
    if cuda:
        torch.cuda.synchronize(device)
    compile_s = time.perf_counter() - start
    want = _step(_fn, x0, w0)
    # relative to the output's scale: the backward sums 512 terms, and Inductor may reorder them
    diff = max(float((g - e).abs().max() / (1 + e.abs().max())) for g, e in zip(got, want, strict=True))
    ms = speed({"eager": _fn, "compiled": compiled}, x0, w0, cuda)
    eager_ms, comp_ms = ms["eager"], ms["compiled"]
    spent = _time_spent()
    phases = {k: round(spent[k] - spent_before.get(k, 0.0), 2) for k in PHASES if k in spent}
    return {
        "compile_s": round(compile_s, 2),
        "compile_phases_s": phases,
        "max_rel_diff": diff,
        "eager_ms": round(eager_ms, 4),
        "compiled_ms": round(comp_ms, 4),
        "compiled_vs_eager": round(eager_ms / comp_ms, 2),
    }


def _time_spent() -> dict[str, float]:
    """Inductor's own cumulative compile-time counters in this process ({} where this torch has none)."""
    try:
        from torch._dynamo.utils import calculate_time_spent

        return {k: float(v) for k, v in calculate_time_spent().items()}
    except Exception:  # a private API: its absence only costs the breakdown
        return {}


def _failure(text: str, ev: Evidence) -> Cause:
    cause = classify(text, ev)
    if not cause.named:  # the text names no known cause: the probes may
        hint = preflight_cause(ev)
        if hint:
            return Cause(f"{cause.summary}; pre-flight: {hint.summary}", hint.fix)
    return cause


def compile_inductor(ctx: Context) -> Result:
    """torch.compile (Inductor) of a function and its backward works and matches eager on CPU and each GPU model (one
    GPU of each, envcheck.reference.devices: the same arch compiles the same kernels)."""
    import torch
    from torch._dynamo import config as dynamo_config
    from torch._inductor import config as inductor_config

    applied = apply_settings()
    dynamo_config.suppress_errors = False  # TORCHDYNAMO_SUPPRESS_ERRORS=1 would hide failures behind eager
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    ev = evidence(gpus)
    measured: dict[str, Any] = {
        "cxx": ev.cxx.found if ev.cxx else None,
        "cxx_version": ev.cxx.version if ev.cxx else None,
        "dirs": {d.role: d.path for d in ev.dirs},
        "inductor_settings": applied | {"cpp.vec_isa_ok": inductor_config.cpp.vec_isa_ok},
        "devices": {},
    }
    if ev.cc:
        measured.update(
            cc=ev.cc.found,
            libcuda=list(ev.libcuda_found),
            triton_libcuda_path=ev.libcuda_env,
            ptxas=probes.ptxas_path(),
            ptxas_problems=list(ev.ptxas_problems),
        )
    problems: list[Cause] = []
    for device in check_devices():
        try:
            with on_device(device):
                figures = run_on(device)
        except Exception as exc:
            text = user_paths(error_text(exc))  # the user's temp dir, not this worker's private one
            cause = _failure(text, ev)
            problems.append(
                Cause(
                    f"torch.compile fails on {device}: {cause.summary}",
                    cause.fix,
                    fault_class=cause.fault_class,
                )
            )
            measured["devices"][device] = {"error": text.splitlines()[0][:500]}
            continue
        measured["devices"][device] = figures
        if figures["max_rel_diff"] > TOLERANCE:
            problems.append(
                Cause(
                    f"torch.compile gives wrong results on {device}: max |compiled - eager| / (1 + max |eager|) = "
                    f"{figures['max_rel_diff']:.3g} (> {TOLERANCE})",
                    "an Inductor wrong-code bug for this torch and device: reproduce with TORCH_COMPILE_DEBUG=1 and "
                    "report it; meanwhile torch.compile(backend='aot_eager') avoids the generated kernels",
                    fault_class=FaultClass.IMAGE,
                )
            )
    details = "\n".join(
        [f"{d.role} {d.path}: {'; '.join(d.problems) or 'ok'}" for d in ev.dirs] + list(ev.ptxas_problems)
    )
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return failed(
            problems[0].summary + more,
            problems[0].fix,
            measured=measured,
            fault_class=problems[0].fault_class,
            details=details + "\n" + "\n".join(p.summary for p in problems),
        )
    figs = measured["devices"]
    speed = ", ".join(
        f"{d} compile {f['compile_s']} s, {f['compiled_vs_eager']}x eager" for d, f in figs.items()
    )
    return passed(
        f"torch.compile (Inductor) fwd+bwd matches eager: {speed}",
        measured=measured,
        expected={"max_rel_diff": f"<= {TOLERANCE}"},
        details=details,
    )
