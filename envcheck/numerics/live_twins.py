"""Options set on a live module mean what they mean at construction (modules.train_eval, full level): each module
below is built with one value, trained a step, given another value by attribute, and must then compute bitwise what
a twin built with that value and loaded with the live module's state computes, output and input gradient, in train()
(the same random draws: the generator is seeded before each) and eval(), with its state and parameter gradients.

The attributes are the ones torch's forward reads on every call and documents as constructor options: Dropout* `p`
and `inplace`; RNN/GRU/LSTM `dropout` (between layers, two layers); MultiheadAttention `dropout` and `batch_first`;
Embedding `padding_idx` (its row gets no gradient) and `max_norm` (rows renormalized in place on lookup, so the twin
compares weights too); LayerNorm and GroupNorm `eps`. A construction-only difference is kept out of the twin by
loading the live module's state (Embedding zeroes its padding row when built, not when the attribute is set).
BatchNorm's and InstanceNorm's options, whose live meaning differs from construction (the buffers exist or not), are
judged against their own reference (live_norms.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.reference.compare import Comparison, compare

Factory = Callable[..., Any]  # option value -> module


def _cases() -> list[tuple[str, str, Any, Any, Factory, tuple[int, ...]]]:
    """(module, attribute, built with, set to, factory, input shape)."""
    import torch.nn as nn

    out: list[tuple[str, str, Any, Any, Factory, tuple[int, ...]]] = []
    for name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"):
        shape = {
            "Dropout1d": (4, 6, 5),
            "Dropout3d": (4, 6, 2, 2, 2),
            "FeatureAlphaDropout": (4, 6, 2, 2, 2),
        }.get(name, (4, 6, 3, 3))
        out.append((name, "p", 0.2, 0.6, lambda v, n=name: getattr(nn, n)(v), shape))
        out.append((name, "inplace", False, True, lambda v, n=name: getattr(nn, n)(0.4, inplace=v), shape))
    for name in ("RNN", "GRU", "LSTM"):
        for old, new in ((0.5, 0.0), (0.0, 0.4)):
            out.append((name, "dropout", old, new, lambda v, n=name: getattr(nn, n)(6, 6, num_layers=2, dropout=v),
                        (5, 3, 6)))  # fmt: skip
    out.append(
        (
            "MultiheadAttention",
            "dropout",
            0.0,
            0.3,
            lambda v: nn.MultiheadAttention(8, 2, dropout=v),
            (5, 3, 8),
        )
    )
    out.append(("MultiheadAttention", "batch_first", False, True,
                lambda v: nn.MultiheadAttention(8, 2, batch_first=v), (3, 5, 8)))  # fmt: skip
    out.append(("Embedding", "padding_idx", None, 2, lambda v: nn.Embedding(10, 4, padding_idx=v), (3, 7)))
    out.append(("Embedding", "max_norm", None, 1.0, lambda v: nn.Embedding(10, 4, max_norm=v), (3, 7)))
    out.append(("LayerNorm", "eps", 1e-5, 0.5, lambda v: nn.LayerNorm(6, eps=v), (4, 6)))
    out.append(("GroupNorm", "eps", 1e-5, 0.5, lambda v: nn.GroupNorm(2, 6, eps=v), (4, 6, 3)))
    return out


def seeded(device: Any, seed: int) -> None:
    """Seed the generator a dropout on `device` draws from: the CPU one, or that GPU's own (torch.manual_seed would
    also queue a seed for every lazy accelerator backend, formatting a stack trace for each: ~2 ms a call, and
    torch.cuda.manual_seed seeds only the current GPU)."""
    import torch

    torch.default_generator.manual_seed(seed)
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.default_generators[
            dev.index if dev.index is not None else torch.cuda.current_device()
        ].manual_seed(seed)


def _run(module: Any, x: Any, training: bool, seed: int) -> tuple[Any, Any, list[Any]]:
    """Output, input gradient (None for index input), and the state and parameter gradients after one seeded forward
    and backward."""
    import torch

    module.train(training)
    module.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(x.is_floating_point())
    source = x.clone() if x.is_floating_point() else x  # in-place dropout writes into what it is given
    seeded(x.device, seed)
    if isinstance(module, torch.nn.MultiheadAttention):
        out = module(source, source, source, need_weights=False)[0]
    else:
        out = module(source)
    out = out[0] if isinstance(out, tuple) else out
    (out * torch.linspace(-1, 1, out.numel(), device=out.device).reshape(out.shape)).sum().backward()
    state = [t.detach().clone() for t in module.state_dict().values()]
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    return out.detach(), x.grad, state + grads


def twin_comparisons(device: str) -> tuple[list[Comparison], list[str]]:
    """Every (module, attribute) on `device`: live-set vs built-with, train() and eval(), bitwise."""
    import torch

    comps: list[Comparison] = []
    problems: list[str] = []
    for name, attr, old, new, factory, shape in _cases():
        label = f"{name}.{attr} = {new!r} on a module built with {old!r}"
        seeded("cpu", 1)
        live = factory(old).to(device)
        gen = torch.Generator().manual_seed(2)
        x = (torch.randint(0, 10, shape, generator=gen) if name == "Embedding"
             else torch.randn(shape, generator=gen) + 2.0).to(device)  # fmt: skip
        _run(live, x, True, 3)  # one step with the old value
        setattr(live, attr, new)
        twin = factory(new).to(device)
        twin.load_state_dict(live.state_dict())
        for training in (True, False):
            mode = "train" if training else "eval"
            try:
                got, want = _run(live, x, training, 4), _run(twin, x, training, 4)
            except Exception as exc:  # torch refusing a documented attribute value is the finding
                problems.append(f"{label} on {device} ({mode}): {type(exc).__name__}: {exc}"[:300])
                continue
            for part, a, e in (("output", got[0], want[0]), ("input gradient", got[1], want[1])):
                # bitwise; compare() (~1 ms) only names a difference, and keeps the train output as the record
                if (
                    a is not None
                    and e is not None
                    and (not torch.equal(a, e) or (training and part == "output"))
                ):
                    comps.append(compare(a, e, op=f"{label}: {mode} {part} equals the twin's", device=device,
                                         dtype=str(a.dtype).replace("torch.", ""), atol=0.0, rtol=0.0))  # fmt: skip
            moved = len(got[2]) != len(want[2]) or any(
                not torch.equal(a, e) for a, e in zip(got[2], want[2], strict=False)
            )
            if moved:
                problems.append(
                    f"{label} on {device} ({mode}): state or parameter gradients differ from the twin's"
                )
    return comps, problems
