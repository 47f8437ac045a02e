"""Structured environment facts, in the spirit of torch's collect_env but bounded and honest.

Every probe has a timeout and no shell; an absent value says why; secrets in env vars are redacted.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import resource
import sys
from typing import Any

from envcheck.core import redact as secrets
from envcheck.core.versions import cudnn_version_text, pinned_with_prefix
from envcheck.probe.cgroup import limits_facts
from envcheck.probe.inventory import field, gpu_inventory
from envcheck.probe.system import CommandRunner, absent, in_container, read_text, run_command
from envcheck.probe.topology import distributed_facts

ENV_PREFIXES = ("NVIDIA_", "CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "LD_LIBRARY_PATH", "ENVCHECK_")


def redact_env(environ: dict[str, str]) -> dict[str, str]:
    """The GPU-relevant variables, secrets redacted by name and in URLs (envcheck.core.redact)."""
    return secrets.redact_env(environ, ENV_PREFIXES)


def os_facts() -> dict[str, Any]:
    """OS, distribution, Python, CPUs, memory and whether we are in a container."""
    release = read_text("/etc/os-release") or ""
    pretty = next(
        (
            line.split("=", 1)[1].strip('"')
            for line in release.splitlines()
            if line.startswith("PRETTY_NAME=")
        ),
        None,
    )
    meminfo = read_text("/proc/meminfo") or ""
    mem_kb = next(
        (int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal:")), None
    )
    return {
        "system": f"{platform.system()} {platform.release()}",
        "distribution": pretty or absent("/etc/os-release has no PRETTY_NAME"),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_count": os.cpu_count() or absent("os.cpu_count() returned nothing"),
        "memory_gib": round(mem_kb / 2**20, 1) if mem_kb else absent("/proc/meminfo not readable"),
        "in_container": in_container(),
    }


def _package_version(name: str) -> str | dict[str, str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return absent(f"{name} is not installed")


def _dotted(version: Any) -> str:
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    if isinstance(version, int) and version > 1000:  # cuDNN style 90100 -> 9.1.0
        return cudnn_version_text(version)
    return str(version)


def torch_facts() -> dict[str, Any]:
    """torch and its CUDA, cuDNN and NCCL versions (compiled and loaded), arch list, companions."""
    facts: dict[str, Any] = {
        "torchvision": _package_version("torchvision"),
        "torchaudio": _package_version("torchaudio"),
    }
    if importlib.util.find_spec("torch") is None:
        return {"version": absent("torch is not installed"), **facts}
    import torch

    facts["version"] = torch.__version__
    facts["cuda_compiled"] = torch.version.cuda or absent("CPU-only torch build (torch.version.cuda is None)")
    facts["arch_list"] = (
        field(torch.cuda.get_arch_list, "torch.cuda.get_arch_list")
        if torch.version.cuda
        else absent("CPU-only build")
    )
    compiled = getattr(getattr(torch._C, "_cudnn", None), "getCompileVersion", None)
    facts["cudnn_compiled"] = (
        _dotted(compiled()) if callable(compiled) else absent("this torch build has no cuDNN")
    )
    try:
        loaded = torch.backends.cudnn.version()
        facts["cudnn_loaded"] = _dotted(loaded) if loaded else absent("libcudnn could not be loaded")
    except Exception as exc:
        facts["cudnn_loaded"] = absent(f"libcudnn could not be loaded: {exc}")
    facts["nccl_compiled"] = nccl_pinned_by_torch()
    try:
        facts["nccl_loaded"] = (
            _dotted(torch.cuda.nccl.version()) if torch.version.cuda else absent("CPU-only build")
        )
    except Exception as exc:
        facts["nccl_loaded"] = absent(f"libnccl could not be loaded: {exc}")
    return facts


def nccl_pinned_by_torch() -> str | dict[str, str]:
    """The NCCL version the torch wheel pins (what it was built with); NCCL is loaded from that package."""
    try:
        requires = importlib.metadata.requires("torch") or []
    except importlib.metadata.PackageNotFoundError:
        return absent("torch is not installed")
    found = pinned_with_prefix(requires, "nvidia-nccl")
    if found:
        return found[1]
    return absent("the torch wheel pins no nvidia-nccl package (NCCL linked statically or a source build)")


def shm_bytes() -> int | dict[str, str]:
    """Size of /dev/shm in bytes."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError as exc:
        return absent(f"/dev/shm not mounted: {exc.strerror}")
    return st.f_blocks * st.f_frsize


