"""The fleet's baseline as a TOML `[baseline]` table: written by `envcheck fleet --write-baseline FILE`, kept on its
own or pasted into a node profile (envcheck.cluster.node_profiles accepts the table), and read back by
`envcheck fleet --baseline FILE|PROFILE` to judge new reports against a fleet's learned baseline."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from envcheck.cluster.fleet.learn import Baseline, GroupResult, Rule
from envcheck.cluster.fleet.sources import FleetInputError
from envcheck.core.text import one_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Stored = dict[str, dict[tuple[str, str], Baseline]]


def _quote(text: str) -> str:
    """A TOML basic string: JSON's escaping (valid TOML) of text with every control character already escaped."""
    return json.dumps(one_line(text), ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else "-inf"
    return repr(value) if isinstance(value, float) else str(value)


def render(groups: Sequence[GroupResult], rule: Rule, reports: int) -> str:
    """The TOML text of the baselines of `groups`."""
    from envcheck import __version__

    lines = [
        f"# envcheck fleet baseline (envcheck {__version__}): the median and MAD of each metric, per group,",
        f"# learned from {reports} node report(s). Keep it beside a profile or paste it into one;",
        "# `envcheck fleet --baseline THIS_FILE REPORTS...` judges new reports against it.",
        "[baseline]",
        f"rule = {_quote(rule.describe())}",
        f"margin_pct = {rule.margin_pct!r}",
        f"z_max = {rule.z_max!r}",
        "",
    ]
    for g in groups:
        lines += [f"[baseline.groups.{_quote(g.group)}]", f"nodes = {len(g.nodes)}", ""]
        names = [b.metric for b in g.baselines.values()]
        for b in g.baselines.values():
            key = b.metric if names.count(b.metric) == 1 else f"{b.metric} ({b.scope})"
            lines.append(f"[baseline.groups.{_quote(g.group)}.metrics.{_quote(key)}]")
            lines += [f"{k} = {_value(v)}" for k, v in b.to_dict(rule).items()]
            lines.append("")
    return "\n".join(lines)


def _field(table: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = table.get(key)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FleetInputError(f"{where}: {key} must be a {kind.__name__}, got {value!r}")
    return value


def parse(text: str, where: str) -> Stored:
    """Baselines by group and (metric, scope) from a baseline file or a profile holding a [baseline] table."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FleetInputError(f"{where}: not valid TOML ({exc})") from None
    groups = data.get("baseline", {}).get("groups") if isinstance(data.get("baseline"), dict) else None
    if not isinstance(groups, dict) or not groups:
        raise FleetInputError(
            f"{where}: no [baseline.groups] table; write one with `envcheck fleet REPORTS "
            "--write-baseline FILE`"
        )
    stored: Stored = {}
    for group, table in groups.items():
        metrics = table.get("metrics") if isinstance(table, dict) else None
        if not isinstance(metrics, dict):
            raise FleetInputError(f"{where}: group {group!r} has no metrics table")
        for key, m in metrics.items():
            at = f"{where}: [baseline.groups.{group!r}.metrics.{key!r}]"
            if not isinstance(m, dict):
                raise FleetInputError(f"{at} is not a table")
            better = _field(m, "better", str, at)
            if better not in ("higher", "lower"):
                raise FleetInputError(f"{at}: better must be higher or lower, got {better!r}")
            base = Baseline(
                _field(m, "metric", str, at),
                _field(m, "scope", str, at),
                _field(m, "unit", str, at),
                better,
                _field(m, "median", float, at),
                _field(m, "mad", float, at),
                _field(m, "values", int, at),
                _field(m, "nodes", int, at),
            )
            if not (math.isfinite(base.median) and math.isfinite(base.mad)) or base.mad < 0:
                raise FleetInputError(f"{at}: median and mad must be finite numbers, mad >= 0")
            stored.setdefault(group, {})[(base.metric, base.scope)] = base
    return stored
