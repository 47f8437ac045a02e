"""train.state_roundtrip (full level): optimizer, parameter-group and scheduler state saved in the middle of training
and restored into fresh objects resumes exactly like the uninterrupted run, for every optimizer configuration torch's
own optimizer database generates (common_optimizers.optim_db with its global flags: foreach, fused), for float32,
float64 and bfloat16 parameters, between the CPU and one GPU of each model (envcheck.reference.devices) in every
direction, and (float32) from that GPU onto another GPU of its model.

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

import warnings
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.numerics.opdb import PINNED
from envcheck.reference.checkpoint import by_hand, through_file
from envcheck.reference.compare import Comparison, compare
from envcheck.reference.devices import check_devices, numerics_mode, peer_device
from envcheck.reference.known_bugs import judge_with_known_bugs
from envcheck.reference.resumable_run import run, state_tensors
from envcheck.reference.torch_db import load_internal

SKIP = {"LBFGS": "needs a closure", "SparseAdam": "sparse gradients only", "Muon": "2-D parameters only"}
DTYPES = ("float32", "float64", "bfloat16")
# The dtypes of the GPU-to-GPU pair (map_location onto another GPU of the model, as a rank resuming on another GPU
# does): its arithmetic is the GPU-to-itself pair's, so only the move is new, and one dtype keeps the check inside its
# timeout (three device pairs took 82 s on one H100).
GPU_TO_GPU = ("float32",)
POLICY_CAST = {
    "NAdam": ("mu_product",),
    "ASGD": ("eta", "mu"),
}  # float32 scalar state cast on load (see above)
Config = tuple[str, dict[str, Any], str]  # (optimizer class, kwargs, description)


def configs(device: str) -> tuple[list[Config], str]:
    """(optimizer, kwargs, description) from optim_db, or from optim.differential's option sets."""
    import torch

    optim_db, why = load_internal("common_optimizers", "optim_db", PINNED, environment_raises=True)
    if optim_db is not None:
        from torch.testing._internal.common_optimizers import (
            _get_optim_inputs_including_global_cliquey_kwargs,
        )

        out: list[Config] = []
        for info in optim_db:
            name = info.optim_cls.__name__
            if name in SKIP:
                continue
            for oi in _get_optim_inputs_including_global_cliquey_kwargs(
                device, torch.float32, info, skip=("differentiable",)
            ):
                out.append((name, dict(oi.kwargs), oi.desc))
                # the database lists foreach only where torch has foreach kernels (not CPU), yet foreach=True runs
                # torch.optim's _multi_tensor_* path on any device: a path of its own, so it is in the space too
                if (
                    "foreach" in info.supported_impls
                    and not oi.kwargs.get("foreach")
                    and not oi.kwargs.get("fused")
                ):
                    out.append((name, {**oi.kwargs, "foreach": True}, f"{oi.desc} & foreach"))
        return out, "optim_db"
    from envcheck.numerics.optim_differential import OPTIONS

    return [
        (n, {"lr": lr, **o}, "optim.differential option set")
        for n, (lr, sets) in OPTIONS.items()
        for o in sets
    ], f"optim.differential's option sets ({why})"


def dtypes_for(
    name: str, kw: dict[str, Any], dtypes: tuple[str, ...], seen: set[tuple[str, bool, bool, bool]]
) -> tuple[str, ...]:
    """float32 for every configuration; the other dtypes for the first of each optimizer and implementation
    (foreach, fused, capturable). What a dtype changes in a round trip is decided there: load_state_dict's cast policy
    is the optimizer class's (pytorch#75224: step kept float32, the rest cast), and the kernel that reads the state is
    the implementation's (pytorch#191763: fused SGD's low-precision path); a learning rate, a weight decay or amsgrad
    change neither. The full product ran every optim_db configuration three times (528 runs on CPU, three times that
    per device pair on a GPU host); this runs 176 + 2 x 27 (torch 2.13, CPU)."""
    key = (name, bool(kw.get("foreach")), bool(kw.get("fused")), bool(kw.get("capturable")))
    if key in seen:
        return tuple(d for d in dtypes if d == "float32")
    seen.add(key)
    return dtypes


def config_key(config: Config) -> str:
    """One configuration as text (optimizer, description, options), to find it among another device's
    configurations; the database may spell the same options differently per device (CUDA's adds foreach=False), so
    a device-bound configuration that is not found there is left out, never guessed."""
    name, kw, desc = config
    return f"{name}|{desc}|{sorted((k, repr(v)) for k, v in kw.items())}"


