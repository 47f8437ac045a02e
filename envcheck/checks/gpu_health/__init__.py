"""GPU hardware health from NVML, as warnings naming the GPU: Xid events, ECC errors, retired pages and remapped
rows, a PCIe link below its maximum, clock slowdowns, persistence mode.

Cheap reads only, no torch and no CUDA context: DCGM's diagnostics stay DCGM's job. Every field is read on its
own: NOT_SUPPORTED (consumer GPUs have no ECC or row remapping) is recorded as `absent('not supported')` and
never warns; any other error is recorded as its text. NVML keeps no cheap Xid history, so Xids come from the
kernel log (envcheck.checks.gpu_health.xid). A replayable Section: `envcheck explain` judges a bundle's `gpu_health`
exactly as the live check judges the host.
"""

from envcheck.checks.gpu_health.bundle_shape import validate
from envcheck.checks.gpu_health.capture import capture
from envcheck.checks.gpu_health.verdict import NODE_MODES, verdict
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Result
from envcheck.core.section import Section
from envcheck.probe.node_state import count_overrun

SECTION = Section("gpu_health", "gpu.health", capture, validate, verdict)


def gpu_health(ctx: Context) -> Result:
    """NVML's view of each GPU's hardware state, plus the kernel log's Xids, as warnings naming the GPU. In a
    node mode a first initialisation over its budget is remembered (probe.node_state): a second one in a row is
    the node's, not a cold start."""
    data = capture()
    if ctx.options.cluster_mode in NODE_MODES:
        warm = data.get("warmup")
        overran = isinstance(warm, dict) and warm.get("hang") is not None or data.get("nvml_hung") is not None
        data["overruns"], _ = count_overrun("gpu-init", overran)
    return verdict(data, ctx)


CHECKS = (
    # Its own group: NVML touches no CUDA context, and a call that hangs on a lost GPU takes no other check down.
    CheckSpec(
        "gpu.health",
        gpu_health,
        "NVML hardware state: Xid, ECC, retired pages/remapped rows, PCIe link, "
        "clock slowdowns, persistence mode",
        timeout_s=30,
        group="nvml",
        uses_gpu=False,
        node_order=1,
    ),
)
