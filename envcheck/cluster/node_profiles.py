"""Node profiles: what a node of one type must have, as data (a TOML file per node type, as Azure keeps a conf file
per VM size and cluster-health-scanner a golden config). `--profile FILE` or a built-in name (`--profile
h100-sxm-8`, shipped in envcheck/cluster/profiles/). A bad file is one line naming the field, exit 2."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from envcheck.core.check import ProfileOptions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

BUILT_IN = Path(__file__).with_name("profiles")
MAX_BYTES = 64 * 1024
LEVELS = ("node", "torch")
_INTS = ("gpu_count", "nvlink_links", "pcie_gen", "pcie_width")
_LIMITS = {"gpu_count": (1, 64), "nvlink_links": (0, 64), "pcie_gen": (1, 7), "pcie_width": (1, 32)}
_DRIVER = re.compile(r"\d{3}(\.\d{1,3}){1,2}")


def built_in() -> list[str]:
    """The names of the profiles shipped with envcheck."""
    return sorted(p.stem for p in BUILT_IN.glob("*.toml"))


def _field(data: dict[str, Any], key: str, where: str) -> Any:
    value = data[key]
    if key in _INTS:
        low, high = _LIMITS[key]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"{where}: {key} = {value!r} must be a whole number from {low} to {high}")
    elif key == "busbw_floor_gbps":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 100000:
            raise ValueError(f"{where}: busbw_floor_gbps = {value!r} must be a positive number (GB/s)")
        value = float(value)
    elif key == "busbw_floor_bytes":
        if not isinstance(value, int) or isinstance(value, bool) or not 4 <= value <= 1024**4 or value % 4:
            raise ValueError(
                f"{where}: busbw_floor_bytes = {value!r} must be the floor's all-reduce message size in "
                "bytes, a multiple of 4 (16 GiB = 17179869184)"
            )
    elif key == "driver_floor":
        if not isinstance(value, str) or not _DRIVER.fullmatch(value):
            raise ValueError(
                f'{where}: driver_floor = {value!r} must be a driver version such as "535.104.05"'
            )
    elif key == "level":
        if value not in LEVELS:
            raise ValueError(f"{where}: level = {value!r} must be one of {', '.join(LEVELS)}")
    elif not isinstance(value, str) or not value.strip() or not value.isprintable() or len(value) > 120:
        raise ValueError(f"{where}: {key} must be a short one-line string")
    return value


def parse(text: str, name: str, where: str) -> ProfileOptions:
    """A profile from TOML text; ValueError naming the file and the field on anything malformed."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{where}: not valid TOML ({exc})") from None
    known = {f.name for f in dataclasses.fields(ProfileOptions)} - {"profile"}
    # [baseline]: a fleet's learned baseline (`envcheck fleet --write-baseline`), read by `envcheck fleet --baseline`
    unknown = sorted(set(data) - known - {"sources", "baseline"})
    if unknown:
        raise ValueError(
            f"{where}: unknown field {unknown[0]!r}; known: {', '.join(sorted(known))}, [sources], [baseline]"
        )
    if "sources" in data and not isinstance(data["sources"], dict):
        raise ValueError(f'{where}: sources must be a table of field = "where the value comes from"')
    values = {key: _field(data, key, where) for key in sorted(known) if key in data}
    if not any(k in values for k in ("gpu_model", "gpu_count", "driver_floor", "nvlink_links", "pcie_gen")):
        raise ValueError(f"{where}: expects nothing; set at least gpu_model or gpu_count")
    return ProfileOptions(profile=name, **values)


def load(spec: str) -> ProfileOptions:
    """A built-in profile by name, else a TOML file by path; ValueError with one line on failure."""
    if re.fullmatch(r"[a-z0-9][a-z0-9-]*", spec) and (BUILT_IN / f"{spec}.toml").is_file():
        return parse(
            (BUILT_IN / f"{spec}.toml").read_text(encoding="utf-8"), spec, f"built-in profile {spec}"
        )
    path = Path(spec)
    if not path.suffix and os.sep not in spec:
        raise ValueError(f"no built-in profile {spec!r} and no such file; built-in: {', '.join(built_in())}")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block or never end
            raise ValueError(f"{spec} is not a regular file; give a TOML file")
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read profile {spec}: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{spec}: larger than {MAX_BYTES // 1024} KiB; a profile is a few lines of TOML")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{spec}: not UTF-8 text") from None
    return parse(text, path.stem, spec)


def profile_arg(text: str) -> ProfileOptions:
    """argparse type for --profile: one line naming the problem and the field (exit 2)."""
    try:
        return load(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
