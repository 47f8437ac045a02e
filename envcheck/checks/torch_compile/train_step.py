"""compile.train_step (full level): a training step under torch.compile against the same step in eager mode.

The model (Linear, LayerNorm, GELU, a softmax attention layer, BatchNorm1d in train mode, cross_entropy with label
smoothing) is compiled as a whole (forward and backward through AOTAutograd), and the optimizer's step with it
(torch.compile(opt.step)). Axes: backend (aot_eager: Dynamo + AOTAutograd; aot_eager_decomp_partition: plus
Inductor's decompositions and partitioner; inductor: generated kernels) x optimizer (SGD momentum+nesterov, AdamW
foreach), paired rather than multiplied (PAIRS): the optimizer's step is one graph of its own, compiled and judged the
same way whichever backend compiled the model, so each backend meets one optimizer and Inductor, the only backend
that generates kernels, meets both (a compiled optimizer is Inductor's fused foreach kernels; under the two
aot_eager backends it runs the same ATen ops as eager). Each step starts the compiled copy from the eager copy's exact state (parameters, buffers, optimizer
state), so every piece is compared on identical inputs: loss, every gradient and the BatchNorm buffers after the
forward, then, with the eager gradients, the parameters and optimizer state after the compiled optimizer step.

Tolerance (both sides round, and compilation may reorder sums): a value at most `depth` operations deep is within
2·depth·u·(1 + max|ref|), depth = layers·(batch + width) + 16 for the forward and backward, and optim.differential's
N_OPS = 32 per optimizer step; u = float32 eps/2.
"""

from __future__ import annotations

import copy

from envcheck.checks.torch_compile.settings import apply_settings
from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.eager_step import BATCH, CLASSES, WIDTH, StepModel, optimizer, sync

STEPS, N_OPS, LAYERS = 3, 32, 4
BACKENDS = ("aot_eager", "aot_eager_decomp_partition", "inductor")
OPTIMIZERS = ("SGD", "AdamW")
# (backend, optimizer): every backend, and every optimizer under Inductor. The full product (six) compiled the two
# aot_eager backends' optimizer steps twice more for nothing they could find (about 9 s of a cold run on 2 cores).
PAIRS = (
    ("aot_eager", "AdamW"),
    ("aot_eager_decomp_partition", "SGD"),
    ("inductor", "SGD"),
    ("inductor", "AdamW"),
)


def step_comparisons(device: str, backend: str, opt_name: str) -> list[Comparison]:
    """STEPS steps, each compiled piece against eager from the same state."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    depth = LAYERS * (BATCH + WIDTH) + 16
    torch._dynamo.reset()
    eager = StepModel.build(device)
    opt_e = optimizer(opt_name, eager)
    twin = copy.deepcopy(eager)
    opt_c = optimizer(opt_name, twin)
    model_c = torch.compile(twin, backend=backend)
    step_c = torch.compile(opt_c.step, backend=backend)
    comps: list[Comparison] = []
    label = f"compiled step ({backend}, {opt_name})"
    for t in range(STEPS):
        sync(eager, opt_e, twin, opt_c)
        gen = torch.Generator().manual_seed(10 + t)
        x, y = (
            torch.randn(BATCH, 8, generator=gen).to(device),
            torch.randint(0, CLASSES, (BATCH,), generator=gen),
        )
        y = y.to(device)
        opt_e.zero_grad(set_to_none=True)
        opt_c.zero_grad(set_to_none=True)
        loss_e = eager(x, y)
        loss_e.backward()
        loss_c = model_c(x, y)
        loss_c.backward()
        comps.append(
            compare(
                loss_c.detach().reshape(1),
                loss_e.detach().reshape(1),
                op=f"{label} step {t} loss",
                device=device,
                dtype="float32",
                atol=2 * depth * u * (1 + float(loss_e.detach().abs())),
                rtol=0.0,
            )
        )
        for (name, p_e), p_c in zip(eager.named_parameters(), twin.parameters(), strict=True):
            comps.append(
                compare(
                    p_c.grad,
                    p_e.grad,
                    op=f"{label} step {t} grad {name}",
                    device=device,
                    dtype="float32",
                    atol=2 * depth * u * (1 + float(p_e.grad.abs().max())),
                    rtol=0.0,
                )
            )
            p_c.grad = p_e.grad.clone()  # the optimizer step is compared on identical gradients
        for (name, b_e), b_c in zip(eager.named_buffers(), twin.buffers(), strict=True):
            if b_e.is_floating_point():
                comps.append(
                    compare(
                        b_c,
                        b_e,
                        op=f"{label} step {t} buffer {name}",
                        device=device,
                        dtype="float32",
                        atol=2 * depth * u * (1 + float(b_e.abs().max())),
                        rtol=0.0,
                    )
                )
        opt_e.step()
        step_c()
        for (name, p_e), p_c in zip(eager.named_parameters(), twin.parameters(), strict=True):
            comps.append(
                compare(
                    p_c,
                    p_e,
                    op=f"{label} step {t} parameter {name} after optimizer step",
                    device=device,
                    dtype="float32",
                    atol=2 * N_OPS * u * (1 + float(p_e.detach().abs().max())),
                    rtol=0.0,
                )
            )
    return comps


def compile_train_step(ctx: Context) -> Result:
    """Forward, backward and optimizer step under torch.compile match eager on identical inputs, every backend."""
    apply_settings()
    comparisons: list[Comparison] = []
    problems: list[str] = []
    with numerics_mode():
        for device, (backend, opt_name) in ((d, pair) for d in check_devices() for pair in PAIRS):
            try:
                comparisons += step_comparisons(device, backend, opt_name)
            except Exception as exc:  # a compile that fails is compile.inductor's finding; here, say where
                problems.append(
                    f"compiled step ({backend}, {opt_name}) on {device} did not run: "
                    f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                )
    return comparisons_result(
        "compiled training step vs eager",
        comparisons,
        problems=problems,
        tolerances={
            "forward/backward": f"2·({LAYERS}·(batch+width)+16)·u·(1+|ref|)",
            "optimizer": f"2·{N_OPS}·u·(1+|p|)",
        },
        extra={"pairs": [f"{b}, {o}" for b, o in PAIRS]},
        remediation="torch.compile computes a different training step than eager here "
        "(a decomposition or codegen bug of this torch); train with "
        "backend='aot_eager' or eager until fixed, and report it with "
        "TORCH_COMPILE_DEBUG=1",
    )
