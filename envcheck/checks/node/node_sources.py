"""What the torch-free node checks read besides gpu.health's sources (envcheck.core.evidence): the CUDA driver API
without torch, the process's configuration, and NVML's identity fields against a node profile."""

from __future__ import annotations

from envcheck.checks.cuda.finding import CAPABILITIES, CONTAINER, VISIBLE_DEVICES
from envcheck.checks.cuda.live_errors import GPU_UNUSABLE
from envcheck.checks.node import driver_api, profile_match
from envcheck.checks.node.config_causes import MIG_NO_INSTANCE
from envcheck.core.evidence import Kind, Source

NODE_TESTS = ("tests/checks/node/test_node_path.py", "tests/cluster/test_shared_nodes.py")

EVIDENCE: tuple[Source, ...] = (
    Source(
        "libcuda.so.1: cuInit, cuDeviceGetCount, cuCtxCreate, a 1 MiB copy per GPU",
        Kind.LIBRARY,
        "whether CUDA starts without torch, within a budget, and each GPU no other process holds takes a context and "
        "copies back what it was given",
        (
            driver_api.INIT_ERROR,
            driver_api.INIT_HANG,
            driver_api.INIT_SLOW,
            driver_api.DRIVER_CRASH,
            driver_api.COPY_MISMATCH,
            driver_api.LIBCUDA_MISSING,
            GPU_UNUSABLE,
            "cuda.error.<code>",
        ),
        "CUDA's CUresult table (cuda.h); a busy GPU (NVML lists its holder) is another job's, not a fault",
        NODE_TESTS,
        key="cuda_driver",
    ),
    Source(
        "NVIDIA_DRIVER_CAPABILITIES, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, MIG instances",
        Kind.ENVIRONMENT,
        "the process's own configuration: what the container toolkit mounted, which GPUs CUDA may enumerate",
        (CAPABILITIES, VISIBLE_DEVICES, CONTAINER, MIG_NO_INSTANCE),
        "libnvidia-container nvc_mount.c (compute and utility capabilities); CUDA's device list ends at the first "
        "bad CUDA_VISIBLE_DEVICES entry; a configuration is never the node's",
        NODE_TESTS,
        key="visible_devices",
    ),
    Source(
        "NVML name, PCI bus id, PCIe link, NVLink states; the PCI bus; --profile / --expect-gpus",
        Kind.NVML,
        "the node against what it must be: GPU model and count, driver floor, PCIe link, NVLinks up",
        (
            profile_match.NODE_GPU_COUNT,
            profile_match.NODE_GPU_COUNT_SCOPE,
            profile_match.PROFILE_GPU_COUNT,
            profile_match.GPU_MODEL,
            profile_match.DRIVER_FLOOR,
            profile_match.PCIE_LINK,
            profile_match.NVLINK_DOWN,
        ),
        "the operator's node profile (cluster/node_profiles); a profile adds expectations to what NVML reads",
        ("tests/cluster/test_profile.py",),
        key="profile",
    ),
)
