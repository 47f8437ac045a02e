"""ops.opdb honours each OpInfo's own settings, as PyTorch's test_ops_gradients.py does.

Stand-ins are real OpInfo objects (torch.testing._internal.opinfo.core.OpInfo) around small autograd Functions that
play what only a GPU shows: a backward whose last bits differ between two runs (cuDNN's atomic-add accumulation,
the reason conv1d/2d/3d declare `gradcheck_nondet_tol`), an op whose gradient is defined on a subspace (as eigh
reads one triangle: PyTorch wraps such ops with `gradcheck_wrapper_hermitian_input`), an op that PyTorch expects to
fail its gradient test on a device, and a float32 kernel that needs the OpInfo's own tolerance. Everything else is
the real check on this machine's torch (CPU). Each of these once failed with "derivatives differ ...
reinstall torch" or a forward mismatch.
"""

from __future__ import annotations

import unittest
from typing import Any

import pytest
import torch

from envcheck.core.result import Status
from envcheck.numerics import opdb
from envcheck.numerics.autograd import NONDET_TOL, nondet_tol_for
from envcheck.numerics.opinfo_settings import (
    BACKWARD,
    DOUBLE_BACKWARD,
    FORWARD,
    decorations,
    fast_mode,
)
from tests.helpers import make_context

opdb.load_op_db()  # registers the expecttest stand-in where that test-only package is absent
from torch.testing._internal.common_device_type import tol, toleranceOverride  # noqa: E402
from torch.testing._internal.opinfo.core import DecorateInfo, OpInfo, SampleInput  # noqa: E402


class NoisyCube(torch.autograd.Function):
    """x**3 with a right backward plus ~1e-14 relative noise: two backward passes differ in the last bits."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        exact = grad * 3 * x * x
        return exact * (1 + 1e-14 * torch.rand_like(exact))


class LowerSymmetric(torch.autograd.Function):
    """Reads the lower triangle and returns the symmetric matrix it spells (as eigh reads one triangle); its backward
    is right only on symmetric input, which is why PyTorch's OpInfos wrap such ops for gradcheck."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.tril() + x.tril(-1).mT

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return (grad + grad.mT) / 2


