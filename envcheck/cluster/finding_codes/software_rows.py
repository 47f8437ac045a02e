"""The finding-code rows of the software a job runs on: the runtime profile, torch.compile, the image's libraries."""

from __future__ import annotations

from envcheck.checks.build import compiled_in
from envcheck.checks.linalg import SVD_ERROR, SVD_WRONG
from envcheck.checks.numpy_interop import ABI_MISMATCH, MISSING, WRONG_VALUES
from envcheck.checks.runtime import profile as runtime_profile
from envcheck.checks.torch_compile import autotune, causes, isa, readiness
from envcheck.checks.vision_decoders import DECODE_WRONG, DECODERS_MISSING, NO_TURBO
from envcheck.cluster.finding_codes.common_fixes import CONFIG, IMAGE, REINSTALL
from envcheck.core import hardening
from envcheck.core.findings import Code

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

ROWS = [*_RUNTIME, *_COMPILE, *_IMAGE]
