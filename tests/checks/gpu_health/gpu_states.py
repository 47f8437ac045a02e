"""The captured shapes of gpu.health that the pure-verdict tests build on: a healthy HGX H100 GPU as capture() records
it, a state around some GPUs, and the one way a test judges one (the verdict, with the bundle's shape checked too)."""

from __future__ import annotations

from typing import Any

from envcheck.checks.gpu_health.bundle_shape import validate
from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import Context
from envcheck.core.result import Result, Status
from envcheck.probe.nvml_fields import NOT_SUPPORTED

CTX = Context()
NODE_FINDING = (Status.WARN, Status.FAIL)  # rank <= DRAIN_RANK fails (drains), the rest warn
UUID0 = "GPU-00000000-1111-2222-3333-444444444444"  # synthetic: no real GPU's identity is used
UUID1 = "GPU-55555555-6666-7777-8888-999999999999"


def healthy_gpu(index: int = 0, **changes: Any) -> dict[str, Any]:
    """What capture() records for a healthy, idle H100 (values as NVML reports them)."""
    gpu: dict[str, Any] = {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": UUID1 if index else UUID0,
        "pci": f"00000000:{0x3B + index:02X}:00.0",
        "persistence": True,
        "ecc_volatile_corrected": 0,
        "ecc_volatile_uncorrected": 0,
        "ecc_aggregate_corrected": 0,
        "ecc_aggregate_uncorrected": 0,
        "retired_pages_sbe": 0,
        "retired_pages_dbe": 0,
        "retired_pages_pending": {"absent": NOT_SUPPORTED},
        "remapped_rows": {"corrected": 0, "uncorrected": 0, "pending": False, "failure": False},
        "pcie_gen": 5,
        "pcie_gen_max": 5,
        "pcie_width": 16,
        "pcie_width_max": 16,
        "clock_events": 0x1,
        "temperature_c": 33,
        "mig": False,
        # an HGX H100 on driver 580: registered with the NVLink fabric, no health reported (mask 0, summary 0),
        # 18 NVLinks all active (NVIDIA/k8s-test-infra's qx-h100.xml capture of a real node)
        "fabric": {
            "version": 3,
            "state": 3,
            "status": 0,
            "clique_id": 0,
            "health_mask": 0,
            "health_summary": 0,
        },
        "nvlink": {
            "count": 18,
            "links": [
                {
                    "link": n,
                    "active": True,
                    "replay": 0,
                    "recovery": 0,
                    "crc_flit": 0,
                    "crc_data": 0,
                    "ecc_data": 0,
                }
                for n in range(18)
            ],
        },
        "virtualization": "none",
        "recovery_action": 0,
        "inforom_valid": True,
        "repair_pending": {"channel": False, "tpc": False},
    }
    gpu.update(changes)
    return gpu


def held(mask: int) -> dict[str, Any]:
    """capture()'s second sample of a slowdown that held through the window: the same reasons set again."""
    return {"events_again": mask, "ns_before": {}, "ns_after": {}, "window_s": 1.0}


def state(
    *gpus: dict[str, Any],
    xid: list[str] | None = None,
    nvml_error: str | None = None,
    log_error: str | None = None,
) -> dict[str, Any]:
    return {
        "nvml_error": nvml_error,
        "driver_version": "580.95.05",
        "gpus": list(gpus),
        "nvml_hung": None,
        "kernel_log": {"source": "/dev/kmsg", "error": log_error, "xid": scan(xid or [])["xid"]},
    }


def judge(data: dict[str, Any]) -> Result:
    validate(data, "gpu_health")  # every case is also a well-formed bundle section
    return verdict(data, CTX)
