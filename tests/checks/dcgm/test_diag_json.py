"""The reader of `dcgmi diag -j` and its verdict, against every shape DCGM's writer has produced (tests/checks/dcgm/
documents.py says where each document comes from). Staged: the documents (no DCGM here); real: the reader, the
verdict and the Result they give the cluster policy.
"""

from __future__ import annotations

import json

import pytest

from envcheck.checks.dcgm import error_codes
from envcheck.checks.dcgm.diag_json import Diagnostic, Unread
from envcheck.checks.dcgm.document import parse
from envcheck.checks.dcgm.verdict import CONFIG, NO_RESULT, verdict
from envcheck.core.result import FaultClass, Result, Status
from tests.checks.dcgm import documents as d


def read(text: str) -> Diagnostic:
    got = parse(text)
    assert isinstance(got, Diagnostic), got
    return got


def judged(text: str, pci: dict[str, str] | None = None) -> Result:
    return verdict(read(text), 1, {}, pci)


def test_2x_one_string_per_result_and_fail_for_a_warning() -> None:
    """2.x: gpu_ids "1", warnings one string, no error id. The Deployment "Fail" is persistence mode (DCGM's WARN,
    known by its message format); the memory failure on GPU 1 is the node's."""
    tests = {t.name: t for t in read(d.V2).tests}
    assert tests["GPU Memory"].status == "fail" and tests["GPU Memory"].gpus == ["1"]
    assert tests["GPU Memory"].info == ["Allocated 15836319744 bytes (98.4%)"]
    assert tests["Persistence Mode"].error_ids == [29]  # DCGM_FR_PERSISTENCE_MODE, from the text
    result = judged(d.V2)
    assert result.status is Status.FAIL and result.code == "dcgm.diag.gpu_memory"
    assert result.summary.startswith(
        "DCGM test 'GPU Memory' (Hardware) failed on GPU 1: Found 4 faulty memory"
    )


def test_2x_persistence_mode_alone_is_a_setting_not_a_drain() -> None:
    result = judged(d.V2_WARN_ONLY)
    assert result.status is Status.WARN and result.code == CONFIG and result.fault_class is FaultClass.NODE
    assert "Persistence mode for GPU 0 is disabled" in result.summary and "not the hardware" in result.summary


def test_3_2_error_id_beside_the_string() -> None:
    diag = read(d.V3_2)
    assert diag.version == "3.2.6" and diag.tests[0].error_ids == [52]
    result = verdict(diag, 1, {}, {"1": "0000:18:00"})
    assert result.status is Status.FAIL and "failed on GPU 1 (0000:18:00)" in result.summary
    assert result.measured["findings"][0]["pci"] == ["0000:18:00"]


def test_3_3_1_deployment_errors_as_strings_and_a_monitor_error_warns() -> None:
    """3.3.1: the busy-GPU cuCtxCreate error is DCGM_FR_CUDA_API (51), severity MONITOR: "Fail" in the JSON, a
    warning by DCGM's own severity (the old reader drained the node for it); the serial comes from the document."""
    diag = read(d.V3_3_1)
    memory = next(t for t in diag.tests if t.name == "GPU Memory")
    assert memory.gpus == ["0"] and [e.kind for e in memory.errors] == ["monitor"]
    result = verdict(diag, 1, {}, {"0": "0000:3b:00"})
    assert result.status is Status.WARN and result.code == "dcgm.diag.gpu_memory"
    assert "warned on GPU 0 (0000:3b:00, serial 1652223012345)" in result.summary
    assert result.fault_class is FaultClass.NODE


def test_3_3_9_deployment_messages_under_warnings_and_an_isolate_error_fails() -> None:
    diag = read(d.V3_3_9)
    persistence = next(t for t in diag.tests if t.name == "Persistence Mode")
    assert [e.text for e in persistence.errors] == [d.PERSISTENCE] and persistence.gpus == ["0"]
    assert next(t for t in diag.tests if t.name == "CPU EUD Test").status == "pass"
    result = verdict(diag, 2, {})
    assert result.status is Status.FAIL and result.code == "dcgm.diag.gpu_memory"
    assert "failed on GPU 1 (serial 1652223012346): Found 4 faulty memory" in result.summary
    assert result.measured["tests"]["Persistence Mode"] == "config"
    assert [f["kinds"] for f in result.measured["findings"]] == [["config"], ["fault"]]


