"""`envcheck bench` as a user meets it: bad input, no GPU, and the engine's timeouts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from envcheck.perf.units import GPU_UNITS


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--threshold", "-5"], "--threshold"),
        (["--timeout", "0"], "--timeout"),
        (["--cpu-ranks", "1"], "--cpu-ranks"),
        (["--allow-cpu", "--only", "bench.nope"], "unknown check name"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    run_bench: Callable[..., int], capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    assert run_bench(*argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_cpu_host_without_allow_cpu_says_how(
    run_bench: Callable[..., int], no_gpu: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_bench("--quick") == 2
    assert "--allow-cpu" in capsys.readouterr().err


def test_whole_run_timeout_is_enforced_by_the_engine(
    run_bench: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    """0.5 s cannot even import torch in the worker: the engine kills it and bench exits 1."""
    assert run_bench("--quick", "--allow-cpu", "--timeout", "0.5") == 1
    assert "timed out" in capsys.readouterr().err


def test_gpu_units_skip_with_reason_on_cpu(
    run_bench: Callable[..., int], no_gpu: None, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ",".join(s.name for s in GPU_UNITS)
    assert run_bench("--quick", "--allow-cpu", "--only", names) == 0
    out = capsys.readouterr().out
    for spec in GPU_UNITS:
        assert f"skipped {spec.name}: no CUDA device" in out
