"""libs.cuda: which copy of each CUDA library won the loader's search, against what torch pins and the wheels ship.

Three real-world faults: two distributions of one NVIDIA library family (nvidia-nccl-cu12 next to nvidia-nccl-cu13
after switching torch's CUDA; both write nvidia/nccl/lib/libnccl.so.2), an `LD_LIBRARY_PATH` or `LD_PRELOAD` copy
shadowing the wheel's (the loader searches LD_LIBRARY_PATH before torch's RUNPATH), and an installed version that
is not the one torch pins. `cudnn.conv` compares loaded and compiled cuDNN; this names the path that won and the pin.
When `import torch` itself fails on a library (`libcudnn.so.9: cannot open shared object file`, `undefined symbol:
ncclCommRegister`), the error text is captured and the verdict names the library and where the loader found it.
Capture reads metadata only (METADATA, RECORD), `/proc/self/maps` and the LD_LIBRARY_PATH directories' listings.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.markers import UndefinedEnvironmentName
from packaging.utils import canonicalize_name

from envcheck.checks.bundle import loaded_libraries
from envcheck.checks.probe import mapped_paths
from envcheck.checks.section import Section, require
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import Result, failed, passed, skipped, warned
from envcheck.errors import UsageError
from envcheck.versions import release, requirements

# Library file stem -> the NVIDIA distribution family that ships it (names without the -cuNN suffix).
FAMILIES = {
    "libnccl": "nvidia-nccl", "libcudnn": "nvidia-cudnn", "libcudart": "nvidia-cuda-runtime",
    "libcublas": "nvidia-cublas", "libcublasLt": "nvidia-cublas", "libnvJitLink": "nvidia-nvjitlink",
    "libcusparse": "nvidia-cusparse", "libcusparseLt": "nvidia-cusparselt", "libcufft": "nvidia-cufft",
    "libcurand": "nvidia-curand", "libcusolver": "nvidia-cusolver", "libnvrtc": "nvidia-cuda-nvrtc",
    "libcupti": "nvidia-cuda-cupti", "libnvToolsExt": "nvidia-nvtx", "libcufile": "nvidia-cufile",
    "libnvshmem_host": "nvidia-nvshmem",
}
# The symbol prefixes of each library, for `undefined symbol: X` (the `, version libY.so.N` part wins if given).
SYMBOL_LIBS = (("__nvJitLink", "libnvJitLink"), ("nvJitLink", "libnvJitLink"), ("nccl", "libnccl"),
               ("cudnn", "libcudnn"), ("cublasLt", "libcublasLt"), ("cublas", "libcublas"),
               ("cusparse", "libcusparse"), ("cufft", "libcufft"), ("curand", "libcurand"),
               ("cusolver", "libcusolver"), ("nvrtc", "libnvrtc"), ("cupti", "libcupti"), ("cuda", "libcudart"))
_SO = re.compile(r"^(lib[\w+-]*?)\.so((?:\.\d+)*)$")
_CU = re.compile(r"-cu\d+$")
_MISSING = re.compile(r"(lib[\w.+-]+?\.so[.\d]*): cannot open shared object file")
_UNDEFINED = re.compile(r"(?:(/\S+?):\s*)?undefined symbol:\s*(\w+)(?:,\s*version\s+(lib[\w+-]+\.so[.\d]*))?")
TOOLKIT = "cuda-toolkit"  # torch on CUDA 13 pins cuda-toolkit[cublas,cudart,...]==13.0.x; its extras pin the libs


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
    return next((s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version), None)


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
    out: dict[str, Any] = {"torch_installed": False, "torch_version": None, "torch_cuda": None,
                           "import_error": None}
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
    out["ld_preload"] = [os.path.realpath(p) for p in re.split(r"[\s:]+", os.environ.get("LD_PRELOAD", "")) if p]
    return out


def validate(data: Any, where: str) -> None:
    """One-line UsageError for a malformed `libraries` section."""
    require(data, where, {"torch_installed": (bool,), "torch_version": (str, None), "torch_cuda": (str, None),
                          "import_error": (str, None), "pins": (dict,), "dists": (list,), "loaded": (list,),
                          "ld_library_path": (list,), "ld_preload": (list,), "required_by": (dict,)})
    for i, d in enumerate(data.get("dists", [])):
        require(d, f"{where}.dists[{i}]", {"name": (str,), "version": (str,), "libs": (list,)})
        for j, lib in enumerate(d.get("libs", [])):
            require(lib, f"{where}.dists[{i}].libs[{j}]", {"path": (str,), "state": (str,)})
    for i, d in enumerate(data.get("ld_library_path", [])):
        require(d, f"{where}.ld_library_path[{i}]", {"dir": (str,), "libs": (dict,)})
    for key in ("loaded", "ld_preload"):
        if not all(isinstance(p, str) for p in data.get(key, [])):
            raise UsageError(f"{where}.{key} must be a list of str")
    if not all(isinstance(v, str) for v in data.get("pins", {}).values()):
        raise UsageError(f"{where}.pins must map names to version strings")
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
               for v in data.get("required_by", {}).values()):
        raise UsageError(f"{where}.required_by must map names to lists of str")
    if not all(isinstance(v, str) for d in data.get("ld_library_path", []) for v in d["libs"].values()):
        raise UsageError(f"{where}.ld_library_path[].libs must map file names to paths")


# ---- verdict: pure ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One cause: what is wrong, the command that fixes it, who must act, and whether it breaks torch."""

    problem: str
    fix: str
    fault_class: str
    fatal: bool = False


