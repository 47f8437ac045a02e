"""The causes libs.cuda names on every path (a failed `import torch` and the loaded libraries alike): a library found
outside the wheels (an LD_PRELOAD or LD_LIBRARY_PATH entry, or ld.so.cache), and several distributions of one NVIDIA
library family; each with the command that fixes it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from envcheck.checks.libraries.inputs import family_of
from envcheck.checks.libraries.section_view import SectionView
from envcheck.core.findings import Finding
from envcheck.core.result import FaultClass


@dataclass(frozen=True, kw_only=True)
class LibraryFinding(Finding):
    """One cause (the code is the check's own): and whether it breaks torch (`fatal`: FAIL, else WARN)."""

    fatal: bool = False


def shadow_finding(view: SectionView, path: str, lib_stem: str, fatal: bool, what: str) -> LibraryFinding:
    """A library found outside the wheels: which search entry offered it, and the fix."""
    hit = view.search_hit(path or None, lib_stem)
    copy = view.wheel_copy(lib_stem)
    if hit:
        var, entry = hit
        return LibraryFinding(
            f"{what} from {var} ({entry}): {copy}",
            f"{view.drop_fix(var, entry)}  # remove {entry} so torch loads the wheel's {lib_stem}",
            FaultClass.CONFIG,
            fatal=fatal,
        )
    pin = view.pinned(family_of(lib_stem) or "")
    fix = (
        f"pip install --force-reinstall --no-deps {pin[0]}=={pin[1]}  # the {lib_stem} torch pins"
        if pin
        else "pip install --force-reinstall torch  # restores the NVIDIA wheels torch pins"
    )
    return LibraryFinding(
        f"{what} (not from a wheel, nor from LD_LIBRARY_PATH/LD_PRELOAD: ld.so.cache or a system "
        f"path won): {copy}",
        fix,
        FaultClass.IMAGE,
        fatal=fatal,
    )


def duplicate_finding(
    view: SectionView, family: str, dists: list[dict[str, Any]], fatal: bool = False, why: str = ""
) -> LibraryFinding:
    """Several distributions of one family: which to uninstall, and the kept one to restore if files are shared."""
    pin = view.pinned(family)
    keep = next((d for d in dists if pin and d["name"] == canonicalize_name(pin[0])), None)
    if keep is None:  # nothing pinned (CPU-only torch): keep the newest CUDA (no -cuNN suffix: CUDA 13 on)
        keep = max(dists, key=_cuda_major)
    drop = [d["name"] for d in dists if d is not keep]
    paths = {lib["path"] for lib in keep["libs"]}
    shared = sorted(
        {lib["path"] for d in dists if d is not keep for lib in d["libs"] if lib["path"] in paths}
    )
    names = ", ".join(f"{d['name']} {d['version']}" for d in dists)
    problem = f"{len(dists)} {family} distributions are installed ({names})"
    if pin:
        problem += f"; torch pins {pin[0]}=={pin[1]}"
    if shared:
        foreign = [
            d["name"]
            for d in dists
            if d is not keep and any(lib["path"] == shared[0] and lib["state"] == "ok" for lib in d["libs"])
        ]
        problem += f"; they share {shared[0]}" + (f", which holds {foreign[0]}'s bytes" if foreign else "")
    users = sorted({u for n in drop for u in view.data.get("required_by", {}).get(n, []) if u != "torch"})
    fix = f"pip uninstall -y {' '.join(drop)}"
    if shared:
        fix += f" && pip install --force-reinstall --no-deps {keep['name']}=={pin[1] if pin else keep['version']}"
    if users:
        fix += f"  # first check {', '.join(users)}, which require(s) {', '.join(drop)}"
    return LibraryFinding(f"{why}: {problem}" if why else problem, fix, FaultClass.IMAGE, fatal=fatal)


def _cuda_major(dist: Mapping[str, Any]) -> int:
    m = re.search(r"-cu(\d+)$", dist["name"])
    return int(m.group(1)) if m else 13
