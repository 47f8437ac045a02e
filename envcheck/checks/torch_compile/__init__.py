"""torch.compile: the whole toolchain (Dynamo, Inductor, the C++ compiler, Triton, ptxas) on CPU and every GPU."""

from __future__ import annotations

from envcheck.checks.torch_compile.inductor import compile_inductor
from envcheck.core.check import CheckSpec, Level, Needs

# Its own worker ("compile"): a compile leaves process-wide state behind (Dynamo's caches, Inductor's config,
# TORCHINDUCTOR_CACHE_DIR written into os.environ, a compile-thread setting), and a failed GPU compile may
# leave a CUDA error; none of it may leak into the other checks. On a CPU host the group overlaps with the
# others; on a GPU host it costs one more fork in the GPU lane, and goes after the groups that preload nothing,
# so the fork server's import of torch._dynamo (~2-4 s, `preload`) overlaps them instead of adding to the lane.
# Timeout: a cold cache costs ~20-30 s on 2 CPU cores (bench/compile_check.py), a few s more per GPU.
CHECKS = (
    CheckSpec("compile.inductor", compile_inductor,
              "torch.compile (Inductor) compiles a function and its backward, matches eager, on CPU and every GPU",
              Level.FULL, Needs(torch=True), timeout_s=300, group="compile", preload=("torch._dynamo",)),
)
