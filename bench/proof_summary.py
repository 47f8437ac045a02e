"""Summarise a GPU proof folder (bench/gpu_proof.sh) as Markdown; every section that has no input says why.

    python bench/proof_summary.py DIR [--note TEXT] [--out FILE]     # default FILE: DIR/SUMMARY.md

Reads what the proof wrote in DIR (both parts, once unpacked into one folder): steps-part*.tsv, nvidia-smi-q-*.txt,
the run, prolog, npd, health, opdb, local-rank and bench JSON reports, pytest-*.log. Prints figures only: nothing is
judged here beyond the targets it names (quick run <= 8 s, cold full run <= 60 s on one H100 or H200, and
no ERROR or FAIL at either level on a healthy GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARGIN_LISTED = 0.3  # list every CUDA comparison whose error is above 0.3 of its tolerance
TARGETS = {"run-quick-cold": 8.0, "run-quick-warm": 8.0, "run-full-cold": 60.0}
MODES = (
    "run-quick-cold",
    "run-quick-warm",
    "run-full-cold",
    "run-full-warm",
    "prolog",
    "prolog-node",
    "health",
    "preflight",
    "npd",
    "prolog-missing-gpu",
    "busy-prolog",
    "busy-prolog-node",
    "busy-health",
    "local-rank",
    "health-idle",
    "health-load",
    "opdb-1",
    "opdb-2",
    "opdb-3",
    "two-checks",
)
BAD = ("error", "fail")  # a healthy GPU ends both levels with neither


def read_steps(folder: Path) -> dict[str, dict[str, str]]:
    """Every step of every part: rc ('-' when it did not run), wall, note, command."""
    steps: dict[str, dict[str, str]] = {}
    for path in sorted(folder.glob("steps-part*.tsv")):
        for line in path.read_text().splitlines():
            name, rc, wall, note, command = (line.split("\t") + [""] * 5)[:5]
            if rc != "-" or name not in steps:  # a step that ran in one part wins over "part 2 of the proof"
                steps[name] = {"rc": rc, "wall": wall, "note": note, "command": command}
    return steps


def report(folder: Path, name: str) -> dict[str, Any] | None:
    """A JSON report the proof wrote, or None (absent or unreadable)."""
    try:
        data: dict[str, Any] = json.loads((folder / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    return data


def why_not(steps: dict[str, dict[str, str]], *names: str) -> str:
    """Why the steps behind a section did not run (the first reason recorded), or that no step recorded any."""
    for name in names:
        step = steps.get(name)
        if step and step["rc"] == "-":
            return f"not run: {step['note']}"
        if step:
            return f"not run: `{name}` exited {step['rc']} without its report"
    return f"not run: no step {', '.join(names)} in this proof"


def margins(measured: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """(label, margin) of every comparison in a result's measured values (the shared `margin` key)."""
    if isinstance(measured, dict):
        if isinstance(measured.get("margin"), (int, float)):
            yield path, float(measured["margin"])
        for key, value in measured.items():
            yield from margins(value, key if not path else f"{path}/{key}")


def host_section(folder: Path, note: str) -> list[str]:
    lines = ["## Host", ""]
    if note:
        lines += [f"**{note}**", ""]
    for path in sorted(folder.glob("host-part*.txt")):
        lines += ["```", path.read_text().strip(), "```"]
    smi = "\n".join(p.read_text() for p in sorted(folder.glob("nvidia-smi-q-part*.txt")))
    wanted = (
        "Product Name",
        "Driver Version",
        "CUDA Version",
        "Persistence Mode",
        "Compute Mode",
        "MIG Mode",
    )
    found = [line.strip() for line in smi.splitlines() if line.strip().split(":")[0].strip() in wanted]
    lines += (
        ["", *(f"- {line}" for line in dict.fromkeys(found))]
        if found
        else ["", "- nvidia-smi -q: no GPU fields"]
    )
    return [*lines, ""]