def test_all_skip_is_never_a_fault() -> None:
    """NVIDIA/DCGM#139: every test skipped (the SKU file was missing): DCGM judged nothing, which is no fault."""
    result = judged(d.ALL_SKIP_3_3)
    assert result.status is Status.PASS and set(result.measured["tests"].values()) == {"skip"}


def test_gb10_persistence_mode_fail_is_a_setting() -> None:
    """A real DCGM 4.2.3 run: "Fail" with error_severity 5 (DCGM_ERROR_CONFIG); the old reader made it a node FAIL
    that drains a healthy node. The serial DCGM could not read is left out."""
    diag = read(d.GB10_4_2_3)
    assert diag.version == "4.2.3" and diag.serials == {}
    result = verdict(diag, 1, {}, {"0": "000f:01:00"})
    assert result.status is Status.WARN and result.code == CONFIG and result.fault_class is FaultClass.NODE
    assert result.summary.startswith(
        "DCGM test 'software' (Deployment) flagged a setting on GPU 0 (000f:01:00): Persistence Mode: Persistence"
    )
    assert "nvidia-smi -i <gpuId> -pm 1" in result.summary


def test_eight_gpus_passing_with_info_lists() -> None:
    """NVIDIA/DCGM#215's 4.x "diagnostic" test: info as lists, one result per entity, a test_summary."""
    diag = read(d.DIAGNOSTIC_8_GPUS_4X)
    assert diag.tests[0].status == "pass" and len(diag.tests[0].info) == 8
    assert judged(d.DIAGNOSTIC_8_GPUS_4X).status is Status.PASS


def test_4x_failure_names_the_gpu_by_pci_address_and_serial() -> None:
    doc = d.v4(
        [
            {
                "name": "memory",
                "results": [
                    d.v4_gpu(0, "Pass"),
                    d.v4_gpu(1, "Fail", d.v4_error(d.FAULTY_MEMORY, 52, error_codes.ISOLATE, 10)),
                ],
                "test_summary": {
                    "status": "Fail",
                    "warnings": [d.v4_error(d.FAULTY_MEMORY, 52, error_codes.ISOLATE, 10)],
                },
            }
        ],
        serials={0: "1321021034567", 1: "1321021034568"},
    )
    result = judged(doc, {"0": "0000:18:00", "1": "0000:2a:00"})
    assert result.status is Status.FAIL and result.code == "dcgm.diag.memory"
    assert "failed on GPU 1 (0000:2a:00, serial 1321021034568): Found 4 faulty memory" in result.summary
    assert len(result.measured["findings"][0]["messages"]) == 1  # the summary repeats the error: counted once


def test_4x_error_of_no_entity_only_in_the_test_summary() -> None:
    """HelperJsonAddTestSummary carries the errors of no entity (DCGM_FE_NONE); the results may all pass."""
    xid = "Detected XID 79 for GPU 3 Run a field diagnostic on the GPU."
    doc = d.v4(
        [
            {
                "name": "targeted_stress",
                "results": [d.v4_gpu(3, "Pass")],
                "test_summary": {"status": "Fail", "warnings": [d.v4_error(xid, 101, error_codes.TRIAGE, 5)]},
            }
        ],
        category="Stress",
    )
    result = judged(doc)
    assert (
        result.status is Status.FAIL and result.code == "dcgm.diag.targeted_stress" and xid in result.summary
    )


def test_a_cpu_entity_is_not_named_as_a_gpu() -> None:
    eud = {"name": "cpu_eud", "results": [{"entity_group": "CPU", "entity_group_id": 7, "entity_id": 0}]}
    eud["results"][0].update(
        status="Fail", warnings=[d.v4_error("CPU EUD test failed", 95, error_codes.ISOLATE, 7)]
    )
    result = judged(d.v4([eud]))
    assert (
        result.status is Status.FAIL and "failed on CPU 0:" in result.summary and "GPU" not in result.summary
    )


def test_dcgms_own_failure_leaves_the_node_unjudged() -> None:
    dcgm_api = "Error using DCGM API dcgmGetDeviceAttributes Check DCGM and system logs for errors."
    doc = d.v4(
        [{"name": "pcie", "results": [d.v4_gpu(0, "Fail", d.v4_error(dcgm_api, 67, error_codes.TRIAGE, 16))]}]
    )
    result = judged(doc)
    assert result.status is Status.ERROR and result.fault_class is None and result.code == NO_RESULT
    assert result.summary.startswith("cannot judge: DCGM test 'pcie' (Hardware) could not run on GPU 0")


