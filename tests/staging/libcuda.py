"""A stand-in libcuda.so.1 built from C for the node-path tests: no NVIDIA driver can exist on this machine.

It answers the driver API calls probe/cuda_driver_child.py makes, as the case in its environment says:
STUB_INIT (cuInit's CUresult), STUB_HANG_INIT (cuInit vfork()s and waits: the kernel holds the caller in D state,
as it holds a process stuck in the NVIDIA driver), STUB_COUNT, STUB_CTX_FAIL_GPU/STUB_CTX_FAIL_CODE (cuCtxCreate
fails on one GPU), STUB_CORRUPT_GPU (the copy back flips a bit on one GPU). The error names are CUDA's own (cuda.h's
CUresult enum, docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef int CUresult;
static int cur = -1;
static const int bus[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xb3, 0xdb};
static int env_int(const char *n, int d) { const char *v = getenv(n); return v ? atoi(v) : d; }
CUresult cuDriverGetVersion(int *v) { *v = env_int("STUB_DRIVER_CUDA", 13000); return 0; }
CUresult cuInit(unsigned int flags) {
  if (getenv("STUB_HANG_INIT") && vfork() == 0) { sleep(60); _exit(0); }
  return env_int("STUB_INIT", 0);
}
CUresult cuDeviceGetCount(int *n) { *n = env_int("STUB_COUNT", 2); return 0; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return 0; }
CUresult cuDeviceGetName(char *s, int len, int d) { snprintf(s, len, "NVIDIA H100 80GB HBM3"); return 0; }
CUresult cuDeviceGetPCIBusId(char *s, int len, int d) { snprintf(s, len, "00000000:%02X:00.0", bus[d % 8]); return 0; }
CUresult cuCtxCreate_v2(void **c, unsigned int f, int d) {
  if (d == env_int("STUB_CTX_FAIL_GPU", -1)) return env_int("STUB_CTX_FAIL_CODE", 214);
  cur = d; *c = (void *)(long)(d + 1); return 0;
}
CUresult cuCtxDestroy_v2(void *c) { cur = -1; return 0; }
CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)malloc(n); return 0; }
CUresult cuMemFree_v2(unsigned long long p) { free((void *)p); return 0; }
CUresult cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { memcpy((void *)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n) {
  memcpy(d, (void *)s, n);
  if (cur == env_int("STUB_CORRUPT_GPU", -1)) ((unsigned char *)d)[4097] ^= 0x10;
  return 0;
}
CUresult cuGetErrorName(CUresult e, const char **s) {
  switch (e) {
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 214: *s = "CUDA_ERROR_ECC_UNCORRECTABLE"; return 0;
    case 802: *s = "CUDA_ERROR_SYSTEM_NOT_READY"; return 0;
    case 999: *s = "CUDA_ERROR_UNKNOWN"; return 0;
  }
  return 1;
}
"""


def build(folder: Path) -> Path:
    """Compile the stand-in into folder/libcuda.so.1 (skips visibly without a C compiler)."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler for the stand-in libcuda.so.1")
    (folder / "stub_libcuda.c").write_text(SOURCE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(folder / "libcuda.so.1"), str(folder / "stub_libcuda.c")],
                   check=True, timeout=60)
    return folder
