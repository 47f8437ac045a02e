"""The training run that the state round-trip check resumes or not: an MLP with two parameter groups (the second at
half the learning rate) and a third added after the first step, a StepLR, STEPS steps on seeded batches; with a
`transfer`, its state after SAVE_AT steps goes to fresh objects (built from another seed) on the target device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Tensor = Any
STEPS, SAVE_AT = 5, 2


def _model(device: str, dtype: Any, seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3), torch.nn.Linear(3, 2)
    ).to(device, dtype)


def _optimizer(name: str, kw: dict[str, Any], model: Any) -> Any:
    import torch

    lr = kw.get("lr", 1e-3)
    half = lr * 0.5 if not isinstance(lr, torch.Tensor) else lr.clone() * 0.5
    groups = [{"params": list(model[0].parameters())}, {"params": list(model[2].parameters()), "lr": half}]
    return getattr(torch.optim, name)(groups, **kw)


def _step(model: Any, opt: Any, sched: Any, i: int, device: str, dtype: Any) -> None:
    import torch

    if i == 1 and len(opt.param_groups) == 2:
        opt.add_param_group({"params": list(model[3].parameters())})
    gen = torch.Generator().manual_seed(100 + i)
    x, y = (
        torch.randn(8, 4, generator=gen).to(device, dtype),
        torch.randn(8, 2, generator=gen).to(device, dtype),
    )
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x).float(), y.float()).backward()
    opt.step()
    sched.step()


def _fresh(name: str, kw: dict[str, Any], device: str, dtype: Any, seed: int) -> tuple[Any, Any, Any]:
    import copy

    import torch

    model = _model(device, dtype, seed)
    opt = _optimizer(name, copy.deepcopy(kw), model)
    return model, opt, torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


def run(
    name: str,
    kw: dict[str, Any],
    dtype: Any,
    source: str,
    target: str,
    transfer: Callable[[dict[str, Any], str], dict[str, Any]] | None,
) -> tuple[Any, Any, Any]:
    """(model, optimizer, scheduler) after STEPS steps; with `transfer`, the state after SAVE_AT steps on `source`
    goes through it to fresh objects on `target`."""
    model, opt, sched = _fresh(name, kw, source, dtype, seed=0)
    for i in range(STEPS):
        if i == SAVE_AT and transfer is not None:
            state = transfer(
                {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()},
                target,
            )
            model, opt, sched = _fresh(name, kw, target, dtype, seed=1)
            opt.add_param_group({"params": list(model[3].parameters())})
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
        device = target if (transfer is not None and i >= SAVE_AT) else source
        _step(model, opt, sched, i, device, dtype)
    return model, opt, sched


def state_tensors(opt: Any) -> list[tuple[str, Tensor]]:
    """Every tensor of the optimizer's state, named state[i].key, in a stable order."""
    import torch

    out = []
    for i, (_, st) in enumerate(sorted(opt.state_dict()["state"].items())):
        for k, v in sorted(st.items()):
            if isinstance(v, torch.Tensor):
                out.append((f"state[{i}].{k}", v))
    return out