class WrongSquare(torch.autograd.Function):
    """x**2 whose backward says 3x."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 3 * x


def half_precision_tanh(x: torch.Tensor) -> torch.Tensor:
    """A float32 kernel that rounds through float16 (error ~1e-3): right to the tolerance its OpInfo states."""
    return torch.tanh(x.half()).to(x.dtype) if x.dtype == torch.float32 else torch.tanh(x)


def samples(shape: tuple[int, ...]) -> Any:
    def sample_inputs(op: Any, device: str, dtype: Any, requires_grad: bool, **kw: Any) -> Any:
        gen = torch.Generator().manual_seed(0)
        x = torch.rand(shape, generator=gen, dtype=torch.float64).mul(2).sub(1).add(0.1).to(device, dtype)
        yield SampleInput(x.requires_grad_(requires_grad))

    return sample_inputs


def info(name: str, op: Any, shape: tuple[int, ...] = (4,), **kw: Any) -> Any:
    return OpInfo(
        f"envcheck_stand_in.{name}",
        op=op,
        dtypes=(torch.float32, torch.float64),
        sample_inputs_func=samples(shape),
        supports_out=False,
        supports_gradgrad=False,
        **kw,
    )


def run(*infos: Any) -> Any:
    return opdb.ops_opdb(make_context(), load=lambda: (list(infos), ""))


def test_a_declared_nondet_tol_lets_a_nondeterministic_backward_pass() -> None:
    """conv1d/2d/3d's case: the OpInfo declares gradcheck_nondet_tol; the old check passed nondet_tol=0 and FAILED
    ("reinstall torch") on a healthy GPU."""
    declared = info("noisy_cube", NoisyCube.apply, gradcheck_nondet_tol=1e-12)
    found = opdb.op_comparisons(declared, "cpu")
    assert found.problems == [] and found.comparisons
    assert run(declared).status is Status.PASS


def test_undeclared_nondeterminism_warns_and_never_says_reinstall() -> None:
    result = run(info("noisy_cube", NoisyCube.apply))
    assert result.status is Status.WARN, result.summary
    assert "Backward is not reentrant" in result.summary
    assert result.remediation and "reinstall" not in result.remediation


def test_the_cuda_reentrancy_tolerance_is_one_rule_for_both_checks() -> None:
    assert nondet_tol_for("cuda:0") == NONDET_TOL and nondet_tol_for("cpu") == 0.0
    assert nondet_tol_for("cpu", 1e-12) == 1e-12 and nondet_tol_for("cuda:1", 1e-12) == 1e-12
    conv = {i.name: i for i in opdb.load_op_db()[0] or []}["nn.functional.conv2d"]
    assert conv.gradcheck_nondet_tol > 0 and nondet_tol_for("cuda:0", conv.gradcheck_nondet_tol) >= 1e-12


def test_gradcheck_goes_through_the_opinfos_wrapper() -> None:
    """Old code called the op directly: a Jacobian mismatch on an op PyTorch itself checks only through its wrapper."""
    wrapped = info(
        "lower_symmetric",
        LowerSymmetric.apply,
        shape=(3, 3),
        gradcheck_wrapper=lambda op, x, *a, **k: op(x + x.mT, *a, **k),
    )
    assert opdb.op_comparisons(wrapped, "cpu").problems == []
    bare = info("lower_symmetric", LowerSymmetric.apply, shape=(3, 3))
    problems = opdb.op_comparisons(bare, "cpu").problems
    assert problems and "Jacobian mismatch" in problems[0]  # the same op unwrapped: the check can fail


def test_an_expected_gradient_failure_on_this_device_is_not_judged() -> None:
    marked = info(
        "wrong_square",
        WrongSquare.apply,
        decorators=(
            DecorateInfo(unittest.expectedFailure, "TestBwdGradients", "test_fn_grad", device_type="cpu"),
        ),
    )
    result = run(marked)
    assert result.status is Status.PASS, result.summary
    assert (
        "backward on cpu" in result.measured["not_judged"][0]
        and "expected to fail" in result.measured["not_judged"][0]
    )
    unmarked = run(info("wrong_square", WrongSquare.apply))
    assert unmarked.status is Status.FAIL and "Jacobian mismatch" in unmarked.summary


def test_a_cuda_skip_applies_on_cuda_only() -> None:
    """The device-type rule, without a GPU: a skip declared for cuda takes the comparison out on cuda, not on cpu."""
    skipped = info(
        "noisy_cube",
        NoisyCube.apply,
        decorators=(
            DecorateInfo(
                unittest.skip("Skipped!"),
                "TestBwdGradients",
                "test_fn_grad",
                device_type="cuda",
                dtypes=(torch.float64,),
            ),
        ),
    )
    assert decorations(skipped, BACKWARD, "cuda", torch.float64).skip is not None
    assert decorations(skipped, BACKWARD, "cpu", torch.float64).skip is None
    assert decorations(skipped, BACKWARD, "cuda", torch.float32).skip is None  # the dtype must match too


def test_the_real_op_db_skips_are_read() -> None:
    """torch's own OpInfo for scaled_dot_product_attention skips test_fn_gradgrad on cpu."""
    sdpa = {i.name: i for i in opdb.load_op_db()[0] or []}["nn.functional.scaled_dot_product_attention"]
    assert decorations(sdpa, DOUBLE_BACKWARD, "cpu", torch.float64).skip
    assert decorations(sdpa, DOUBLE_BACKWARD, "cuda", torch.float64).skip is None


def test_the_opinfos_float32_tolerance_widens_the_forward_bound() -> None:
    loose = info(
        "half_tanh",
        half_precision_tanh,
        shape=(64,),
        decorators=(
            DecorateInfo(
                toleranceOverride({torch.float32: tol(atol=2e-3, rtol=2e-3)}),
                "TestCommon",
                "test_compare_cpu",
            ),
        ),
    )
    assert decorations(loose, FORWARD, "cpu", torch.float32).atol == 2e-3
    assert run(loose).status is Status.PASS
    strict = run(info("half_tanh", half_precision_tanh, shape=(64,)))
    assert strict.status is Status.FAIL and "float32 vs float64" in strict.summary


@pytest.mark.parametrize(("declared", "mode"), [(None, True), (True, True), (False, False)])
def test_fast_mode_is_the_opinfos(declared: bool | None, mode: bool) -> None:
    assert fast_mode(info("noisy_cube", NoisyCube.apply, gradcheck_fast_mode=declared)) is mode
