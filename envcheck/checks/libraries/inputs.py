"""libs.cuda's capture: the NVIDIA distributions, torch's pins, the mapped libraries and the loader's search path
(metadata, listings and /proc/self/maps only), and the captured section's shape."""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Iterable
from typing import Any

from packaging.markers import UndefinedEnvironmentName
from packaging.utils import canonicalize_name

from envcheck.checks.cuda.capture import loaded_libraries
from envcheck.core.errors import UsageError
from envcheck.core.section import require
from envcheck.core.versions import release, requirements
from envcheck.probe.system import mapped_paths

# Library file stem -> the NVIDIA distribution family that ships it (names without the -cuNN suffix).
FAMILIES = {
    "libnccl": "nvidia-nccl",
    "libcudnn": "nvidia-cudnn",
    "libcudart": "nvidia-cuda-runtime",
    "libcublas": "nvidia-cublas",
    "libcublasLt": "nvidia-cublas",
    "libnvJitLink": "nvidia-nvjitlink",
    "libcusparse": "nvidia-cusparse",
    "libcusparseLt": "nvidia-cusparselt",
    "libcufft": "nvidia-cufft",
    "libcurand": "nvidia-curand",
    "libcusolver": "nvidia-cusolver",
    "libnvrtc": "nvidia-cuda-nvrtc",
    "libcupti": "nvidia-cuda-cupti",
    "libnvToolsExt": "nvidia-nvtx",
    "libcufile": "nvidia-cufile",
    "libnvshmem_host": "nvidia-nvshmem",
}
# The symbol prefixes of each library, for `undefined symbol: X` (the `, version libY.so.N` part wins if given).
SYMBOL_LIBS = (
    ("__nvJitLink", "libnvJitLink"),
    ("nvJitLink", "libnvJitLink"),
    ("nccl", "libnccl"),
    ("cudnn", "libcudnn"),
    ("cublasLt", "libcublasLt"),
    ("cublas", "libcublas"),
    ("cusparse", "libcusparse"),
    ("cufft", "libcufft"),
    ("curand", "libcurand"),
    ("cusolver", "libcusolver"),
    ("nvrtc", "libnvrtc"),
    ("cupti", "libcupti"),
    ("cuda", "libcudart"),
)
_SO = re.compile(r"^(lib[\w+-]*?)\.so((?:\.\d+)*)$")
_CU = re.compile(r"-cu\d+$")
MISSING_LIBRARY = re.compile(r"(lib[\w.+-]+?\.so[.\d]*): cannot open shared object file")
UNDEFINED_SYMBOL = re.compile(
    r"(?:(/\S+?):\s*)?undefined symbol:\s*(\w+)(?:,\s*version\s+(lib[\w+-]+\.so[.\d]*))?"
)
TOOLKIT = (
    "cuda-toolkit"  # torch on CUDA 13 pins cuda-toolkit[cublas,cudart,...]==13.0.x; its extras pin the libs
)


def stem(path: str) -> str | None:
    """`/x/libnccl.so.2.18.3` -> 'libnccl'; None for a file that is not a versioned or plain `lib*.so`."""
    m = _SO.match(os.path.basename(path))
    return m.group(1) if m else None


def family_of(lib_stem: str | None) -> str | None:
    """The NVIDIA family of a library stem ('libcudnn_graph' -> 'nvidia-cudnn'); None for others (torch's own,
    hash-suffixed copies such as libcusparseLt-f8b4a9fb included)."""
    if lib_stem is None:
        return None
    for key in sorted(FAMILIES, key=len, reverse=True):
        if lib_stem == key or lib_stem.startswith(key + "_"):
            return FAMILIES[key]
    return None


def dist_family(name: str) -> str:
    """'nvidia-nccl-cu12' -> 'nvidia-nccl'."""
    return _CU.sub("", canonicalize_name(name))


