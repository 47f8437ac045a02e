"""Normalization layers whose options change on the live module (modules.train_eval): sequences of forwards in which
track_running_stats is turned off to freeze the statistics and on again, momentum changes (including to None, the
cumulative average over num_batches_tracked), train() and eval() alternate, eps changes, reset_running_stats() and a
partial load_state_dict(strict=False) happen between steps; every output, buffer and num_batches_tracked against the
float64 layer of envcheck.reference.live_norm stepped with the same options. Tolerance as norm_options: (n + 8)·u·(1 +
|ref|), n the reduced count, for outputs; the buffers accumulate one such error per forward, so k forwards in
(n + 8)·k·u·(1 + |running_mean| + |running_var|); num_batches_tracked exactly.

InstanceNorm with track_running_stats turned off on a live module normalizes with the instance's statistics, as
documented, but keeps updating its running statistics in train() and eval() (torch 2.13; its forward passes the
buffers to instance_norm whenever they exist, where BatchNorm's stopped doing so when the flag is off): the outputs are
judged, the buffers after that point are named as not judged.
"""

from __future__ import annotations

import itertools
from typing import Any

from envcheck.reference.compare import Check, Comparison, judged
from envcheck.reference.live_norm import NormState

CHANNELS, EPS = 3, 1e-5
Step = tuple[Any, ...]
SCENARIOS: dict[str, tuple[dict[str, Any], tuple[Step, ...]]] = {
    # name: (constructor options, steps); ("train", i) / ("eval", i) run batch i, ("set", attr, value) changes an option
    "freeze statistics": ({}, (("train", 0), ("train", 1), ("set", "track_running_stats", False), ("train", 2),
                               ("eval", 3), ("train", 4), ("set", "track_running_stats", True), ("train", 5),
                               ("eval", 3))),
    "momentum changed": ({}, (("train", 0), ("set", "momentum", 0.5), ("train", 1), ("set", "momentum", None),
                              ("train", 2), ("train", 3), ("set", "momentum", 0.1), ("train", 4), ("eval", 5))),
    "train and eval alternate": ({"momentum": None}, (("train", 0), ("eval", 1), ("eval", 2), ("train", 3),
                                                      ("eval", 4), ("train", 5), ("eval", 1))),
    "eps changed": ({}, (("train", 0), ("set", "eps", 0.1), ("train", 1), ("eval", 2))),
    "reset_running_stats": ({"momentum": None}, (("train", 0), ("train", 1), ("reset",), ("train", 2),
                                                 ("eval", 3))),
    "load_state_dict(strict=False) without buffers": ({"momentum": None}, (("train", 0), ("train", 1), ("load",),
                                                                           ("train", 2), ("eval", 3))),
    "tracking turned on, built without": ({"track_running_stats": False},
                                          (("train", 0), ("set", "track_running_stats", True), ("train", 1),
                                           ("eval", 2))),
}  # fmt: skip
INSTANCE_SCENARIOS = ("momentum changed", "train and eval alternate", "eps changed", "freeze statistics")
SHAPES = {"BatchNorm1d (N, C)": (), "BatchNorm2d": (3, 2), "BatchNorm3d": (2, 2, 2), "InstanceNorm1d": (7,),
          "InstanceNorm2d": (3, 3)}  # fmt: skip
QUICK = ("BatchNorm2d",)
QUICK_SCENARIOS = ("freeze statistics", "momentum changed", "load_state_dict(strict=False) without buffers")
BATCHES = (4, 6, 5, 3, 7, 4)


