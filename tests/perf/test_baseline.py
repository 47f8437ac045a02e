"""--baseline flags figures that got worse beyond --threshold and exits 1; improvements pass."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from envcheck.perf.baseline import regressions


def _fig(key: str, value: float, better: str) -> dict[str, Any]:
    return {"key": key, "value": value, "unit": "u", "better": better}


def test_regression_directions() -> None:
    base = [_fig("rate", 100.0, "higher"), _fig("time", 10.0, "lower"), _fig("noise", 5.0, "none")]
    now = [_fig("rate", 85.0, "higher"), _fig("time", 10.5, "lower"), _fig("noise", 50.0, "none")]
    found = regressions(now, base, 10.0)
    assert [r["key"] for r in found] == ["rate"] and found[0]["change_pct"] == pytest.approx(-15.0)
    assert regressions(now, base, 20.0) == []
    slower = [_fig("time", 12.0, "lower")]
    assert [r["key"] for r in regressions(slower, base, 10.0)] == ["time"]
    assert regressions([_fig("rate", 150.0, "higher")], base, 10.0) == []


def test_injected_regression_exits_1(
    cpu_report: dict[str, Any],
    run_bench: Callable[..., int],
    write_json: Callable[[dict[str, Any]], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Pretend the machine used to be 10x faster: every rate is now a regression."""
    fast = copy.deepcopy(cpu_report["doc"])
    for fig in fast["figures"]:
        fig["value"] *= 10
    code = run_bench(
        "--quick",
        "--allow-cpu",
        "--only",
        "bench.cpu_matmul",
        "--cpu-threads",
        "1",
        "--baseline",
        write_json(fast),
        "--threshold",
        "10",
    )
    assert code == 1
    assert "REGRESSION cpu_matmul.float32.n1024" in capsys.readouterr().out


def test_bad_baseline_is_one_line_usage_error(
    run_bench: Callable[..., int], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert run_bench("--allow-cpu", "--baseline", str(bad)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not JSON" in err and "Traceback" not in err
