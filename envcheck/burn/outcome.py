"""A finished burn as results a scheduler can act on, each with its fault class and stable code:

- burn.corruption: a device that computed wrong bits is a node fault naming it (burn.sdc); two devices that disagree
  with nothing to say which is right are a node fault naming both (burn.sdc_unresolved). It carries the checksums
  per workload and model that `envcheck fleet` compares across nodes.
- burn.accuracy: every device agrees, but outside tolerance of the float64 reference: the software's arithmetic
  (burn.inaccurate, image).
- burn.stragglers: a slow device is a node warning (burn.straggler) unless far outside the fleet's baseline
  (burn.straggler_fleet, a node fault); it carries the throughput figures the fleet learns from.
- burn.run: only when the burn itself failed (a worker died, none started): an error, envcheck's own, never evidence.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from envcheck.burn import corruption, stragglers
from envcheck.burn.catalogue import every_workload
from envcheck.burn.coordinator import BurnRun
from envcheck.burn.measures import figures, label, sampled, units
from envcheck.burn.records import Tally
from envcheck.core.result import FaultClass, Result, errored, failed, passed, skipped, warned
from envcheck.reference.matmul_precision import env_cause

GPU_SDC_FIX = (
    "drain the node; nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i {i}; dcgmi diag -r 4 -i {i}; "
    "replace (RMA) the GPU if it recurs"
)
CPU_SDC_FIX = "take the node out; run the CPU vendor's diagnostics on core {i} (e.g. stress-ng --matrix); replace the CPU"
UNRESOLVED_FIX = (
    "compare this node's checksums with the fleet's (envcheck fleet burn-*.json), or burn longer; "
    "keep the node out of jobs until one device is named"
)
INACCURATE_FIX = (
    "the arithmetic of this software stack is wrong on this model: burn another image or torch/CUDA build, compare the "
    "checksums with the fleet's (envcheck fleet), and report it with this report"
)
STRAGGLER_FIX = (
    "nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE -i {i} names the clock-event reason; check cooling and power "
    "delivery; dcgmi diag -r 3 -i {i}"
)
CPU_STRAGGLER_FIX = (
    "check what else runs on core {i} and its cgroup's CPU quota (cpu.max or cpu.cfs_quota_us)"
)


def _index(tally: Tally, worker: int) -> str:
    hello = tally.workers[worker].hello if worker in tally.workers else {}
    return str(hello.get("index", worker) if hello.get("kind") == "cuda" else hello.get("core", worker))


def _gpu(tally: Tally) -> bool:
    return any(w.hello.get("kind") == "cuda" for w in tally.workers.values())


def _host() -> str:
    return socket.gethostname()


def checksums(tally: Tally, verdict: corruption.Verdict) -> list[dict[str, Any]]:
    """The checksum of each workload per model (what its devices agreed on, over `seeds` seeds), with the stack."""
    stacks = {
        str(w.hello.get("model")): {k: w.hello.get(k) for k in ("torch", "cuda", "cudnn")}
        for w in tally.workers.values()
    }
    return [
        {
            "model": model,
            "workload": workload,
            "checksum": digest,
            "seeds": seeds,
            "stack": stacks.get(model, {}),
        }
        for (model, workload), (digest, seeds) in sorted(verdict.checksums.items())
    ]


def corruption_result(tally: Tally, verdict: corruption.Verdict, problems: Sequence[str]) -> Result:
    """burn.corruption's result."""
    compared = sum(verdict.results.values())
    measured: dict[str, Any] = {
        "host": _host(),
        "results": {label(tally, i, True): n for i, n in sorted(verdict.results.items())},
        "checksums": checksums(tally, verdict),
        "wrong": [asdict(w) for w in verdict.wrong[:50]],
        "unresolved": [asdict(d) for d in verdict.unresolved[:50]],
    }
    if not compared:
        why = "; ".join(problems) or (
            "the burn ended before a round finished (the budget was spent starting the workers: give a longer "
            "--budget)"
        )
        return errored(f"no result to compare: {why}", measured=measured, crashed=bool(problems))
    bad = verdict.wrong_workers()
    if bad:
        lines = [_wrong_line(tally, verdict, i) for i in bad]
        measured.update(
            codes=[corruption.SDC],
            first_wrong_at_s=round(min(w.first_at for w in verdict.wrong), 3) if verdict.wrong else None,
        )
        fix = CPU_SDC_FIX if not _gpu(tally) else GPU_SDC_FIX
        return failed(
            lines[0] + (f" (+{len(lines) - 1} more devices)" if len(lines) > 1 else ""),
            " | ".join(f"{label(tally, i, True)}: {fix.format(i=_index(tally, i))}" for i in bad),
            measured=measured,
            fault_class=FaultClass.NODE,
            code=corruption.SDC,
            details="\n".join(lines),
        )
    if verdict.unresolved:
        first = verdict.unresolved[0]
        who = " and ".join(label(tally, i, True) for i in first.workers)
        what = "disagree bit for bit" if len(first.workers) > 1 else "gave two results for the same inputs"
        return failed(
            f"{who} {what} on {first.workload} (seed {first.seed}); neither their repeats nor the float64 reference "
            f"says which is wrong ({len(verdict.unresolved)} such workload-seed(s))",
            UNRESOLVED_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=corruption.UNRESOLVED,
        )
    models = corruption.models(tally)
    return passed(
        f"{compared} results on {len(verdict.results)} device(s) agree bit for bit "
        f"({len(tally.workload_names())} workloads, {len(models)} model(s): {', '.join(models)})",
        measured=measured,
    )