def _batches(name: str, seed: int) -> list[Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    return [3 * torch.randn(b, CHANNELS, *SHAPES[name], generator=gen).double() + 1.5 for b in BATCHES]


def _built(name: str, options: dict[str, Any], affine: bool, device: str) -> tuple[Any, NormState]:
    """The torch module and its reference, with the same options and affine parameters."""
    import torch

    instance = name.startswith("Instance")
    kw = {"momentum": 0.1, "eps": EPS, "affine": affine, "track_running_stats": True, **options}
    module = getattr(torch.nn, name.split(" ")[0])(CHANNELS, **kw).to(device)
    params = None
    if affine:
        params = torch.stack(
            [torch.linspace(0.5, 2.0, CHANNELS), torch.linspace(-1.0, 1.0, CHANNELS)]
        ).double()
        with torch.no_grad():
            module.weight.copy_(params[0])
            module.bias.copy_(params[1])
    ref = NormState.built(instance, kw["track_running_stats"], kw["momentum"], EPS, CHANNELS, params)
    return module, ref


def sequence_comparisons(
    name: str, scenario: str, affine: bool, device: str, seed: int
) -> tuple[list[Comparison], list[str], list[str]]:
    """Run one scenario on the module and on the reference; judge every output and buffer after every step.
    Returns (comparisons, what is not judged, problems: a documented step torch refused)."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    options, steps = SCENARIOS[scenario]
    if name.startswith("Instance"):  # InstanceNorm documents no cumulative average (it passes None on as 0.0)
        options = {k: 0.1 if k == "momentum" and v is None else v for k, v in options.items()}
        steps = tuple(s for s in steps if s[:2] != ("set", "momentum") or s[2] is not None)
        if ("set", "track_running_stats", True) in steps:  # its buffers are not judged once the flag went off
            steps = steps[: steps.index(("set", "track_running_stats", True))]
    module, ref = _built(name, options, affine, device)
    batches = _batches(name, seed)
    reduced = max(x.numel() // (x.shape[1] * (x.shape[0] if ref.instance else 1)) for x in batches)
    label = f"{name}(affine={affine}) [{scenario}]"
    checks: list[Check] = []
    not_judged: list[str] = []
    problems: list[str] = []
    buffers_judged, forwards = True, 0
    for t, step in enumerate(steps):
        try:
            got = _module_step(module, step, batches, device)
        except Exception as exc:  # torch refusing a documented step is the finding (the sequence stops there)
            problems.append(f"{label} on {device}: step {t} {step} raised {type(exc).__name__}: {exc}"[:300])
            break
        if step[0] == "set":
            setattr(ref, "tracking" if step[1] == "track_running_stats" else str(step[1]), step[2])
            if ref.instance and step[1] == "track_running_stats" and not step[2]:
                buffers_judged = False
                not_judged.append(f"{label} on {device}: running statistics after track_running_stats=False")
            continue
        if step[0] == "reset":
            ref.reset()
        elif step[0] in ("train", "eval"):
            ref.training = step[0] == "train"
            want = ref.forward(batches[step[1]])
            forwards += 1
            checks.append((f"{label} step {t} {step[0]} output", got, want,
                           (reduced + 8) * u * (1 + float(want.abs().max())), 0.0))  # fmt: skip
        if buffers_judged:
            depth = (reduced + 8) * max(forwards, 1) * u  # each update adds one statistic's rounding
            checks += _buffer_checks(module, ref, f"{label} after step {t} {step[0]}", depth)
    return judged(checks, device=device, dtype="float32"), not_judged, problems


def _module_step(module: Any, step: Step, batches: list[Any], device: str) -> Any:
    """Apply one step to the torch module; the output of a forward, else None."""
    import torch

    if step[0] == "set":
        setattr(module, step[1], step[2])
    elif step[0] == "reset":
        module.reset_running_stats()
    elif step[0] == "load":  # a plain dict of the parameters only: no buffers, no version metadata
        module.load_state_dict({k: v for k, v in module.state_dict().items() if k in ("weight", "bias")},
                               strict=False)  # fmt: skip
    else:
        module.train(step[0] == "train")
        with torch.no_grad():
            return module(batches[step[1]].float().to(device))
    return None


def _buffer_checks(module: Any, ref: NormState, label: str, depth: float) -> list[Check]:
    import torch

    if ref.mean is None:
        held = module.running_mean is not None
        return [(f"{label}: buffers (built without tracking, none expected)", torch.tensor([float(held)]),
                 torch.zeros(1, dtype=torch.float64), 0.0, 0.0)]  # fmt: skip
    scale = 1 + float(ref.var.abs().max() + ref.mean.abs().max())
    # clones: the module updates its buffers in place, and these are judged after the sequence
    out: list[Check] = [(f"{label} running_mean", module.running_mean.clone(), ref.mean, depth * scale, 0.0),
                        (f"{label} running_var", module.running_var.clone(), ref.var, depth * scale, 0.0)]  # fmt: skip
    if ref.count is not None:
        count = module.num_batches_tracked
        out.append((f"{label} num_batches_tracked", None if count is None else count.clone().double().reshape(1),
                    torch.tensor([float(ref.count)]), 0.0, 0.0))  # fmt: skip
    return out


def live_norm_comparisons(device: str, quick: bool) -> tuple[list[Comparison], list[str], list[str]]:
    """Every module x scenario x affine on `device` (quick: BatchNorm2d with affine, three scenarios):
    (comparisons, not judged, problems)."""
    comps: list[Comparison] = []
    not_judged: list[str] = []
    problems: list[str] = []
    names = QUICK if quick else tuple(SHAPES)
    scenarios = QUICK_SCENARIOS if quick else tuple(SCENARIOS)
    for seed, (name, scenario, affine) in enumerate(
        itertools.product(names, scenarios, (True,) if quick else (True, False))
    ):
        if name.startswith("Instance") and scenario not in INSTANCE_SCENARIOS:
            continue
        found, skipped, bad = sequence_comparisons(name, scenario, affine, device, seed)
        comps += found
        not_judged += skipped
        problems += bad
    return comps, not_judged, problems
