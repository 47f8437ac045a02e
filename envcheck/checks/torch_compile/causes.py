"""Name the cause of a failed torch.compile from its real error text and the pre-flight evidence, with the fix."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

from envcheck.checks.torch_compile.toolchain import Compiler, Directory
from envcheck.core.result import FaultClass

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
DIR_UNUSABLE = "compile.dir_unusable"
NO_COMPILER = "compile.no_compiler"
NO_LIBCUDA = "compile.no_libcuda"
NO_PYTHON_HEADERS = "compile.no_python_headers"
PTXAS_ARCH = "compile.ptxas_arch"
TRITON_MISMATCH = "compile.triton_mismatch"

# Lines of Inductor/Dynamo boilerplate that are never the cause.
_NOISE = (
    "set torchdynamo_verbose",
    "for even more developer context",
    "you can suppress this exception",
    "torch._dynamo.config.suppress_errors",
    "traceback (most recent call last)",
    "backend='inductor' raised",
)


_EXAMPLE = {
    "TMPDIR": "$HOME/tmp",
    "TORCHINDUCTOR_CACHE_DIR": "$HOME/.cache/torchinductor",
    "TRITON_CACHE_DIR": "$HOME/.cache/triton",
}


@dataclass(frozen=True)
class Evidence:
    """What the pre-flight probes found."""

    cxx: Compiler | None = None
    cc: Compiler | None = None
    dirs: tuple[Directory, ...] = ()
    headers_missing: str | None = None  # the include dir without Python.h
    libcuda_env: str | None = None
    libcuda_found: tuple[str, ...] = ()
    ptxas_problems: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Cause:
    """A named cause and the concrete fix."""

    summary: str
    fix: str
    named: bool = True  # False: only the error's first line, no known cause
    fault_class: FaultClass | None = None  # image: the software installed; config: how the job was started
    code: str = ""  # the stable finding code (compile.no_compiler ...); empty for an unnamed cause


def first_line(text: str) -> str:
    """The first line of an error that says something (not Dynamo's boilerplate)."""
    for line in text.splitlines():
        line = line.strip()
        if line and not any(n in line.lower() for n in _NOISE):
            return line[:300]
    return text.strip()[:300] or "no error text"


def _compiler(comp: Compiler | None, variable: str) -> Cause:
    looked = ", ".join(comp.looked_for) if comp else "?"
    what = comp.role if comp else "compiler"
    return Cause(
        f"no working {what}: looked for {looked} ({variable}={os.environ.get(variable) or 'unset'}); "
        "none answers --version",
        f"install one (apt-get install -y g++ gcc, or your image's compiler package), or point {variable} "
        f"at a working compiler, e.g. export {variable}=/usr/bin/{'g++' if variable == 'CXX' else 'gcc'}",
        fault_class=FaultClass.IMAGE,
        code=NO_COMPILER,
    )


def _dir_for(path_text: str, dirs: tuple[Directory, ...]) -> Directory | None:
    """The probed directory an error's path lies in (the deepest match), or None."""
    matches = [d for d in dirs if path_text.startswith(d.path.rstrip("/") + "/") or path_text == d.path]
    return max(matches, key=lambda d: len(d.path)) if matches else None


def _dir_cause(kind: str, path: str, dirs: tuple[Directory, ...]) -> Cause:
    probed = _dir_for(path, dirs)
    remount = "or remount it (Docker: --tmpfs /tmp:exec, or a volume without noexec/ro)"
    if probed is None:
        return Cause(
            f"{path} is {kind}",
            "make it writable and exec, or move the directory that holds it: TMPDIR, "
            f"TORCHINDUCTOR_CACHE_DIR or TRITON_CACHE_DIR (e.g. under $HOME/.cache), {remount}",
            fault_class=FaultClass.CONFIG,
            code=DIR_UNUSABLE,
        )
    var = probed.variable
    also = "" if var == "TMPDIR" else " (or TMPDIR, which moves every default)"
    return Cause(
        f"the {probed.role} {probed.path} is {kind}: {path}",
        f"export {var}=<a writable directory on an exec mount, e.g. {_EXAMPLE[var]}>{also}, {remount}",
        fault_class=FaultClass.CONFIG,
        code=DIR_UNUSABLE,
    )


def classify(text: str, ev: Evidence) -> Cause:
    """The cause of a compile failure, from the exception text first and the probes second."""
    low = text.lower()
    if "invalidcxxcompiler" in low or "no working c++ compiler" in low:
        return _compiler(ev.cxx, "CXX")
    if "failed to find c compiler" in low or re.search(
        r"\b(gcc|cc|clang): (not found|command not found)", low
    ):
        return _compiler(ev.cc, "CC")
    missing = re.search(r"\[Errno 2\] No such file or directory: '([^']+)'", text)
    if missing and ev.cc and missing.group(1) in ev.cc.looked_for:  # Triton runs $CC as given
        return _compiler(ev.cc, "CC")
    m = re.search(r"(\S+): failed to map segment from shared object", text)
    if m or "noexec" in low:
        path = (
            m.group(1)
            if m
            else next((d.path for d in ev.dirs if any("noexec" in p for p in d.problems)), "?")
        )
        return _dir_cause("mounted noexec (compiled code cannot be loaded from it)", path, ev.dirs)
    m = re.search(r"\[Errno (30|13)\] (?:Read-only file system|Permission denied): '([^']+)'", text)
    if m:
        return _dir_cause("read-only" if m.group(1) == "30" else "not writable", m.group(2), ev.dirs)
    if "libcuda.so cannot found" in low or "cannot find -lcuda" in low:
        listed = ", ".join(ev.libcuda_found) or "no libcuda.so* at all"
        return Cause(
            f"Triton cannot find the driver library libcuda.so (ldconfig -p lists: {listed})",
            "export TRITON_LIBCUDA_PATH=<the dir holding libcuda.so.1, e.g. /usr/local/nvidia/lib64>, "
            "or add that dir to /etc/ld.so.conf.d/ and run ldconfig (without a driver mount: run the "
            "container with --gpus all)",
            fault_class=FaultClass.CONFIG,
            code=NO_LIBCUDA,
        )
    m = re.search(r"Value '(sm_\w+)' is not defined for option 'gpu-name'", text)
    if m:
        return Cause(
            f"ptxas does not know the GPU's architecture {m.group(1)}: {first_line(text)}",
            "export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (a CUDA toolkit new enough for "
            f"{m.group(1)}), or a triton release whose bundled ptxas supports it",
            fault_class=FaultClass.IMAGE,
            code=PTXAS_ARCH,
        )
    if re.search(r"python\.h: no such file", low):
        where = f" in {ev.headers_missing}" if ev.headers_missing else ""
        version = "{}.{}".format(*sys.version_info[:2])
        return Cause(
            f"the Python headers are missing (no Python.h{where}); compiled kernels and helpers #include it",
            f"install the headers of {sys.executable}: for Debian/Ubuntu's python, apt-get install -y "
            f"python{version}-dev (or python3-dev); for conda, pyenv or python.org builds, reinstall that "
            "Python with its include/ dir (slim images strip it)",
            fault_class=FaultClass.IMAGE,
            code=NO_PYTHON_HEADERS,
        )
    if re.search(r"cannot import name .* from 'triton|no module named 'triton", low):
        return Cause(
            f"torch and triton do not match: {first_line(text)}",
            "pip install --force-reinstall torch==<your version> from one index (it pins the triton "
            "it was built with); do not install triton separately",
            fault_class=FaultClass.IMAGE,
            code=TRITON_MISMATCH,
        )
    return Cause(
        first_line(text),
        "see the full error in details; TORCH_LOGS=+inductor shows the compile steps",
        named=False,
    )


def preflight_cause(ev: Evidence) -> Cause | None:
    """A cause the probes alone make likely (to annotate a failure whose text names none)."""
    for d in ev.dirs:
        if d.problems:
            return _dir_cause(d.problems[0].split(" is ", 1)[-1], d.path, ev.dirs)
    if ev.cxx and not ev.cxx.found:
        return _compiler(ev.cxx, "CXX")
    if ev.cc and not ev.cc.found:
        return _compiler(ev.cc, "CC")
    if ev.headers_missing:
        return classify("Python.h: No such file or directory", ev)
    if ev.cc and not ev.libcuda_env and not ev.libcuda_found:  # ev.cc is probed only on GPU hosts
        return classify("libcuda.so cannot found!", ev)
    if ev.ptxas_problems:
        return Cause(
            ev.ptxas_problems[0],
            "export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (a CUDA toolkit "
            "new enough for this GPU), or a triton release whose bundled ptxas supports it",
            fault_class=FaultClass.IMAGE,
            code=PTXAS_ARCH,
        )
    return None
