"""ops.opdb: the ops a training step uses, taken with their sample inputs from PyTorch's own op database
(torch.testing._internal.common_methods_invocations.op_db): forward in float32 vs the same op in float64, backward
and double backward vs float64 finite differences (gradcheck/gradgradcheck) where the OpInfo says the op supports
them, and autocast's documented output dtype per op.

Each OpInfo's own settings are honoured as PyTorch's tests honour them: gradcheck is called as
TestGradients._check_helper calls it (opdb_grad: gradcheck_wrapper, gradcheck_nondet_tol, gradcheck_fast_mode), the
OpInfo's skips and expected failures for this device type take a comparison out of the verdict (listed in
`not_judged`), and its float32 toleranceOverride widens the forward bound (opinfo_settings). A backward that only
fails gradcheck's reentrancy check (cuDNN's non-deterministic accumulation) warns, as autograd.gradcheck does.

op_db is internal API: this check is pinned to the torch versions of the matrix (PINNED) and skips with the reason
anywhere else, or when the import or an OpInfo's shape changed (envcheck.reference.torch_db loads it: a stand-in for
the test-only `expecttest`, torch.backends' flags unfrozen after). The autocast dtypes: opdb_autocast.py.
Forward bound: an op over inputs of at most K elements is at most K + 8 operations deep (sums, dot products: Higham
2002 eq. 3.5 gives γ_K·|a|·|b|), so |err| <= (K + 8)·u·(1 + max|ref|), u = float32 eps/2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, skipped
from envcheck.numerics.autograd import nondeterministic_warning
from envcheck.numerics.opdb_autocast import autocast_problems
from envcheck.numerics.opdb_grad import derivative_problem
from envcheck.numerics.opinfo_calls import first_float, op_function
from envcheck.numerics.opinfo_settings import BACKWARD, DOUBLE_BACKWARD, FORWARD, decorations
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.torch_db import load_internal

PINNED = ("2.11", "2.13", "2.14")
MAX_SAMPLES = 2
TRAINING_OPS = (
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "nn.functional.linear",
    "nn.functional.conv1d",
    "nn.functional.conv2d",
    "nn.functional.layer_norm",
    "nn.functional.group_norm",
    "nn.functional.rms_norm",
    "nn.functional.gelu",
    "nn.functional.silu",
    "nn.functional.relu",
    "nn.functional.softplus",
    "nn.functional.mish",
    "nn.functional.elu",
    "tanh",
    "sigmoid",
    "softmax",
    "log_softmax",
    "nn.functional.cross_entropy",
    "nn.functional.nll_loss",
    "nn.functional.mse_loss",
    "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.smooth_l1_loss",
    "nn.functional.huber_loss",
    "nn.functional.kl_div",
    "sum",
    "mean",
    "var",
    "nn.functional.embedding",
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.normalize",
    "cumsum",
    "nn.functional.avg_pool2d",
)


def load_op_db() -> tuple[list[Any] | None, str]:
    """The OpInfos for TRAINING_OPS, or None and why not (envcheck.reference.torch_db: pinned, the expecttest
    stand-in, torch.backends' flags unfrozen)."""
    op_db, why = load_internal("common_methods_invocations", "op_db", PINNED)
    if op_db is None:
        return None, why.replace("common_methods_invocations.op_db is", "op_db is")
    infos = [o for o in op_db if o.name in TRAINING_OPS and not getattr(o, "variant_test_name", "")]
    if not infos or not all(hasattr(o, a) for o in infos for a in ("sample_inputs", "supports_autograd")):
        return None, "op_db's OpInfo shape changed (no sample_inputs/supports_autograd)"
    return infos, ""


def _cast(v: Any, dtype: Any) -> Any:
    import torch

    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.detach().to(dtype)
    if isinstance(v, (tuple, list)):
        return type(v)(_cast(x, dtype) for x in v)
    if isinstance(v, dict):
        return {k: _cast(x, dtype) for k, x in v.items()}
    return v


@dataclass
class OpFindings:
    """One OpInfo on one device: the forward comparisons, the problems, and what its OpInfo says not to judge."""

    comparisons: list[Comparison] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_judged: list[str] = field(default_factory=list)


def forward_tolerance(info: Any, device: str, bound: float) -> tuple[float, float]:
    """(atol, rtol) of the float32 forward: the (K+8)·u bound, widened (never narrowed) by the OpInfo's own
    toleranceOverride/precisionOverride for float32 on this device type."""
    import torch

    said = decorations(info, FORWARD, device.split(":")[0], torch.float32)
    return max(bound, said.atol or 0.0), max(0.0, said.rtol or 0.0)


def op_comparisons(info: Any, device: str) -> OpFindings:
    """Forward float32 vs float64, then gradcheck and gradgradcheck as PyTorch's tests run them (opdb_grad), for
    one OpInfo's first samples; a comparison the OpInfo skips or expects to fail on this device is not judged."""
    import torch

    fn = op_function(info)
    kind = device.split(":")[0]
    u = torch.finfo(torch.float32).eps / 2
    found = OpFindings()
    grad_ok = info.supports_autograd and torch.float64 in info.supported_backward_dtypes(kind)
    derivatives = [(False, BACKWARD), *([(True, DOUBLE_BACKWARD)] if info.supports_gradgrad else [])]
    skips = {double: decorations(info, tests, kind, torch.float64).skip for double, tests in derivatives}
    found.not_judged += [
        f"{info.name} {'double backward' if d else 'backward'} on {device}: {why}"
        for d, why in skips.items()
        if why and grad_ok
    ]
    samples = list(info.sample_inputs(device, torch.float64, requires_grad=grad_ok))[:MAX_SAMPLES]
    for k, s in enumerate(samples):
        label = f"{info.name}[sample {k}]"
        try:
            ref = first_float(fn(s.input, *s.args, **s.kwargs))
        except (RuntimeError, TypeError, ValueError):
            continue  # a float64 sample this op does not take here: nothing to compare against
        try:
            got = first_float(
                fn(
                    _cast(s.input, torch.float32),
                    *_cast(s.args, torch.float32),
                    **_cast(s.kwargs, torch.float32),
                )
            )
        except (RuntimeError, TypeError, ValueError) as exc:
            found.problems.append(f"{label} on {device}: float32 run raised {exc!r}"[:200])
            continue
        if ref is None or got is None:
            continue
        n = max([t.numel() for t in (s.input, *s.args) if isinstance(t, torch.Tensor)] or [1])
        bound = (n + 8) * u * (1 + float(ref.detach().abs().max()) if ref.numel() else 1.0)
        atol, rtol = forward_tolerance(info, device, bound)
        found.comparisons.append(
            compare(
                got,
                ref,
                op=f"{label} float32 vs float64",
                device=device,
                dtype="float32",
                atol=atol,
                rtol=rtol,
            )
        )
        for double, _ in derivatives if grad_ok else []:
            if skips[double] is None:
                problem = derivative_problem(info, fn, s, device, double, label)
                found.problems += [problem] if problem else []
    return found


def ops_opdb(ctx: Context, load: Callable[[], tuple[list[Any] | None, str]] = load_op_db) -> Result:
    """Training-step ops from op_db: float32 forward, derivatives and autocast dtypes hold on every device
    (`load`: the OpInfos to check, torch's own by default)."""
    infos, why = load()
    if infos is None:
        return skipped(why)
    found = OpFindings()
    with numerics_mode():
        for device in check_devices():
            for info in infos:
                one = op_comparisons(info, device)
                found.comparisons += one.comparisons
                found.problems += one.problems + autocast_problems(info, device)
                found.not_judged += one.not_judged
    names = sorted({i.name for i in infos})
    tolerances = {
        "forward": "(K+8)·u·(1+max|ref|), K = largest input numel; widened by the OpInfo's float32 "
        "toleranceOverride",
        "derivatives": "gradcheck/gradgradcheck float64, the OpInfo's "
        "gradcheck_nondet_tol (at least 1e-12 on CUDA), gradcheck_fast_mode, gradcheck_wrapper",
    }
    extra = {
        "ops": names,
        "missing_from_op_db": sorted(set(TRAINING_OPS) - set(names)),
        "not_judged": found.not_judged,
    }
    warning = nondeterministic_warning(
        f"op_db training ops ({len(names)})", found.comparisons, found.problems, tolerances, extra
    )
    if warning is not None:
        return warning
    return comparisons_result(
        f"op_db training ops ({len(names)})",
        found.comparisons,
        problems=found.problems,
        tolerances=tolerances,
        extra=extra,
        remediation="an op computes a wrong value or derivative in this torch build; reinstall torch",
    )
