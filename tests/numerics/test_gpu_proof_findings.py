"""What the GPU proof on an H100 found (docs/gpu-evidence/2026-11-24-nvidia-h100-80gb-hbm3/call-3, torch
2.11.0+cu130), judged here on the CPU: each of the five checks that misjudged a healthy GPU gets the CUDA behaviour
injected at the seam where the check reads it, and must not fail; its fault twin, the same injection where it is a
fault, must still fail. Staged: the CUDA behaviour (replayed from the measurement); real: torch, the checks."""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import pytest
import torch

from envcheck.core.check import Context, Level
from envcheck.core.result import Status
from envcheck.numerics import attention_backends as attention
from envcheck.numerics import inplace_detection, module_sweep, state_roundtrip
from tests.helpers import ROOT

LERP_ON_CUDA = (
    "_foreach_lerp_ on cuda:0: backward after modifying a saved tensor in place did not raise "
    "(gradient silently used the new values)"
)


@pytest.mark.parametrize(
    ("missed", "status"),
    [
        ([LERP_ON_CUDA], Status.WARN),  # the measured torch 2.11 CUDA gap: a known bug, named
        (
            [LERP_ON_CUDA.replace("cuda:0", "cpu")],
            Status.FAIL,
        ),  # the CPU path bumps the version: a fault there
        ([LERP_ON_CUDA.replace("_foreach_lerp_", "_foreach_add_")], Status.FAIL),  # another op: a fault
        (
            [LERP_ON_CUDA, "add_ on cuda:0: backward after modifying a saved tensor in place did not raise"],
            Status.FAIL,
        ),
    ],
)
def test_inplace_detection_names_the_cuda_lerp_gap_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch, missed: list[str], status: Status
) -> None:
    monkeypatch.setattr(inplace_detection, "missed_detections", lambda device: missed)
    result = inplace_detection.autograd_inplace_detection(Context(allow_cpu=True))
    assert result.status is status, result.summary
    if status is Status.WARN:
        assert "ForeachTernaryOp.cu" in result.summary and "avoid the affected options" in (
            result.remediation or ""
        )


def test_inplace_detection_passes_on_this_torch() -> None:
    assert inplace_detection.autograd_inplace_detection(Context(allow_cpu=True)).status is Status.PASS


def _adagrad_only(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def run(*args: Any) -> Any:
        raise error  # what torch 2.11's Adagrad raises on the first step after add_param_group

    monkeypatch.setattr(
        state_roundtrip, "configs", lambda device: ([("Adagrad", {"lr": 0.1}, "default")], "optim_db")
    )
    monkeypatch.setattr(state_roundtrip, "run", run)


def test_state_roundtrip_reports_torch_2_11_adagrad_as_its_known_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    _adagrad_only(monkeypatch, KeyError("sum"))
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    result = state_roundtrip.train_state_roundtrip(Context(level=Level.FULL, allow_cpu=True))
    assert result.status is Status.WARN and "issues/53712" in result.summary, result.summary
    assert result.remediation == "pip install 'torch>=2.12' (fixed upstream)"


def test_state_roundtrip_keyerror_on_a_fixed_torch_is_a_fail_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _adagrad_only(monkeypatch, KeyError("sum"))
    monkeypatch.setattr(torch, "__version__", "2.12.0")
    result = state_roundtrip.train_state_roundtrip(Context(level=Level.FULL, allow_cpu=True))
    assert result.status is Status.FAIL and "KeyError: 'sum'" in result.summary, result.summary


def _doctored(row: int) -> Any:
    """A backend that answers like MATH, except for a garbage output row (cuDNN's fully masked row, measured)."""
    real = attention.run_backend

    def run(backend: str, case: Any, x: Any, device: str) -> Any:
        if backend != "FLASH_ATTENTION":
            return real(backend, case, x, device)
        got = real("MATH", case, x, device)
        got["out"] = got["out"].clone()
        got["out"][:, :, row] += 1.16  # the cuDNN row's size on the H100
        return got

    return run


@pytest.mark.parametrize(("row", "ok"), [(attention.MASKED_ROW, True), (0, False)])
def test_a_fully_masked_row_is_each_backends_own_but_a_kept_row_is_judged(
    monkeypatch: pytest.MonkeyPatch, row: int, ok: bool
) -> None:
    monkeypatch.setattr(
        attention,
        "sdpa_cases",
        lambda quick: [attention.SdpaCase("fully_masked_row", (5, 7), None, False, "float32")],
    )
    monkeypatch.setattr(attention, "run_backend", _doctored(row))
    comps, info = attention.sdpa_comparisons("cpu", quick=True)
    assert info["backends_run@cpu"].get("FLASH_ATTENTION") == 1  # the premise: the doctored backend ran
    flash = [c for c in comps if "FLASH_ATTENTION" in c.op]
    assert all(c.ok for c in flash) is ok, [c.describe() for c in flash if not c.ok]
    assert all(c.ok for c in comps if "MATH" in c.op)  # MATH is held to the zeros, row included


def test_the_masked_rows_output_gradient_is_zero_so_gradients_agree_under_any_convention() -> None:
    x = attention.case_inputs(attention.SdpaCase("fully_masked_row", (5, 7), None, False, "float32"), seed=0)
    assert float(x["dout"][:, :, attention.MASKED_ROW].abs().sum()) == 0.0
    assert float(x["dout"][:, :, 0].abs().sum()) > 0.0


@pytest.mark.parametrize(
    ("module", "training", "device", "refused"),
    [
        (torch.nn.LSTM(3, 4), False, "cuda:0", True),  # the H100 crash: eval() + cuDNN RNN + backward
        (torch.nn.Sequential(torch.nn.GRU(3, 4)), False, "cuda", True),  # an RNN inside another module
        (torch.nn.LSTM(3, 4), True, "cuda:0", False),  # train(): cuDNN has the backward
        (torch.nn.LSTM(3, 4), False, "cpu", False),  # the CPU kernels have an eval() backward
        (torch.nn.BatchNorm1d(3), False, "cuda:0", False),  # not an RNN
    ],
)
def test_eval_backward_is_refused_only_where_cudnn_refuses_it(
    monkeypatch: pytest.MonkeyPatch, module: Any, training: bool, device: str, refused: bool
) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)  # as on a CUDA build with cuDNN
    assert module_sweep.eval_backward_refused(module, training, device) is refused
    with torch.backends.cudnn.flags(
        enabled=False
    ):  # cuDNN switched off: torch's own RNN kernels, with backward
        assert module_sweep.eval_backward_refused(module, training, device) is False


