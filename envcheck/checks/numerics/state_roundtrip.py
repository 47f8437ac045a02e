"""train.state_roundtrip (full level): optimizer, parameter-group and scheduler state saved in the middle of training
and restored into fresh objects resumes exactly like the uninterrupted run, for every optimizer configuration torch's
own optimizer database generates (common_optimizers.optim_db with its global flags: foreach, fused), for float32,
float64 and bfloat16 parameters, and from every device to every device.

One run: an MLP with two parameter groups (the second at half the learning rate) plus a third group added after the
first step (add_param_group), a StepLR, STEPS steps. The resumed run saves model, optimizer and scheduler with
torch.save after SAVE_AT steps, loads them with torch.load(weights_only=True, map_location=target) into a model built
from another seed, a new optimizer and a new scheduler, and finishes. Reference: the uninterrupted run (same device),
or, across devices, the same state moved to the target by hand (no serialization). Parameters, every optimizer state
tensor (value, dtype and device) and the learning rates must be identical: the arithmetic is the same, so the
tolerance is zero. Without optim_db (another torch), the option sets of optim.differential are used instead.

One exception is torch's documented load policy: Optimizer.load_state_dict casts floating state to the parameter's
dtype, except `step` (pytorch#75224). NAdam's mu_product and ASGD's eta and mu are float32 scalars like `step`, so a
bfloat16 or float64 run that is resumed computes with them rounded (measured here: NAdam bf16 parameters 1% apart two
steps after the resume, torch 2.13 and 2.14). No torch release changes this yet: for those optimizers and dtypes the
reference is the same state loaded in memory (no file), and the cast is listed in `measured`, not judged.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from typing import Any

from envcheck.checks.numerics.torch_testing import load_internal
from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, Tensor, compare
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.known_bugs import judge_with_known_bugs

STEPS, SAVE_AT = 5, 2
SKIP = {"LBFGS": "needs a closure", "SparseAdam": "sparse gradients only", "Muon": "2-D parameters only"}
DTYPES = ("float32", "float64", "bfloat16")
POLICY_CAST = {"NAdam": ("mu_product",), "ASGD": ("eta", "mu")}  # float32 scalar state cast on load (see above)
Config = tuple[str, dict[str, Any], str]  # (optimizer class, kwargs, description)


def configs(device: str) -> tuple[list[Config], str]:
    """(optimizer, kwargs, description) from optim_db, or from optim.differential's option sets."""
    import torch

    optim_db, why = load_internal("common_optimizers", "optim_db")
    if optim_db is not None:
        from torch.testing._internal.common_optimizers import (
            _get_optim_inputs_including_global_cliquey_kwargs,
        )

        out: list[Config] = []
        for info in optim_db:
            name = info.optim_cls.__name__
            if name in SKIP:
                continue
            for oi in _get_optim_inputs_including_global_cliquey_kwargs(device, torch.float32, info,
                                                                       skip=("differentiable",)):
                out.append((name, dict(oi.kwargs), oi.desc))
                # the database lists foreach only where torch has foreach kernels (not CPU), yet foreach=True runs
                # torch.optim's _multi_tensor_* path on any device: a path of its own, so it is in the space too
                if "foreach" in info.supported_impls and not oi.kwargs.get("foreach") and not oi.kwargs.get("fused"):
                    out.append((name, {**oi.kwargs, "foreach": True}, f"{oi.desc} & foreach"))
        return out, "optim_db"
    from envcheck.checks.numerics.optim_differential import OPTIONS

    return [(n, {"lr": lr, **o}, "optim.differential option set") for n, (lr, sets) in OPTIONS.items()
            for o in sets], f"optim.differential's option sets ({why})"


def _model(device: str, dtype: Any, seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3),
                               torch.nn.Linear(3, 2)).to(device, dtype)


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
    x, y = torch.randn(8, 4, generator=gen).to(device, dtype), torch.randn(8, 2, generator=gen).to(device, dtype)
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


def _move(state: Any, device: str) -> Any:
    import torch

    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {k: _move(v, device) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_move(v, device) for v in state)
    return state


def run(name: str, kw: dict[str, Any], dtype: Any, source: str, target: str,
        transfer: Callable[[dict[str, Any], str], dict[str, Any]] | None) -> tuple[Any, Any, Any]:
    """(model, optimizer, scheduler) after STEPS steps; with `transfer`, the state after SAVE_AT steps on `source`
    goes through it to fresh objects on `target`."""
    model, opt, sched = _fresh(name, kw, source, dtype, seed=0)
    for i in range(STEPS):
        if i == SAVE_AT and transfer is not None:
            state = transfer({"model": model.state_dict(), "optimizer": opt.state_dict(),
                              "scheduler": sched.state_dict()}, target)
            model, opt, sched = _fresh(name, kw, target, dtype, seed=1)
            opt.add_param_group({"params": list(model[3].parameters())})
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
        device = target if (transfer is not None and i >= SAVE_AT) else source
        _step(model, opt, sched, i, device, dtype)
    return model, opt, sched


