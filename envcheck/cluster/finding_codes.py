"""The one table of finding codes (one row per code or code family: code, meaning, fault class, fix), gathered from
the named constants of the modules that emit them, and `markdown()`, which renders it as the codes reference page.
Cluster policy and severity read codes from here, never as literals of their own.

A family writes its variable part in angle brackets (`xid.<xid>`, `cuda.error.<code>`); `lookup` finds a code's row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from envcheck.checks.build import compiled_in
from envcheck.checks.cuda import MEMORY_LEAKED, live_errors, runtime_errors
from envcheck.checks.cuda import finding as cuda_layers
from envcheck.checks.cuda import verdict as cuda_verdict
from envcheck.checks.cuda.layers import CAPABILITIES_FIX, CPU_TORCH_FIX, DAEMON_RELOAD_FIX, MIG_FIX
from envcheck.checks.dcgm import HOSTENGINE_DOWN, HOSTENGINE_HANG, NO_RESULT
from envcheck.checks.gpu_health import node as gpu_node
from envcheck.checks.gpu_health.verdict import KERNEL_LOG_FIX, KERNEL_LOG_UNREADABLE, PERSISTENCE_OFF
from envcheck.checks.linalg import SVD_ERROR, SVD_WRONG
from envcheck.checks.node import driver_api, profile_match
from envcheck.checks.numpy_interop import ABI_MISMATCH, MISSING, WRONG_VALUES
from envcheck.checks.runtime import profile as runtime_profile
from envcheck.checks.torch_compile import autotune, causes, isa, readiness
from envcheck.checks.vision_decoders import DECODE_WRONG, DECODERS_MISSING, NO_TURBO
from envcheck.cluster.fleet import drift, learn
from envcheck.collectives import crossnode, pair_verdict
from envcheck.collectives.sweep import BUSBW_LOW
from envcheck.core import hardening
from envcheck.core.findings import Code
from envcheck.core.result import FaultClass
from envcheck.perf import relative

NODE, IMAGE, CONFIG = FaultClass.NODE, FaultClass.IMAGE, FaultClass.CONFIG
REINSTALL = "pip install --force-reinstall torch (the wheel of the CUDA build this image pins)"
DRAIN = "drain the node; nvidia-smi -q; dmesg | grep -iE 'NVRM|Xid'; reset the GPU (nvidia-smi -r -i <i>) or reboot"
FLEET_FIX = "compare the node with its peers (envcheck fleet); drain it and run dcgmi diag -r 3 if it stays an outlier"

_CUDA = [
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
_GPU = [
    Code(
        gpu_node.GPU_HEALTH,
        "a GPU's own state: uncorrectable ECC, pending page retirement or row remap, remap "
        "failure, a slowed or narrowed PCIe link, clocks held down",
        NODE,
        "see the result's remediation per GPU",
    ),
    Code(
        gpu_node.GPU_LOST,
        "a GPU on the PCI bus that NVML no longer lists, or fewer GPUs than the node must have",
        NODE,
        gpu_node.BUS_FIX,
    ),
    Code(gpu_node.FELL_OFF_BUS, "a GPU fell off the bus (the kernel log says so)", NODE, gpu_node.BUS_FIX),
    Code(
        gpu_node.GPU_INIT_SLOW,
        "NVML's initialisation overran its budget (twice in a row: the node's)",
        NODE,
        gpu_node.PERSISTENCE_FIX,
    ),
    Code(gpu_node.NVML_HANG, "an NVML call did not return: a GPU in a bad state hangs NVML", NODE, DRAIN),
    Code(
        KERNEL_LOG_UNREADABLE,
        "the kernel log cannot be read, so Xid errors go unseen",
        CONFIG,
        KERNEL_LOG_FIX,
    ),
    Code(
        PERSISTENCE_OFF,
        "persistence mode is off: every client pays the GPUs' initialisation",
        NODE,
        gpu_node.PERSISTENCE_FIX,
    ),
    Code(
        "xid.<xid>",
        "an Xid error in the kernel log within the window (NVIDIA's catalogue decides fail or warn)",
        NODE,
        "per Xid: NVIDIA's resolution in the result's remediation",
    ),
    Code(
        "xid.<xid>.repeated",
        "an Xid that recurred within the window: escalated",
        NODE,
        "per Xid: NVIDIA's resolution in the result's remediation",
    ),
    Code(
        "dcgm.diag.<test>",
        "a DCGM diagnostic test failed (the test's name, lower-case)",
        NODE,
        "dcgmi diag -r 3 -i <i> and NVIDIA's guidance for the test; drain the node",
    ),
    Code(
        HOSTENGINE_HANG,
        "dcgmi did not answer within its budget: the host engine hangs",
        NODE,
        "systemctl restart nvidia-dcgm; drain the node if it hangs again",
    ),
    Code(
        HOSTENGINE_DOWN,
        "the DCGM host engine is not running or unreachable",
        CONFIG,
        "systemctl enable --now nvidia-dcgm (nv-hostengine)",
    ),
    Code(
        NO_RESULT,
        "dcgmi gave no diagnostic result",
        None,
        "rerun dcgmi diag -r 1 by hand and read its output",
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
_RUNTIME = [
    Code(
        hardening.NOFILE_LOW,
        "the open-file limit is below what a PyTorch job needs",
        CONFIG,
        f"docker run --ulimit nofile={hardening.NOFILE_NEED}:524288",
    ),
    Code(
        hardening.NPROC_LOW,
        "the process/thread limit (nproc, pids.max) is below what a job needs",
        CONFIG,
        "docker run --pids-limit 4096 --ulimit nproc=65536, or the pod's pids limit",
    ),
    Code(
        hardening.NO_PASSWD_ENTRY,
        "the uid has no passwd entry and USER/LOGNAME are unset",
        CONFIG,
        hardening.PASSWD_FIX,
    ),
    Code(hardening.TMP_FULL, "the temp/cache dir is full", CONFIG, hardening.WRITE_FIX),
    Code(hardening.TMP_READONLY, "the temp/cache dir is not writable", CONFIG, hardening.WRITE_FIX),
    Code(
        hardening.SHM_SMALL,
        "/dev/shm is smaller than DataLoader workers and NCCL need",
        CONFIG,
        hardening.SHM_FIX,
    ),
    Code(
        runtime_profile.TMP_NOEXEC,
        "the Inductor cache dir is mounted noexec",
        CONFIG,
        "mount it exec (--tmpfs /tmp:exec) or point TORCHINDUCTOR_CACHE_DIR at an exec mount",
    ),
    Code(
        runtime_profile.HOME_READONLY,
        "Triton's cache dir (HOME or TRITON_CACHE_DIR) is not writable",
        CONFIG,
        "set TRITON_CACHE_DIR (or HOME) to a writable mount",
    ),
    Code(
        runtime_profile.CPU_QUOTA_BELOW_THREADS,
        "the cgroup CPU quota is below torch's intra-op thread count",
        CONFIG,
        "export OMP_NUM_THREADS=<quota> or torch.set_num_threads(<quota>)",
    ),
]
_COMPILE = [
    Code(
        causes.DIR_UNUSABLE, "a directory torch.compile writes to is not usable", CONFIG, hardening.WRITE_FIX
    ),
    Code(
        causes.NO_COMPILER,
        "no C++ compiler for Inductor's CPU kernels",
        IMAGE,
        "apt-get install g++ (or set CXX)",
    ),
    Code(
        causes.NO_LIBCUDA,
        "Triton cannot find libcuda.so",
        CONFIG,
        "give the container the driver's libraries (NVIDIA_DRIVER_CAPABILITIES=compute,utility)",
    ),
    Code(
        causes.NO_PYTHON_HEADERS,
        "Python.h is missing: Triton cannot build its launcher",
        IMAGE,
        "apt-get install python3-dev (the headers of this Python)",
    ),
    Code(
        causes.PTXAS_ARCH,
        "ptxas does not know the GPU's architecture",
        IMAGE,
        "install a Triton (or CUDA toolkit) that supports this GPU",
    ),
    Code(
        causes.TRITON_MISMATCH,
        "the installed Triton is not the one torch pins",
        IMAGE,
        "pip install triton==<the version torch pins>",
    ),
    Code(
        isa.ISA_DISABLED,
        "Inductor's vector ISA is disabled here",
        CONFIG,
        "unset ATEN_CPU_CAPABILITY=default",
    ),
    Code(
        isa.NO_VEC_ISA,
        "Inductor found no vector ISA: this CPU has none (the node's), or its probes cannot "
        "compile (no compiler: the image's)",
        None,
        "expected on CPUs without AVX2/AVX-512/NEON; else install a C++ compiler",
    ),
    Code(
        readiness.NO_TRITON,
        "Triton is not installed: torch.compile cannot compile GPU kernels",
        IMAGE,
        "pip install triton==<the version torch pins>",
    ),
    Code(
        readiness.TOOLCHAIN,
        "torch.compile's toolchain fails for an unnamed cause",
        IMAGE,
        "see the result's details",
    ),
    Code(autotune.MAX_AUTOTUNE_ERROR, "mode='max-autotune' fails", IMAGE, "see the result's details"),
    Code(
        autotune.MAX_AUTOTUNE_WRONG,
        "mode='max-autotune' computes wrong values",
        IMAGE,
        "upgrade torch and Triton; report the case upstream",
    ),
]
_IMAGE = [
    Code(compiled_in.NO_NVSHMEM, "torch was built without NVSHMEM", IMAGE, REINSTALL),
    Code(compiled_in.NO_OPENMP, "torch was built without OpenMP", IMAGE, REINSTALL),
    Code(SVD_ERROR, "torch.linalg.svd fails (LAPACK or cuSOLVER)", IMAGE, REINSTALL),
    Code(
        SVD_WRONG,
        "torch.linalg.svd computes wrong values",
        None,
        "CPU: the BLAS/LAPACK in use (image); GPU: the GPU (node)",
    ),
    Code(
        ABI_MISMATCH,
        "numpy's ABI is not the one torch was built against",
        IMAGE,
        "pip install 'numpy<2' or a torch built for numpy 2",
    ),
    Code(MISSING, "numpy is not installed", IMAGE, "pip install numpy"),
    Code(WRONG_VALUES, "torch <-> numpy conversion gives wrong values", IMAGE, REINSTALL),
    Code(
        DECODE_WRONG, "torchvision decodes an image wrong", IMAGE, "pip install --force-reinstall torchvision"
    ),
    Code(
        DECODERS_MISSING,
        "torchvision lacks its image decoders",
        IMAGE,
        "pip install --force-reinstall torchvision",
    ),
    Code(
        NO_TURBO, "torchvision's JPEG decoder is not libjpeg-turbo", IMAGE, "install torchvision's PyPI wheel"
    ),
]
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

TABLE: tuple[Code, ...] = (
    *_CUDA,
    *_GPU,
    *_NODE_PROFILE,
    *_RUNTIME,
    *_COMPILE,
    *_IMAGE,
    *_DIST,
    *_PERF,
    *_FLEET,
    *_DEFAULT,
)
_PLACEHOLDER = re.compile(r"<[^>]+>")


def _pattern(code: str) -> re.Pattern[str]:
    return re.compile(
        "^" + ".+".join(re.escape(p) for p in _PLACEHOLDER.split(code)) + "$"
    )  # a check name has dots


_EXACT = {row.code: row for row in TABLE if "<" not in row.code}
_FAMILIES = [(_pattern(row.code), row) for row in TABLE if "<" in row.code]


def lookup(code: str) -> Code | None:
    """The table's row for `code`: its own, else its family's (`xid.79` -> `xid.<xid>`), else None."""
    if code in _EXACT:
        return _EXACT[code]
    families = [row for pattern, row in _FAMILIES if pattern.match(code)]
    return max(families, key=lambda r: len(_PLACEHOLDER.sub("", r.code)), default=None)


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def markdown(rows: Iterable[Code] = TABLE) -> str:
    """The codes reference page: one row per code (code, meaning, fault class, fix), sorted by code."""
    lines = [
        "# Finding codes",
        "",
        "Every finding code envcheck gives, what it means, who must act (its fault class) and the usual fix. "
        "Generated from `envcheck.cluster.finding_codes.TABLE`; do not edit by hand.",
        "",
        "| Code | Meaning | Fault class | Fix |",
        "| --- | --- | --- | --- |",
    ]
    for row in sorted(rows, key=lambda r: r.code):
        who = row.fault_class.value if row.fault_class is not None else "depends"
        lines.append(f"| `{row.code}` | {_cell(row.meaning)} | {who} | {_cell(row.fix)} |")
    return "\n".join(lines) + "\n"
