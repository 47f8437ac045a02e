"""Lookups over libs.cuda's captured section (envcheck.checks.libraries.rules judges with them): what torch pins in a
library family, which wheels ship a library, which LD_PRELOAD or LD_LIBRARY_PATH entry offered one, and the `export`
that drops that entry."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name

from envcheck.checks.libraries.inputs import dist_family, family_of, stem


class SectionView:
    """Lookups over a captured `libraries` section."""

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
                    not real and stem(name) == lib_stem
                ):
                    return "LD_LIBRARY_PATH", d["dir"]
        return None

    def drop_fix(self, var: str, entry: str) -> str:
        """`export VAR=rest` (or `unset VAR`) without `entry`."""
        if var == "LD_PRELOAD":
            rest = [p for p in self.data.get("ld_preload", []) if p != entry]
            return f"export LD_PRELOAD='{' '.join(rest)}'" if rest else "unset LD_PRELOAD"
        rest = [d["dir"] for d in self.data.get("ld_library_path", []) if d["dir"] != entry]
        return f"export LD_LIBRARY_PATH={':'.join(rest)}" if rest else "unset LD_LIBRARY_PATH"
