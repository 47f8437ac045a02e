"""NVIDIA's kernel-log catalogues row by row, with what envcheck concludes of each number: the evidence map's Xid and
SXid tables (docs/reference/evidence.md), derived from the same data the verdict uses."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.checks.gpu_health.xid import XID_CATALOG, meaning_of
from envcheck.checks.gpu_health.xid_catalog import CATALOG, UNUSED

DRAIN_RANK = 1  # gpu.health's: a finding up to this rank fails the check


@dataclass(frozen=True)
class CatalogueRow:
    """One catalogue number: NVIDIA's name and resolution, envcheck's status ('judged', 'read', 'not') and how."""

    number: int
    name: str
    nvidia: str
    status: str
    how: str


def _how(rank: int | None) -> tuple[str, str]:
    if rank is None:
        return "read", "the application's error, not the node's: never a node finding"
    return "judged", "drains (a node FAIL)" if rank <= DRAIN_RANK else "warns (a node WARN)"


def xid_coverage() -> list[CatalogueRow]:
    """Every Xid of NVIDIA's catalogue, and the driver's newer ones envcheck knows."""
    rows = []
    for xid in sorted(set(CATALOG) | set(XID_CATALOG) | set(UNUSED)):
        meaning = meaning_of(xid)
        status, how = _how(meaning.rank)
        if xid in CATALOG:
            mnemonic, _, now, later = CATALOG[xid]
            nvidia = now if later == now else f"{now}, then {later}"
        elif xid in UNUSED:
            mnemonic, nvidia = "", "unused (deprecated, or Volta and older)"
        else:
            mnemonic, nvidia = "", "not in the catalogue (the driver's nverror.h)"
        rows.append(CatalogueRow(xid, mnemonic, nvidia, status, how))
    return rows


def sxid_coverage() -> list[CatalogueRow]:
    """Every SXid of NVIDIA's SXid catalogue (none is tabled yet: SXid lines are judged by their own tag)."""
    return []
