"""--plots writes real PNG files for the sweeps that were measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_plots_are_real_pngs(cpu_report: dict[str, Any]) -> None:
    plots = Path(cpu_report["dir"]) / "plots"
    names = sorted(p.name for p in plots.iterdir())
    assert names == ["copy_bandwidth.png", "matmul.png"]
    for path in plots.iterdir():
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000, path
