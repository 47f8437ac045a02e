"""train.resume: a state_dict round trip (model + optimizer, through a real file) resumes bit-for-bit."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

STEPS_BEFORE = 3
RESUME_TOL = {"atol": 1e-7, "rtol": 0.0}  # identical arithmetic: differences should be exactly zero
DETECTABLE = 1e-4  # dropping the optimizer state must move the next step by at least this much
Resume = Callable[[Path, Any, Any], None]  # (checkpoint file, fresh model, fresh optimizer) -> loads in place
OPTIMIZERS = ("sgd_momentum", "adam")


def load_model_and_optimizer(path: Path, model: Any, optimizer: Any) -> None:
    """The correct resume: restore both state_dicts from the file."""
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])


def load_model_only(path: Path, model: Any, optimizer: Any) -> None:
    """The classic resume bug: the weights come back but momentum/Adam moments start from zero."""
    import torch

    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True)["model"])


def _fresh(device: str, kind: str) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(device)
    opt = (
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        if kind == "sgd_momentum"
        else torch.optim.Adam(model.parameters(), lr=0.01)
    )
    return model, opt


def _step(model: Any, opt: Any, i: int, device: str) -> None:
    import torch

    gen = torch.Generator().manual_seed(100 + i)
    x, y = torch.randn(12, 5, generator=gen).to(device), torch.randn(12, 2, generator=gen).to(device)
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()


def _flat(model: Any) -> Any:
    import torch

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def next_step_after(device: str, kind: str, resume: Resume | None, folder: Path) -> Any:
    """Parameters after step STEPS_BEFORE+1, uninterrupted (resume=None) or resumed from a file."""
    import torch

    model, opt = _fresh(device, kind)
    for i in range(STEPS_BEFORE):
        _step(model, opt, i, device)
    if resume is not None:
        path = folder / f"{kind}.pt"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
        torch.manual_seed(999)  # a different init proves the weights really came from the file
        model, opt = _fresh(device, kind)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
        resume(path, model, opt)
    _step(model, opt, STEPS_BEFORE, device)
    return _flat(model)


def resume_findings(
    device: str, resume: Resume = load_model_and_optimizer
) -> tuple[list[Comparison], dict[str, Any], list[str]]:
    """Resumed next step vs uninterrupted, and proof that dropping optimizer state would be visible."""
    cmp, info, problems = [], {}, []
    with tempfile.TemporaryDirectory(prefix="envcheck-resume-") as tmp:
        for kind in OPTIMIZERS:
            straight = next_step_after(device, kind, None, Path(tmp))
            cmp.append(
                compare(
                    next_step_after(device, kind, resume, Path(tmp)),
                    straight,
                    op=f"params after resumed step ({kind})",
                    device=device,
                    dtype="float32",
                    **RESUME_TOL,
                )
            )
            dropped = float(
                (next_step_after(device, kind, load_model_only, Path(tmp)) - straight).abs().max()
            )
            info[f"dropped_optimizer_state_diff@{device}/{kind}"] = dropped
            if dropped < DETECTABLE:
                problems.append(
                    f"dropping {kind} state on {device} changed the next step by only {dropped:.3g} "
                    f"(< {DETECTABLE:g}): the check could not tell a broken resume apart"
                )
    return cmp, info, problems


def train_resume(ctx: Context, resume: Resume = load_model_and_optimizer) -> Result:
    """Model + optimizer state_dicts saved to a file and loaded back resume with an identical next step."""
    comparisons: list[Comparison] = []
    extra: dict[str, Any] = {}
    problems: list[str] = []
    with numerics_mode():
        for device in check_devices():
            found, info, bad = resume_findings(device, resume)
            comparisons += found
            extra.update(info)
            problems += bad
    return comparisons_result(
        "resume from state_dict",
        comparisons,
        extra=extra,
        problems=problems,
        tolerances={**RESUME_TOL, "dropped_state_min_diff": DETECTABLE},
        remediation="save and load both model.state_dict() and optimizer.state_dict() "
        "(torch.save({'model': ..., 'optimizer': ...}, path))",
    )
