"""Compare a bench document with an earlier one and flag figures that got worse beyond a threshold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envcheck.core.errors import UsageError


def load_baseline(path: str) -> dict[str, Any]:
    """Read an earlier `envcheck bench --json` file; bad input is a one-line usage error."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise UsageError(
            f"--baseline {path}: cannot read it ({exc.strerror}); pass a file from `envcheck bench --json`"
        ) from exc
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--baseline {path}: not JSON ({exc.msg} at line {exc.lineno}); pass a bench --json file"
        ) from exc
    if (
        not isinstance(doc, dict)
        or doc.get("kind") != "envcheck-bench"
        or not isinstance(doc.get("figures"), list)
    ):
        raise UsageError(
            f"--baseline {path}: not an envcheck bench report; create one with `envcheck bench --json FILE`"
        )
    return doc


def regressions(
    current: list[dict[str, Any]], baseline: list[dict[str, Any]], threshold_pct: float
) -> list[dict[str, Any]]:
    """Figures present in both whose value moved in the worse direction by more than `threshold_pct`."""
    before = {f["key"]: f for f in baseline}
    found = []
    for fig in current:
        old = before.get(fig["key"])
        if old is None or fig["better"] == "none" or not old["value"]:
            continue
        change = 100.0 * (fig["value"] - old["value"]) / abs(old["value"])
        worse = -change if fig["better"] == "higher" else change
        if worse > threshold_pct:
            found.append(
                {
                    "key": fig["key"],
                    "unit": fig["unit"],
                    "value": fig["value"],
                    "baseline": old["value"],
                    "change_pct": round(change, 2),
                    "threshold_pct": threshold_pct,
                }
            )
    return found
