"""A stand-in libcuda.so.1 built from C: no NVIDIA driver can exist on this machine.

It answers the driver API calls envcheck's CUDA probe makes (probe/cuda_driver_child.py) the way the real library
behaves in each deployment shape, from its environment:
- STUB_GPUS: the node's GPUs as `bus:minor` hex/decimal pairs ("18:0,2a:1,..."). Like the real library it lists
  only those whose /dev/nvidia<minor> this process may use (access(2): absent in a container given other GPUs,
  EPERM under a device cgroup), then applies CUDA_VISIBLE_DEVICES as CUDA does: indices or UUIDs (STUB_UUIDS,
  "bus:GPU-..." or "bus:MIG-...", a unique prefix is enough), read up to the first entry that names no device; a
  repeated device leaves none. Without STUB_GPUS: STUB_COUNT GPUs on fixed buses, no /dev check (the older
  single-GPU tests). With no device left, cuInit returns CUDA_ERROR_NO_DEVICE (100), as the real library does.
- STUB_INIT: cuInit's CUresult; STUB_HANG_INIT: cuInit vfork()s and waits (the kernel holds the caller in
  uninterruptible sleep, D, as it holds a process stuck in the NVIDIA driver).
- STUB_COLD_MS_PER_GPU and STUB_WARM_DIR: with persistence mode off, cuInit sleeps (interruptibly: state S) that
  long per GPU unless another client holds the GPUs initialised (a file in STUB_WARM_DIR, written by the NVML
  stand-in while it is initialised), as the driver tears a GPU down when its last client leaves.
- STUB_CTX_CODES ("2a:2,5d:46": cuCtxCreate's CUresult per bus: 2 OUT_OF_MEMORY, 46 DEVICES_UNAVAILABLE, 214
  ECC_UNCORRECTABLE, 999 UNKNOWN); the older STUB_CTX_FAIL_GPU/STUB_CTX_FAIL_CODE (by index); STUB_CORRUPT_GPU
  (the copy back flips a bit on one GPU).
`stub_dstate(seconds)` lets the NVML stand-in block its caller in D state the same way. The error names are CUDA's
own (cuda.h's CUresult enum, docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SOURCE = r"""
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
typedef int CUresult;
#define MAXG 32
static int cur = -1, nvis = -1, vis_bus[MAXG];
static const int dflt[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xb3, 0xdb};
static int env_int(const char *n, int d) { const char *v = getenv(n); return v ? atoi(v) : d; }
/* -2: not a UUID; -1: a UUID no device has; else the index of the device (in bus[]) whose UUID it prefixes */
static long by_uuid(const char *tok, const int *bus, int n) {
  if (strncmp(tok, "GPU-", 4) && strncmp(tok, "MIG-", 4)) return -2;
  const char *spec = getenv("STUB_UUIDS");
  if (!spec) return -1;
  char buf[2048]; strncpy(buf, spec, sizeof buf - 1); buf[sizeof buf - 1] = 0;
  for (char *save, *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
    int b = 0; char uuid[128];
    if (sscanf(e, "%x:%127s", &b, uuid) != 2 || strncmp(uuid, tok, strlen(tok))) continue;
    for (int i = 0; i < n; i++) if (bus[i] == b) return i;
  }
  return -1;
}
static void enumerate(void) {
  int bus[MAXG], n = 0;
  if (nvis >= 0) return;
  const char *spec = getenv("STUB_GPUS");
  if (spec) {
    char buf[1024]; strncpy(buf, spec, sizeof buf - 1); buf[sizeof buf - 1] = 0;
    for (char *tok = strtok(buf, ","); tok && n < MAXG; tok = strtok(NULL, ",")) {
      int b = 0, m = 0; char path[64];
      if (sscanf(tok, "%x:%d", &b, &m) != 2) continue;
      snprintf(path, sizeof path, "/dev/nvidia%d", m);
      if (access(path, R_OK | W_OK) == 0) bus[n++] = b;
    }
  } else {
    for (int i = 0; i < env_int("STUB_COUNT", 2) && n < MAXG; i++) bus[n++] = dflt[i % 8];
  }
  nvis = 0;
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  if (cvd) {
    char buf[256]; strncpy(buf, cvd, sizeof buf - 1); buf[sizeof buf - 1] = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
      long i = by_uuid(tok, bus, n);
      if (i == -2) { char *end; i = strtol(tok, &end, 10); if (end == tok) i = -1; }
      if (i < 0 || i >= n) break;  /* CUDA stops at the first invalid entry */
      for (int k = 0; k < nvis; k++) if (vis_bus[k] == bus[i]) { nvis = 0; return; }  /* a repeat: none */
      vis_bus[nvis++] = bus[i];
    }
  } else {
    for (int i = 0; i < n; i++) vis_bus[nvis++] = bus[i];
  }
}
static int warm(void) {
  const char *d = getenv("STUB_WARM_DIR");
  if (!d) return 1;
  DIR *dir = opendir(d);
  if (!dir) return 0;
  int held = 0; struct dirent *e;
  while ((e = readdir(dir))) if (e->d_name[0] != '.') held = 1;
  closedir(dir);
  return held;
}
static void hold_in_d_state(int seconds) {
  if (vfork() == 0) { prctl(PR_SET_PDEATHSIG, SIGKILL); sleep(seconds); _exit(0); }
}
void stub_dstate(int seconds) { hold_in_d_state(seconds); }
CUresult cuDriverGetVersion(int *v) { *v = env_int("STUB_DRIVER_CUDA", 13000); return 0; }
CUresult cuInit(unsigned int flags) {
  if (getenv("STUB_HANG_INIT")) hold_in_d_state(60);
  enumerate();
  int ms = env_int("STUB_COLD_MS_PER_GPU", 0) * nvis;
  if (ms > 0 && !warm()) { struct timespec t = {ms / 1000, (ms % 1000) * 1000000L}; nanosleep(&t, NULL); }
  if (getenv("STUB_INIT")) return env_int("STUB_INIT", 0);
  return nvis ? 0 : 100;
}
CUresult cuDeviceGetCount(int *n) { enumerate(); *n = nvis; return 0; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return 0; }
CUresult cuDeviceGetName(char *s, int len, int d) { snprintf(s, len, "NVIDIA H100 80GB HBM3"); return 0; }
CUresult cuDeviceGetPCIBusId(char *s, int len, int d) { snprintf(s, len, "00000000:%02X:00.0", vis_bus[d]); return 0; }
static int ctx_code(int d) {
  const char *spec = getenv("STUB_CTX_CODES");
  if (spec) {
    char buf[512]; strncpy(buf, spec, sizeof buf - 1); buf[sizeof buf - 1] = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
      int b = 0, code = 0;
      if (sscanf(tok, "%x:%d", &b, &code) == 2 && b == vis_bus[d]) return code;
    }
  }
  if (d == env_int("STUB_CTX_FAIL_GPU", -1)) return env_int("STUB_CTX_FAIL_CODE", 214);
  return 0;
}
CUresult cuCtxCreate_v2(void **c, unsigned int f, int d) {
  int code = ctx_code(d);
  if (code) return code;
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
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 46: *s = "CUDA_ERROR_DEVICES_UNAVAILABLE"; return 0;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 214: *s = "CUDA_ERROR_ECC_UNCORRECTABLE"; return 0;
    case 802: *s = "CUDA_ERROR_SYSTEM_NOT_READY"; return 0;
    case 999: *s = "CUDA_ERROR_UNKNOWN"; return 0;
  }
  return 1;
}
"""


def build(folder: Path) -> Path:
    """Put the stand-in at folder/libcuda.so.1, with its source beside it (skips visibly without a C compiler)."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler for the stand-in libcuda.so.1")
    (folder / "stub_libcuda.c").write_text(SOURCE)
    shutil.copy(_compiled(), folder / "libcuda.so.1")
    return folder


@functools.cache
def _compiled() -> Path:
    """The stand-in compiled once per test process (every staged node loads the same library)."""
    where = Path(tempfile.mkdtemp(prefix="envcheck-stub-libcuda-"))
    atexit.register(shutil.rmtree, where, True)
    (where / "stub_libcuda.c").write_text(SOURCE)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(where / "libcuda.so.1"), str(where / "stub_libcuda.c")],
        check=True,
        timeout=60,
    )
    return where / "libcuda.so.1"
