"""The finding-code rows of the CUDA layers (torch's view and the node path's driver-API probe) and of the node
profile."""

from __future__ import annotations

from envcheck.checks.cuda import MEMORY_LEAKED, live_errors, runtime_errors
from envcheck.checks.cuda import finding as cuda_layers
from envcheck.checks.cuda import verdict as cuda_verdict
from envcheck.checks.cuda.layers import CAPABILITIES_FIX, CPU_TORCH_FIX, DAEMON_RELOAD_FIX, MIG_FIX
from envcheck.checks.node import driver_api, profile_match
from envcheck.cluster.finding_codes.common_fixes import CONFIG, DRAIN, IMAGE, NODE, REINSTALL
from envcheck.core.findings import Code

_CUDA = [
    Code(
        cuda_layers.CAPABILITIES,
        "NVIDIA_DRIVER_CAPABILITIES lacks what is needed (compute: libcuda and /dev/nvidia-uvm; utility: NVML), "
        "so the container toolkit did not mount it",
        CONFIG,
        CAPABILITIES_FIX,
    ),
    Code(
        cuda_layers.VISIBLE_DEVICES,
        "CUDA_VISIBLE_DEVICES leaves CUDA no device (empty, -1, a repeat, an index or UUID no GPU here has)",
        CONFIG,
        "unset CUDA_VISIBLE_DEVICES, or set it to GPU indices that exist here or their UUIDs (nvidia-smi -L)",
    ),
    Code(
        cuda_layers.CONTAINER,
        "no GPU reaches the container: no /dev/nvidia* and no driver inside",
        CONFIG,
        "docker run --gpus all (Compose: deploy.resources.reservations.devices; Kubernetes: nvidia.com/gpu)",
    ),
    Code(cuda_layers.CUDA_INIT, "CUDA initialisation failed with no known CUDA error code", NODE, DRAIN),
    Code(
        cuda_layers.DEVICES,
        "the /dev/nvidia* device nodes are missing or refused (cgroup device rules)",
        NODE,
        DAEMON_RELOAD_FIX,
    ),
    Code(
        cuda_layers.DRIVER,
        "the host driver is older than the CUDA torch was built for",
        NODE,
        "upgrade the host driver (CUDA 12.x needs >= 525.60.13, 13.x >= 580), or use a torch of an older CUDA",
    ),
    Code(cuda_layers.GPU, "a GPU fails CUDA calls (a sticky error, an unusable context)", NODE, DRAIN),
    Code(
        cuda_layers.LIBCUDA,
        "libcuda.so.1 cannot be loaded (no driver libraries, or capabilities lack compute)",
        NODE,
        CAPABILITIES_FIX,
    ),
    Code(
        cuda_layers.TORCH,
        "torch is absent, a CPU build on a GPU host, or built without CUDA",
        IMAGE,
        CPU_TORCH_FIX,
    ),
    Code(cuda_layers.UNKNOWN, "CUDA is unavailable for a reason no layer explains", NODE, DRAIN),
    Code(
        "cuda.error.<code>",
        "a CUDA driver error code in torch's warning (802 fabric manager, 803 libcuda "
        "mismatch, 804 forward-compat, 100 no device, 35 driver too old, 999 wedged driver)",
        None,
        "per code: see the result's remediation (envcheck explain <code>)",
    ),
    Code(
        live_errors.GPU_BUSY,
        "the GPU is held by another process (exclusive compute mode) or unavailable",
        CONFIG,
        "run one process per GPU, or set the compute mode to DEFAULT (nvidia-smi -c 0 -i <i>)",
    ),
    Code(
        live_errors.GPU_UNUSABLE,
        "the GPU refuses contexts although no GPU is in an exclusive mode",
        NODE,
        DRAIN,
    ),
    Code(
        runtime_errors.ASSERT_LOST,
        "a device-side assert that torch did not report (the kernel's message lost)",
        IMAGE,
        "rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel; reinstall torch if it recurs",
    ),
    Code(
        runtime_errors.ASSERT_UNNAMED,
        "a device-side assert without the assert's message",
        IMAGE,
        "rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel",
    ),
    Code(
        runtime_errors.GDS_ERROR,
        "GPUDirect Storage fails with an error that is not cuFile's",
        IMAGE,
        "pip install --force-reinstall torch (the nvidia-cufile wheel it pins); keep LD_LIBRARY_PATH from loading "
        "another libcufile",
    ),
    Code(
        runtime_errors.GDS_MISSING,
        "torch has no torch.cuda.gds: GPUDirect Storage is missing from the build",
        IMAGE,
        REINSTALL,
    ),
    Code(
        cuda_verdict.GPU_COUNT,
        "fewer GPUs visible than expected (--expect-gpus)",
        CONFIG,
        "give the container every GPU (--gpus all, NVIDIA_VISIBLE_DEVICES), or expect the GPUs it is given",
    ),
    Code(cuda_verdict.MIG_GPU_COUNT, "MIG slices counted as GPUs differ from --expect-gpus", CONFIG, MIG_FIX),
    Code(
        cuda_verdict.MIG_SINGLE_DEVICE,
        "several MIG devices given, CUDA enumerates only one per process",
        CONFIG,
        MIG_FIX,
    ),
    Code(
        MEMORY_LEAKED,
        "GPU memory is held with no process in the host's view",
        NODE,
        "reset the GPU (nvidia-smi -r -i <i>) or reboot the node",
    ),
    Code(
        driver_api.COPY_MISMATCH, "a host-device copy came back wrong: the data path is broken", NODE, DRAIN
    ),
    Code(
        driver_api.DRIVER_CRASH, "libcuda crashed the process inside a driver call", NODE, driver_api.HANG_FIX
    ),
    Code(driver_api.INIT_ERROR, "cuInit failed with a code envcheck does not name", NODE, DRAIN),
    Code(
        driver_api.INIT_HANG,
        "cuInit did not return within its budget: a wedged driver",
        NODE,
        driver_api.HANG_FIX,
    ),
    Code(
        driver_api.INIT_SLOW,
        "CUDA initialisation overran its budget (a cold start; twice in a row: the node's)",
        NODE,
        driver_api.SLOW_FIX,
    ),
    Code(
        driver_api.LIBCUDA_MISSING,
        "the driver's libcuda.so.1 cannot be loaded on the host",
        NODE,
        driver_api.LIBCUDA_FIX,
    ),
]