def ulimits() -> dict[str, Any]:
    """Soft memlock, stack and nofile limits ('unlimited' or a number of bytes/files)."""
    out: dict[str, Any] = {}
    for name, res in (
        ("memlock_bytes", resource.RLIMIT_MEMLOCK),
        ("stack_bytes", resource.RLIMIT_STACK),
        ("nofile", resource.RLIMIT_NOFILE),
    ):
        soft, _hard = resource.getrlimit(res)
        out[name] = "unlimited" if soft == resource.RLIM_INFINITY else soft
    return out


def collect_facts(run: CommandRunner = run_command) -> dict[str, Any]:
    """Every fact, grouped by section."""
    env = dict(os.environ)
    return {  # one section that raises leaves `absent: why` in that section; the others stay
        "platform": field(os_facts, "platform facts"),
        "torch": field(torch_facts, "torch facts"),
        "gpu": field(lambda: gpu_inventory(run), "GPU inventory"),
        "env": redact_env(env),
        "cuda_visible_devices": env["CUDA_VISIBLE_DEVICES"]
        if "CUDA_VISIBLE_DEVICES" in env
        else absent("not set (all GPUs visible)"),
        "shm_bytes": field(shm_bytes, "statvfs(/dev/shm)"),
        "ulimits": field(ulimits, "getrlimit"),
        "distributed": field(lambda: distributed_facts(run), "distributed facts"),
        **collect_env_parity(run),
    }


# ---- collect_env parity: toolchain, libc, packages, cgroup limits, runtime env, build arch flags ----------

RUNTIME_ENV_PREFIXES = ("GLOO_", "NCCL_", "LD_", "OMP_", "PYTHONPATH", "MKL_", "KMP_")


def runtime_env(environ: dict[str, str]) -> dict[str, str]:
    """GLOO_*, NCCL_*, LD_*, OMP_*, MKL_*, KMP_* and PYTHONPATH, secrets redacted by name and in URLs."""
    return secrets.redact_env(environ, RUNTIME_ENV_PREFIXES)


def toolchain_facts(run: CommandRunner = run_command) -> dict[str, Any]:
    """The C and C++ compilers torch.compile/inductor would call (CC/CXX or cc/c++), and libc."""
    import shutil

    out: dict[str, Any] = {}
    for key, env_name, names in (
        ("cc", "CC", ("cc", "gcc", "clang")),
        ("cxx", "CXX", ("c++", "g++", "clang++")),
    ):
        chosen = os.environ.get(env_name) or next((n for n in names if shutil.which(n)), None)
        if chosen is None:
            out[key] = absent(f"no {' / '.join(names)} on PATH and {env_name} is not set")
            continue
        done = run([chosen, "--version"], 10.0)
        if isinstance(done, dict):
            out[key] = done
        elif done.returncode != 0:
            out[key] = absent(f"{chosen} --version exited {done.returncode}")
        else:
            out[key] = f"{chosen}: {(done.stdout.strip().splitlines() or ['?'])[0]}"
    name, version = platform.libc_ver()
    gnu = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else None
    out["libc"] = gnu or (
        f"{name} {version}" if name else absent("platform.libc_ver() found no libc (musl?)")
    )
    return out


def package_facts() -> dict[str, Any]:
    """numpy, triton and every nvidia-* / cuda-* distribution installed, with versions."""
    out: dict[str, Any] = {"numpy": _package_version("numpy"), "triton": _package_version("triton")}
    seen: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(("nvidia-", "cuda-")) or name in ("pytorch-triton", "nvidia-ml-py"):
            seen[name] = dist.version
    out["nvidia"] = dict(sorted(seen.items()))
    return out


def torch_build_facts() -> dict[str, Any]:
    """The arch list the torch build was compiled for, also when no GPU is visible (get_arch_list is [] then)."""
    if importlib.util.find_spec("torch") is None:
        return {"arch_flags": absent("torch is not installed")}
    import torch

    if not torch.version.cuda:
        return {"arch_flags": absent("CPU-only build")}
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    if not callable(flags):
        return {"arch_flags": absent("this torch has no torch._C._cuda_getArchFlags")}
    text = flags()
    return {"arch_flags": text.split() if isinstance(text, str) and text else absent("empty arch flags")}


def collect_env_parity(run: CommandRunner = run_command) -> dict[str, Any]:
    """What `python -m torch.utils.collect_env` reports beyond the sections above (additive to collect_facts)."""
    return {
        "toolchain": field(lambda: toolchain_facts(run), "compiler and libc"),
        "packages": field(package_facts, "installed distributions"),
        "cgroup": field(limits_facts, "cgroup limits"),
        "runtime_env": runtime_env(dict(os.environ)),
        "torch_build": field(torch_build_facts, "torch build arch flags"),
    }
