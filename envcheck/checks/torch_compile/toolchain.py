"""Pre-flight probes of the compile toolchain, found the way Inductor and Triton find it; no compiling."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from envcheck.core.rundir import user_env, user_temp_dir

PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Compiler:
    """The compiler a tool would use: what it looked for, and what (if anything) answered `--version`."""

    role: str  # "C++ (Inductor CPU)" or "C (Triton helpers)"
    looked_for: tuple[str, ...]
    found: str | None = None
    version: str = ""


@dataclass(frozen=True)
class Directory:
    """A directory the compile writes and runs code from, the variable that moves it, and what is wrong."""

    role: str
    path: str
    variable: str
    problems: tuple[str, ...] = field(default_factory=tuple)


def _run(argv: list[str]) -> str | None:
    """stdout+stderr of a short probe command, or None when it cannot run."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout + done.stderr) if done.returncode == 0 else None


def _answering(looked_for: tuple[str, ...]) -> tuple[str | None, str]:
    for name in looked_for:
        out = _run([name, "--version"])
        if out is not None:
            return shutil.which(name) or name, out.strip().splitlines()[0] if out.strip() else ""
    return None, ""


def cxx_search() -> tuple[str | None, ...]:
    """Inductor's C++ compiler search, `torch._inductor.config.cpp.cxx`: read from the config when Inductor is
    already imported, else its default `(None, os.environ.get("CXX", "g++"))` (torch/_inductor/config.py), so that
    the quick probe (compile.toolchain) never pays Inductor's import (~1 s on 2 cores)."""
    config = sys.modules.get("torch._inductor.config")
    cxx = config.cpp.cxx if config is not None else (None, os.environ.get("CXX", "g++"))
    return tuple(cxx) if isinstance(cxx, (list, tuple)) else (cxx,)


def cxx_compiler() -> Compiler:
    """Inductor's CPU compiler: the first of its search (cxx_search) that answers `--version`.

    cpp_builder.cpp_compiler_search skips the None entry (a conda download) unless TORCH_INDUCTOR_INSTALL_GXX
    is set; the rest defaults to `$CXX`, else `g++`.
    """
    search = cxx_search()
    looked_for = tuple(str(c) for c in search if c is not None)
    found, version = _answering(looked_for)
    return Compiler("C++ compiler (Inductor, CPU kernels)", looked_for, found, version)


def c_compiler() -> Compiler:
    """Triton's C compiler for its launcher helpers: `$CC`, else `gcc`, else `clang` (triton/runtime/build.py)."""
    cc = os.environ.get("CC")
    looked_for = (cc,) if cc else ("gcc", "clang")
    found, version = _answering(looked_for)
    return Compiler("C compiler (Triton helpers, GPU)", looked_for, found, version)


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def dir_problems(path: str) -> tuple[str, ...]:
    """Why code cannot be written to or run from `path` (or, if it does not exist yet, where it would be made)."""
    where = _existing_ancestor(Path(path))
    problems = []
    try:
        flags = os.statvfs(where).f_flag
    except OSError as exc:
        return (f"cannot stat {where}: {exc.strerror}",)
    if flags & os.ST_RDONLY:
        problems.append(f"{where} is on a read-only mount")
    elif not os.access(where, os.W_OK | os.X_OK):
        problems.append(f"{where} is not writable by uid {os.getuid()}")
    if flags & os.ST_NOEXEC:
        problems.append(f"{where} is on a mount with noexec, so compiled kernels (.so) cannot be loaded")
    return tuple(problems)


def default_cache_dir() -> str:
    """Inductor's default cache, <TMPDIR>/torchinductor_<user>, in the temp dir the user's jobs use (this check's
    own worker has a private TMPDIR on the same mount, envcheck.core.rundir, which is what its compile fills).
    The name is torch._inductor.runtime.cache_dir_utils.default_cache_dir's
    (tests/checks/torch_compile/test_compile_smoke.py holds them equal), computed here: importing that module imports
    all of Inductor."""
    return os.path.join(user_temp_dir(), default_cache_name())