def time_section(steps: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## Time to verdict", "", "| mode | exit | wall (s) | target |", "|---|---|---|---|"]
    for name in MODES:
        step = steps.get(name)
        if step is None or step["rc"] == "-":
            lines.append(f"| {name} | - | - | {why_not(steps, name)} |")
            continue
        target = TARGETS.get(name)
        verdict = (
            ""
            if target is None
            else f"<= {target:g} s: {'met' if float(step['wall']) <= target else 'missed'}"
        )
        lines.append(f"| {name} | {step['rc']} | {float(step['wall']):.1f} | {verdict} |")
    return [*lines, ""]


def checks_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## Every check's verdict and time", ""]
    runs = {name: report(folder, name) for name in ("run-quick-cold", "run-full-cold", "run-full-warm")}
    if not any(runs.values()):
        return [*lines, why_not(steps, *runs), ""]
    names = list(dict.fromkeys(r["name"] for data in runs.values() if data for r in data["results"]))
    lines += ["| check | " + " | ".join(runs) + " |", "|---|" + "---|" * len(runs)]
    for check in names:
        cells = []
        for data in runs.values():
            result = next((r for r in (data or {}).get("results", []) if r["name"] == check), None)
            cells.append(
                "-"
                if result is None
                else f"{result['status']} {result['duration_s']:.2f}s"
                + (f" `{result['code']}`" if result.get("code") else "")
            )
        lines.append(f"| {check} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def verdict_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    """Every ERROR and FAIL of the quick and full runs (a healthy GPU has none), and the two checks verified on CPU
    only before the GPU proof ran them, from their own step."""
    lines = ["## ERROR and FAIL on this GPU", ""]
    runs = {
        n: report(folder, n) for n in ("run-quick-cold", "run-quick-warm", "run-full-cold", "run-full-warm")
    }
    for name, data in runs.items():
        if data is None:
            lines.append(f"- {name}: {why_not(steps, name)}")
            continue
        bad = [r for r in data.get("results", []) if r["status"] in BAD]
        lines.append(f"- {name}: {len(bad)} of {len(data.get('results', []))} checks ERROR or FAIL")
        lines += [f"  - {r['name']}: {r['status'].upper()} {r['summary'][:160]}" for r in bad]
    lines += ["", "## modules.train_eval and train.state_roundtrip", ""]
    data = report(folder, "two-checks") or runs.get("run-full-cold")
    if data is None:
        return [*lines, why_not(steps, "two-checks", "run-full-cold"), ""]
    for check in ("modules.train_eval", "train.state_roundtrip"):
        result = next((r for r in data.get("results", []) if r["name"] == check), None)
        if result is None:
            lines.append(f"- {check}: not in the report")
            continue
        pairs = (result.get("measured") or {}).get("device_pairs")
        lines.append(
            f"- {check}: {result['status'].upper()} in {result['duration_s']:.1f} s: {result['summary'][:200]}"
            + (f" (device pairs: {', '.join(pairs)})" if pairs else "")
        )
    return [*lines, ""]


def health_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## gpu.health at idle and under load", ""]
    found = {}
    for name in ("health-idle", "health-load"):
        data = report(folder, name)
        result = next((r for r in (data or {}).get("results", []) if r["name"] == "gpu.health"), None)
        found[name] = result
    if not any(found.values()):
        return [*lines, why_not(steps, "health-idle", "health-load"), ""]
    rows: dict[str, dict[str, str]] = {}
    for name, result in found.items():
        if result is None:
            continue
        rows.setdefault("status", {})[name] = f"{result['status']} ({result['summary'][:80]})"
        for i, gpu in enumerate(result["measured"].get("gpus") or []):
            for key, value in gpu.items() if isinstance(gpu, dict) else []:
                if not isinstance(value, (dict, list)):
                    rows.setdefault(f"gpu{i}.{key}", {})[name] = str(value)
    lines += ["| field | idle | under load |", "|---|---|---|"]
    lines += [f"| {k} | {v.get('health-idle', '-')} | {v.get('health-load', '-')} |" for k, v in rows.items()]
    return [*lines, ""]


def margin_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## Numerics margins on CUDA (error over tolerance)", ""]
    found: dict[str, float] = {}
    sources = [n for n in ("run-full-cold", "run-quick-cold", "opdb-1") if report(folder, n)]
    for name in sources:
        for result in (report(folder, name) or {}).get("results", []):
            for label, value in margins(result.get("measured")):
                if "cuda" in label:
                    found[f"{result['name']}: {label}"] = value
    if not sources:
        return [*lines, why_not(steps, "run-full-cold", "run-quick-cold"), ""]
    if not found:
        return [*lines, f"No CUDA comparison in {', '.join(sources)} (no GPU in these runs).", ""]
    high = sorted(((v, k) for k, v in found.items() if v > MARGIN_LISTED or math.isnan(v)), reverse=True)
    lines.append(
        f"{len(found)} CUDA comparisons in {', '.join(sources)}; largest margin {max(found.values()):.3g}; "
        f"{len(high)} above {MARGIN_LISTED}:"
    )
    lines += ["", "| margin | comparison |", "|---|---|", *(f"| {v:.3g} | {k} |" for v, k in high)]
    return [*lines, ""]


def opdb_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## ops.opdb, three times", ""]
    runs = {n: report(folder, n) for n in ("opdb-1", "opdb-2", "opdb-3")}
    if not any(runs.values()):
        return [*lines, why_not(steps, *runs), ""]
    lines += [
        "| run | status | time (s) | comparisons | largest margin | not judged |",
        "|---|---|---|---|---|---|",
    ]
    seen = []
    for name, data in runs.items():
        result = next((r for r in (data or {}).get("results", []) if r["name"] == "ops.opdb"), None)
        if result is None:
            lines.append(f"| {name} | {why_not(steps, name)} | | | | |")
            continue
        values = dict(margins(result["measured"]))
        seen.append((result["status"], sorted(values)))
        lines.append(
            f"| {name} | {result['status']} | {result['duration_s']:.1f} | {len(values)} | "
            f"{max(values.values(), default=0):.3g} | {len(result['measured'].get('not_judged') or [])} |"
        )
    stable = len({(s, tuple(k)) for s, k in seen}) <= 1
    lines += ["", f"Same verdict and same comparisons in every run: {'yes' if stable else 'NO'}."]
    return [*lines, ""]


def case_section(folder: Path, steps: dict[str, dict[str, str]], name: str, title: str) -> list[str]:
    lines = [f"## {title}", ""]
    data = report(folder, name)
    if data is None:
        return [*lines, why_not(steps, name), ""]
    step = steps.get(name, {})
    lines.append(f"exit {step.get('rc', '?')}, verdict {data.get('verdict')}, counts {data.get('counts')}")
    if name.startswith("busy-") and (folder / "busy-hold.txt").exists():
        held, total = ((folder / "busy-hold.txt").read_text().split() + ["0", "0"])[:2]
        lines.append(f"another process held {int(held) / 2**30:.1f} GiB of {int(total) / 2**30:.1f} GiB")
    lines += [f"- {r['name']}: {r['status']} — {r['summary'][:160]}" for r in data.get("results", [])]
    return [*lines, ""]


def bench_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## bench figures against the peak", ""]
    data = report(folder, "bench-quick")
    if data is None:
        return [*lines, why_not(steps, "bench-quick"), ""]
    figures = [f for u in data.get("units", []) for f in (u.get("measured") or {}).get("figures", [])]
    lines += ["| figure | value | peak | % of peak |", "|---|---|---|---|"]
    lines += [
        f"| {f['label']} | {f['value']} {f['unit']} | {f.get('peak') or '-'} | {f.get('pct_of_peak') or '-'} |"
        for f in figures
        if f.get("peak")
    ]
    return [*lines, ""]


def burn_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    """The burn-in (part 3): its verdicts, each device's sustained throughput per workload against the datasheet peak,
    and its clocks, temperature and power under load, as burn.json says."""
    lines = ["## burn-in: 2 minutes on every GPU", ""]
    data = report(folder, "burn")
    if data is None:
        return [*lines, why_not(steps, "burn"), ""]
    burn = (data.get("facts") or {}).get("burn") or {}
    lines.append(
        f"budget {burn.get('budget_s')} s, ran {burn.get('elapsed_s')} s, stopped by {burn.get('stopped_by')}, "
        f"workers ready after {burn.get('started_after_s')} s; rounds {burn.get('rounds')}"
    )
    lines += ["", "| check | status | summary |", "|---|---|---|"]
    lines += [f"| {r['name']} | {r['status']} | {r['summary']} |" for r in data.get("results", [])]
    slow = next((r for r in data.get("results", []) if r.get("name") == "burn.stragglers"), {})
    measured = slow.get("measured") or {}
    lines += ["", "| workload | device | sustained | peak | % of peak |", "|---|---|---|---|---|"]
    lines += [
        f"| {f.get('kind', '')[5:]} | {f.get('device_label')} | {f['value']} {f['unit']} | {f.get('peak') or '-'} | "
        f"{f.get('pct_of_peak') or '-'} |"
        for f in measured.get("figures", [])
    ]
    lines += [
        "",
        "| device | SM clock MHz (min/median/max) | temperature C (max) | power W (median) | clock events |",
    ]
    lines.append("|---|---|---|---|---|")
    for device, s in (measured.get("samples") or {}).items():
        clock = s.get("sm_clock_mhz") or {}
        lines.append(
            f"| {device} | {clock.get('min', '-')}/{clock.get('median', '-')}/{clock.get('max', '-')} | "
            f"{(s.get('temperature_c') or {}).get('max', '-')} | {(s.get('power_w') or {}).get('median', '-')} | "
            f"{s.get('clock_events') or '-'} |"
        )
    cost = burn.get("cost") or {}
    if cost:
        lines += ["", "| workload | s per call | share of compute | calls |", "|---|---|---|---|"]
        lines += [
            f"| {name} | {c['seconds_per_call']} | {c['share_pct']}% | {c['calls']} |"
            for name, c in cost.items()
        ]
    return [*lines, ""]


def pytest_section(folder: Path, steps: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## pytest", ""]
    for name in ("pytest-gpu", "pytest-rest"):
        log = folder / f"{name}.log"
        tail = (
            [line for line in log.read_text().splitlines() if re.search(r"\b(passed|failed|error)", line)]
            if log.exists()
            else []
        )
        lines.append(f"- {name}: {tail[-1].strip('= ') if tail else why_not(steps, name)}")
    return [*lines, ""]


def summarise(folder: Path, note: str = "") -> str:
    """The whole summary as Markdown."""
    steps = read_steps(folder)
    parts = [
        f"# GPU proof: {folder.name}",
        "",
        *host_section(folder, note),
        *time_section(steps),
        *checks_section(folder, steps),
        *verdict_section(folder, steps),
        *health_section(folder, steps),
        *margin_section(folder, steps),
        *opdb_section(folder, steps),
        *case_section(
            folder, steps, "busy-prolog", "Busy GPU: --for prolog while another process holds memory"
        ),
        *case_section(folder, steps, "local-rank", "One visible GPU, LOCAL_RANK=1 (srun --gpus-per-task=1)"),
        *case_section(
            folder,
            steps,
            "busy-prolog-node",
            "Busy GPU: the documented prolog (--expect-gpus, --timeout 120) while another process holds memory",
        ),
        *case_section(
            folder, steps, "busy-health", "Busy GPU: --for health while another process holds memory"
        ),
        *case_section(folder, steps, "prolog", "--for prolog"),
        *case_section(
            folder, steps, "prolog-node", "The documented prolog: --for prolog --expect-gpus N --timeout 120"
        ),
        *case_section(
            folder, steps, "prolog-missing-gpu", "Fault twin: --expect-gpus one more than the node has"
        ),
        *case_section(folder, steps, "health", "--for health"),
        *case_section(folder, steps, "preflight", "--for preflight"),
        *case_section(folder, steps, "npd", "--for npd"),
        *bench_section(folder, steps),
        *burn_section(folder, steps),
        *pytest_section(folder, steps),
    ]
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str]) -> int:
    """Write the summary; 2 when DIR is not a folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--note", default="", help="a line shown first (e.g. why there is no GPU)")
    parser.add_argument("--out", type=Path, help="default: DIR/SUMMARY.md")
    args = parser.parse_args(argv)
    if not args.dir.is_dir():
        print(f"proof_summary.py: {args.dir} is not a folder", file=sys.stderr)
        return 2
    out = args.out or args.dir / "SUMMARY.md"
    out.write_text(summarise(args.dir, args.note))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