@pytest.mark.parametrize(
    ("module", "shape", "steps"),
    [
        (
            torch.nn.GRU(2, 2, num_layers=2, bidirectional=True),
            (3, 2),
            3,
        ),  # the H100's failing input: unbatched, T=3
        (torch.nn.LSTM(2, 3), (5, 4, 2), 5),  # (T, N, H)
        (torch.nn.LSTM(2, 3, batch_first=True), (4, 7, 2), 7),  # (N, T, H)
        (torch.nn.BatchNorm1d(3), (4, 3), 1),  # not recurrent: one step
    ],
)
def test_a_recurrent_gradients_depth_counts_its_time_steps(
    module: Any, shape: tuple[int, ...], steps: int
) -> None:
    assert module_sweep.recurrence_steps(module, (torch.zeros(shape),)) == steps


def test_a_cross_device_round_trip_skips_options_the_target_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    plain, capturable = (
        ("Adam", {"lr": 0.1}, "default"),
        ("Adam", {"lr": 0.1, "capturable": True}, "capturable"),
    )
    monkeypatch.setattr(
        state_roundtrip,
        "configs",
        lambda device: ([plain, capturable] if device.startswith("cuda") else [plain], "optim_db"),
    )
    ran: list[str] = []

    def run(name: str, kw: dict[str, Any], *args: Any) -> Any:
        ran.append(kw.get("capturable") and "capturable" or "plain")
        raise RuntimeError("stop here")  # what ran is all this test asks

    monkeypatch.setattr(state_roundtrip, "run", run)
    _, problems, _ = state_roundtrip.roundtrip_comparisons("cuda:0", "cpu")
    assert set(ran) == {"plain"} and problems  # the capturable config never reaches a CPU parameter
    ran.clear()
    state_roundtrip.roundtrip_comparisons("cuda:0", "cuda:0")
    assert set(ran) == {"plain", "capturable"}  # on its own device it is judged


EVIDENCE = ROOT / "docs/gpu-evidence/2026-11-24-nvidia-h100-80gb-hbm3/call-4/five.json.gz"
FAILED_LINE = re.compile(
    r"^(nn\.\w+)\[train input (\d+)\] gradient \d+ on cuda:0 float32: .*abs err ([\d.e+-]+),"
    r".*tolerance atol ([\d.e+-]+) "
)


def test_the_recurrent_bound_holds_every_error_cudnn_showed() -> None:
    """Replayed from the H100 run (call-4): each cuDNN RNN gradient that failed the one-step bound, with the
    tolerance that run computed, is inside it once the input's time steps multiply the depth (the input shapes, and
    so the steps, are the database's on any device; the values are not, so the run's own tolerance is used)."""
    from envcheck.numerics.opdb import PINNED
    from envcheck.reference.torch_db import load_internal

    module_db, why = load_internal("common_modules", "module_db", PINNED)
    if module_db is None:
        pytest.skip(f"module_db: {why}")
    report = json.loads(gzip.decompress(EVIDENCE.read_bytes()))
    sweep = next(r for r in report["results"] if r["name"] == "modules.train_eval")
    failed = [FAILED_LINE.match(line) for line in sweep["details"].splitlines()]
    assert len(failed) == 7 and all(failed)  # the premise: the run's seven failures, all parsed
    for m in failed:
        assert m is not None
        name, n, err, atol = m[1], int(m[2]), float(m[3]), float(m[4])
        info = next(i for i in module_db if i.name == name)
        mi = info.module_inputs_func(
            info, device="cpu", dtype=torch.float64, requires_grad=True, training=True
        )[n]
        module = info.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs)
        steps = module_sweep.recurrence_steps(module, mi.forward_input.args)
        assert atol < err <= atol * steps, (m[0], steps)