def through_file(state: dict[str, Any], target: str) -> dict[str, Any]:
    """torch.save to a buffer, torch.load(weights_only=True, map_location=target)."""
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded: dict[str, Any] = torch.load(buf, weights_only=True, map_location=target)
    return loaded


def by_hand(state: dict[str, Any], target: str) -> dict[str, Any]:
    """The same state, copied and moved to `target` tensor by tensor (no serialization)."""
    import copy

    moved: dict[str, Any] = _move(copy.deepcopy(state), target)
    return moved


def _state_tensors(opt: Any) -> list[tuple[str, Tensor]]:
    import torch

    out = []
    for i, (_, st) in enumerate(sorted(opt.state_dict()["state"].items())):
        for k, v in sorted(st.items()):
            if isinstance(v, torch.Tensor):
                out.append((f"state[{i}].{k}", v))
    return out


def roundtrip_comparisons(device: str, target: str, casts: list[str] | None = None
                          ) -> tuple[list[Comparison], list[str], str]:
    """Every config x dtype: restored-from-file (on `target`) vs the reference run."""
    import torch

    comps: list[Comparison] = []
    problems: list[str] = []
    casts = [] if casts is None else casts
    found, source = configs(device)
    for name, kw, desc in found:
        for dtype_name in DTYPES:
            dtype = getattr(torch, dtype_name)
            label = f"{name}({desc}; {', '.join(f'{k}={v}' for k, v in kw.items())}) {dtype_name} {device}->{target}"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cast = name in POLICY_CAST and dtype_name != "float32"
                    ref = run(name, kw, dtype, device, target, None if device == target and not cast else by_hand)
                    if cast:
                        casts.append(f"{name} {dtype_name}: load_state_dict casts {', '.join(POLICY_CAST[name])} "
                                     f"from float32 to {dtype_name}")
                    got = run(name, kw, dtype, device, target, through_file)
            except (RuntimeError, TypeError, ValueError) as exc:
                if dtype_name == "float32":  # the database's configurations are meant to run in float32
                    problems.append(f"{label}: {type(exc).__name__}: {exc}"[:300])
                continue
            flat = [p.detach().reshape(-1) for p in got[0].parameters()]
            flat_ref = [p.detach().reshape(-1) for p in ref[0].parameters()]
            comps.append(compare(torch.cat(flat), torch.cat(flat_ref), op=f"{label} parameters", device=target,
                                 dtype=dtype_name, atol=0.0, rtol=0.0))
            st, st_ref = _state_tensors(got[1]), _state_tensors(ref[1])
            if [(k, v.dtype, v.device) for k, v in st] != [(k, v.dtype, v.device) for k, v in st_ref]:
                problems.append(f"{label}: restored optimizer state differs in keys, dtypes or devices: "
                                f"{[(k, str(v.dtype), str(v.device)) for k, v in st]} vs "
                                f"{[(k, str(v.dtype), str(v.device)) for k, v in st_ref]}"[:400])
                continue
            for (k, v), (_, r) in zip(st, st_ref, strict=True):
                comps.append(compare(v.reshape(-1).float(), r.reshape(-1).float(), op=f"{label} {k}", device=target,
                                     dtype=dtype_name, atol=0.0, rtol=0.0))
            lrs = [float(g["lr"]) for g in got[1].param_groups]
            if lrs != [float(g["lr"]) for g in ref[1].param_groups]:
                problems.append(f"{label}: learning rates after resume {lrs} differ from the reference")
    return comps, problems, source


def train_state_roundtrip(ctx: Context) -> Result:
    """Optimizer, param-group and scheduler state restored mid-training resume bit-for-bit, on every device pair."""
    comparisons: list[Comparison] = []
    problems: list[str] = []
    extra: dict[str, Any] = {}
    casts: list[str] = []
    with numerics_mode():
        devices = check_devices()
        pairs = [(d, d) for d in devices] + [(a, b) for a in devices for b in devices if a != b]
        for source, target in pairs:
            found, bad, origin = roundtrip_comparisons(source, target, casts)
            comparisons += found
            problems += bad
            extra["configurations_from"] = origin
    extra["device_pairs"] = [f"{a}->{b}" for a, b in pairs]
    extra["load_policy_casts"] = sorted(set(casts))
    return judge_with_known_bugs("optimizer/scheduler state round trips", comparisons, problems=problems,
                              tolerances={"atol": 0.0, "rtol": 0.0, "why": "same arithmetic on the same values"},
                              extra=extra,
                              remediation="save and restore model, optimizer and scheduler state_dicts together "
                                          "(torch.save({...}); load_state_dict each after rebuilding the same "
                                          "param groups); reinstall torch if it still differs")
