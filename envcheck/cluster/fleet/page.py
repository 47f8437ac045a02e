"""`envcheck fleet --html`: one self-contained page (inline CSS and SVG, no script, nothing fetched): per group and
metric a plot with the nodes as points (a GPU or pair metric: each node's worst GPU or pair) and the baseline as a
band (from the outlier limit to its mirror above the median), outliers in red with a tooltip; then the outlier table
and the nodes per finding code. Every name from a report is escaped (html.escape after core.text.one_line)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from envcheck.cluster.fleet.fleet_text import checksum_line, violation_line
from envcheck.cluster.fleet.learn import Baseline, GroupResult
from envcheck.cluster.fleet.nodes import FleetNode
from envcheck.cluster.fleet.survey import Survey, to_dict
from envcheck.core.text import one_line

W, H, LEFT, RIGHT, TOP, BOTTOM = 580, 232, 64, 12, 40, 30
STYLE = """body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1240px}
h1{font-size:20px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;font-size:13px}th{background:#f3f3f3}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plot{border:1px solid #ddd;padding:4px}
.bad{color:#b00}.note{color:#555}svg text{font:11px system-ui,sans-serif;fill:#333}"""


def _e(value: Any) -> str:
    return html.escape(one_line(value), quote=True)


def _fmt(value: float) -> str:
    return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def node_points(nodes: Sequence[FleetNode], base: Baseline) -> list[tuple[str, float]]:
    """(node, value) per node for one metric: the node's own figure, or its worst GPU or pair."""
    worst = min if base.better == "higher" else max
    out = []
    for node in sorted(nodes, key=lambda n: n.node):
        values = [m.value for m in node.metrics if (m.name, m.scope) == (base.metric, base.scope)]
        if values:
            out.append((node.node, worst(values)))
    return out


def plot(base: Baseline, points: Sequence[tuple[str, float]], bad: set[str], limit: float) -> str:
    """One SVG scatter: x = nodes in name order, y = value; the band between `limit` and its mirror."""
    mirror = 2 * base.median - limit
    values = [v for _, v in points] + [limit, mirror]
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad

    def y(v: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (high - v) / (high - low)

    def x(i: int) -> float:
        return LEFT + (W - LEFT - RIGHT) * (i + 0.5) / max(1, len(points))

    band_top, band_bottom = sorted((y(limit), y(mirror)))
    scope = {"gpu": " (worst GPU per node)", "pair": " (worst pair per node)"}.get(base.scope, "")
    title = f"{base.metric} ({base.unit}){scope}"
    figures = f"median {_fmt(base.median)}, MAD {_fmt(base.mad)}, limit {_fmt(limit)}, {base.nodes} nodes"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img">',
        f"<title>{_e(title)}: {_e(figures)}</title>",
        f'<text x="{LEFT}" y="14" font-weight="bold">{_e(title)}</text>',
        f'<text x="{LEFT}" y="29">{_e(figures)}</text>',
        f'<rect x="{LEFT}" y="{band_top:.1f}" width="{W - LEFT - RIGHT}" height="{band_bottom - band_top:.1f}" '
        'fill="#cfe8cf" opacity="0.7"/>',
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(base.median):.1f}" y2="{y(base.median):.1f}" '
        'stroke="#2a7" stroke-width="1.5"/>',
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#999"/>',
    ]
    for v in (high - pad, base.median, low + pad):
        parts.append(f'<text x="{LEFT - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{_e(_fmt(v))}</text>')
    parts.append(
        f'<text x="{(W + LEFT) / 2:.0f}" y="{H - 8}" text-anchor="middle">{len(points)} nodes, by name</text>'
    )
    for i, (node, v) in enumerate(points):
        colour, r = ("#c00", 3.5) if node in bad else ("#36c", 2.2)
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{r}" fill="{colour}">'
            f"<title>{_e(node)}: {_e(_fmt(v))} {_e(base.unit)}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _group_section(g: GroupResult, nodes: Sequence[FleetNode], survey: Survey) -> list[str]:
    members = [n for n in nodes if n.group == g.group]
    out = [
        f"<h2>{_e(g.group)}: {len(g.nodes)} nodes, {len({v.node for v in g.violations})} outliers</h2>",
        '<div class="plots">',
    ]
    for base in g.baselines.values():
        bad = {v.node for v in g.violations if (v.metric, v.scope) == (base.metric, base.scope)}
        out.append(
            f'<div class="plot">{plot(base, node_points(members, base), bad, base.limit(survey.rule))}</div>'
        )
    out.append("</div>")
    if g.too_few:
        out.append(
            '<p class="note">Not judged (too few nodes): '
            + ", ".join(f"{_e(m)} ({n})" for m, n in g.too_few.items())
            + "</p>"
        )
    return out


def render_html(survey: Survey) -> str:
    """The whole page."""
    doc = to_dict(survey)
    read = doc["read"]
    body = [
        f"<h1>envcheck fleet: {read['nodes']} nodes, {len(doc['outlier_nodes'])} outliers</h1>",
        f"<p>Read {read['reports']} reports from {read['sources']} sources; {len(read['skipped'])} skipped, "
        f"{len(read['duplicates'])} duplicates. Rule: {_e(doc['rule']['text'])}. Baseline: "
        f"{_e(doc['rule']['baseline'])}.</p>",
        '<p class="note">Each plot: one point per node (for a GPU or pair metric, its worst GPU or pair), in name '
        "order; the green line is the median, the band runs from the outlier limit to its mirror above the median; "
        "red points are outliers (hover for the node).</p>",
    ]
    if read["skipped"]:
        body.append(
            "<ul>"
            + "".join(f"<li>skipped {_e(s['source'])}: {_e(s['why'])}</li>" for s in read["skipped"])
            + "</ul>"
        )
    for g in survey.groups:
        body += _group_section(g, survey.nodes, survey)
    body.append("<h2>Outlier nodes</h2><table><tr><th>node</th><th>group</th><th>violations</th></tr>")
    for o in doc["outlier_nodes"]:
        body.append(
            f'<tr><td class="bad">{_e(o["node"])}</td><td>{_e(o["group"])}</td><td>'
            + "<br>".join(_e(violation_line(v)) for v in o["violations"])
            + "</td></tr>"
        )
    body.append("</table><h2>Version drift</h2>")
    if doc["version_drift"]:
        body.append(
            "<table><tr><th>GPU model</th><th>version</th><th>majority</th><th>nodes that differ</th></tr>"
        )
        body += [
            f"<tr><td>{_e(d['model'])}</td><td>{_e(d['field'])}</td><td>{_e(d['majority'])} "
            f'({d["majority_nodes"]} nodes)</td><td class="bad">'
            + "<br>".join(f"{_e(n['node'])}: {_e(n['value'])}" for n in d["nodes"])
            + f" [{_e(d['code'])}]</td></tr>"
            for d in doc["version_drift"]
        ]
        body.append("</table>")
    else:
        body.append(
            '<p class="note">Driver, CUDA, torch, NCCL and cuDNN agree across each GPU model\'s nodes.</p>'
        )
    body.append("<h2>Burn checksums</h2>")
    if doc["burn_checksums"]:
        body.append(
            "<ul>"
            + "".join(f'<li class="bad">{_e(checksum_line(m))}</li>' for m in doc["burn_checksums"])
            + "</ul>"
        )
    else:
        body.append('<p class="note">Every burn checksum agrees across the nodes of its model and stack.</p>')
    body.append("<h2>Nodes per finding code</h2><table><tr><th>code</th><th>nodes</th></tr>")
    body += [f"<tr><td>{_e(c)}</td><td>{n}</td></tr>" for c, n in doc["codes"].items()]
    body.append("</table>")
    head = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>envcheck fleet</title>'
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<style>{STYLE}</style></head><body>"
    )
    return head + "\n".join(body) + "</body></html>\n"
