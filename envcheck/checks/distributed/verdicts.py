"""Judge the ranks' findings: correctness (#wrong, tolerances) and performance (busbw) separately.

Pure functions of the per-rank findings, shared by the single-node check and the torchrun entry.
"""

from __future__ import annotations

from typing import Any

from envcheck.core.result import Result, failed, passed, warned

WRONG_REMEDIATION = (
    "Wrong collective results mean silent data corruption: rerun with NCCL_P2P_DISABLE=1 and "
    "NCCL_PROTO=Simple to isolate the transport, check `nvidia-smi -q -d ECC` and dmesg for Xid errors, "
    "and do not train on this host until fixed"
)


def scope(backend: str, world: int) -> str:
    """E.g. `2 gloo ranks (CPU)`; calls out world size 1 on NCCL."""
    if backend == "nccl":
        if world == 1:
            return "1 NCCL rank (world size 1: NCCL init and the kernel ran, but no inter-GPU traffic)"
        return f"{world} NCCL ranks (one per GPU)"
    return f"{world} gloo rank{'s' if world != 1 else ''} (CPU)"


def _sum_wrong(findings: list[dict[str, Any]], *path: str) -> tuple[int, int]:
    wrong = elements = 0
    for found in findings:
        node: Any = found
        for key in path:
            node = node[key]
        wrong += int(node["wrong"])
        elements += int(node["elements"])
    return wrong, elements


def all_reduce_result(findings: list[dict[str, Any]], backend: str, world: int) -> Result:
    """float32, bfloat16 and float16 exact (#wrong over every element of every rank)."""
    measured: dict[str, Any] = {"backend": backend, "world_size": world}
    problems = []
    for dtype in ("float32", "bfloat16", "float16"):
        wrong, elements = _sum_wrong(findings, "all_reduce", dtype)
        measured[f"wrong_{dtype}"] = wrong
        measured[f"elements_{dtype}"] = elements
        if dtype != "float32":
            measured[f"max_abs_err_{dtype}"] = max(f["all_reduce"][dtype]["max_abs_err"] for f in findings)
            measured[f"tolerance_{dtype}"] = findings[0]["all_reduce"][dtype]["tolerance"]
        if wrong:
            problems.append(f"#wrong {wrong} of {elements} {dtype} elements")
    first = [(f["rank"], f["all_reduce"]["float32"]) for f in findings
             if f["all_reduce"]["float32"]["first_wrong_index"] is not None]
    expected = {"wrong_float32": 0, "wrong_bfloat16": 0, "wrong_float16": 0}
    if problems:
        detail = ""
        if first:
            rank, info = first[0]
            detail = (f"rank {rank}: first wrong float32 element {info['first_wrong_index']} = "
                      f"{info['first_wrong_value']}, expected {info['first_expected_value']}")
        return failed(f"all_reduce over {scope(backend, world)} gave wrong results: {'; '.join(problems)}",
                      WRONG_REMEDIATION, measured=measured, expected=expected, details=detail)
    return passed(f"all_reduce over {scope(backend, world)}: float32 exact on "
                  f"{measured['elements_float32']} elements (#wrong 0); bfloat16/float16 exact too",
                  measured=measured, expected=expected)


def collectives_result(findings: list[dict[str, Any]], backend: str, world: int) -> Result:
    """all_gather and broadcast must reproduce every element exactly."""
    measured: dict[str, Any] = {"backend": backend, "world_size": world}
    problems = []
    for op in ("all_gather", "broadcast"):
        wrong, elements = _sum_wrong(findings, op)
        measured[f"wrong_{op}"], measured[f"elements_{op}"] = wrong, elements
        if wrong:
            problems.append(f"{op} #wrong {wrong} of {elements}")
    expected = {"wrong_all_gather": 0, "wrong_broadcast": 0}
    if problems:
        return failed(f"collectives over {scope(backend, world)} gave wrong results: {'; '.join(problems)}",
                      WRONG_REMEDIATION, measured=measured, expected=expected)
    return passed(f"all_gather and broadcast (root {world - 1}) exact over {scope(backend, world)}",
                  measured=measured, expected=expected)


def sweep_rows(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rank 0's timing rows (already max over ranks) with #wrong summed over all ranks."""
    rows = [dict(row) for row in findings[0]["sweep"]]
    for row_index, row in enumerate(rows):
        row["wrong"] = sum(int(f["sweep"][row_index]["wrong"]) for f in findings)
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """An nccl-tests style text table."""
    lines = [f"{'size(B)':>12} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'#wrong':>7}"]
    lines += [f"{r['bytes']:>12} {r['time_us']:>11.1f} {r['algbw_gbps']:>12.3f} {r['busbw_gbps']:>12.3f} "
              f"{r['wrong']:>7}" for r in rows]
    return "\n".join(lines)


def busbw_result(findings: list[dict[str, Any]], backend: str, world: int, min_busbw: float | None,
                 strict: bool) -> Result:
    """Peak busbw over the sweep against an optional floor; wrong elements in the sweep fail."""
    rows = sweep_rows(findings)
    peak = max(rows, key=lambda r: r["busbw_gbps"])
    measured = {"backend": backend, "world_size": world, "peak_busbw_gbps": peak["busbw_gbps"],
                "peak_at_bytes": peak["bytes"], "rows": rows}
    expected: dict[str, Any] = {"wrong": 0}
    table = format_table(rows)
    wrong = sum(r["wrong"] for r in rows)
    head = f"all_reduce busbw peak {peak['busbw_gbps']:.3f} GB/s at {peak['bytes']} B over {scope(backend, world)}"
    if wrong:
        return failed(f"{head}, but #wrong {wrong} during the sweep", WRONG_REMEDIATION, measured=measured,
                      expected=expected, details=table)
    if min_busbw is not None:
        expected["min_busbw_gbps"] = min_busbw
        if peak["busbw_gbps"] < min_busbw:
            fix = ("Check `nvidia-smi topo -m` (PIX/NV# links expected, not SYS), that NCCL uses NVLink/P2P "
                   "(NCCL_DEBUG=INFO), and that containers run with --ipc=host")
            make = failed if strict else warned
            return make(f"{head}, below the {min_busbw:g} GB/s floor", fix, measured=measured,
                        expected=expected, details=table)
    if world == 1:
        head += " (busbw is 0 by definition with one rank)"
    return passed(head, measured=measured, expected=expected, details=table)