_NODE_PROFILE = [
    Code(
        profile_match.NODE_GPU_COUNT,
        "fewer GPUs than --expect-gpus on the node path (the missing addresses named)",
        NODE,
        profile_match.LOST_FIX,
    ),
    Code(
        profile_match.NODE_GPU_COUNT_SCOPE,
        "a whole node's GPU count expected of a process given fewer GPUs",
        CONFIG,
        "run the node check on the host, or expect the GPUs this process is given",
    ),
    Code(
        profile_match.PROFILE_GPU_COUNT,
        "the node has not the GPU count of its node profile",
        NODE,
        profile_match.LOST_FIX,
    ),
    Code(
        profile_match.GPU_MODEL,
        "a GPU is not the model the node profile names",
        NODE,
        "run this node under the profile of its GPU model, or fix gpu_model",
    ),
    Code(
        profile_match.DRIVER_FLOOR,
        "the driver is older than the node profile's floor",
        NODE,
        "upgrade the NVIDIA driver to the profile's floor, then reboot",
    ),
    Code(
        profile_match.PCIE_LINK,
        "a GPU's PCIe link is below the node profile's generation or width",
        NODE,
        "reseat the GPU and its riser; lspci -vv (LnkCap, LnkSta); check the BIOS slot settings",
    ),
    Code(
        profile_match.NVLINK_DOWN,
        "fewer NVLinks up than the node profile says",
        NODE,
        "nvidia-smi nvlink -s; check nvidia-fabricmanager on NVSwitch systems; reset the GPU or reboot",
    ),
]

ROWS = [*_CUDA, *_NODE_PROFILE]
