"""The one table of finding codes (one row per code or code family: code, meaning, fault class, fix), gathered from
the named constants of the modules that emit them, and `markdown()`, which renders it as the codes reference page.
Cluster policy and severity read codes from here, never as literals of their own. The rows live beside their domain:
cuda_rows (the CUDA layers, the node profile), gpu_rows (a GPU's presence, the kernel log, DCGM), nvml_rows (what NVML
says of a GPU: memory, links, fabric, recovery, licence), log_rows (the driver's catalogues in the kernel log),
software_rows (runtime, compile, image), cluster_rows (collectives, performance, fleet, the catch-all), burn_rows
(the burn-in and its fleet checksums).

A family writes its variable part in angle brackets (`xid.<xid>`, `cuda.error.<code>`); `lookup` finds a code's row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from envcheck.cluster.finding_codes import (
    burn_rows,
    cluster_rows,
    cuda_rows,
    gpu_rows,
    log_rows,
    nvml_rows,
    software_rows,
)
from envcheck.core.findings import Code

TABLE: tuple[Code, ...] = (
    *cuda_rows.ROWS,
    *gpu_rows.ROWS,
    *nvml_rows.ROWS,
    *log_rows.ROWS,
    *software_rows.ROWS,
    *cluster_rows.ROWS,
    *burn_rows.ROWS,
)
_PLACEHOLDER = re.compile(r"<[^>]+>")


def _pattern(code: str) -> re.Pattern[str]:
    return re.compile(
        "^" + ".+".join(re.escape(p) for p in _PLACEHOLDER.split(code)) + "$"
    )  # a check name has dots


_EXACT = {row.code: row for row in TABLE if "<" not in row.code}
_FAMILIES = [(_pattern(row.code), row) for row in TABLE if "<" in row.code]


def lookup(code: str) -> Code | None:
    """The table's row for `code`: its own, else its family's (`xid.79` -> `xid.<xid>`), else None."""
    if code in _EXACT:
        return _EXACT[code]
    families = [row for pattern, row in _FAMILIES if pattern.match(code)]
    return max(families, key=lambda r: len(_PLACEHOLDER.sub("", r.code)), default=None)


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def markdown(rows: Iterable[Code] = TABLE) -> str:
    """The codes reference page: one row per code (code, meaning, fault class, fix), sorted by code."""
    lines = [
        "# Finding codes",
        "",
        "Every finding code envcheck gives, what it means, who must act (its fault class) and the usual fix. "
        "Generated from `envcheck.cluster.finding_codes.TABLE`; do not edit by hand.",
        "",
        "| Code | Meaning | Fault class | Fix |",
        "| --- | --- | --- | --- |",
    ]
    for row in sorted(rows, key=lambda r: r.code):
        who = row.fault_class.value if row.fault_class is not None else "depends"
        lines.append(f"| `{row.code}` | {_cell(row.meaning)} | {who} | {_cell(row.fix)} |")
    return "\n".join(lines) + "\n"
