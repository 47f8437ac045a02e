"""The node checks: torch-free, inline in the envcheck process, each bounded by its own budgeted probe (a child
for the CUDA driver API, a thread for NVML). `--for prolog|npd` runs them, with gpu.health, instead of the torch
checks (envcheck.checks.node.path)."""

from __future__ import annotations

from envcheck.checks.node.driver_live import cuda_driver
from envcheck.checks.node.profile_match import profile_check
from envcheck.core.check import CheckSpec

CHECKS = (
    CheckSpec(
        "node.cuda_driver",
        cuda_driver,
        "the CUDA driver API without torch: cuInit, device count, a context "
        "and a 1 MiB copy per GPU; a hung cuInit is evidence (state, wchan)",
        timeout_s=30,
        isolated=False,
        group="node",
        uses_gpu=True,
        node_order=0,
    ),
    CheckSpec(
        "node.profile",
        profile_check,
        "the node matches its --profile: GPU model and count (missing PCI "
        "address), driver floor, PCIe link, NVLinks up",
        timeout_s=30,
        isolated=False,
        group="node",
        uses_gpu=False,
        node_order=4,
    ),
)
