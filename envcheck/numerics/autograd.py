"""autograd.gradcheck and autograd.device_agreement: gradients right on every device, and equal across them."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, first_of, warned
from envcheck.reference.autograd_ops import OP_SET, OpCase, jacobian_comparison
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, cuda_devices, numerics_mode
from envcheck.reference.matmul_precision import TORCH_OVERRIDE, env_cause, matmul_mode

GRADCHECK_TOL = {"atol": 1e-5, "rtol": 1e-3}  # torch.autograd.gradcheck's defaults, float64
AGREEMENT_TOL = {"float32": {"atol": 1e-5, "rtol": 1e-4}, "float64": {"atol": 1e-10, "rtol": 1e-9}}
REMEDIATION = (
    "reinstall a matching torch build (pip install --force-reinstall torch==<version> --index-url "
    "https://download.pytorch.org/whl/<cuda tag>) and report the op to PyTorch if it persists"
)
# CUDA backward kernels of conv (cuDNN), index/gather and scatter_add accumulate with atomic adds, so two
# backward passes may differ in the last bits (torch.use_deterministic_algorithms documents them). gradcheck's
# reentrancy check compares two backward passes exactly unless given nondet_tol; PyTorch's own tests pass
# GRADCHECK_NONDET_TOL = 1e-12 for these ops. The Jacobian itself is still held to GRADCHECK_TOL.
NONDET_TOL = 1e-12
NOT_REENTRANT = "Backward is not reentrant"
NONDET_REMEDIATION = (
    "the gradients match the numerical Jacobian but differ between two identical backward "
    "passes (non-deterministic accumulation): not a broken install; if a workload needs "
    "bitwise reproducibility use torch.use_deterministic_algorithms(True) "
    "(and torch.backends.cudnn.deterministic = True)"
)

# TF32 keeps 10 mantissa bits (unit roundoff 2**-11 ~ 4.9e-4); small sums of such products stay within 1e-2.
TF32_TOL = {"atol": 1e-2, "rtol": 1e-2}

DeviceOp = Callable[[OpCase], Callable[..., Any]]


def nondet_tol_for(device: str, declared: float = 0.0) -> float:
    """gradcheck's reentrancy tolerance: what the op declares (an OpInfo's gradcheck_nondet_tol), at least
    NONDET_TOL on CUDA (atomic-add backward kernels); exact on CPU unless declared."""
    return max(declared, NONDET_TOL if device.startswith("cuda") else 0.0)


def gradcheck_findings(
    devices: Sequence[str],
    ops: Sequence[OpCase] = OP_SET,
    nondet_tol: Callable[[str], float] = nondet_tol_for,
) -> tuple[list[Comparison], list[str]]:
    """Jacobian comparisons for every op on every device, plus torch.autograd.gradcheck's own verdicts.

    A rejection carries the first line of gradcheck's own error, so the reader sees why it rejected.
    """
    import torch

    comparisons, problems = [], []
    for device in devices:
        for case in ops:
            comparisons.append(jacobian_comparison(case, device, **GRADCHECK_TOL))
            inputs = case.inputs(device, torch.float64)
            try:
                torch.autograd.gradcheck(
                    case.fn,
                    inputs,
                    raise_exception=True,
                    fast_mode=True,
                    nondet_tol=nondet_tol(device),
                    **GRADCHECK_TOL,
                )
            except Exception as exc:  # GradcheckError, or whatever the op itself raised
                why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                problems.append(f"torch.autograd.gradcheck rejects {case.name} on {device} float64: {why}")
    return comparisons, problems


def nondeterministic_warning(
    what: str,
    comparisons: Sequence[Comparison],
    problems: Sequence[str],
    expected: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Result | None:
    """WARN (not 'reinstall torch') when gradcheck's non-reentrancy is the only finding; None otherwise.

    Shared by autograd.gradcheck and ops.opdb: two backward passes differing in the last bits beyond the
    tolerance is the kernels' own accumulation order, not a broken install, while a wrong Jacobian still fails."""
    nondet = [p for p in problems if NOT_REENTRANT in p]
    if not nondet or len(nondet) != len(problems) or not all(c.ok for c in comparisons):
        return None
    measured = {c.label: c.measured() for c in comparisons} | (extra or {})
    return warned(
        f"{what}: {first_of(nondet)}",
        NONDET_REMEDIATION,
        measured=measured,
        expected=expected,
        details="\n".join(nondet),
        fault_class=FaultClass.IMAGE,
    )  # the kernels' own (non-deterministic) accumulation


def gradcheck_result(comparisons: Sequence[Comparison], problems: Sequence[str]) -> Result:
    """FAIL for a wrong Jacobian; WARN (not 'reinstall torch') when the only finding is non-reentrancy."""
    warning = nondeterministic_warning(
        "gradcheck float64", comparisons, problems, {**GRADCHECK_TOL, "nondet_tol_cuda": NONDET_TOL}
    )
    if warning is not None:
        return warning
    return comparisons_result(
        "gradcheck float64", comparisons, tolerances=GRADCHECK_TOL, remediation=REMEDIATION, problems=problems
    )