def file_version(path: str) -> str | None:
    """The version in a real file name (`libnccl.so.2.18.3` -> '2.18.3'); None when only the soname's major."""
    m = _SO.match(os.path.basename(path))
    parts = m.group(2).lstrip(".") if m else ""
    return parts if parts.count(".") >= 1 else None


def same_release(a: str, b: str) -> bool | None:
    """Whether two versions agree on every number both have (at least two); None when that cannot be told."""
    ra, rb = release(a), release(b)
    if ra is None or rb is None or min(len(ra), len(rb)) < 2:
        return None
    n = min(len(ra), len(rb))
    return ra[:n] == rb[:n]


# ---- capture: the live system --------------------------------------------------------------------------------


def _exact(req: Any) -> str | None:
    return next(
        (s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version), None
    )


def _applies(req: Any, extra: str = "") -> bool:
    try:
        return req.marker is None or bool(req.marker.evaluate({"extra": extra}))
    except UndefinedEnvironmentName:
        return False


def pins(torch_requires: Iterable[str], requires_of: Any = None) -> dict[str, str]:
    """Torch's exact pins whose markers hold here (`name -> version`), following `cuda-toolkit[extras]`'s own
    extras one level down (`requires_of(name)` -> its Requires-Dist lines)."""
    out: dict[str, str] = {}
    for req in requirements(torch_requires):
        version = _exact(req)
        if version is None or not _applies(req):
            continue
        out[canonicalize_name(req.name)] = version
        if canonicalize_name(req.name) == TOOLKIT and req.extras and requires_of is not None:
            for sub in requirements(requires_of(req.name) or []):
                sub_version = _exact(sub)
                if sub_version and any(_applies(sub, e) for e in req.extras):
                    out[canonicalize_name(sub.name)] = sub_version
    return out


def _dists(path: list[str] | None = None, **kw: Any) -> Iterable[importlib.metadata.Distribution]:
    """Distributions on `path` (sys.path when None), as importlib.metadata finds them."""
    if path is None:
        return importlib.metadata.distributions(**kw)
    return importlib.metadata.distributions(path=path, **kw)


def _requires(name: str, path: list[str] | None = None) -> list[str] | None:
    dist = next(iter(_dists(path, name=name)), None)
    return None if dist is None else list(dist.requires or [])


def nvidia_dists(path: list[str] | None = None) -> list[dict[str, Any]]:
    """Each distribution shipping an NVIDIA CUDA library: name, version, and its libraries (real path, and
    `missing` / `other-bytes` when the file is gone or holds another install's bytes, per RECORD's size)."""
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for dist in _dists(path):
        name = canonicalize_name(dist.metadata["Name"] or "")
        if name in seen or not (name.startswith("nvidia-") or name == TOOLKIT):
            continue
        seen.add(name)  # the first on sys.path is the one Python sees
        libs = []
        for f in dist.files or ():
            if family_of(stem(f.name)) is None:
                continue
            where = os.path.realpath(str(dist.locate_file(f)))
            try:
                size = os.stat(where).st_size
                state = "ok" if f.size is None or f.size == size else "other-bytes"
            except OSError:
                state = "missing"
            libs.append({"path": where, "state": state})
        if libs:
            out.append({"name": name, "version": dist.version, "libs": libs})
    return out


def required_by(names: Iterable[str], path: list[str] | None = None) -> dict[str, list[str]]:
    """Which installed distributions require each of `names` (so an uninstall does not break them)."""
    wanted = {canonicalize_name(n): [] for n in names}  # type: dict[str, list[str]]
    for dist in _dists(path):
        for req in requirements(dist.requires or []):
            key = canonicalize_name(req.name)
            if key in wanted and _applies(req):
                owner = canonicalize_name(dist.metadata["Name"] or "")
                if owner not in wanted[key]:
                    wanted[key].append(owner)
    return wanted