def test_a_fail_without_any_error_keeps_dcgms_word() -> None:
    doc = d.v4([{"name": "memory", "results": [d.v4_gpu(5, "Fail")], "test_summary": {"status": "Fail"}}])
    result = judged(doc)
    assert result.status is Status.FAIL and result.summary.endswith("failed on GPU 5: status fail")


@pytest.mark.parametrize("word", ["Skip", "SKIP", "Not Run", "not_run", "Not Supported"])
def test_skip_spellings_are_never_a_fault(word: str) -> None:
    skipped = "Test memory was skipped."  # DCGM_FR_TEST_SKIPPED (117), severity CONFIG
    doc = d.v4(
        [{"name": "memory", "results": [d.v4_gpu(0, word, d.v4_error(skipped, 117, error_codes.CONFIG, 3))]}]
    )
    assert judged(doc).status is Status.PASS


def test_an_unknown_status_word_is_not_a_pass() -> None:
    doc = d.v4([{"name": "memory", "results": [d.v4_gpu(0, "Inconclusive")]}])
    result = judged(doc)
    assert result.status is Status.ERROR and result.code == NO_RESULT


def test_nvvs_upper_case_statuses_int_ids_and_null_gaps() -> None:
    diag = read(d.NVVS_3_3)
    power = next(t for t in diag.tests if t.name == "Targeted Power")
    assert power.status == "warn" and power.gpus == ["5"]
    result = verdict(diag, 1, {})
    assert result.status is Status.WARN and result.code == "dcgm.diag.targeted_power"


def test_iterations_are_read_and_any_failing_run_fails() -> None:
    passing, failing = d.DIAGNOSTIC_8_GPUS_4X, d.V3_3_9
    assert judged(d.iterations(passing, passing)).status is Status.PASS
    assert judged(d.iterations(passing, failing, overall="Fail")).status is Status.FAIL


def test_text_around_the_document_with_braces_of_its_own() -> None:
    before = "2024-05-02 10:00:01 WARN [dcgmi] {unused option}\nSuccessfully ran diagnostic for group.\n"
    after = "\nlog: {'written': 'after the document'}\n"
    assert judged(before + d.V3_3_9 + after).status is Status.FAIL


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_a_cut_off_document_cannot_be_judged(keep: float) -> None:
    got = parse(d.V3_3_9[: int(len(d.V3_3_9) * keep)])
    assert isinstance(got, Unread) and got.why.startswith("dcgmi's JSON document is cut off")


def test_a_runtime_error_holds_no_test() -> None:
    """HelperDisplayFailureMessage: the old reader found no test in it and passed the node with 0 tests."""
    got = parse(d.RUNTIME_ERROR_4X)
    assert isinstance(got, Unread) and got.refusal and "Could not load plugin libmemory.so" in got.refusal


@pytest.mark.parametrize(
    "text, why",
    [
        (json.dumps({"DCGM Diagnostic": {"test_categories": []}}), "dcgmi's document lists no test"),
        ('{"DCGM Diagnostic": null}', "dcgmi's JSON has none of DCGM GPU Diagnostic, DCGM Diagnostic"),
        ("{}", "no DCGM document"),
        ("Error: unable to establish a connection to the specified host: localhost\n", "no DCGM document"),
        ("", "no DCGM document"),
    ],
)
def test_no_test_is_no_verdict(text: str, why: str) -> None:
    got = parse(text)
    assert isinstance(got, Unread) and got.why.startswith(why)


def test_the_severity_table_is_dcgms() -> None:
    """Spot checks against dcgmErrorMeta (dcgmlib/src/dcgm_errors.c, DCGM 4.6.0)."""
    assert error_codes.SEVERITY[29] == error_codes.CONFIG and error_codes.SEVERITY[52] == error_codes.ISOLATE
    assert error_codes.SEVERITY[51] == error_codes.MONITOR and error_codes.SEVERITY[80] == error_codes.RESET
    assert error_codes.SEVERITY[66] == error_codes.TRIAGE and sorted(error_codes.SEVERITY) == list(range(133))
    assert error_codes.code_of("GPU 3 Found driver on the denylist: nouveau") == 23
    assert error_codes.kind(None, None, None) == "unknown" and error_codes.kind(67, None, None) == "internal"


def test_a_broken_document_cannot_be_judged() -> None:
    broken = d.V3_3_9.replace('"status" : "Pass"', '"status" : Pass', 1)
    got = parse(broken)
    assert isinstance(got, Unread) and got.why.startswith("dcgmi's JSON document is broken")
