"""A GPU's clock slowdowns from NVML's clock-event reasons, judged only when they held: nvml.h says HW slowdown "may be
also reported during PState or clock change", so capture samples a flagged GPU again after a window, with the
slowdowns' cumulative durations (fields 269-271). DCGM warns when the violation time grows in its window
(MonitorThermal, MonitorPower); gpud counts HW slowdowns in 6 of 10 minutes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.probe.nvml_fields import HW_POWER_BRAKE, HW_SLOWDOWN, HW_THERMAL, SW_THERMAL

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
CLOCKS_SLOWDOWN = "gpu.clocks_slowdown"

# Of NVML's clock-event reasons (probe.nvml_fields), only these warn: idle, application clocks, SW power cap and sync boost are normal operation.
SLOWDOWNS = {
    HW_THERMAL: "HW thermal slowdown",
    HW_POWER_BRAKE: "HW power brake slowdown",
    SW_THERMAL: "SW thermal slowdown",
    HW_SLOWDOWN: "HW slowdown",
}
# The slowdowns' cumulative-duration fields (probe.nvml_health.FI_SLOWDOWN_NS) by reason bit; HW slowdown has none.
_DURATION = {SW_THERMAL: "sw_thermal", HW_THERMAL: "hw_thermal", HW_POWER_BRAKE: "hw_power_brake"}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def sustained(gpu: Mapping[str, Any]) -> list[int]:
    """The slowdown reasons that held through capture's second sample: still set after the window, or whose
    cumulative duration grew in it."""
    first = _int(gpu.get("clock_events"))
    second = _dict(gpu.get("slowdown"))
    if not first or not second:
        return []
    again = _int(second.get("events_again")) or 0
    before, after = _dict(second.get("ns_before")), _dict(second.get("ns_after"))
    held = []
    for bit in SLOWDOWNS:
        if not first & bit:
            continue
        name = _DURATION.get(bit)
        late, early = _int(after.get(name)) if name else None, _int(before.get(name)) if name else None
        if again & bit or (late is not None and late > (early or 0)):
            held.append(bit)
    return held


def slowdown(gpu: Mapping[str, Any]) -> tuple[str, str] | None:
    """(problem, fix template) for slowdowns that held, else None."""
    held = sustained(gpu)
    if not held:
        return None
    temp = _int(gpu.get("temperature_c"))
    thermal = bool({HW_THERMAL, SW_THERMAL} & set(held))
    fix = (
        "check cooling: fans, airflow, inlet temperature (nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {i})"
        if thermal
        else "the chassis asserted power brake: check the PSUs and power delivery "
        "(nvidia-smi -q -d POWER,PERFORMANCE -i {i})"
        if HW_POWER_BRAKE in held
        else "nvidia-smi -q -d PERFORMANCE -i {i} names the cause; check cooling and power delivery"
    )
    window = _dict(gpu.get("slowdown")).get("window_s")
    during = f" through a {window:.1f} s window" if isinstance(window, (int, float)) else ""
    at = f" at {temp} C" if temp is not None else ""
    return f"clocks held down by {', '.join(SLOWDOWNS[bit] for bit in held)}{during}{at}", fix
