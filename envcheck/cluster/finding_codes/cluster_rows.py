"""The finding-code rows of many GPUs and nodes (collectives, performance, the fleet), and the catch-all."""

from __future__ import annotations

from envcheck.cluster.finding_codes.common_fixes import CONFIG, DRAIN, FLEET_FIX, IMAGE, NODE
from envcheck.cluster.fleet import drift, learn
from envcheck.collectives import crossnode_codes as codes
from envcheck.collectives import pair_verdict
from envcheck.collectives.sweep import BUSBW_LOW
from envcheck.core.findings import Code
from envcheck.perf import relative

_DIST = [
    Code(
        codes.MISSING_RANK,
        "a rank never joined the multi-node roll call (Slurm's look on its node says whether its task ran)",
        NODE,
        "read that rank's own line in the job output; check the named node and what runs before envcheck there",
    ),
    Code(
        codes.UNRESOLVED,
        "MASTER_ADDR does not resolve on some node, or resolves there to a stale address",
        NODE,
        "fix DNS or /etc/hosts on the named nodes",
    ),
    Code(
        codes.MASTER_ELSEWHERE,
        "MASTER_ADDR names a host that is not rank 0's node: no rank can host the store there",
        CONFIG,
        "set MASTER_ADDR to rank 0's node, or leave it unset under srun",
    ),
    Code(
        codes.PORT_TAKEN,
        "the rendezvous port is held on rank 0's node (the holding process is named)",
        CONFIG,
        "stop the leftover process, or pick another MASTER_PORT (or let envcheck derive it from the job id)",
    ),
    Code(
        codes.PORT_BLOCKED,
        "a firewall drops or rejects connections to the rendezvous port while rank 0 listens there",
        NODE,
        "allow TCP MASTER_PORT into rank 0's node from the job's nodes",
    ),
    Code(
        codes.INTERFACE,
        "NCCL/gloo interface variables (or NCCL_IB_HCA) select nothing usable on some node",
        CONFIG,
        "set NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME to an interface every node has",
    ),
    Code(
        codes.VERSIONS,
        "the nodes run different torch, NCCL, envcheck or Python versions",
        IMAGE,
        "run the same image on every node",
    ),
    Code(
        codes.CLOCK_SKEW,
        "a node's clock differs from the Slurm controller's past torch elastic's keep-alive",
        NODE,
        "synchronise the clocks (chrony/NTP)",
    ),
    Code(
        codes.TRANSPORT_LOOPBACK,
        "the backend's address on a node is a loopback address (its host name resolves to 127.0.1.1)",
        NODE,
        "map the host name to the node's own address in /etc/hosts, or set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME",
    ),
    Code(
        codes.TRANSPORT_NO_CARRIER,
        "the interface the backend uses on a node is up but has no carrier",
        NODE,
        "check the cable or switch port, or point the backend at another interface",
    ),
    Code(
        codes.TRANSPORT_BLOCKED,
        "a firewall lets the rendezvous port through but not the backend's own (ephemeral) ports",
        NODE,
        "allow TCP between the job's nodes on the ephemeral port range, not only MASTER_PORT",
    ),
    Code(
        codes.TRANSPORT_NO_DATA,
        "a connection between nodes opened but data did not move over it (where it stopped, the probe cannot tell)",
        NODE,
        "check the route each named node takes to the other (`ip route get <address>`) and any filter on the way",
    ),
    Code(
        codes.TRANSPORT_SLOW,
        "a link between nodes is far slower than the others (a warning: slow is not broken)",
        NODE,
        "check the named node's traffic shaping (tc), link speed and errors (ethtool)",
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