def _wrong_line(tally: Tally, verdict: corruption.Verdict, worker: int) -> str:
    mine = [w for w in verdict.wrong if w.worker == worker]
    count = sum(w.count for w in mine) + sum(n for (i, _), n in verdict.overflow.items() if i == worker)
    workloads: dict[str, int] = {}
    for w in mine:
        workloads[w.workload] = workloads.get(w.workload, 0) + w.count
    against = "its peers" if any(w.against == "peers" for w in mine) else "its own repeats"
    first = f", first at {min(w.first_at for w in mine):.1f} s" if mine else ""
    which = ", ".join(f"{n} x{c}" for n, c in sorted(workloads.items(), key=lambda kv: -kv[1]))
    return (
        f"{label(tally, worker)} computed wrong bits: {count} of {verdict.results.get(worker, 0)} results differ from "
        f"{against} ({which}){first}"
    )


def accuracy_result(tally: Tally, verdict: corruption.Verdict, tolerances: Mapping[str, float]) -> Result:
    """burn.accuracy's result: the error of what the devices agreed on against the float64 reference (a wrong
    result of one device is corruption's, not counted here)."""
    worst = dict(verdict.agreed_error)
    measured = {
        "worst_error": {w: (e if math.isfinite(e) else "inf") for w, e in worst.items()},
        "tolerance": {w: tolerances.get(w) for w in worst},
    }
    if not verdict.checksums and not verdict.inaccurate:
        return skipped("no workload finished a round", measured=measured)
    if verdict.inaccurate:
        first = verdict.inaccurate[0]
        # a float32 matmul or convolution run as TF32: the variable that asks for it, where one does (NGC's images)
        cause = env_cause() if first.workload in ("matmul.float32", "conv.float32") else None
        return failed(
            f"every {first.model} device agrees on {first.workload}, but it is {first.error:.3g} from the float64 "
            f"reference (tolerance {first.tolerance:g}; {len(verdict.inaccurate)} such workload-seed(s))"
            + (f"; {cause} in the environment makes float32 run as TF32" if cause else ""),
            f"unset {cause.split('=')[0]} (the image sets it) to burn true float32"
            if cause
            else INACCURATE_FIX,
            measured={**measured, "inaccurate": [asdict(d) for d in verdict.inaccurate]},
            fault_class=FaultClass.IMAGE,
            code=corruption.INACCURATE,
        )
    return passed(f"{len(worst)} workloads within tolerance of their float64 references", measured=measured)