def autograd_gradcheck(ctx: Context) -> Result:
    """gradcheck (float64) on matmul/addmm, conv2d, softmax, layer_norm, reductions, indexing, scatter, broadcasting."""
    with numerics_mode():
        comparisons, problems = gradcheck_findings(check_devices())
    return gradcheck_result(comparisons, problems)


def same_op(case: OpCase) -> Callable[..., Any]:
    """The real device op: the same function, run on the device's tensors."""
    return case.fn


def input_grads(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Gradients of sum(out * fixed weights) with respect to every input."""
    import torch

    out = fn(*inputs)
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=torch.float64).reshape(out.shape).to(out)
    return tuple(torch.autograd.grad((out * weights).sum(), inputs))


def device_grad_agreement(
    device: str,
    ops: Sequence[OpCase] = OP_SET,
    device_op: DeviceOp = same_op,
    dtypes: Sequence[str] = ("float32", "float64"),
    tolerances: Mapping[str, Mapping[str, float]] = AGREEMENT_TOL,
) -> list[Comparison]:
    """Compare CPU gradients with `device_op` gradients on `device`, op by op (the op pair is injectable)."""
    import torch

    comparisons = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for case in ops:
            reference = input_grads(case.fn, case.inputs("cpu", dtype))
            on_device = input_grads(device_op(case), case.inputs(device, dtype))
            for i, (got, want) in enumerate(zip(on_device, reference, strict=True)):
                comparisons.append(
                    compare(
                        got,
                        want,
                        op=f"{case.name} d/dinput{i}",
                        device=device,
                        dtype=dtype_name,
                        **tolerances[dtype_name],
                    )
                )
    return comparisons


def autograd_device_agreement(
    ctx: Context,
    devices: Callable[[], list[str]] = cuda_devices,
    device_op: DeviceOp = same_op,
    environ: Mapping[str, str] | None = None,
    mode: Callable[[str], str] = matmul_mode,
) -> Result:
    """CUDA gradients equal CPU gradients (float32 with TF32 off, and float64) on each GPU model (cuda_devices).

    What a float32 matmul computes is measured on each device first (`matmul_precision`): where it runs
    as TF32 although allow_tf32 is False (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 in NGC images, with a torch
    that honours it), float32 is held to TF32_TOL and the result says so, naming the variable as the cause.
    """
    cause = env_cause(os.environ if environ is None else environ)
    with numerics_mode():
        modes = {device: mode(device) for device in devices()}
        as_tf32 = [d for d, m in modes.items() if m == "tf32"]
        tolerances = {**AGREEMENT_TOL, "float32": TF32_TOL} if as_tf32 else AGREEMENT_TOL
        comparisons = [
            c
            for device in modes
            for c in device_grad_agreement(device, device_op=device_op, tolerances=tolerances)
        ]
    measured_modes = {"float32_matmul_mode": modes}
    if not as_tf32:
        result = comparisons_result(
            "CUDA vs CPU gradients", comparisons, tolerances=AGREEMENT_TOL, remediation=REMEDIATION
        )
        if cause and cause.startswith(TORCH_OVERRIDE):
            result = replace(
                result,
                summary=result.summary + f" ({cause} is set, but float32 matmuls measured "
                "full float32 here: this torch does not apply it)",
            )
        return replace(result, measured={**result.measured, **measured_modes})
    why = cause or "no TF32 variable is set: look for NVIDIA_TF32_OVERRIDE or code that enables TF32"
    result = comparisons_result(
        f"CUDA vs CPU gradients (float32 matmuls on {', '.join(as_tf32)} measured as TF32 "
        f"with allow_tf32=False; cause: {why}; float32 held to TF32 tolerance)",
        comparisons,
        tolerances={**tolerances, "tf32_cause": why},
        remediation=tf32_remediation(cause),
    )
    return replace(result, measured={**result.measured, **measured_modes, "tf32_override": cause is not None})


def tf32_remediation(cause: str | None) -> str:
    """What to do when float32 gradients disagree while float32 matmuls run as TF32."""
    if cause is None:
        return (
            "float32 matmuls run as TF32 although allow_tf32 is False: find what enables TF32, then rerun. "
            f"If it still fails then: {REMEDIATION}"
        )
    name = cause.split("=", 1)[0]
    return (
        f"{cause} is set (NVIDIA's NGC images set it): float32 matmuls run as TF32 even with "
        f"allow_tf32=False; rerun with it unset (env -u {name} envcheck ...) to judge float32. "
        f"If it still fails then: {REMEDIATION}"
    )
