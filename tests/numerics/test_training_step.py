"""The training-step checks on this machine's real torch: their references are right (checked against
torch in float64 or the documentation's own numbers), their quick slices stay cheap (no sympy, no torch._dynamo),
and each option space reaches the options it claims. Injected faults per class: test_corpus.py (step_mechanisms)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from envcheck.core.check import Context, Level
from envcheck.core.result import Status
from envcheck.numerics import attention_backends as attention
from envcheck.numerics import embedding_options as embedding
from envcheck.numerics import lr_schedules as schedulers
from envcheck.numerics import mha, state_roundtrip
from envcheck.reference import schedulers as closed
from envcheck.reference.attention import sdpa_reference
from tests.helpers import ROOT

QUICK_NEW = (
    "attention.reference",
    "modules.train_eval",
    "embedding.reference",
    "swa.averaging",
    "dropout.structure",
    "losses.reference",
)


def test_sdpa_reference_equals_torch_math_in_float64() -> None:
    """The elementary-op reference agrees with torch's math backend in float64 (masks, causal, GQA), values and
    gradients: the reference itself is right."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for case in attention.sdpa_cases(quick=False):
        if case.dtype != "float32" or case.mask == "fully_masked_row":
            continue
        x = attention.case_inputs(case, seed=3)
        q, k, v = (x[n].double().requires_grad_(True) for n in ("q", "k", "v"))
        mask = x["mask"] if x["mask"] is None or x["mask"].dtype == torch.bool else x["mask"].double()
        ours, _ = sdpa_reference(q, k, v, mask, case.mask == "causal", case.scale)
        q2, k2, v2 = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        kw = {"attn_mask": mask, "is_causal": case.mask == "causal", "scale": case.scale}
        with sdpa_kernel(SDPBackend.MATH):
            theirs = torch.nn.functional.scaled_dot_product_attention(q2, k2, v2, enable_gqa=case.gqa, **kw)
        assert torch.allclose(ours, theirs, atol=1e-12), case.label
        dout = x["dout"].double()
        g_ours = torch.autograd.grad((ours * dout).sum(), (q, k, v))
        g_theirs = torch.autograd.grad((theirs * dout).sum(), (q2, k2, v2))
        assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(g_ours, g_theirs, strict=True)), (
            case.label
        )


def test_fully_masked_row_gives_zeros_in_the_reference() -> None:
    case = attention.SdpaCase("fully_masked_row", (5, 7), None, False, "float32")
    x = attention.case_inputs(case, seed=0)
    out, probs = sdpa_reference(x["q"].double(), x["k"].double(), x["v"].double(), x["mask"])
    assert (
        torch.equal(out[:, :, 1], torch.zeros_like(out[:, :, 1])) and float(probs[:, :, 1].abs().sum()) == 0.0
    )


def test_option_spaces_are_products_not_lists() -> None:
    assert len(attention.sdpa_cases(quick=False)) == 5 * 2 * 2 * 2 * 3
    assert len(mha.mha_cases(quick=False)) == 2**4 * 3 * 4 * 3 + 2 * 3 * 4 * 2 * 2
    assert {c.kpm for c in mha.mha_cases(quick=False)} == {"none", "bool", "float"}
    assert len(schedulers.scheduler_cases()) > 60
    found, source = state_roundtrip.configs("cpu")
    assert source == "optim_db"  # torch 2.13's own optimizer database
    assert {n for n, _, _ in found} >= {"SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adagrad", "Adamax", "ASGD"}
    assert any(kw.get("fused") for _, kw, _ in found) and any(kw.get("foreach") for _, kw, _ in found)


def test_state_configs_fall_back_when_optim_db_is_not_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "__version__", "9.9.0")
    found, source = state_roundtrip.configs("cpu")
    assert "optim.differential" in source and "pinned" in source and found


def test_module_sweep_skips_with_its_reason_on_an_unpinned_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck.numerics.module_sweep import module_sweep

    monkeypatch.setattr(torch, "__version__", "9.9.0")
    comps, problems, info = module_sweep("cpu")
    assert not comps and not problems and "pinned" in info["module_db"]


def test_scheduler_closed_forms_match_the_documentation_examples() -> None:
    """StepLR and MultiStepLR doc examples (lr 0.05, gamma 0.1), CosineAnnealingLR's end points."""
    step = closed.closed_form("StepLR", {"step_size": 30, "gamma": 0.1})
    assert [step(0.05, t) for t in (0, 29, 30, 59, 60)] == pytest.approx([0.05, 0.05, 0.005, 0.005, 0.0005])
    multi = closed.closed_form("MultiStepLR", {"milestones": [30, 80], "gamma": 0.1})
    assert [multi(0.05, t) for t in (29, 30, 79, 80)] == pytest.approx([0.05, 0.005, 0.005, 0.0005])
    cos = closed.closed_form("CosineAnnealingLR", {"T_max": 10, "eta_min": 0.001})
    assert cos(0.1, 0) == pytest.approx(0.1) and cos(0.1, 10) == pytest.approx(0.001)
    assert closed.plateau({"patience": 1, "factor": 0.5}, 1.0, [1.0, 1.0, 1.0, 1.0]) == [1.0, 1.0, 0.5, 0.5]


def test_embedding_check_finds_pytorch_190063_on_affected_torch() -> None:
    """On torch < 2.14 (CPU) the option space reaches embedding_bag's scale_grad_by_freq bug; on a fixed torch the
    same option sets pass. Either way, nothing else fails."""
    result = embedding.embedding_reference(Context(level=Level.FULL, allow_cpu=True))
    if tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 14):
        assert result.status is Status.WARN, result.summary
        assert list(result.measured["known_upstream_bugs"]) == [
            "https://github.com/pytorch/pytorch/issues/190063"
        ]
    else:
        assert result.status is Status.PASS, result.details


def test_quick_slices_import_neither_sympy_nor_dynamo() -> None:
    """The quick level's budget (bench/quick_run.py): the new quick checks must not pull in sympy (1-3 s cold) or
    torch._dynamo (~1-3 s); measured in a fresh interpreter, as a quick run's worker is."""
    code = (
        "import sys, torch\nfrom envcheck.checks.check_registry import registry\nfrom envcheck.core.check import Context\n"
        "from envcheck.core.execute import execute\n"
        f"for name in {QUICK_NEW!r}:\n"
        "    r = execute(registry()[name], Context(allow_cpu=True))\n"
        "    assert r.status.value == 'pass', (name, r.summary)\n"
        "print(sorted(m for m in ('sympy', 'torch._dynamo') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_quick_and_full_levels_of_the_new_checks() -> None:
    from envcheck.checks.check_registry import registry

    specs = registry()
    assert all(specs[n].level is Level.QUICK for n in QUICK_NEW)
    full = (
        "sched.closed_form",
        "train.state_roundtrip",
        "train.clip_options",
        "ddp.differential",
        "compile.train_step",
    )
    assert all(specs[n].level is Level.FULL for n in full)
    assert not math.isnan(specs["ddp.differential"].timeout_s)