def roundtrip_comparisons(
    device: str, target: str, casts: list[str] | None = None, dtypes: tuple[str, ...] = DTYPES
) -> tuple[list[Comparison], list[str], str]:
    """Every config x dtype: restored-from-file (on `target`) vs the reference run."""
    import torch

    comps: list[Comparison] = []
    problems: list[str] = []
    casts = [] if casts is None else casts
    seen: set[tuple[str, bool, bool, bool]] = set()
    found, source = configs(device)
    if (
        target != device
    ):  # a device-bound option must exist on both ends: capturable=True is CUDA's (torch asserts
        # on a CPU parameter, seen on the H100 proof), fused=True runs only where torch has the fused kernel
        there = {config_key(c) for c in configs(target)[0]}
        found = [
            c for c in found if not (c[1].get("capturable") or c[1].get("fused")) or config_key(c) in there
        ]
    for name, kw, desc in found:
        for dtype_name in dtypes_for(name, kw, dtypes, seen):
            dtype = getattr(torch, dtype_name)
            label = f"{name}({desc}; {', '.join(f'{k}={v}' for k, v in kw.items())}) {dtype_name} {device}->{target}"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cast = name in POLICY_CAST and dtype_name != "float32"
                    ref = run(
                        name, kw, dtype, device, target, None if device == target and not cast else by_hand
                    )
                    if cast:
                        casts.append(
                            f"{name} {dtype_name}: load_state_dict casts {', '.join(POLICY_CAST[name])} "
                            f"from float32 to {dtype_name}"
                        )
                    got = run(name, kw, dtype, device, target, through_file)
            except (RuntimeError, TypeError, ValueError, KeyError, IndexError, AssertionError) as exc:
                # torch's own failure on this configuration (torch 2.11's Adagrad raises KeyError after
                # add_param_group, pytorch#53712) is a problem line of the check, judged below, never a crash of it
                if dtype_name == "float32":  # the database's configurations are meant to run in float32
                    problems.append(f"{label}: {type(exc).__name__}: {exc}"[:300])
                continue
            flat = [p.detach().reshape(-1) for p in got[0].parameters()]
            flat_ref = [p.detach().reshape(-1) for p in ref[0].parameters()]
            comps.append(
                compare(
                    torch.cat(flat),
                    torch.cat(flat_ref),
                    op=f"{label} parameters",
                    device=target,
                    dtype=dtype_name,
                    atol=0.0,
                    rtol=0.0,
                )
            )
            st, st_ref = state_tensors(got[1]), state_tensors(ref[1])
            if [(k, v.dtype, v.device) for k, v in st] != [(k, v.dtype, v.device) for k, v in st_ref]:
                problems.append(
                    f"{label}: restored optimizer state differs in keys, dtypes or devices: "
                    f"{[(k, str(v.dtype), str(v.device)) for k, v in st]} vs "
                    f"{[(k, str(v.dtype), str(v.device)) for k, v in st_ref]}"[:400]
                )
                continue
            for (k, v), (_, r) in zip(st, st_ref, strict=True):
                comps.append(
                    compare(
                        v.reshape(-1).float(),
                        r.reshape(-1).float(),
                        op=f"{label} {k}",
                        device=target,
                        dtype=dtype_name,
                        atol=0.0,
                        rtol=0.0,
                    )
                )
            lrs = [float(g["lr"]) for g in got[1].param_groups]
            if lrs != [float(g["lr"]) for g in ref[1].param_groups]:
                problems.append(f"{label}: learning rates after resume {lrs} differ from the reference")
    return comps, problems, source


def train_state_roundtrip(ctx: Context) -> Result:
    """Optimizer, param-group and scheduler state restored mid-training resume bit-for-bit, on every device pair
    (the CPU, one GPU of each model, and a GPU onto another of its model)."""
    comparisons: list[Comparison] = []
    problems: list[str] = []
    extra: dict[str, Any] = {}
    casts: list[str] = []
    with numerics_mode():
        devices = check_devices()
        pairs = [(d, d) for d in devices] + [(a, b) for a in devices for b in devices if a != b]
        peers = [(d, p) for d in devices[1:] if (p := peer_device(d)) is not None]
        for source, target in (
            pairs + peers
        ):  # a GPU's state onto another GPU of its model: float32 (GPU_TO_GPU)
            found, bad, origin = roundtrip_comparisons(
                source, target, casts, GPU_TO_GPU if (source, target) in peers else DTYPES
            )
            comparisons += found
            problems += bad
            extra["configurations_from"] = origin
        pairs += peers
    extra["device_pairs"] = [f"{a}->{b}" for a, b in pairs]
    extra["load_policy_casts"] = sorted(set(casts))
    return judge_with_known_bugs(
        "optimizer/scheduler state round trips",
        comparisons,
        problems=problems,
        tolerances={"atol": 0.0, "rtol": 0.0, "why": "same arithmetic on the same values"},
        extra=extra,
        remediation="save and restore model, optimizer and scheduler state_dicts together "
        "(torch.save({...}); load_state_dict each after rebuilding the same "
        "param groups); reinstall torch if it still differs",
    )