class _View:
    """Lookups over a captured section."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.pins: dict[str, str] = dict(data.get("pins", {}))
        self.dists: list[dict[str, Any]] = list(data.get("dists", []))
        self.owners: dict[str, list[dict[str, Any]]] = {}
        for d in self.dists:
            for lib in d["libs"]:
                self.owners.setdefault(lib["path"], []).append(d)

    def pinned(self, family: str) -> tuple[str, str] | None:
        """(name, version) torch pins in `family`."""
        return next(((n, v) for n, v in self.pins.items() if dist_family(n) == family), None)

    def shipping(self, lib_stem: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(dist, lib) for every wheel copy of `lib_stem`."""
        return [(d, lib) for d in self.dists for lib in d["libs"] if stem(lib["path"]) == lib_stem]

    def wheel_copy(self, lib_stem: str) -> str:
        """'DIST VERSION ships PATH' for the pinned (else first) wheel copy, or what should ship it."""
        copies = self.shipping(lib_stem)
        family = family_of(lib_stem) or ""
        pin = self.pinned(family)
        copies.sort(key=lambda c: not (pin and c[0]["name"] == canonicalize_name(pin[0])))
        if copies:
            d, lib = copies[0]
            return f"the wheel's copy is {lib['path']} ({d['name']} {d['version']})"
        return f"torch pins {pin[0]}=={pin[1]}, which is not installed" if pin else "no wheel ships it"

    def search_hit(self, real: str | None, lib_stem: str) -> tuple[str, str] | None:
        """('LD_PRELOAD' | 'LD_LIBRARY_PATH', entry) offering `real` (or, without it, any copy of `lib_stem`)."""
        for p in self.data.get("ld_preload", []):
            if (real and p == real) or (not real and stem(p) == lib_stem):
                return "LD_PRELOAD", p
        for d in self.data.get("ld_library_path", []):
            for name, target in d["libs"].items():
                if (real and (target == real or os.path.join(d["dir"], name) == real)) or (
                        not real and stem(name) == lib_stem):
                    return "LD_LIBRARY_PATH", d["dir"]
        return None

    def drop_fix(self, var: str, entry: str) -> str:
        """`export VAR=rest` (or `unset VAR`) without `entry`."""
        if var == "LD_PRELOAD":
            rest = [p for p in self.data.get("ld_preload", []) if p != entry]
            return f"export LD_PRELOAD='{' '.join(rest)}'" if rest else "unset LD_PRELOAD"
        rest = [d["dir"] for d in self.data.get("ld_library_path", []) if d["dir"] != entry]
        return f"export LD_LIBRARY_PATH={':'.join(rest)}" if rest else "unset LD_LIBRARY_PATH"


