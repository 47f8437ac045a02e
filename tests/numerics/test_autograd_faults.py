"""Autograd checks fail, naming the op, device and dtype, when a backward is wrong."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import torch

from envcheck.core.check import CheckSpec
from envcheck.core.result import Status
from envcheck.numerics.autograd import (
    autograd_device_agreement,
    autograd_gradcheck,
    gradcheck_findings,
    gradcheck_result,
    nondet_tol_for,
)
from envcheck.numerics.autograd_mechanics import MechanicsParts, autograd_mechanics
from envcheck.numerics.linear_vjp import autograd_linear_vjp, linear_vjp_comparisons
from envcheck.numerics.second_order import second_order_findings
from envcheck.reference.autograd_ops import OP_SET, OpCase
from envcheck.reference.compare import comparisons_result
from tests.helpers import run_spec


class _Cube(torch.autograd.Function):
    """x**3; subclasses give the backward under test."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x**3


class CubeWrongBackward(_Cube):
    """x**3 whose backward says 2x² instead of 3x²."""

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x * x


class CubeNoisyBackward(_Cube):
    """x**3 with a correct backward plus ~1e-14 relative random noise: what atomic-add accumulation
    (cuDNN conv backward, index/scatter backward on CUDA) does. Stands in for a GPU kernel on CPU."""

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        exact = grad * 3 * x * x
        return exact * (1 + 1e-14 * torch.rand_like(exact))


class SquareWrongBackward(torch.autograd.Function):
    """x**2 whose backward says 3x instead of 2x."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 3 * x


class CubeFlatSecondOrder(torch.autograd.Function):
    """x**3 with a correct first derivative computed outside autograd, so its second derivative is lost."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 3 * x.detach() ** 2


class LinearWrongWeightGrad(torch.autograd.Function):
    """Y = X·W + b whose backward forgets to transpose X (dW = G·X-ish)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x @ w + b

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x, w = ctx.saved_tensors
        dw = x.reshape(-1, x.shape[-1]).t() @ g.reshape(-1, g.shape[-1])
        return g @ w.t(), dw * 1.01, g.reshape(-1, g.shape[-1]).sum(0)


def test_gradcheck_fails_on_wrong_backward_naming_op_device_dtype() -> None:
    bad = OpCase("cube(wrong backward)", CubeWrongBackward.apply, ((5,),))
    comparisons, problems = gradcheck_findings(["cpu"], [*OP_SET[:2], bad])
    result = comparisons_result("gradcheck", comparisons, tolerances={}, remediation="r", problems=problems)
    assert result.status is Status.FAIL
    assert "cube(wrong backward) jacobian on cpu float64: worst element" in result.summary
    assert any("gradcheck rejects cube(wrong backward)" in p for p in problems)


def test_gradcheck_tolerates_cuda_nondeterminism_but_still_rejects_a_wrong_backward() -> None:
    """No GPU: a noisy backward on CPU plays cuDNN's atomics. With the CUDA reentrancy tolerance it passes;
    held to exact reentrancy it WARNs with gradcheck's own text and no 'reinstall torch'; a wrong backward FAILs."""
    noisy = OpCase("cube(noisy backward)", CubeNoisyBackward.apply, ((5,),))
    assert nondet_tol_for("cuda:0") > 0 and nondet_tol_for("cpu") == 0
    comparisons, problems = gradcheck_findings(
        ["cpu"], [noisy], nondet_tol=lambda d: nondet_tol_for("cuda:0")
    )
    assert problems == [] and gradcheck_result(comparisons, problems).status is Status.PASS
    comparisons, problems = gradcheck_findings(["cpu"], [noisy])
    result = gradcheck_result(comparisons, problems)
    assert result.status is Status.WARN, result
    assert "rejects cube(noisy backward) on cpu float64: Backward is not reentrant" in result.summary
    assert result.remediation and "reinstall" not in result.remediation
    assert "use_deterministic_algorithms" in result.remediation
    wrong = OpCase("cube(wrong backward)", CubeWrongBackward.apply, ((5,),))
    comparisons, problems = gradcheck_findings(["cpu"], [wrong], nondet_tol=lambda d: 1e-12)
    result = gradcheck_result(comparisons, problems)
    assert result.status is Status.FAIL and "reinstall" in (result.remediation or "")
    assert any("rejects cube(wrong backward) on cpu float64: Jacobian mismatch" in p for p in problems), (
        problems
    )


def test_gradcheck_check_passes_through_run_spec() -> None:
    spec = CheckSpec("autograd.gradcheck_probe", autograd_gradcheck, "probe")
    assert run_spec(spec).status is Status.PASS


def test_linear_vjp_fails_on_wrong_weight_grad() -> None:
    comparisons = linear_vjp_comparisons("cpu", "float64", op=LinearWrongWeightGrad.apply)
    assert [c.ok for c in comparisons] == [True, False, True]
    assert "linear dW = Xᵀ·G on cpu float64" in comparisons[1].describe()
    spec = CheckSpec("autograd.linear_vjp_probe", autograd_linear_vjp, "probe")
    assert run_spec(spec).status is Status.PASS


def test_device_agreement_catches_a_perturbed_device_op() -> None:
    """The GPU is mocked: 'cpu' plays the device and the device op for conv2d is perturbed by 1e-3."""

    def perturbed(case: OpCase) -> Any:
        if case.name != "conv2d":
            return case.fn
        return lambda *a: case.fn(*a) * (1 + 1e-3)

    spec = CheckSpec(
        "autograd.device_agreement_probe",
        functools.partial(autograd_device_agreement, devices=lambda: ["cpu"], device_op=perturbed),
        "probe",
    )
    result = run_spec(spec)
    assert result.status is Status.FAIL
    assert result.summary.startswith("CUDA vs CPU gradients: conv2d d/dinput0 on cpu float32: worst element")
    assert "float64" in result.details and "softmax" not in result.details
    healthy = run_spec(
        CheckSpec(
            "autograd.device_agreement_ok",
            functools.partial(autograd_device_agreement, devices=lambda: ["cpu"]),
            "probe",
        )
    )
    assert healthy.status is Status.PASS


