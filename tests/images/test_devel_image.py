"""The devel image: nvcc is exactly torch.version.cuda and a CUDA extension compiles (no GPU needed to build)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.containers import run_in

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Laid out as PyTorch's own test extension (test/cpp_extensions/cuda_extension.cu and .cpp): nvcc compiles the kernel
# and its launcher with ATen's and c10's CUDA headers (load_inline puts torch/types.h, cuda.h and cuda_runtime.h on top
# of the .cu source too), g++ the Tensor function and the Python binding (the binding alone needs torch/extension.h:
# pybind11, Python.h). The launch check makes the link need libc10_cuda. Given up: nvcc compiling torch/extension.h
# itself, as extensions that include it in their .cu files do; that object took three times as long here.
EXTENSION = r'''
import os, torch
from torch.utils.cpp_extension import load_inline
cuda_src = """
#include <cuda.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>
#include <ATen/ATen.h>
__global__ void add_one(float* x, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
void add_one_cuda(float* x, int64_t n) {
  if (n == 0) return;  // a grid of no blocks is an invalid launch
  add_one<<<(n + 255) / 256, 256>>>(x, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
cpp_src = """
void add_one_cuda(float* x, int64_t n);
torch::Tensor add_one_(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "contiguous float CUDA tensor expected");
  add_one_cuda(x.data_ptr<float>(), x.numel());
  return x;
}
"""
mod = load_inline("envcheck_add_one", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["add_one_"],
                  build_directory=os.environ["BUILD_DIR"], verbose=False)
print("extension built:", mod.__file__)
if torch.cuda.is_available():
    x = torch.zeros(1000, device="cuda")
    assert torch.equal(mod.add_one_(x).cpu(), torch.ones(1000))
    print("extension ran on GPU")
'''


def test_nvcc_matches_torch_cuda(docker_client: Any, devel_image: str) -> None:
    script = "nvcc --version | tail -2; python -c 'import torch; print(\"torch cuda\", torch.version.cuda)'"
    code, output = run_in(docker_client, devel_image, ["bash", "-c", script])
    assert code == 0, output
    cuda = output.split("torch cuda ")[1].split()[0]
    assert f"release {cuda}," in output, output


def test_cuda_extension_compiles(docker_client: Any, devel_image: str) -> None:
    code, output = run_in(
        docker_client,
        devel_image,
        ["bash", "-c", 'mkdir -p /tmp/ext && python -c "$SRC"'],
        timeout_s=900,
        environment={
            "SRC": EXTENSION,
            "BUILD_DIR": "/tmp/ext",
            "TORCH_CUDA_ARCH_LIST": "8.0",
            "MAX_JOBS": "2",
        },
    )
    assert code == 0, output
    assert "extension built:" in output and ".so" in output


def test_envcheck_layer_is_last_in_devel_too(docker_client: Any, devel_image: str) -> None:
    code, output = run_in(docker_client, devel_image, ["envcheck", "run", "--only", "image.versions"])
    assert code == 0, output
    assert docker_client.images.get(devel_image).attrs["Config"]["Labels"]["io.envcheck.target"] == "devel"
