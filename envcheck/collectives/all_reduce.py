"""`dist.all_reduce`: float32 exact on every element (nccl-tests #wrong), bfloat16/float16 exact too."""

from __future__ import annotations

from typing import Any

from envcheck.collectives import pattern
from envcheck.collectives.rank_context import RankContext
from envcheck.collectives.verdicts import WRONG_REMEDIATION, scope, sum_wrong
from envcheck.core.check import DistOptions
from envcheck.core.result import FaultClass, Result, failed, passed

GPU_EXACT_COUNT = 4 << 20  # 16 MiB of float32
CPU_EXACT_COUNT = 1 << 18  # 1 MiB of float32
LOWP_COUNT = 1 << 16
LOWP_DTYPES = ("bfloat16", "float16")


def run(rc: RankContext) -> dict[str, Any]:
    """float32 all-reduce of known integer inputs, then bfloat16/float16 of exactly summable inputs."""
    import torch
    import torch.distributed as dist

    count = GPU_EXACT_COUNT if rc.device.type == "cuda" else CPU_EXACT_COUNT
    buf = pattern.exact_contribution(rc.rank, count, rc.device)
    if rc.hook is not None:  # tests inject faults here (envcheck.collectives.rank_hook)
        rc.hook("all_reduce", rc.rank, buf)
    rc.progress("all_reduce.float32")
    dist.all_reduce(buf)
    wrong, first = pattern.count_wrong(buf, pattern.exact_sum(rc.world, count, rc.device))
    exact: dict[str, Any] = {"elements": count, "wrong": wrong, "first_wrong_index": first}
    if first is not None:
        exact["first_wrong_value"] = float(buf[first].item())
        exact["first_expected_value"] = float(pattern.exact_sum(rc.world, 1, rc.device, first)[0].item())
    out = {"float32": exact}
    for name in LOWP_DTYPES:
        dtype = getattr(torch, name)
        low = pattern.lowp_contribution(rc.rank, rc.world, LOWP_COUNT, dtype, rc.device)
        rc.progress(f"all_reduce.{name}")
        dist.all_reduce(low)
        out[name] = pattern.lowp_check(low, rc.world, dtype)
    return out


def judge(findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions) -> Result:
    """#wrong over every element of every rank, for each dtype."""
    measured: dict[str, Any] = {"backend": backend, "world_size": world}
    problems = []
    for dtype in ("float32", *LOWP_DTYPES):
        wrong, elements = sum_wrong(findings, "all_reduce", dtype)
        measured[f"wrong_{dtype}"] = wrong
        measured[f"elements_{dtype}"] = elements
        if dtype != "float32":
            measured[f"max_abs_err_{dtype}"] = max(f["all_reduce"][dtype]["max_abs_err"] for f in findings)
            measured[f"tolerance_{dtype}"] = findings[0]["all_reduce"][dtype]["tolerance"]
        if wrong:
            problems.append(f"#wrong {wrong} of {elements} {dtype} elements")
    first = [
        (f["rank"], f["all_reduce"]["float32"])
        for f in findings
        if f["all_reduce"]["float32"]["first_wrong_index"] is not None
    ]
    expected = {"wrong_float32": 0, "wrong_bfloat16": 0, "wrong_float16": 0}
    if problems:
        detail = ""
        if first:
            rank, info = first[0]
            detail = (
                f"rank {rank}: first wrong float32 element {info['first_wrong_index']} = "
                f"{info['first_wrong_value']}, expected {info['first_expected_value']}"
            )
        return failed(
            f"all_reduce over {scope(backend, world)} gave wrong results: {'; '.join(problems)}",
            WRONG_REMEDIATION,
            measured=measured,
            expected=expected,
            details=detail,
            fault_class=FaultClass.NODE,
        )
    return passed(
        f"all_reduce over {scope(backend, world)}: float32 exact on "
        f"{measured['elements_float32']} elements (#wrong 0); bfloat16/float16 exact too",
        measured=measured,
        expected=expected,
    )
