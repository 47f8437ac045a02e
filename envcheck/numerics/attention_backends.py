"""attention.reference: scaled_dot_product_attention on every backend this device has (math, flash, memory-efficient,
cuDNN), across the masks users pass (none, boolean, additive float, causal, a fully masked row), scale, GQA and dtype,
output and gradients against float64 math (envcheck.reference.attention, which also derives the tolerances); and
nn.MultiheadAttention across its options (module.py: mha_comparisons).

The option space is the product of the axes below, not a list of cases; a backend that does not take a combination
("No available kernel") is recorded as not applicable, never as a failure. Quick level: float32, the five mask kinds,
every backend. Full level adds scale, GQA, a square and a rectangular (L != S) shape, bfloat16 and float16.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.reference.attention import sdpa_bounds, sdpa_reference
from envcheck.reference.compare import Comparison, Tensor, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

BATCH, HEADS, KV_HEADS, DIM = 2, 4, 2, 8
MASKS = ("none", "bool", "float", "causal", "fully_masked_row")
MASKED_ROW = 1  # the query row that "fully_masked_row" gives no key
SHAPES = ((5, 7), (6, 6))  # (queries L, keys S)
BACKENDS = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


@dataclass(frozen=True)
class SdpaCase:
    """One point of SDPA's option space."""

    mask: str
    shape: tuple[int, int]
    scale: float | None
    gqa: bool
    dtype: str

    @property
    def label(self) -> str:
        """`sdpa(mask=bool, L=5, S=7, scale=None, gqa=False)`."""
        return (
            f"sdpa(mask={self.mask}, L={self.shape[0]}, S={self.shape[1]}, scale={self.scale}, "
            f"gqa={self.gqa})"
        )


def sdpa_cases(quick: bool) -> list[SdpaCase]:
    """The product of the axes that change the arithmetic (the quick level keeps float32, one shape)."""
    if quick:
        return [SdpaCase(m, SHAPES[0], None, False, "float32") for m in MASKS]
    return [
        SdpaCase(*p)
        for p in itertools.product(
            MASKS, SHAPES, (None, 0.3), (False, True), ("float32", "bfloat16", "float16")
        )
    ]