def _shadow(view: _View, path: str, lib_stem: str, fatal: bool, what: str) -> Finding:
    """A library found outside the wheels: which search entry offered it, and the fix."""
    hit = view.search_hit(path or None, lib_stem)
    copy = view.wheel_copy(lib_stem)
    if hit:
        var, entry = hit
        return Finding(f"{what} from {var} ({entry}): {copy}",
                       f"{view.drop_fix(var, entry)}  # remove {entry} so torch loads the wheel's {lib_stem}",
                       "config", fatal)
    pin = view.pinned(family_of(lib_stem) or "")
    fix = (f"pip install --force-reinstall --no-deps {pin[0]}=={pin[1]}  # the {lib_stem} torch pins"
           if pin else "pip install --force-reinstall torch  # restores the NVIDIA wheels torch pins")
    return Finding(f"{what} (not from a wheel, nor from LD_LIBRARY_PATH/LD_PRELOAD: ld.so.cache or a system "
                   f"path won): {copy}", fix, "image", fatal)


def import_finding(view: _View, error: str) -> Finding:
    """The library cause of a failed `import torch`, from its error text."""
    first = error.strip().splitlines()[0][:300] if error.strip() else "import failed"
    missing = _MISSING.search(error)
    if missing:
        soname = missing.group(1)
        lib_stem = stem(soname) or soname
        copies = [c for c in view.shipping(lib_stem) if os.path.basename(c[1]["path"]) == soname]
        pin = view.pinned(family_of(lib_stem) or "")
        if pin and not any(c[0]["name"] == canonicalize_name(pin[0]) for c in copies):
            return Finding(f"torch cannot import: {soname} is missing ({first}); torch pins {pin[0]}=={pin[1]}, "
                           "which is not installed", f"pip install {pin[0]}=={pin[1]}", "image", True)
        for d, lib in copies:
            if lib["state"] == "missing":
                return Finding(f"torch cannot import: {soname} is missing ({first}); {d['name']} "
                               f"{d['version']} lists {lib['path']} but the file is gone (removed when another "
                               "distribution sharing it was uninstalled?)",
                               f"pip install --force-reinstall --no-deps {d['name']}=={d['version']}", "image", True)
        if copies:
            d, lib = copies[0]
            return Finding(f"torch cannot import: the loader does not find {soname} ({first}), though {d['name']} "
                           f"installed it at {lib['path']}: torch and the NVIDIA wheels are in different "
                           "site-packages (torch's RUNPATH is $ORIGIN/../../nvidia/...)",
                           f"pip install --force-reinstall torch=={view.data.get('torch_version') or 'X'}  "
                           f"# one site-packages for both; stopgap: export LD_LIBRARY_PATH="
                           f"{os.path.dirname(lib['path'])}", "image", True)
        return Finding(f"torch cannot import: {soname} is missing ({first})",
                       "pip install --force-reinstall torch  # installs the NVIDIA wheels it pins", "image", True)
    undefined = _UNDEFINED.search(error)
    if undefined:
        needer, symbol, versioned = undefined.groups()
        lib_stem = stem(versioned) if versioned else next((lib for p, lib in SYMBOL_LIBS if symbol.startswith(p)),
                                                          None)
        if lib_stem is None:
            return Finding(f"torch cannot import: {first}", "pip install --force-reinstall torch", "image", True)
        who = os.path.basename(needer) if needer else "torch"
        what = f"torch cannot import: {who} needs {symbol}, which the {lib_stem} the loader found lacks (older)"
        if view.search_hit(None, lib_stem):
            return _shadow(view, "", lib_stem, True, what + "; it came")
        family = family_of(lib_stem) or ""
        doubled = [d for d in view.dists if dist_family(d["name"]) == family]
        if len(doubled) > 1:
            return duplicate_finding(view, family, doubled, fatal=True, why=what)
        pin = view.pinned(family)
        return Finding(f"{what}: {view.wheel_copy(lib_stem)}",
                       f"pip install --force-reinstall --no-deps {pin[0]}=={pin[1]}" if pin else
                       "pip install --force-reinstall torch", "image", True)
    return Finding(f"torch cannot import: {first}", "pip install --force-reinstall torch", "image", True)


