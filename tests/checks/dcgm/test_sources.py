"""The DCGM checks' evidence declarations (envcheck.checks.dcgm.dcgm_sources) hold to the code: every code they name is in
the finding-code table, every test file exists, and the health-watch systems are DCGM's whole enum (dcgmHealthSystems_t,
dcgmlib/dcgm_structs.h@v4.6.0), each with the code the verdict gives its incidents."""

from __future__ import annotations

from pathlib import Path

from envcheck.checks.dcgm import EVIDENCE, HEALTH_SYSTEMS
from envcheck.checks.dcgm.health_verdict import SYSTEMS
from envcheck.cluster.finding_codes import lookup
from tests.checks.dcgm import health_documents as h

ROOT = Path(__file__).resolve().parents[3]


def test_every_declared_code_is_in_the_table_and_every_test_file_exists() -> None:
    for source in EVIDENCE:
        assert source.codes or source.qualifies, source.name
        for code in source.codes:
            assert lookup(code) is not None, (source.name, code)
        for test in source.tests:
            assert (ROOT / test).is_file(), (source.name, test)


def test_the_health_systems_are_dcgms_enum_each_with_its_finding_code() -> None:
    values = [s.value for s in HEALTH_SYSTEMS]
    expected = [*h.LABEL, h.NVSWITCH_NONFATAL, h.NVSWITCH_FATAL, h.ALL]
    assert sorted(values) == sorted(expected) and len(set(values)) == len(values)
    for system in HEALTH_SYSTEMS:
        assert system.label == h.label(system.value), system.name  # dcgmi's own label for it
        if system.label in SYSTEMS:  # a labelled system: the verdict's code follows the label
            assert system.code == f"dcgm.health.{SYSTEMS[system.label]}"
        assert system.code.startswith("dcgm.health.") and lookup(system.code) is not None
        assert system.rule and system.judges and system.verdict
