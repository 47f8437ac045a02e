"""NVLinks of PCIe cards joined by NVLink bridges: the GPU's own link count (NVML field 91) is the chip's, not the
bridges'. A bridged H100 PCIe pair wires 12 of its 18 links, and the other 6 read inactive on a healthy node; only an
NVSwitch baseboard (NVSwitches on the PCI bus, or a GPU registered with an NVLink fabric) wires every link below the
count. So without a profile, a link below the count that is down is a fault on a switched node; on a bridged one it
is judged against the node's other GPUs of the same product, as a warning (the bridges fitted are not known to NVML).

Field record: HPE-Japan-Presales/e-learning gpu/h100/mgmt_gpu_on_dl380agen11.md (commit 80cd5bf): an HPE ProLiant
DL380a Gen11 with two NVIDIA H100 PCIe joined by bridges, driver 555.42.02; `nvidia-smi topo -m` NV12;
`nvidia-smi nvlink -s` lists links 0-17 of each GPU, links 4, 5, 10, 11, 16 and 17 `<inactive>`, the others at
26.562 GB/s; simpleP2P passes and p2pBandwidthLatencyTest measures 256 GB/s each way: a healthy node.

What is staged: nothing; the verdict on captured states (tests/checks/gpu_health/gpu_states.py's shape).
"""

from __future__ import annotations

from typing import Any

from envcheck.core.result import Status
from tests.checks.gpu_health.gpu_states import healthy_gpu, judge, state

NS = {"absent": "not supported"}
BRIDGED = (0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15)  # the record's active links


def h100_pcie(index: int, active: tuple[int, ...] = BRIDGED) -> dict[str, Any]:
    links = [
        {
            "link": n,
            "active": n in active,
            "replay": 0,
            "recovery": 0,
            "crc_flit": 0,
            "crc_data": 0,
            "ecc_data": 0,
        }
        for n in range(18)
    ]
    return healthy_gpu(index, name="NVIDIA H100 PCIe", fabric=NS, nvlink={"count": 18, "links": links})


def test_a_bridged_h100_pcie_pair_with_its_unwired_links_inactive_passes() -> None:
    result = judge(state(h100_pcie(0), h100_pcie(1)))
    assert result.status is Status.PASS, result.summary


def test_a_bridged_pair_with_fewer_links_up_than_its_peers_warns() -> None:
    """Its twin: a bridge of GPUs 2 and 3 lost (4 links fewer than the node's other pair)."""
    fewer = tuple(n for n in BRIDGED if n not in (12, 13, 14, 15))
    result = judge(state(h100_pcie(0), h100_pcie(1), h100_pcie(2, fewer), h100_pcie(3, fewer)))
    assert (result.status, result.code) == (Status.WARN, "gpu.nvlink_down"), result.summary
    assert "8 of its 18 NVLinks up" in result.summary and "12" in result.summary


def test_on_a_switched_node_a_link_down_still_drains() -> None:
    """The HGX twin: the same link down where NVSwitches wire every link (the fabric registered)."""
    hgx = healthy_gpu(0)
    hgx["nvlink"]["links"][4]["active"] = False
    result = judge(state(hgx, healthy_gpu(1)))
    assert (result.status, result.code) == (Status.FAIL, "gpu.nvlink_down"), result.summary