def case_inputs(case: SdpaCase, seed: int) -> dict[str, Any]:
    """q, k, v, dout (already rounded to the case's dtype) and the mask, on CPU."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    length, keys = case.shape
    kv = KV_HEADS if case.gqa else HEADS
    q = torch.randn(BATCH, HEADS, length, DIM, generator=gen).to(dtype)
    k = torch.randn(BATCH, kv, keys, DIM, generator=gen).to(dtype)
    v = torch.randn(BATCH, kv, keys, DIM, generator=gen).to(dtype)
    dout = torch.randn(BATCH, HEADS, length, DIM, generator=gen).to(dtype)
    allowed = torch.rand(length, keys, generator=gen) > 0.4
    allowed[:, 0] = True  # every query row keeps a key
    mask: Tensor | None = None
    if case.mask == "bool":
        mask = allowed
    elif case.mask == "float":
        mask = (2 * torch.randn(length, keys, generator=gen)).to(dtype)
    elif case.mask == "fully_masked_row":
        allowed[MASKED_ROW] = False
        mask = allowed
        # What a row with no key gives is each backend's own convention (MATH and EFFICIENT_ATTENTION: zeros;
        # cuDNN on an H100: a weighted mix of v, docs/gpu-evidence/2026-11-24-nvidia-h100-80gb-hbm3/call-3), and a
        # model ignores that row (a padded query). Its output gradient is zero, as a masked loss makes it, so the
        # gradients of q, k and v are the same under any convention and are compared on every backend.
        dout[:, :, MASKED_ROW] = 0
    return {"q": q, "k": k, "v": v, "dout": dout, "mask": mask}


def judged_rows(case: SdpaCase, backend: str, length: int) -> list[int]:
    """The query rows whose output is compared: all of them, except a row with no key on a backend other than
    MATH (torch's documented math convention, zeros, is the reference's)."""
    if case.mask == "fully_masked_row" and backend != "MATH":
        return [r for r in range(length) if r != MASKED_ROW]
    return list(range(length))


def run_backend(backend: str, case: SdpaCase, x: dict[str, Any], device: str) -> dict[str, Tensor] | None:
    """out, dq, dk, dv from torch's SDPA restricted to one backend; None when it does not take this case."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (x[n].to(device).clone().requires_grad_(True) for n in ("q", "k", "v"))
    kw: dict[str, Any] = {"scale": case.scale, "is_causal": case.mask == "causal"}
    if x["mask"] is not None:
        kw["attn_mask"] = x["mask"].to(device)
    if case.gqa:
        kw["enable_gqa"] = True
    try:
        with warnings.catch_warnings(), sdpa_kernel(getattr(SDPBackend, backend)):
            warnings.simplefilter("ignore")
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
            # (out·dout).sum() has exactly dout as its output gradient; out.backward(dout) would import sympy
            # (torch.autograd's _make_grads checks symbolic shapes: 1-3 s cold, more than the quick level's budget)
            (out * x["dout"].to(device)).sum().backward()
    except (RuntimeError, TypeError) as exc:
        if "kernel" in str(exc) or "enable_gqa" in str(exc) or "support" in str(exc):
            return None
        raise
    return {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def sdpa_comparisons(device: str, quick: bool) -> tuple[list[Comparison], dict[str, Any]]:
    """Every case on every backend of `device`, output and gradients vs float64 math."""
    import torch

    comps: list[Comparison] = []
    ran: dict[str, int] = {}
    for i, case in enumerate(sdpa_cases(quick)):
        x = case_inputs(case, seed=i)
        q, k, v = (x[n].double().requires_grad_(True) for n in ("q", "k", "v"))
        mask = x["mask"]
        mask = mask.double() if mask is not None and mask.dtype != torch.bool else mask
        out, probs = sdpa_reference(q, k, v, mask, case.mask == "causal", case.scale)
        dout = x["dout"].double()
        (out * dout).sum().backward()
        ref = {"out": out.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
        dtype = getattr(torch, case.dtype)
        u_acc = torch.finfo(torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype).eps / 2
        u_st = torch.finfo(dtype).eps / 2
        tol = sdpa_bounds(
            q.detach(),
            k.detach(),
            v.detach(),
            probs.detach(),
            ref["out"],
            dout,
            {n: ref[n] for n in ("dq", "dk", "dv")},
            mask,
            case.scale,
            u_acc,
        )
        for backend in BACKENDS:
            if device == "cpu" and backend in ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
                continue
            got = run_backend(backend, case, x, device)
            if got is None:
                continue
            ran[backend] = ran.get(backend, 0) + 1
            rows = judged_rows(case, backend, case.shape[0])
            for name in ("out", "dq", "dk", "dv"):
                atol = tol[name] + 8 * u_st * float(ref[name].abs().max())  # low-precision stores and output
                a, e = (
                    (got[name], ref[name])
                    if name != "out"
                    else (got[name][:, :, rows], ref[name][:, :, rows])
                )
                comps.append(
                    compare(
                        a,
                        e,
                        op=f"{case.label} {backend} {name}",
                        device=device,
                        dtype=case.dtype,
                        atol=atol,
                        rtol=0.0,
                    )
                )
    return comps, {f"backends_run@{device}": ran}


def attention_reference(ctx: Context) -> Result:
    """SDPA on every backend and nn.MultiheadAttention match float64 attention, on every device."""
    from envcheck.numerics.mha import mha_comparisons

    quick = ctx.level is Level.QUICK
    comparisons: list[Comparison] = []
    extra: dict[str, Any] = {}
    with numerics_mode():
        for device in check_devices():
            found, info = sdpa_comparisons(device, quick)
            comparisons += found
            extra.update(info)
            found, info = mha_comparisons(device, quick)
            comparisons += found
            extra.update(info)
    extra["rows_without_a_key"] = (
        "the output of a query row with no key is compared on MATH only (zeros); other "
        "backends have their own convention for it; its gradients are compared on all"
    )
    tolerances = {
        "sdpa": "(2·ds + depth·u)·|magnitude| + u·|ref|, ds = (E+2)·u·scale·max(|q|·|k|ᵀ) "
        "(envcheck.reference.attention)",
        "mha": "as sdpa, with the in- and out-projections' (E+2)·u added to the depth",
    }
    return comparisons_result(
        "attention vs float64 math",
        comparisons,
        tolerances=tolerances,
        extra=extra,
        remediation="an attention kernel computes wrong values or gradients for these "
        "options; select another backend (torch.nn.attention.sdpa_kernel) "
        "and reinstall torch",
    )
