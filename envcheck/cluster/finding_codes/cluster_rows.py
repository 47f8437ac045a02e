"""The finding-code rows of many GPUs and nodes (collectives, performance, the fleet), and the catch-all."""

from __future__ import annotations

from envcheck.cluster.finding_codes.common_fixes import CONFIG, DRAIN, FLEET_FIX, IMAGE, NODE
from envcheck.cluster.fleet import drift, learn
from envcheck.collectives import crossnode, pair_verdict
from envcheck.collectives.sweep import BUSBW_LOW
from envcheck.core.findings import Code
from envcheck.perf import relative

_DIST = [
    Code(
        crossnode.MISSING_RANK,
        "a rank never joined the multi-node roll call",
        NODE,
        "check the named node's network and that it ran the same command",
    ),
    Code(
        crossnode.UNRESOLVED,
        "a node's name does not resolve from another node",
        NODE,
        "fix DNS or /etc/hosts on the named nodes",
    ),
    Code(
        crossnode.INTERFACE,
        "NCCL/gloo interface variables name no usable interface",
        CONFIG,
        "set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to an interface every node has",
    ),
    Code(
        crossnode.VERSIONS,
        "the nodes run different torch, NCCL, envcheck or Python versions",
        CONFIG,
        "run the same image on every node",
    ),
    Code(
        crossnode.CLOCK_SKEW,
        "the nodes' clocks differ past torch elastic's keep-alive",
        NODE,
        "synchronise the clocks (chrony/NTP)",
    ),
    Code(
        crossnode.PORT_TAKEN,
        "the rendezvous port is taken on the master node",
        CONFIG,
        "pick another MASTER_PORT (or let envcheck derive it from the job id)",
    ),
    Code(
        pair_verdict.SLOW_CODE,
        "a node pair's bus bandwidth is below the fleet's",
        NODE,
        pair_verdict.SLOW_FIX,
    ),
    Code(
        pair_verdict.WRONG_CODE,
        "a node pair's all-reduce gives wrong elements: data corruption",
        NODE,
        "check both nodes' NICs and dmesg; keep them out of jobs until fixed",
    ),
    Code(
        BUSBW_LOW,
        "the all-reduce bus bandwidth is below --min-busbw",
        NODE,
        "check NVLink/NVSwitch and the NCCL transport (NCCL_DEBUG=INFO)",
    ),
    Code(
        "dist.busbw.fail",
        "dist.busbw's failure: a #wrong element in the all-reduce sweep (data corruption)",
        NODE,
        DRAIN,
    ),
]

_PERF = [
    Code(kind.code, f"a GPU (or pair) whose {kind.label} is below the node's best", NODE, kind.fix)
    for kind in relative.KINDS.values()
]

_FLEET = [
    Code(
        code,
        f"a node's {code.split('.', 1)[1].replace('_', ' ')} figure is an outlier against the fleet's "
        "baseline",
        NODE,
        FLEET_FIX,
    )
    for code in learn.CODES
] + [
    Code(
        drift.DRIVER_DRIFT,
        "a node's NVIDIA driver differs from the driver of most nodes of its GPU model (it missed a rollout)",
        NODE,
        "bring the node to the majority's driver (or drain it) before it runs jobs with the others",
    ),
    Code(
        drift.STACK_DRIFT,
        "a node's CUDA, torch, NCCL or cuDNN differs from most nodes of its GPU model: mixed NCCL versions across "
        "one job's ranks hang or fail its collectives",
        IMAGE,
        "run one image (or venv) on every node of a job: pull the fleet's tag by digest on this node",
    ),
]

_DEFAULT = [
    Code(
        "<check>.<status>",
        "a check's warning, failure or error that names no code of its own "
        "(an error has no fault class: envcheck's own failure)",
        None,
        "see the result's remediation",
    )
]


ROWS = [*_DIST, *_PERF, *_FLEET, *_DEFAULT]
