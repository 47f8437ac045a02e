"""NVIDIA's Xid catalogue as envcheck holds it (checks.gpu_health.xid_catalog) against the sheet it comes from
(Xid-Catalog.xlsx behind https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, revision of 2025-09-30):
the rows that give no resolution bucket get none invented, the decode sheet's buckets are defined, and the 'Xid 154
linkage' column is carried. Staged: nothing (the catalogue is data)."""

from __future__ import annotations

import pytest

from envcheck.checks.gpu_health.nvlink5_sheet import ROWS
from envcheck.checks.gpu_health.xid import meaning_of
from envcheck.checks.gpu_health.xid_catalog import BUCKET_RANK, BUCKETS, CATALOG, TRIGGER, XID_154_LINKED


@pytest.mark.parametrize("xid", range(162, 173))
def test_the_xids_without_a_bucket_get_none_and_never_drain(xid: int) -> None:
    """Sheet rows 163-173: columns I and J (immediate, investigatory) are empty."""
    _, _, now, later = CATALOG[xid]
    assert (now, later) == ("", "")
    m = meaning_of(xid)
    assert m.rank is None or m.rank >= 2, (xid, m)
    assert "no resolution bucket" in m.meaning
    if xid in TRIGGER:  # the catalogue's trigger text is the only action it gives
        assert m.fix == TRIGGER[xid]


def test_xid142_has_no_investigatory_bucket() -> None:
    assert CATALOG[142][2:] == ("CONTACT_SUPPORT", "")
    assert "if it recurs" not in meaning_of(142).fix


def test_every_bucket_the_catalogue_and_the_decode_sheet_use_is_defined() -> None:
    used = {b for row in CATALOG.values() for b in row[2:] if b}
    used |= {b for row in ROWS for b in (row.bucket, row.investigate, row.action2) if b}
    assert used <= set(BUCKETS), used - set(BUCKETS)
    assert BUCKET_RANK["XID_154_EVAL"] is None and BUCKET_RANK["RESET_GPU"] == 1


def test_the_xid154_linkage_column() -> None:
    """Column K, set for 48, 62-64, 74, 79, 94, 95, 109, 110, 120, 136, 143-150, 155, 156, 158-161."""
    assert {144, 149, 150, 74, 79, 94, 95, 158, 159} <= XID_154_LINKED
    assert not {13, 31, 43, 45, 119, 154} & XID_154_LINKED


def test_an_nvlink5_xid_by_its_number_alone_warns() -> None:
    """Without its record's fields the number says nothing the sheet can judge (checks.gpu_health.nvlink5)."""
    assert all(meaning_of(x).rank == 2 for x in range(144, 151))
