"""compile.train_step through the real engine (its own "compile" worker, Inductor's cache in the run's temp dir):
the healthy twin on this machine's torch and C++ compiler. The injected fault (a wrong softmax-backward
decomposition, pytorch#152309) is in the corpus (tests/numerics/corpus/step_mechanisms.py)."""

from __future__ import annotations

import pytest

from envcheck.checks.torch_compile import train_step
from envcheck.core.result import Status
from envcheck.reference import eager_step
from tests.helpers import run_check

# long: a real compile on every backend; `make test` runs it in its `long` stream
pytestmark = [pytest.mark.slow, pytest.mark.long]


def test_compiled_step_matches_eager_on_every_backend() -> None:
    result = run_check("compile.train_step")
    assert result.status is Status.PASS, (result.summary, result.details)
    labels = " ".join(result.measured)
    for backend, opt in train_step.PAIRS:
        assert f"compiled step ({backend}, {opt})" in labels
    assert {b for b, _ in train_step.PAIRS} == set(train_step.BACKENDS)
    assert {o for b, o in train_step.PAIRS if b == "inductor"} == set(train_step.OPTIMIZERS)
    assert "after optimizer step" in labels and "buffer bn.running_mean" in labels


def test_sync_copies_state_without_aliasing() -> None:
    """The compiled twin starts every step from the eager state, in place and never aliased (an aliased momentum
    buffer would be stepped twice)."""
    import copy

    import torch

    eager = eager_step.StepModel.build("cpu")
    twin = copy.deepcopy(eager)
    opt_e, opt_c = eager_step.optimizer("SGD", eager), eager_step.optimizer("SGD", twin)
    for p in eager.parameters():
        p.grad = torch.ones_like(p)
    opt_e.step()
    eager_step.sync(eager, opt_e, twin, opt_c)
    for p_e, p_c in zip(eager.parameters(), twin.parameters(), strict=True):
        assert torch.equal(p_e, p_c) and p_e.data_ptr() != p_c.data_ptr()
        b_e, b_c = opt_e.state[p_e]["momentum_buffer"], opt_c.state[p_c]["momentum_buffer"]
        assert torch.equal(b_e, b_c) and b_e.data_ptr() != b_c.data_ptr()
