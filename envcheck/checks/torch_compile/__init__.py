"""torch.compile: the whole toolchain (Dynamo, Inductor, the C++ compiler, Triton, ptxas) on CPU and every GPU."""

from __future__ import annotations

from envcheck.checks.torch_compile.autotune import compile_max_autotune
from envcheck.checks.torch_compile.inductor import compile_inductor
from envcheck.checks.torch_compile.isa import compile_cpu_isa
from envcheck.checks.torch_compile.readiness import compile_toolchain
from envcheck.checks.torch_compile.train_step import compile_train_step
from envcheck.core.check import CheckSpec, Level, Needs

# Its own worker ("compile"): a compile leaves process-wide state behind (Dynamo's caches, Inductor's config,
# TORCHINDUCTOR_CACHE_DIR written into os.environ, a compile-thread setting), and a failed GPU compile may
# leave a CUDA error; none of it may leak into the other checks. On a CPU host the group overlaps with the
# others; on a GPU host it costs one more fork in the GPU lane, and goes after the groups that preload nothing,
# so the fork server's import of torch._dynamo (~2-4 s, `preload`) overlaps them instead of adding to the lane.
# Timeout: a cold cache costs ~20-30 s on 2 CPU cores (bench/compile_check.py), a few s more per GPU.
# compile.toolchain is the quick run's answer (probes only, in the torch worker: no Inductor import, no compile).
# compile.cpu_isa and compile.max_autotune (PyTorch's release smoke test's points) share the compile worker; a cold
# max-autotune of the smoke test's Net costs ~17 s on 2 CPU cores (its GEMM templates are compiled and timed).
CHECKS = (
    CheckSpec(
        "compile.toolchain",
        compile_toolchain,
        "torch.compile can work here: compiler, Python.h, exec temp/cache dirs, triton/ptxas/libcuda (no "
        "compile)",
        needs=Needs(torch=True),
        timeout_s=30,
    ),
    CheckSpec(
        "compile.inductor",
        compile_inductor,
        "torch.compile (Inductor) compiles a function and its backward, matches eager, on CPU and each GPU model",
        Level.FULL,
        Needs(torch=True),
        timeout_s=300,
        group="compile",
        preload=("torch._dynamo",),
    ),
    CheckSpec(
        "compile.cpu_isa",
        compile_cpu_isa,
        "Inductor picks a vectorized CPU ISA (AVX2/AVX-512/NEON ...)",
        Level.FULL,
        Needs(torch=True),
        timeout_s=120,
        group="compile",
        preload=("torch._dynamo",),
    ),
    CheckSpec(
        "compile.max_autotune",
        compile_max_autotune,
        "torch.compile(mode='max-autotune') of the release smoke test's Net matches eager, CPU and each GPU model",
        Level.FULL,
        Needs(torch=True),
        timeout_s=300,
        group="compile",
        preload=("torch._dynamo",),
    ),
    # The whole step (model forward/backward and optimizer step) per backend, against eager; three
    # Inductor compiles (model, two optimizer steps) on a cold cache are most of its time.
    CheckSpec(
        "compile.train_step",
        compile_train_step,
        "a training step (model fwd+bwd, BatchNorm buffers, optimizer step) under torch.compile with "
        "aot_eager, Inductor's decompositions and Inductor matches eager on identical inputs",
        Level.FULL,
        Needs(torch=True),
        timeout_s=480,
        group="compile",
        preload=("torch._dynamo",),
    ),
)
