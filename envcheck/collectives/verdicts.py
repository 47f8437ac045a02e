"""The shared verifier's verdict side: #wrong summed over ranks, scopes, combining results, sweep tables.

Pure functions of the per-rank findings, shared by every collective module, the single-node checks
and the torchrun entry. Each collective's own `judge` lives in its module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envcheck.collectives.interface_rules import judge_variable
from envcheck.core.result import FaultClass, Result, Status, failed, passed

WRONG_REMEDIATION = (
    "Wrong collective results mean silent data corruption: rerun with NCCL_P2P_DISABLE=1 and "
    "NCCL_PROTO=Simple to isolate the transport, check `nvidia-smi -q -d ECC` and dmesg for Xid errors, "
    "and do not train on this host until fixed"
)


# What a rank shows when its backend found no interface for the variable. gloo, from this host's torch 2.13:
# `... device.cc:84] ifa != nullptr. Unable to find address for: nosuch0`, and for an empty name between commas
# `GlooDeviceFactory::makeTCPDevice(): interface or hostname can't be empty`. NCCL: `NCCL WARN Bootstrap : no socket
# interface found` (https://github.com/pytorch/pytorch/issues/29482, NCCL_SOCKET_IFNAME=eth0), and from NCCL 2.27
# `ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)`
# (https://github.com/NVIDIA/nccl/issues/1837, NCCL_SOCKET_IFNAME naming a missing interface).
INTERFACE_ERRORS = (
    (
        "GLOO_SOCKET_IFNAME",
        re.compile(r"Unable to find address for: |makeTCPDevice\(\): interface or hostname can't be empty"),
    ),
    (
        "NCCL_SOCKET_IFNAME",
        re.compile(r"no socket interface found|is neither AF_INET\(2\) nor AF_INET6\(10\)"),
    ),
)


def interface_cause(
    text: str, env: Mapping[str, str], interfaces: list[dict[str, Any]]
) -> tuple[str, str] | None:
    """(cause, fix) when the ranks' output shows their backend finding no socket interface and the variable they
    ran with selects none of `interfaces` (envcheck.checks.network's reading); None otherwise."""
    for var, pattern in INTERFACE_ERRORS:
        if var in env and pattern.search(text):
            finding = judge_variable(var, env[var], {"interfaces": interfaces, "env": dict(env)})
            if finding.status is Status.FAIL and finding.fix:
                return finding.text, finding.fix
    return None


def scope(backend: str, world: int) -> str:
    """E.g. `2 gloo ranks (CPU)`; calls out world size 1 on NCCL."""
    if backend == "nccl":
        if world == 1:
            return "1 NCCL rank (world size 1: NCCL init and the kernel ran, but no inter-GPU traffic)"
        return f"{world} NCCL ranks (one per GPU)"
    return f"{world} gloo rank{'s' if world != 1 else ''} (CPU)"


def sum_wrong(findings: list[dict[str, Any]], *path: str) -> tuple[int, int]:
    """(#wrong, elements) summed over every rank's findings at `path`."""
    wrong = elements = 0
    for found in findings:
        node: Any = found
        for key in path:
            node = node[key]
        wrong += int(node["wrong"])
        elements += int(node["elements"])
    return wrong, elements


def exact_op_result(
    findings: list[dict[str, Any]], step: str, label: str, backend: str, world: int
) -> Result:
    """PASS when every element of `step` on every rank was exact, else FAIL with #wrong."""
    wrong, elements = sum_wrong(findings, step)
    measured: dict[str, Any] = {
        "backend": backend,
        "world_size": world,
        f"wrong_{step}": wrong,
        f"elements_{step}": elements,
    }
    expected = {f"wrong_{step}": 0}
    if wrong:
        return failed(
            f"{label} over {scope(backend, world)} gave wrong results: #wrong {wrong} of {elements}",
            WRONG_REMEDIATION,
            measured=measured,
            expected=expected,
            fault_class=FaultClass.NODE,
        )
    return passed(f"{label} exact over {scope(backend, world)}", measured=measured, expected=expected)


def combine(results: list[Result]) -> Result:
    """One result for a check that covers several collectives: bad if any is bad, all measurements."""
    if len(results) == 1:
        return results[0]
    measured = {k: v for r in results for k, v in r.measured.items()}
    expected = {k: v for r in results for k, v in r.expected.items()}
    bad = [r for r in results if r.status.is_bad]
    if bad:
        return failed(
            "; ".join(r.summary for r in bad),
            bad[0].remediation or WRONG_REMEDIATION,
            measured=measured,
            expected=expected,
            fault_class=bad[0].fault_class or FaultClass.NODE,
            details="\n".join(r.details for r in bad if r.details),
        )
    return passed("; ".join(r.summary for r in results), measured=measured, expected=expected)


def sweep_rows(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rank 0's timing rows (already max over ranks) with #wrong summed over all ranks."""
    rows = [dict(row) for row in findings[0]["sweep"]]
    for row_index, row in enumerate(rows):
        row["wrong"] = sum(int(f["sweep"][row_index]["wrong"]) for f in findings)
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """An nccl-tests style text table."""
    lines = [f"{'size(B)':>12} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'#wrong':>7}"]
    lines += [
        f"{r['bytes']:>12} {r['time_us']:>11.1f} {r['algbw_gbps']:>12.3f} {r['busbw_gbps']:>12.3f} "
        f"{r['wrong']:>7}"
        for r in rows
    ]
    return "\n".join(lines)