def test_second_order_catches_a_non_differentiable_backward() -> None:
    bad = OpCase("cube(flat backward)", CubeFlatSecondOrder.apply, ((6,),))
    comparisons, problems = second_order_findings(["cpu"], [bad])
    assert (
        not comparisons[0].ok
        and "cube(flat backward) hessian-vector on cpu float64" in comparisons[0].describe()
    )
    assert problems and "gradgradcheck rejects cube(flat backward)" in problems[0]


def _run_mechanics(**parts: Any) -> Any:
    return run_spec(
        CheckSpec(
            "autograd.mechanics_probe",
            functools.partial(autograd_mechanics, parts=MechanicsParts(**parts)),
            "probe",
        )
    )


def test_mechanics_hook_catches_wrong_upstream_grad() -> None:
    result = _run_mechanics(square=SquareWrongBackward.apply)
    assert result.status is Status.FAIL and "hook_sees_upstream_grad@cpu" in result.summary


def test_mechanics_no_grad_and_detach_faults() -> None:
    result = _run_mechanics(
        no_grad=contextlib.nullcontext, inference_mode=contextlib.nullcontext, detach=lambda t: t
    )
    assert result.status is Status.FAIL
    for probe in (
        "no_grad_builds_no_graph@cpu",
        "inference_mode_builds_no_graph@cpu",
        "detach_cuts_graph@cpu",
    ):
        assert probe in result.details


def test_mechanics_saved_tensor_that_is_a_copy_misses_the_version_error() -> None:
    result = _run_mechanics(saving_op=lambda t: t.detach().clone().sin() + 0 * t)
    assert result.status is Status.FAIL and "inplace_on_saved_tensor_raises@cpu" in result.details
    assert _run_mechanics().status is Status.PASS


def _float32_perturbed(scale: float) -> Any:
    """conv2d/addmm whose float32 results are off by `scale` (relative), as TF32 rounding is; float64 exact."""

    def device_op(case: OpCase) -> Any:
        if case.name not in ("conv2d", "addmm(linear)"):
            return case.fn
        return lambda *a: case.fn(*a) * (1 + scale) if a[0].dtype == torch.float32 else case.fn(*a)

    return device_op


def _agreement(scale: float, environ: dict[str, str], mode: str) -> Any:
    """device_agreement with 'cpu' playing the GPU, a float32 error of `scale`, and the measured matmul mode."""
    return run_spec(
        CheckSpec(
            "autograd.device_agreement_probe",
            functools.partial(
                autograd_device_agreement,
                devices=lambda: ["cpu"],
                device_op=_float32_perturbed(scale),
                environ=environ,
                mode=lambda device: mode,
            ),
            "probe",
        )
    )


OVERRIDE = {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}


def test_device_agreement_where_float32_is_measured_as_tf32_says_so_and_names_the_variable() -> None:
    """No GPU: 'cpu' plays the device and the probe's verdict is given; a 1e-3 float32 error stands in for TF32
    under TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (an NGC image); a 5% error still fails and names the variable."""
    strict = _agreement(1e-3, {}, "float32")
    assert strict.status is Status.FAIL and "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE" not in (
        strict.remediation or ""
    )
    tf32 = _agreement(1e-3, OVERRIDE, "tf32")
    assert tf32.status is Status.PASS, tf32
    assert "measured as TF32" in tf32.summary and "cause: TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1" in tf32.summary
    assert tf32.measured["float32_matmul_mode"] == {"cpu": "tf32"} and tf32.measured["tf32_override"] is True
    broken = _agreement(5e-2, OVERRIDE, "tf32")
    assert broken.status is Status.FAIL
    assert "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 is set" in (broken.remediation or "")
    assert "env -u TORCH_ALLOW_TF32_CUBLAS_OVERRIDE" in (broken.remediation or "")


def test_the_variable_alone_is_not_taken_as_tf32() -> None:
    """Seen on the H100 proof host (torch 2.11.0+cu130): with TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 set, float32
    matmuls still ran full float32 (identical errors to a run without it). Float32 stays strict there."""
    healthy = _agreement(0.0, OVERRIDE, "float32")
    assert healthy.status is Status.PASS and "this torch does not apply it" in healthy.summary
    assert _agreement(1e-3, OVERRIDE, "float32").status is Status.FAIL


def test_tf32_without_any_variable_is_named_as_unexplained() -> None:
    result = _agreement(1e-3, {}, "tf32")
    assert result.status is Status.PASS and "no TF32 variable is set" in result.summary


def test_matmul_probe_tells_float32_from_tf32() -> None:
    """The probe for real on this CPU (full float32), and with a matmul whose inputs are rounded to TF32's
    10-bit mantissa, as tensor cores do (simulated: no GPU here)."""
    import torch

    from envcheck.reference.matmul_precision import matmul_mode

    def tf32_matmul(a: Any, b: Any) -> Any:
        def round_to_tf32(x: Any) -> Any:
            bits = x.view(torch.int32)
            return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)  # round to nearest, 10 mantissa bits kept

        return torch.matmul(round_to_tf32(a), round_to_tf32(b))

    assert matmul_mode("cpu") == "float32"
    assert matmul_mode("cpu", matmul=tf32_matmul) == "tf32"
    assert matmul_mode("cpu", matmul=lambda a, b: torch.matmul(a, b) + 1) == "other"