def straggler_result(
    tally: Tally,
    samples: Sequence[Mapping[str, Any]],
    found: Sequence[stragglers.Slow],
    margin_pct: float,
    baseline: str | None,
) -> Result:
    """burn.stragglers' result, with every device's throughput figures."""
    figs = figures(tally)
    measured: dict[str, Any] = {
        "host": _host(),
        "figures": figs,
        "margin_pct": margin_pct,
        "baseline": baseline,
        "samples": sampled(tally, samples),
    }
    if not figs:
        return skipped("no workload finished a round: no throughput to compare", measured=measured)
    excused = [s for s in found if s.excused]
    found = [s for s in found if not s.excused]
    note = "".join(
        f"; {label(tally, s.worker, True)} measured {s.deficit_pct:g}% below, lost to the host's other work "
        f"({s.excused})"
        for s in excused
    )
    measured["excused"] = [asdict(s) for s in excused]
    if found:
        lines = [
            f"{label(tally, s.worker)}: {'; '.join(s.how)}"
            + (f" ({'; '.join(s.reasons)})" if s.reasons else " (no slowdown reason was sampled)")
            for s in found
        ]
        far = found[0].far
        code = stragglers.FLEET_FAR if far else stragglers.STRAGGLER
        fix = STRAGGLER_FIX if _gpu(tally) else CPU_STRAGGLER_FIX
        measured.update(codes=[code], stragglers=[asdict(s) for s in found])
        return (failed if far else warned)(
            lines[0] + (f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""),
            " | ".join(
                f"{label(tally, s.worker, True)}: {fix.format(i=_index(tally, s.worker))}" for s in found
            ),
            measured=measured,
            fault_class=FaultClass.NODE,
            code=code,
            details="\n".join(lines),
        )
    devices = len(tally.workers)
    against = f" and the fleet baseline {baseline}" if baseline else ""
    if devices < 2 and not baseline:
        return passed(
            "one device: nothing to compare inside the node; the fleet's baseline judges it (envcheck fleet)",
            measured=measured,
        )
    # devices measured too thinly to judge are said as such, never counted among those found within the margin
    short = stragglers.too_few_calls(tally, corruption.models(tally))
    thin = "too few calls to judge against their peers (fewer than {} of every workload): {}".format(
        stragglers.MIN_CALLS, ", ".join(label(tally, i, True) for i in short)
    )
    measured["too_few_calls"] = short
    if short and len(short) == devices and not baseline:
        return passed(f"no device compared: {thin}{note}", measured=measured)
    return passed(
        f"{devices - len(short)} device(s) within {margin_pct:g}% of the node's best{against} over the whole burn"
        f"{note}{'; ' + thin if short else ''}",
        measured=measured,
    )


def results(
    run: BurnRun,
    *,
    margin_pct: float = stragglers.DEFAULT_MARGIN_PCT,
    fleet: Mapping[str, stragglers.FleetLine] | None = None,
    baseline: str | None = None,
    far_pct: float = stragglers.DEFAULT_FAR_PCT,
) -> list[Result]:
    """The burn's results, in the order the report shows them."""
    tally = run.tally
    tolerances = {w.name: w.tolerance for w in every_workload()}
    verdict = corruption.judge(tally, tolerances)
    scale = {
        name: {"TFLOP/s": 1e-12, "GFLOP/s": 1e-9, "GB/s": 1e-9}.get(unit, 1.0)
        for name, unit in units(tally).items()
    }
    slow = stragglers.judge(
        tally,
        run.samples,
        corruption.models(tally),
        margin_pct=margin_pct,
        fleet=fleet,
        far_pct=far_pct,
        scale=scale,
    )
    out = [
        corruption_result(tally, verdict, run.problems).named("burn.corruption", run.elapsed_s),
        accuracy_result(tally, verdict, tolerances).named("burn.accuracy", run.elapsed_s),
        straggler_result(tally, run.samples, slow, margin_pct, baseline).named(
            "burn.stragglers", run.elapsed_s
        ),
    ]
    if run.problems:
        out.append(
            errored(
                "; ".join(run.problems),
                crashed=True,
                measured={"exit_codes": {str(k): v for k, v in run.exit_codes.items()}},
            ).named("burn.run", run.elapsed_s)
        )
    return out