def duplicate_finding(view: _View, family: str, dists: list[dict[str, Any]], fatal: bool = False,
                      why: str = "") -> Finding:
    """Several distributions of one family: which to uninstall, and the kept one to restore if files are shared."""
    pin = view.pinned(family)
    keep = next((d for d in dists if pin and d["name"] == canonicalize_name(pin[0])), None)
    if keep is None:  # nothing pinned (CPU-only torch): keep the newest CUDA (no -cuNN suffix: CUDA 13 on)
        keep = max(dists, key=_cuda_major)
    drop = [d["name"] for d in dists if d is not keep]
    paths = {lib["path"] for lib in keep["libs"]}
    shared = sorted({lib["path"] for d in dists if d is not keep for lib in d["libs"] if lib["path"] in paths})
    names = ", ".join(f"{d['name']} {d['version']}" for d in dists)
    problem = f"{len(dists)} {family} distributions are installed ({names})"
    if pin:
        problem += f"; torch pins {pin[0]}=={pin[1]}"
    if shared:
        foreign = [d["name"] for d in dists if d is not keep and any(
            lib["path"] == shared[0] and lib["state"] == "ok" for lib in d["libs"])]
        problem += f"; they share {shared[0]}" + (f", which holds {foreign[0]}'s bytes" if foreign else "")
    users = sorted({u for n in drop for u in view.data.get("required_by", {}).get(n, []) if u != "torch"})
    fix = f"pip uninstall -y {' '.join(drop)}"
    if shared:
        fix += f" && pip install --force-reinstall --no-deps {keep['name']}=={pin[1] if pin else keep['version']}"
    if users:
        fix += f"  # first check {', '.join(users)}, which require(s) {', '.join(drop)}"
    return Finding(f"{why}: {problem}" if why else problem, fix, "image", fatal)


def _cuda_major(dist: Mapping[str, Any]) -> int:
    m = re.search(r"-cu(\d+)$", dist["name"])
    return int(m.group(1)) if m else 13


