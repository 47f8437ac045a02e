"""PNG plots of the sweeps (matplotlib, Agg backend): one file per figure family with a series/x."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from envcheck.core.errors import UsageError

FAMILIES = {  # file stem -> (key prefixes, x label, log-x)
    "matmul": (("matmul.", "cpu_matmul."), "matrix size n (n x n @ n x n)", True),
    "busbw": (("all_reduce.",), "message size (bytes)", True),
    "copy_bandwidth": (("memory.", "cpu_memory."), "buffer size (bytes)", True),
}


def write_plots(figures: list[dict[str, Any]], directory: str) -> list[str]:
    """Write one PNG per family that has data into `directory`; return the paths written."""
    try:
        import matplotlib
    except ImportError as exc:
        raise UsageError("--plots needs matplotlib: pip install 'envcheck[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, (prefixes, xlabel, logx) in FAMILIES.items():
        series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        units = set()
        for fig in figures:
            if fig["key"].startswith(prefixes) and fig.get("series") and fig.get("x") is not None:
                series[fig["series"]].append((fig["x"], fig["value"]))
                units.add(fig["unit"])
        if not series:
            continue
        fig_, ax = plt.subplots(figsize=(8, 5))
        for name, points in sorted(series.items()):
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", label=name)
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(" / ".join(sorted(units)))
        ax.set_title(f"envcheck bench: {stem.replace('_', ' ')}")
        ax.grid(True, alpha=0.3)
        ax.legend()
        path = out / f"{stem}.png"
        fig_.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig_)
        written.append(str(path))
    return written


def write_timeline(timeline: dict[str, Any], directory: str, stem: str = "burn") -> str | None:
    """One PNG of a burn: the headline workload's throughput over time (top) and each device's clock or CPU share
    (bottom), one line per device; the path written, or None when nothing was measured over time."""
    try:
        import matplotlib
    except ImportError as exc:
        raise UsageError("--plots needs matplotlib: pip install 'envcheck[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (timeline.get("throughput") or {}, f"{timeline.get('workload')} ({timeline.get('unit')})"),
        (timeline.get("clocks") or {}, f"{timeline.get('clock_key')} ({timeline.get('clock_unit')})"),
    ]
    if not any(points for series, _ in panels for points in series.values()):
        return None
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    fig_, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for ax, (series, ylabel) in zip(axes, panels, strict=True):
        for name, points in sorted(series.items()):
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker=".", label=name)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if series:
            ax.legend(fontsize="small")
    axes[-1].set_xlabel("seconds since the burn began")
    axes[0].set_title("envcheck burn: throughput and clocks over time, one line per device")
    path = out / f"{stem}.png"
    fig_.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig_)
    return str(path)
