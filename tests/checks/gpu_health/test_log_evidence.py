"""The kernel log's rows of the evidence map (checks.gpu_health.log_evidence): every declared code has its row in the
finding-code table, every declared test exists, and the coverage rows cover every number of NVIDIA's Xid and SXid
catalogues with the verdict the code gives. Staged: nothing."""

from __future__ import annotations

from pathlib import Path

from envcheck.checks.gpu_health.log_evidence import LOG_SOURCES, sxid_coverage, xid_coverage
from envcheck.checks.gpu_health.sxid_catalog import SXIDS
from envcheck.cluster.finding_codes import lookup
from envcheck.core.evidence import Kind

ROOT = Path(__file__).resolve().parents[3]


def test_each_source_declares_codes_of_the_table_and_tests_of_the_tree() -> None:
    assert len(LOG_SOURCES) >= 8 and all(s.kind is Kind.KERNEL_LOG for s in LOG_SOURCES)
    for source in LOG_SOURCES:
        assert source.codes and all(lookup(c) is not None for c in source.codes), source.name
        assert all((ROOT / t).is_file() for t in source.tests), source.tests
        assert source.rule and source.reads


def test_xid_coverage_has_one_row_per_catalogue_number() -> None:
    rows = xid_coverage()
    assert [r[0] for r in rows] == list(range(1, 177))
    by = {r[0]: r for r in rows}
    assert by[79].how.startswith("drains") and by[43][3] == "read: the application's"
    assert "decoded per the sheet's row" in by[149][3] and by[149][2].startswith("WORKFLOW_NVLINK5_ERR")
    assert by[167][3].startswith("warns") and "no bucket" in by[167][2]
    assert "not in the catalogue" in by[175][2]
    assert (by[79].status, by[43].status, by[14].status) == ("judged", "read", "not")


def test_sxid_coverage_has_one_row_per_sxid_with_its_verdict() -> None:
    rows = sxid_coverage()
    assert [r[0] for r in rows] == sorted(SXIDS)
    by = {r[0]: r for r in rows}
    assert by[20034][3].endswith("untagged: drains") and "fatal (port/partition)" in by[20034][2]
    assert by[22013][3].endswith("untagged: no finding")
    assert "tagged Non-fatal: warns" in by[12028][3]
    assert by[26006][3].endswith("untagged: drains") and "free text" in by[26006][2]
