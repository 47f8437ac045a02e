"""The ModuleInfo sweep of modules.train_eval (full level): every module torch's own database marks as behaving
differently in train() and eval() (common_modules.module_db, `train_and_eval_differ`: BatchNorm, InstanceNorm,
Transformer layers, MultiheadAttention, RNN/GRU/LSTM), with every module input the database generates for each mode.
A recurrent module's gradients chain its time steps (recurrence_steps), and in eval() on CUDA cuDNN's RNN has no
backward (eval_backward_refused): its gradients there are named as not judged.

Per input and mode: the module built in float64 and a float32 copy with the same parameters run the same forward;
outputs, input and parameter gradients, and buffers after the forward are compared (float32 vs float64); in eval() a
second forward must give the identical output and leave every buffer where it was. Dropout inside these modules is
set to 0 for the comparison (train-mode randomness is judged by the dropout closed forms in modes.py). Tolerance, as
ops.opdb: a value computed from K input and parameter elements is at most K + 8 operations deep,
|err| <= (K + 8)·u·(1 + max|ref|), u = float32 eps/2.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

from envcheck.numerics.opdb import PINNED
from envcheck.reference.compare import Comparison, compare
from envcheck.reference.module_twin import cast, floats, without_dropout
from envcheck.reference.torch_db import load_internal

MAX_INPUTS = 12  # per module and mode: the database's first inputs cover its option axes


def eval_backward_refused(module: Any, training: bool, device: str) -> bool:
    """Whether torch refuses this module's backward: cuDNN's RNN kernels keep what backward needs in train() only
    ("cudnn RNN backward can only be called in training mode", pytorch#10006; seen on the H100 proof), so in
    eval() on a CUDA device with cuDNN on, RNN/GRU/LSTM have a forward and no backward."""
    import torch

    return (
        not training
        and device.startswith("cuda")
        and bool(torch.backends.cudnn.enabled)
        and torch.backends.cudnn.is_available()
        and any(isinstance(m, torch.nn.RNNBase) for m in module.modules())
    )


def recurrence_steps(module: Any, args: Any) -> int:
    """How many time steps a recurrent module's backward chains (1 for any other module): back-propagation through
    time carries each step's rounding into every earlier step's gradients, so the depth bound of a gradient is the
    per-step depth times this (measured: cuDNN's GRU gradients on an H100 at 1.5x the one-step bound)."""
    import torch

    rnns = [m for m in module.modules() if isinstance(m, torch.nn.RNNBase)]
    x = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if not rnns or x is None or x.dim() < 2:
        return 1
    return int(x.shape[1] if x.dim() == 3 and rnns[0].batch_first else x.shape[0])


def input_comparisons(
    info: Any, mi: Any, training: bool, device: str, label: str, not_judged: list[str] | None = None
) -> tuple[list[Comparison], list[str]]:
    """float32 copy vs float64 module for one ModuleInput in one mode; a gradient torch refuses to compute
    (eval_backward_refused) is named in `not_judged` instead."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    torch.manual_seed(0)
    m64 = info.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).to(device, torch.float64)
    without_dropout(m64)
    m32 = copy.deepcopy(m64).to(torch.float32)
    args64, kw64 = mi.forward_input.args, mi.forward_input.kwargs
    args32, kw32 = cast(args64, torch.float32), cast(kw64, torch.float32)
    m64.train(training)
    m32.train(training)
    buffers = [b.clone() for b in m32.buffers()]
    out64 = floats(m64(*args64, **kw64))
    out32 = floats(m32(*args32, **kw32))
    if not out64 or len(out64) != len(out32):
        return [], []
    k = sum(t.numel() for t in floats((args64, kw64))) + sum(p.numel() for p in m64.parameters())
    comps, bad = [], []
    for i, (a, e) in enumerate(zip(out32, out64, strict=True)):
        comps.append(
            compare(
                a,
                e,
                op=f"{label} output {i}",
                device=device,
                dtype="float32",
                atol=(k + 8) * u * (1 + float(e.detach().abs().max()) if e.numel() else 1.0),
                rtol=0.0,
            )
        )
    for i, (a, e) in enumerate(zip(m32.buffers(), m64.buffers(), strict=True)):
        if a.is_floating_point():
            comps.append(
                compare(
                    a,
                    e,
                    op=f"{label} buffer {i} after forward",
                    device=device,
                    dtype="float32",
                    atol=(k + 8) * u * (1 + float(e.abs().max()) if e.numel() else 1.0),
                    rtol=0.0,
                )
            )
    if not training:
        again = floats(m32(*args32, **kw32))
        if any(not torch.equal(x, y) for x, y in zip(again, out32, strict=True)):
            bad.append(f"{label} on {device}: two eval() forwards of the same input differ")
        moved = [
            i for i, (x, y) in enumerate(zip(m32.buffers(), buffers, strict=True)) if not torch.equal(x, y)
        ]
        if moved:
            bad.append(f"{label} on {device}: eval() forward changed buffers {moved}")
    if eval_backward_refused(m32, training, device):
        if not_judged is not None:
            not_judged.append(f"{label} on {device}: gradients (cuDNN RNN has no eval() backward)")
        return comps, bad
    grads_in = [t for t in floats((args64, kw64)) if t.requires_grad]
    if grads_in or any(p.requires_grad for p in m64.parameters()):
        weights = [
            torch.randn(e.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64).to(device)
            for e in out64
        ]
        p64 = [p for p in m64.parameters() if p.requires_grad]
        p32 = [p for p in m32.parameters() if p.requires_grad]
        in32 = [t for t in floats((args32, kw32)) if t.requires_grad]
        g64 = torch.autograd.grad(
            sum((o * w).sum() for o, w in zip(out64, weights, strict=True)), grads_in + p64, allow_unused=True
        )
        g32 = torch.autograd.grad(
            sum((o * w.float()).sum() for o, w in zip(out32, weights, strict=True)),
            in32 + p32,
            allow_unused=True,
        )
        depth = (k + 8) * recurrence_steps(m64, args64)
        for i, (a, e) in enumerate(zip(g32, g64, strict=True)):
            if a is None or e is None:
                continue
            comps.append(
                compare(
                    a,
                    e,
                    op=f"{label} gradient {i}",
                    device=device,
                    dtype="float32",
                    atol=depth * u * (1 + float(e.abs().max()) if e.numel() else 1.0),
                    rtol=0.0,
                )
            )
    return comps, bad


def module_sweep(device: str) -> tuple[list[Comparison], list[str], dict[str, Any]]:
    """Every train/eval-differing ModuleInfo, every generated input (up to MAX_INPUTS), both modes."""
    import torch

    module_db, why = load_internal("common_modules", "module_db", PINNED)
    if module_db is None:
        return [], [], {"module_db": f"skipped: {why}"}
    infos = [i for i in module_db if getattr(i, "train_and_eval_differ", False)]
    comps: list[Comparison] = []
    bad: list[str] = []
    not_judged: list[str] = []
    counted = 0
    for info in infos:
        for training in (True, False):
            try:
                inputs = info.module_inputs_func(
                    info, device=device, dtype=torch.float64, requires_grad=True, training=training
                )[:MAX_INPUTS]
            except (
                Exception
            ) as exc:  # internal API: a generator that does not run here is reported, not fatal
                bad.append(
                    f"module_db {info.name}: its module inputs did not generate on {device}: {exc!r}"[:200]
                )
                continue
            for n, mi in enumerate(inputs):
                label = f"{info.name}[{'train' if training else 'eval'} input {n}{' ' + mi.desc if mi.desc else ''}]"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    found, problems = input_comparisons(info, mi, training, device, label, not_judged)
                comps += found
                bad += problems
                counted += 1
    info_out: dict[str, Any] = {"modules": [i.name for i in infos], "inputs": counted}
    if not_judged:
        info_out["not_judged"] = not_judged[:5] + (
            [f"... {len(not_judged) - 5} more"] if len(not_judged) > 5 else []
        )
    return comps, bad, {f"module_db@{device}": info_out}