def findings(data: Mapping[str, Any]) -> tuple[list[Finding], list[dict[str, Any]]]:
    """Every cause found, worst first, and a row per loaded NVIDIA library (what won, and the pin)."""
    view = _View(data)
    found: list[Finding] = []
    if data.get("import_error"):
        found.append(import_finding(view, data["import_error"]))
    rows: list[dict[str, Any]] = []
    for path in data.get("loaded", []):
        lib_stem = stem(path)
        family = family_of(lib_stem)
        if lib_stem is None or family is None:
            continue
        owners = view.owners.get(path, [])
        holders = [d for d in owners if any(x["path"] == path and x["state"] == "ok" for x in d["libs"])]
        owner = (holders or owners)[0] if owners else None
        version = owner["version"] if owner else file_version(path)
        pin = view.pinned(family)
        rows.append({"library": os.path.basename(path), "path": path, "from": owner["name"] if owner else None,
                     "version": version, "pinned": f"{pin[0]}=={pin[1]}" if pin else None})
        if owner is None and view.shipping(lib_stem):
            differs = f", not the {pin[1]} torch pins" if version and pin and same_release(version, pin[1]) is False \
                else ""
            what = f"{lib_stem} {version or '(version unknown)'} is loaded from {path}{differs}"
            found.append(_shadow(view, path, lib_stem, False, what))
        elif owner is None and pin:
            found.append(Finding(f"{lib_stem} is loaded from {path}, but torch pins {pin[0]}=={pin[1]}, which is "
                                 "not installed", f"pip install {pin[0]}=={pin[1]}", "image"))
        elif owner is not None and pin and owner["name"] != canonicalize_name(pin[0]) and len(
                [d for d in view.dists if dist_family(d["name"]) == family]) < 2:
            found.append(Finding(f"{lib_stem} is loaded from {path} ({owner['name']} {owner['version']}), but "
                                 f"torch pins {pin[0]}=={pin[1]}", f"pip install {pin[0]}=={pin[1]}", "image"))
    families: dict[str, list[dict[str, Any]]] = {}
    for d in view.dists:
        families.setdefault(dist_family(d["name"]), []).append(d)
    for family, dists in sorted(families.items()):
        if len(dists) > 1 and not any(f.fatal and family in f.problem for f in found):
            found.append(duplicate_finding(view, family, dists))
    installed = {d["name"]: d["version"] for d in view.dists}
    for name, version in sorted(view.pins.items()):
        have = installed.get(name)
        if have is not None and have != version and release(have) != release(version):
            found.append(Finding(f"{name} {have} is installed, torch {data.get('torch_version')} pins {version}",
                                 f"pip install {name}=={version}", "image"))
    found.sort(key=lambda f: not f.fatal)
    return found, rows


def verdict(data: Mapping[str, Any], ctx: Context) -> Result:
    """libs.cuda's verdict for a captured `libraries` section."""
    if not data.get("torch_installed"):
        return skipped("needs torch, which is not installed")
    found, rows = findings(data)
    measured = {"libraries": rows, "pins": data.get("pins", {}),
                "ld_library_path": [d["dir"] for d in data.get("ld_library_path", [])]}
    if found:
        summary = found[0].problem + (f" (+{len(found) - 1} more)" if len(found) > 1 else "")
        fix = " | ".join(dict.fromkeys(f.fix for f in found))
        measured["findings"] = [f.__dict__ for f in found]
        make = failed if found[0].fatal else warned
        return make(summary, fix, measured=measured, fault_class=found[0].fault_class)
    if not data.get("torch_cuda"):
        return passed(f"torch {data.get('torch_version')} is CPU-only: no CUDA libraries to check; one distribution "
                      "per NVIDIA library family", measured=measured)
    if not rows:
        return passed(f"torch {data.get('torch_version')} (CUDA {data['torch_cuda']}) has no NVIDIA library mapped "
                      "yet; one distribution per NVIDIA library family", measured=measured)
    wheel = [f"{r['library']} {r['version'] or '?'}" for r in rows if r["from"]]
    other = [r["path"] for r in rows if not r["from"]]  # no wheel ships them, torch pins none: a source build
    parts = [f"{len(wheel)} from torch's pinned wheels ({', '.join(wheel)})"] if wheel else []
    parts += [f"{len(other)} from the system, as this torch build expects ({', '.join(other)})"] if other else []
    return passed(f"NVIDIA libraries loaded: {'; '.join(parts)}", measured=measured)


SECTION = Section("libraries", "libs.cuda", capture, validate, verdict)


def libs_cuda(ctx: Context) -> Result:
    """The CUDA libraries torch loaded are the wheels' copies at the pinned versions, one distribution each."""
    return SECTION.judge(ctx)


CHECKS = (
    CheckSpec("libs.cuda", libs_cuda, "each loaded CUDA library is the pinned wheel's copy (not LD_LIBRARY_PATH's);"
              " one distribution per NVIDIA library family", needs=Needs(torch=True), timeout_s=30),
)
