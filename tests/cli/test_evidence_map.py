"""The evidence map cannot drift from the code: every code a source or a peer row names is in the code table, every
test a source names exists and names one of its codes or its key, every NVML call envcheck makes is some source's,
and every finding code the node path's modules emit is some source's. The page itself is checked against its
generator with the other reference pages (tests/cli/test_docs_reference.py). Nothing staged: the real declarations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envcheck.app.docs_evidence import evidence_page
from envcheck.app.docs_markdown import _cell
from envcheck.checks.check_registry import EVIDENCE
from envcheck.checks.gpu_health.log_evidence import sxid_coverage, xid_coverage
from envcheck.checks.peer_coverage import DCGM_ROWS, GPUD_ROWS
from envcheck.cluster.finding_codes import lookup
from envcheck.core.evidence import Kind
from tests.helpers import ROOT

NODE_PATH_MODULES = sorted(
    [
        *(ROOT / "envcheck" / "checks" / "gpu_health").glob("*.py"),
        *(ROOT / "envcheck" / "checks" / "node").glob("*.py"),
    ]
)
EMITTED = re.compile(r'^([A-Z][A-Z_]+) = "((?:gpu|driver|nvml|nvswitch|node|profile)\.[a-z_.]+)"', re.M)


def _with_its_data(path: Path) -> str:
    """A test module's text and that of the suite's modules it imports (its cases: tests/staging/contexts.py for
    tests/cluster/test_shared_nodes.py, the field corpus's records for tests/checks/gpu_health/test_field_corpus.py)."""
    text = path.read_text()
    for module in re.findall(r"^from (tests(?:\.\w+)+) import", text, re.M):
        data = ROOT / (module.replace(".", "/") + ".py")
        if data.is_file():
            text += data.read_text()
            cases = data.with_name("field_records")  # the field corpus's cases, which its loader reads
            if data.name == "field_corpus.py" and cases.is_dir():
                text += "".join(p.read_text() for p in sorted(cases.glob("*.toml")))
    return text


@pytest.mark.parametrize("source", EVIDENCE, ids=[s.name[:60] for s in EVIDENCE])
def test_each_source_names_known_codes_and_tests_that_cover_it(source: object) -> None:
    from envcheck.core.evidence import Source

    assert isinstance(source, Source)
    for code in source.codes:
        assert lookup(code) is not None, f"{source.name}: {code} is in no row of the code table"
    assert source.codes or source.qualifies, (
        f"{source.name}: a source leads to codes or says what it qualifies"
    )
    assert source.tests, f"{source.name}: no test named"
    for test in source.tests:
        path = ROOT / test
        assert path.is_file(), f"{source.name}: {test} does not exist"
        text = _with_its_data(path)
        words = [*source.codes, source.key] if source.key else list(source.codes)
        assert any(w.split("<")[0] in text for w in words if w), f"{test} names none of {words}"


def test_every_nvml_call_envcheck_makes_is_a_declared_source() -> None:
    declared = " ".join(s.name for s in EVIDENCE if s.kind is Kind.NVML)
    for module in ("nvml_fields.py", "nvml_health.py", "gpu_usage.py"):
        text = (ROOT / "envcheck" / "probe" / module).read_text()
        calls = set(re.findall(r'"(nvml(?:Device|System)[A-Za-z_0-9]+)"', text))
        # a call whose name is composed (nvmlDeviceGet{Curr|Max}PcieLink{Width|Generation}) is declared by its parts
        missing = [c for c in sorted(calls) if c not in declared]
        assert not missing, f"probe/{module} calls {missing}, which no evidence row declares"


def test_every_code_the_node_paths_modules_emit_is_some_sources() -> None:
    declared = {code for s in EVIDENCE for code in s.codes}
    for path in NODE_PATH_MODULES:
        for name, code in EMITTED.findall(path.read_text()):
            assert code in declared, f"{path.name}: {name} = {code!r} is no declared source's code"


@pytest.mark.parametrize("row", [*GPUD_ROWS, *DCGM_ROWS], ids=lambda r: f"{r.peer}: {r.signal}"[:70])
def test_each_peer_row_maps_to_declared_evidence_or_says_why_not(row: object) -> None:
    from envcheck.checks.peer_coverage import PeerRow

    assert isinstance(row, PeerRow)
    declared = {code for s in EVIDENCE for code in s.codes}
    keys = {s.key for s in EVIDENCE}
    for code in row.codes:
        assert code in declared, f"{row.signal}: {code} is no declared source's code"
    for key in row.reads:
        assert key in keys, f"{row.signal}: {key} is no declared source's key"
    assert row.status != "not" or row.why_not, f"{row.signal}: 'not' needs why not"


def test_every_xid_of_nvidias_catalogue_has_a_row_and_a_verdict() -> None:
    from envcheck.checks.gpu_health.xid_catalog import CATALOG, UNUSED

    rows = {r.number: r for r in xid_coverage()}
    assert set(CATALOG) | set(UNUSED) <= set(rows)
    assert all(r.status in ("judged", "read", "not") and r.how for r in rows.values())
    assert rows[79].how.startswith("drains") and rows[13].status == "read"
    assert all(r.status == "not" for r in rows.values() if r.how.startswith("not judged"))  # the row says why


def test_every_sxid_of_the_drivers_list_has_a_row_and_a_verdict() -> None:
    from envcheck.checks.gpu_health.sxid_catalog import SXIDS

    rows = {r.number: r for r in sxid_coverage()}
    assert set(rows) == set(SXIDS) and all(r.status == "judged" for r in rows.values())


def test_the_page_summarises_each_peer_and_lists_every_source() -> None:
    page = evidence_page()
    assert "| leptonai/gpud components |" in page and "| DCGM health-watch systems |" in page
    for source in EVIDENCE:
        assert _cell(f"`{source.name}`") in page, source.name  # as the table writes a code span


def test_the_map_is_in_the_sites_navigation() -> None:
    assert "reference/evidence.md" in (ROOT / "mkdocs.yml").read_text()
    assert Path(ROOT / "docs" / "reference" / "evidence.md").is_file()


# The NVML read each DCGM health-watch rule rests on (DCGM 4.6 modules/health/DcgmHealthWatch.cpp; the DCGM field's
# NVML source from dcgmlib/src/dcgm_fields.cpp): MonitorPCIe judges DCGM_FI_DEV_PCIE_REPLAY_COUNTER
# (nvmlDeviceGetPcieReplayCounter; generation and width only scale its limit, GetExpectedPcieReplayRate);
# MonitorPower DCGM_FI_DEV_POWER_VIOLATION (NVML field 74, the SW power cap's time); MonitorThermal
# DCGM_FI_DEV_THERMAL_VIOLATION (NVML's thermal policy time, field 269 in nvml.h's translation table);
# MonitorInforom nvmlDeviceValidateInforom; MonitorGpuRecoveryAction field 230.
DCGM_RESTS_ON = {
    "PCIe (0x1)": "nvmlDeviceGetPcieReplayCounter",
    "Power (0x100)": "field 74",
    "Thermal (0x80)": "269",
    "InfoROM (0x40)": "nvmlDeviceValidateInforom",
    "Driver (0x200)": "(230)",
}


@pytest.mark.parametrize("signal, read", sorted(DCGM_RESTS_ON.items()))
def test_a_dcgm_system_is_judged_only_where_envcheck_reads_the_signal_it_judges(
    signal: str, read: str
) -> None:
    """A row is 'judged' when envcheck judges the same signal, not another one under the same system's name: a
    narrow PCIe link is not a replay rate, a HW power brake is not the SW power cap's time."""
    row = next(r for r in DCGM_ROWS if r.signal == signal)
    declared = " ".join(s.name for s in EVIDENCE if s.kind is Kind.NVML)
    assert row.status != "judged" or read in declared, f"{signal}: judged, but no source reads {read}"
