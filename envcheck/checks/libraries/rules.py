"""libs.cuda's verdict: a pure function of the captured section (envcheck explain replays it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name

from envcheck.checks.libraries.causes import LibraryFinding, duplicate_finding, shadow_finding
from envcheck.checks.libraries.inputs import (
    MISSING_LIBRARY,
    SYMBOL_LIBS,
    UNDEFINED_SYMBOL,
    dist_family,
    family_of,
    file_version,
    same_release,
    stem,
)
from envcheck.checks.libraries.section_view import SectionView
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, failed, passed, skipped, warned
from envcheck.core.versions import release


def import_finding(view: SectionView, error: str) -> LibraryFinding:
    """The library cause of a failed `import torch`, from its error text."""
    first = error.strip().splitlines()[0][:300] if error.strip() else "import failed"
    missing = MISSING_LIBRARY.search(error)
    if missing:
        soname = missing.group(1)
        lib_stem = stem(soname) or soname
        copies = [c for c in view.shipping(lib_stem) if os.path.basename(c[1]["path"]) == soname]
        pin = view.pinned(family_of(lib_stem) or "")
        if pin and not any(c[0]["name"] == canonicalize_name(pin[0]) for c in copies):
            return LibraryFinding(
                f"torch cannot import: {soname} is missing ({first}); torch pins {pin[0]}=={pin[1]}, "
                "which is not installed",
                f"pip install {pin[0]}=={pin[1]}",
                FaultClass.IMAGE,
                fatal=True,
            )
        for d, lib in copies:
            if lib["state"] == "missing":
                return LibraryFinding(
                    f"torch cannot import: {soname} is missing ({first}); {d['name']} "
                    f"{d['version']} lists {lib['path']} but the file is gone (removed when another "
                    "distribution sharing it was uninstalled?)",
                    f"pip install --force-reinstall --no-deps {d['name']}=={d['version']}",
                    FaultClass.IMAGE,
                    fatal=True,
                )
        if copies:
            d, lib = copies[0]
            return LibraryFinding(
                f"torch cannot import: the loader does not find {soname} ({first}), though {d['name']} "
                f"installed it at {lib['path']}: torch and the NVIDIA wheels are in different "
                "site-packages (torch's RUNPATH is $ORIGIN/../../nvidia/...)",
                f"pip install --force-reinstall torch=={view.data.get('torch_version') or 'X'}  "
                f"# one site-packages for both; stopgap: export LD_LIBRARY_PATH="
                f"{os.path.dirname(lib['path'])}",
                FaultClass.IMAGE,
                fatal=True,
            )
        return LibraryFinding(
            f"torch cannot import: {soname} is missing ({first})",
            "pip install --force-reinstall torch  # installs the NVIDIA wheels it pins",
            FaultClass.IMAGE,
            fatal=True,
        )
    undefined = UNDEFINED_SYMBOL.search(error)
    if undefined:
        needer, symbol, versioned = undefined.groups()
        lib_stem = (
            stem(versioned)
            if versioned
            else next((lib for p, lib in SYMBOL_LIBS if symbol.startswith(p)), None)
        )
        if lib_stem is None:
            return LibraryFinding(
                f"torch cannot import: {first}",
                "pip install --force-reinstall torch",
                FaultClass.IMAGE,
                fatal=True,
            )
        who = os.path.basename(needer) if needer else "torch"
        what = (
            f"torch cannot import: {who} needs {symbol}, which the {lib_stem} the loader found lacks (older)"
        )
        if view.search_hit(None, lib_stem):
            return shadow_finding(view, "", lib_stem, True, what + "; it came")
        family = family_of(lib_stem) or ""
        doubled = [d for d in view.dists if dist_family(d["name"]) == family]
        if len(doubled) > 1:
            return duplicate_finding(view, family, doubled, fatal=True, why=what)
        pin = view.pinned(family)
        return LibraryFinding(
            f"{what}: {view.wheel_copy(lib_stem)}",
            f"pip install --force-reinstall --no-deps {pin[0]}=={pin[1]}"
            if pin
            else "pip install --force-reinstall torch",
            FaultClass.IMAGE,
            fatal=True,
        )
    return LibraryFinding(
        f"torch cannot import: {first}", "pip install --force-reinstall torch", FaultClass.IMAGE, fatal=True
    )


def findings(data: Mapping[str, Any]) -> tuple[list[LibraryFinding], list[dict[str, Any]]]:
    """Every cause found, worst first, and a row per loaded NVIDIA library (what won, and the pin)."""
    view = SectionView(data)
    found: list[LibraryFinding] = []
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
        rows.append(
            {
                "library": os.path.basename(path),
                "path": path,
                "from": owner["name"] if owner else None,
                "version": version,
                "pinned": f"{pin[0]}=={pin[1]}" if pin else None,
            }
        )
        if owner is None and view.shipping(lib_stem):
            differs = (
                f", not the {pin[1]} torch pins"
                if version and pin and same_release(version, pin[1]) is False
                else ""
            )
            what = f"{lib_stem} {version or '(version unknown)'} is loaded from {path}{differs}"
            found.append(shadow_finding(view, path, lib_stem, False, what))
        elif owner is None and pin:
            found.append(
                LibraryFinding(
                    f"{lib_stem} is loaded from {path}, but torch pins {pin[0]}=={pin[1]}, which is "
                    "not installed",
                    f"pip install {pin[0]}=={pin[1]}",
                    FaultClass.IMAGE,
                )
            )
        elif (
            owner is not None
            and pin
            and owner["name"] != canonicalize_name(pin[0])
            and len([d for d in view.dists if dist_family(d["name"]) == family]) < 2
        ):
            found.append(
                LibraryFinding(
                    f"{lib_stem} is loaded from {path} ({owner['name']} {owner['version']}), but "
                    f"torch pins {pin[0]}=={pin[1]}",
                    f"pip install {pin[0]}=={pin[1]}",
                    FaultClass.IMAGE,
                )
            )
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
            found.append(
                LibraryFinding(
                    f"{name} {have} is installed, torch {data.get('torch_version')} pins {version}",
                    f"pip install {name}=={version}",
                    FaultClass.IMAGE,
                )
            )
    found.sort(key=lambda f: not f.fatal)
    return found, rows


def verdict(data: Mapping[str, Any], ctx: Context) -> Result:
    """libs.cuda's verdict for a captured `libraries` section."""
    if not data.get("torch_installed"):
        return skipped("needs torch, which is not installed")
    found, rows = findings(data)
    measured = {
        "libraries": rows,
        "pins": data.get("pins", {}),
        "ld_library_path": [d["dir"] for d in data.get("ld_library_path", [])],
    }
    if found:
        summary = found[0].problem + (f" (+{len(found) - 1} more)" if len(found) > 1 else "")
        fix = " | ".join(dict.fromkeys(f.fix for f in found))
        measured["findings"] = [f.__dict__ for f in found]
        make = failed if found[0].fatal else warned
        return make(summary, fix, measured=measured, fault_class=found[0].fault_class)
    if not data.get("torch_cuda"):
        return passed(
            f"torch {data.get('torch_version')} is CPU-only: no CUDA libraries to check; one distribution "
            "per NVIDIA library family",
            measured=measured,
        )
    if not rows:
        return passed(
            f"torch {data.get('torch_version')} (CUDA {data['torch_cuda']}) has no NVIDIA library mapped "
            "yet; one distribution per NVIDIA library family",
            measured=measured,
        )
    wheel = [f"{r['library']} {r['version'] or '?'}" for r in rows if r["from"]]
    other = [r["path"] for r in rows if not r["from"]]  # no wheel ships them, torch pins none: a source build
    parts = [f"{len(wheel)} from torch's pinned wheels ({', '.join(wheel)})"] if wheel else []
    parts += (
        [f"{len(other)} from the system, as this torch build expects ({', '.join(other)})"] if other else []
    )
    return passed(f"NVIDIA libraries loaded: {'; '.join(parts)}", measured=measured)
