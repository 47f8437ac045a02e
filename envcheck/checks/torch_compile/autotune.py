"""compile.max_autotune: torch.compile(model, mode="max-autotune") of PyTorch's release smoke test's Net (two convs,
a max-pool, a linear: smoke_test_compile) on CPU and every GPU, compared with eager. max-autotune benchmarks Inductor's
GEMM and conv templates (C++ on CPU, Triton on GPU) and picks the fastest: a toolchain that compiles one kernel can
still fail there (a template the compiler rejects, autotuning in a subprocess that cannot start)."""

from __future__ import annotations

import time
from typing import Any

from envcheck.checks.torch_compile.causes import Cause, classify, preflight_cause
from envcheck.checks.torch_compile.inductor import error_text, evidence
from envcheck.checks.torch_compile.settings import apply_settings
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, failed, passed
from envcheck.core.rundir import user_paths
from envcheck.reference.devices import check_devices, on_device

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
MAX_AUTOTUNE_ERROR = "compile.max_autotune_error"
MAX_AUTOTUNE_WRONG = "compile.max_autotune_wrong"

BATCH = (64, 1, 28, 28)  # the smoke test's input
TOLERANCE = 1e-3  # max |compiled - eager| / max |eager|; float32 with matmul precision "high" (TF32 on GPUs)


def make_net() -> Any:
    """The smoke test's Net."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Net(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.fc1 = nn.Linear(9216, 1)

        def forward(self, x: Any) -> Any:
            x = F.max_pool2d(self.conv2(self.conv1(x)), 2)
            return self.fc1(torch.flatten(x, 1))

    return Net()


def run_on(device: str) -> dict[str, Any]:
    """Compile with max-autotune on `device` (inference, as max-autotune is for), compare with eager."""
    import torch

    torch._dynamo.reset()  # a fresh compile per device
    torch.manual_seed(0)
    model = make_net().to(device).eval()
    x = torch.rand(*BATCH, generator=torch.Generator().manual_seed(1)).to(device)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        with torch.no_grad():
            want = model(x)
            start = time.perf_counter()
            got = torch.compile(model, mode="max-autotune")(x)
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - start
    finally:
        torch.set_float32_matmul_precision(before)
    diff = float((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-12))
    return {"compile_s": round(seconds, 2), "max_rel_diff": diff}


def autotune_verdict(per_device: dict[str, dict[str, Any] | Cause]) -> Result:
    """Pure: per device its figures or the named cause of its failure."""
    problems: list[Cause] = []
    for device, got in per_device.items():
        if isinstance(got, Cause):
            problems.append(
                Cause(
                    f"torch.compile(mode='max-autotune') fails on {device}: {got.summary}",
                    got.fix,
                    fault_class=got.fault_class,
                    code=got.code or MAX_AUTOTUNE_ERROR,
                )
            )
        elif got["max_rel_diff"] > TOLERANCE:
            problems.append(
                Cause(
                    f"torch.compile(mode='max-autotune') gives wrong results on {device}: max "
                    f"|compiled - eager| / max |eager| = {got['max_rel_diff']:.3g} (> {TOLERANCE})",
                    "an Inductor template bug for this torch and device: reproduce with "
                    "TORCH_COMPILE_DEBUG=1 and report it; mode='default' avoids the autotuned "
                    "templates",
                    fault_class=FaultClass.IMAGE,
                    code=MAX_AUTOTUNE_WRONG,
                )
            )
    measured = {
        "devices": {d: (g if isinstance(g, dict) else {"error": g.summary}) for d, g in per_device.items()}
    }
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return failed(
            problems[0].summary + more,
            problems[0].fix,
            fault_class=problems[0].fault_class,
            code=problems[0].code,
            measured=measured,
            details="\n".join(p.summary for p in problems),
        )
    speed = ", ".join(f"{d} {g['compile_s']} s" for d, g in per_device.items() if isinstance(g, dict))
    return passed(
        f"torch.compile(mode='max-autotune') of the smoke test's Net matches eager: {speed}",
        measured=measured,
        expected={"max_rel_diff": f"<= {TOLERANCE}"},
    )


def compile_max_autotune(ctx: Context) -> Result:
    """max-autotune compiles the smoke test's Net and matches eager on CPU and each GPU model (one GPU of each:
    autotuning eight GPUs of one model compiles and times the same templates eight times, past the check's timeout)."""
    import torch
    from torch._inductor import config as inductor_config

    apply_settings()
    # TORCHINDUCTOR_AUTOTUNE_MULTI_DEVICE=1 benchmarks on every visible GPU, another job's too: here only on the one
    if hasattr(inductor_config, "autotune_multi_device"):
        inductor_config.autotune_multi_device = False
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    ev = evidence(gpus)
    per_device: dict[str, dict[str, Any] | Cause] = {}
    for device in check_devices():
        try:
            with on_device(device):
                per_device[device] = run_on(device)
        except Exception as exc:
            text = user_paths(error_text(exc))
            cause = classify(text, ev)
            hint = None if cause.named else preflight_cause(ev)
            per_device[device] = hint if hint is not None else cause
    return autotune_verdict(per_device)