def _search_dirs(value: str | None) -> list[dict[str, Any]]:
    dirs = []
    for d in [p for p in (value or "").split(":") if p]:
        try:
            names = sorted(n for n in os.listdir(d) if family_of(stem(n)) is not None)
        except OSError:
            names = []
        dirs.append({"dir": d, "libs": {n: os.path.realpath(os.path.join(d, n)) for n in names}})
    return dirs


def capture() -> dict[str, Any]:
    """torch's import (error text when it fails), its pins, the NVIDIA distributions, the mapped libraries,
    and what LD_LIBRARY_PATH / LD_PRELOAD offer the loader."""
    out: dict[str, Any] = {
        "torch_installed": False,
        "torch_version": None,
        "torch_cuda": None,
        "import_error": None,
    }
    try:
        out["torch_version"] = importlib.metadata.version("torch")
        out["torch_installed"] = True
    except importlib.metadata.PackageNotFoundError:
        pass
    if out["torch_installed"]:
        try:
            import torch

            out["torch_cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
        except BaseException as exc:  # ImportError, OSError from a preload, anything an import raises
            out["import_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    out["pins"] = pins(_requires("torch") or [], _requires) if out["torch_installed"] else {}
    dists = nvidia_dists()
    out["dists"] = dists
    families: dict[str, list[str]] = {}
    for d in dists:
        families.setdefault(dist_family(d["name"]), []).append(d["name"])
    doubled = [n for names in families.values() if len(names) > 1 for n in names]
    out["required_by"] = required_by(doubled) if doubled else {}
    maps = mapped_paths()
    out["loaded"] = sorted({p for p in maps or () if family_of(stem(p))} | set(loaded_libraries()))
    out["ld_library_path"] = _search_dirs(os.environ.get("LD_LIBRARY_PATH"))
    out["ld_preload"] = [
        os.path.realpath(p) for p in re.split(r"[\s:]+", os.environ.get("LD_PRELOAD", "")) if p
    ]
    return out


def validate(data: Any, where: str) -> None:
    """One-line UsageError for a malformed `libraries` section."""
    require(
        data,
        where,
        {
            "torch_installed": (bool,),
            "torch_version": (str, None),
            "torch_cuda": (str, None),
            "import_error": (str, None),
            "pins": (dict,),
            "dists": (list,),
            "loaded": (list,),
            "ld_library_path": (list,),
            "ld_preload": (list,),
            "required_by": (dict,),
        },
    )
    for i, d in enumerate(data.get("dists", [])):
        require(d, f"{where}.dists[{i}]", {"name": (str,), "version": (str,), "libs": (list,)})
        missing = [k for k in ("name", "version", "libs") if k not in d]
        if missing:
            raise UsageError(f"{where}.dists[{i}] lacks {missing[0]!r}")
        for j, lib in enumerate(d.get("libs", [])):
            require(lib, f"{where}.dists[{i}].libs[{j}]", {"path": (str,), "state": (str,)})
            if "path" not in lib or "state" not in lib:
                raise UsageError(f"{where}.dists[{i}].libs[{j}] needs 'path' and 'state'")
    for i, d in enumerate(data.get("ld_library_path", [])):
        require(d, f"{where}.ld_library_path[{i}]", {"dir": (str,), "libs": (dict,)})
        missing = [k for k in ("dir", "libs") if k not in d]
        if missing:
            raise UsageError(f"{where}.ld_library_path[{i}] lacks {missing[0]!r}")
    for key in ("loaded", "ld_preload"):
        if not all(isinstance(p, str) for p in data.get(key, [])):
            raise UsageError(f"{where}.{key} must be a list of str")
    if not all(isinstance(v, str) for v in data.get("pins", {}).values()):
        raise UsageError(f"{where}.pins must map names to version strings")
    if not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v)
        for v in data.get("required_by", {}).values()
    ):
        raise UsageError(f"{where}.required_by must map names to lists of str")
    if not all(isinstance(v, str) for d in data.get("ld_library_path", []) for v in d["libs"].values()):
        raise UsageError(f"{where}.ld_library_path[].libs must map file names to paths")