def default_cache_name() -> str:
    """The name of Inductor's default cache dir in a temp dir: torchinductor_<user>."""
    try:
        username = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        username = f"uid_{os.getuid()}"
    return "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", username)


def inductor_cache_dir() -> str:
    """Where Inductor caches compiled code: $TORCHINDUCTOR_CACHE_DIR, else <TMPDIR>/torchinductor_<user>."""
    return os.path.abspath(user_env("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir())


def triton_cache_dir() -> str:
    """Triton's own cache (its compiled launcher helpers): $TRITON_CACHE_DIR, else $TRITON_HOME|~/.triton/cache."""
    if os.environ.get("TRITON_CACHE_DIR"):
        return os.path.abspath(os.environ["TRITON_CACHE_DIR"])
    return os.path.join(os.environ.get("TRITON_HOME") or os.path.expanduser("~"), ".triton", "cache")


def directories(gpu: bool) -> list[Directory]:
    """The directories the user's compile would use, each with its problems (none when fine)."""
    dirs = [
        ("temp dir", user_temp_dir(), "TMPDIR"),
        ("Inductor cache", inductor_cache_dir(), "TORCHINDUCTOR_CACHE_DIR"),
        # codecache._HEADER_DIR: precompiled headers always go under the *default* cache dir, so only TMPDIR
        # moves them, whatever TORCHINDUCTOR_CACHE_DIR says.
        ("Inductor precompiled headers", os.path.join(default_cache_dir(), "precompiled_headers"), "TMPDIR"),
    ]
    if gpu:
        dirs.append(("Triton cache", triton_cache_dir(), "TRITON_CACHE_DIR"))
    return [Directory(role, path, var, dir_problems(path)) for role, path, var in dirs]


def python_headers() -> str | None:
    """The Python include dir when it lacks Python.h (a compiled helper needs it), else None."""
    include = sysconfig.get_paths().get("include") or ""
    return None if os.path.exists(os.path.join(include, "Python.h")) else include


def libcuda_paths() -> tuple[str | None, list[str]]:
    """TRITON_LIBCUDA_PATH, and where Triton would find libcuda.so.1: `ldconfig -p`, else LD_LIBRARY_PATH."""
    listing = _run(["/sbin/ldconfig", "-p"]) or _run(["ldconfig", "-p"]) or ""
    found = sorted(
        {line.rsplit("=>", 1)[-1].strip() for line in listing.splitlines() if "libcuda.so.1" in line}
    )
    if not found:  # triton/backends/nvidia/driver.py: libcuda_dirs() falls back to LD_LIBRARY_PATH
        dirs = (os.environ.get("LD_LIBRARY_PATH") or "").split(":")
        found = [
            os.path.join(d, "libcuda.so.1")
            for d in dirs
            if d and os.path.exists(os.path.join(d, "libcuda.so.1"))
        ]
    return os.environ.get("TRITON_LIBCUDA_PATH"), found


def ptxas_path() -> str | None:
    """The ptxas Triton runs: $TRITON_PTXAS_PATH, else the one bundled with triton, else the one on PATH."""
    if os.environ.get("TRITON_PTXAS_PATH"):
        return os.environ["TRITON_PTXAS_PATH"]
    import importlib.util

    spec = importlib.util.find_spec("triton")  # absent from CPU-only installs
    if spec and spec.origin:
        bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "ptxas"
        if bundled.exists():
            return str(bundled)
    return shutil.which("ptxas")


def ptxas_arch_problem(ptxas: str, arch: str) -> str | None:
    """Why `ptxas` cannot target `arch` (sm_90), or None when it lists it (or lists nothing we can read)."""
    version = _run([ptxas, "--version"])
    if version is None:
        return f"{ptxas} does not run"
    helptext = _run([ptxas, "--help"]) or ""
    allowed = set(re.findall(r"sm_\d+[af]?", helptext))
    if allowed and arch not in allowed and arch.rstrip("af") not in allowed:
        release = re.search(r"release ([\d.]+)", version)
        return f"{ptxas} (CUDA {release.group(1) if release else '?'}) does not know {arch}"
    return None
