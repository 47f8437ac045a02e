"""dcgm.health against `dcgmi health -c -j` as DCGM writes it, through a stand-in `dcgmi` on PATH (tests/staging/dcgmi.py;
staged: no GPU, driver or DCGM exists here). The documents are the verbatim healthy record NVIDIA/DCGM#263 and the
writers re-implemented in tests/checks/dcgm/health_documents.py; the error texts are DCGM's (NVIDIA/DCGM#176 for the
watches not set, dcgmi/Command.cpp for the host engine). NVML, where a test needs the GPUs' PCI addresses, is the
suite's NVML stand-in (tests/staging/nvml.py). Real: the child process within its budget, the cluster policy.
Each incident kind has its healthy twin: the same node and dcgmi with DCGM's healthy document.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from envcheck.checks.dcgm import dcgm_diag, dcgm_health
from envcheck.cluster.mode_names import ModeName
from envcheck.cluster.policy import NODE_FAULT, OK, decide
from envcheck.cluster.severity import HARD, severity
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, Status
from tests.checks.dcgm import documents as diag_docs
from tests.checks.dcgm import health_documents as h
from tests.staging import dcgmi, nvml

I = h.Incident  # noqa: E741


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def answers(version: str = "4.6.0", **groups: tuple[int, str] | str) -> dict[str, tuple[int, str] | str]:
    """dcgmi's answers: each built-in group's document (a group not given: watches not set there) and `-v`."""
    out: dict[str, tuple[int, str] | str] = {
        f"health -g {g} -c -j": groups.get(g, (h.NOT_ENABLED_RC, h.NOT_ENABLED_176)) for g in "gas"
    }
    out["-v"] = (0, h.version_output(version))
    return out


def check(bin_dir: Path, given: dict[str, tuple[int, str] | str], deadline_s: float = 30.0) -> Result:
    dcgmi.install(bin_dir, given)
    return dcgm_health(Context(deadline=time.monotonic() + deadline_s)).named("dcgm.health", 0.0)


# (incidents, writer, status, code, where, DCGM's next step in the fix). Messages: health_documents (DCGM's formats).
KINDS = [
    ([I(2, h.MEM, h.FAIL, h.dbe(2))], "fail", "dcgm.health.memory", "GPU 2", "Drain the GPU and reset it"),
    ([I(3, h.MEM, h.WARN, h.pending(3))], "warn", "dcgm.health.memory", "GPU 3", "Monitor - this GPU"),
    (
        [I(0, h.DRIVER, h.FAIL, h.recovery_reset(0))],
        "fail",
        "dcgm.health.driver",
        "GPU 0",
        "Terminate all GPU",
    ),
    (
        [I(0, h.DRIVER, h.WARN, h.drain_p2p(0))],
        "warn",
        "dcgm.health.driver",
        "GPU 0",
        "Terminate GPU processes",
    ),
    (
        [I(1, h.NVLINK, h.FAIL, h.nvlink_down(1, 3))],
        "fail",
        "dcgm.health.nvlink",
        "GPU 1",
        "Check DCGM and system",
    ),
    (
        [I(2, h.NVLINK, h.WARN, h.fabric_in_progress(2))],
        "warn",
        "dcgm.health.nvlink",
        "GPU 2",
        "FabricManager",
    ),
    ([I(4, h.PCIE, h.WARN, h.pcie_replays(4))], "warn", "dcgm.health.pcie", "GPU 4", "Reconnect PCIe card"),
    (
        [I(2, h.THERMAL, h.WARN, h.thermal(2))],
        "warn",
        "dcgm.health.thermal",
        "GPU 2",
        "Verify that the cooling",
    ),
    ([I(6, h.POWER, h.WARN, h.power(6))], "warn", "dcgm.health.power", "GPU 6", "Monitor the power"),
    ([I(7, h.INFOROM, h.WARN, h.inforom(7))], "warn", "dcgm.health.inforom", "GPU 7", "Flash the InfoROM"),
    (
        [I(1, h.NVSWITCH_NONFATAL, h.WARN, h.nvswitch_nonfatal(1), h.FE_SWITCH)],
        "warn",
        "dcgm.health.nvswitch_nonfatal",
        "NVSwitch 1",
        "Monitor the NVSwitch",
    ),
    (
        [I(1, h.NVSWITCH_FATAL, h.FAIL, h.nvswitch_fatal(1), h.FE_SWITCH)],
        "fail",
        "dcgm.health.nvswitch_fatal",
        "NVSwitch 1",
        "Run a field diagnostic",
    ),
    ([I(5, h.ALL, h.FAIL, h.fallen_off_xid79(5))], "fail", "dcgm.health.xid", "GPU 5", "re-seat the GPU"),
    (
        [I(0, h.NVLINK, h.FAIL, h.imex_down(), h.FE_NONE)],
        "fail",
        "dcgm.health.nvlink",
        "the node",
        "Check IMEX",
    ),
    (
        [I(0, h.CONNECTX, h.FAIL, h.connectx_fatal(0), h.FE_CONNECTX)],
        "fail",
        "dcgm.health.connectx",
        "ConnectX 0",
        "see DCGM's message",
    ),
]


@pytest.mark.parametrize(
    "incidents, status, code, where, step", KINDS, ids=[k[2] + "." + k[1] for k in KINDS]
)
def test_each_incident_is_judged_by_dcgms_own_health_result(
    bin_dir: Path, incidents: list[h.Incident], status: str, code: str, where: str, step: str
) -> None:
    result = check(bin_dir, answers(g=(0, h.report_24(incidents))))
    assert result.status is Status(status) and result.code == code, result.summary
    assert result.fault_class is FaultClass.NODE
    assert f"on {where}" in result.summary and step in (result.remediation or ""), result
    assert result.measured["watch_groups"] == {"g": "all GPUs"}
    expected = NODE_FAULT if status == "fail" else OK
    assert (
        decide([result], ModeName.PROLOG).code is expected and decide([result], ModeName.NPD).code is expected
    )
    if status == "fail":
        assert severity(code) is HARD


@pytest.mark.parametrize("writer", [h.report_24, h.report_21])
def test_the_healthy_twin_passes(bin_dir: Path, writer: Callable[[list[h.Incident]], str]) -> None:
    """Either writer prints the verbatim NVIDIA/DCGM#263 document for no incident (test_health_doc)."""
    result = check(bin_dir, answers(g=(0, writer([]))))
    assert result.status is Status.PASS and result.summary == "DCGM's health watches (on -g g): Healthy"
    assert "-v" not in dcgmi.calls(bin_dir)  # a healthy document needs no writer version


def test_a_gpu_is_named_by_its_pci_address(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DCGM's GPU id is the NVML index (DcgmCacheManager.cpp): NVML gives its PCI address."""
    nvml.install(
        monkeypatch,
        tmp_path / "nvml",
        nvml.state(*(nvml.gpu(i) for i in range(2)), nvml.gpu(2, bus="0000:5d:00.0")),
    )
    result = check(bin_dir, answers(g=(0, h.report_24([I(2, h.MEM, h.FAIL, h.dbe(2))]))))
    assert "on GPU 2 (0000:5d:00" in result.summary, result.summary
    assert result.measured["incidents"][0]["dcgm_fr"] == "DCGM_FR_VOLATILE_DBE_DETECTED (4)"


def test_a_link_down_on_a_node_without_wired_nvlinks_is_not_followed(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVIDIA/NVSentinel#1481: DCGM 3.3.7 failed all 12 NVLinks of A100 PCIe GPUs without a bridge. This machine's
    PCI bus has no NVSwitch; NVML (the stand-in) says no GPU is registered with a fabric: the direct evidence that
    nothing is wired is followed, the disagreement said, and the node is not drained."""
    pcie = {"name": "NVIDIA A100 80GB PCIe", "fabric": None, "nvlinks": [0] * 12}
    nvml.install(monkeypatch, tmp_path / "nvml", nvml.state(nvml.gpu(0, **pcie), nvml.gpu(1, **pcie)))
    result = check(bin_dir, answers(g=(0, h.report_24([I(1, h.NVLINK, h.FAIL, h.nvlink_down(1, 3))]))))
    assert (result.status, result.code) == (Status.WARN, "dcgm.health.nvlink"), result.summary
    assert (
        "no NVSwitch baseboard" in result.summary and "NVSentinel#1481" in result.measured["disagreements"][0]
    )
    assert decide([result], ModeName.PROLOG).code is OK


def test_a_link_down_where_the_nvlinks_are_wired_stands(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: an HGX GPU's other links are up (the stand-in's default), so DCGM's link-down Failure drains."""
    nvml.install(monkeypatch, tmp_path / "nvml", nvml.state(nvml.gpu(0), nvml.gpu(1)))
    result = check(bin_dir, answers(g=(0, h.report_24([I(1, h.NVLINK, h.FAIL, h.nvlink_down(1, 3))]))))
    assert (result.status, result.code) == (Status.FAIL, "dcgm.health.nvlink"), result.summary
    assert "disagreements" not in result.measured


def test_the_watch_is_followed_where_dcgms_error_table_rates_the_code_otherwise(bin_dir: Path) -> None:
    """A pending page retirement: the watch says Warning, dcgmErrorMeta rates DCGM_FR_PENDING_PAGE_RETIREMENTS RESET."""
    result = check(bin_dir, answers(g=(0, h.report_24([I(3, h.MEM, h.WARN, h.pending(3))]))))
    assert result.status is Status.WARN
    (note,) = result.measured["severity_notes"]
    assert (
        "says Warning" in note and "PENDING_PAGE_RETIREMENTS RESET" in note and "watch's own result" in note
    )


def test_several_systems_and_joined_incidents_are_each_a_finding(bin_dir: Path) -> None:
    incidents = [
        I(1, h.NVLINK, h.FAIL, h.nvlink_down(1, 3)),
        I(1, h.NVLINK, h.FAIL, h.nvlink_down(1, 4)),
        I(1, h.THERMAL, h.WARN, h.thermal(1)),
        I(4, h.MEM, h.WARN, h.pending(4)),
    ]
    result = check(bin_dir, answers(g=(0, h.report_24(incidents))))
    assert result.status is Status.FAIL and result.code == "dcgm.health.nvlink"
    found = [(i["system"], i["entity"], i["health"]) for i in result.measured["incidents"]]
    assert found == [
        ("nvlink", "GPU 1", "Failure"),
        ("nvlink", "GPU 1", "Failure"),
        ("thermal", "GPU 1", "Warning"),
        ("memory", "GPU 4", "Warning"),
    ]
    assert result.summary.endswith("(+1 more)")  # the two link-down failures


def test_the_2x_writer_never_names_a_gpu_from_its_key(bin_dir: Path) -> None:
    """dcgmi 2.3.4 (`dcgmi -v`): GPU 1's incident prints under key "10" with no row, GPU 3's first system under "20"
    and its last never. The GPU is named from DCGM's own message only; no "GPU 10" or "GPU 20" is claimed."""
    incidents = [
        I(1, h.MEM, h.WARN, h.pending(1)),
        I(3, h.MEM, h.FAIL, h.dbe(3)),
        I(3, h.THERMAL, h.WARN, h.thermal_2x(3)),
    ]
    result = check(bin_dir, answers("2.3.4", g=(0, h.report_21(incidents))))
    assert result.status is Status.FAIL and result.code == "dcgm.health.memory"
    assert "on GPU 3 (named by DCGM's message)" in result.summary
    assert "GPU 10" not in str(result.to_dict()) and "GPU 20" not in str(result.to_dict())
    assert result.measured["writer"].startswith("2.1-2.3") and result.measured["dcgmi_version"] == "2.3.4"


def test_the_2x_writer_with_no_row_printed_rests_on_overall_health(bin_dir: Path) -> None:
    result = check(bin_dir, answers("2.3.4", g=(0, h.report_21([I(10, h.MEM, h.FAIL, h.dbe(10))]))))
    assert result.status is Status.FAIL and result.code == "dcgm.health.overall"
    assert "does not print every incident" in result.summary
    assert decide([result], ModeName.PROLOG).code is NODE_FAULT


def test_a_newer_writer_names_gpu_10_from_its_key(bin_dir: Path) -> None:
    """On a 16-GPU node dcgmi 4.x's key "10" is GPU 10: the version, not the key's value, decides."""
    result = check(bin_dir, answers("4.6.0", g=(0, h.report_24([I(10, h.THERMAL, h.WARN, h.thermal(10))]))))
    assert result.status is Status.WARN and "on GPU 10:" in result.summary, result.summary


def test_with_no_version_the_2x_writers_mark_is_read(bin_dir: Path) -> None:
    given = answers(g=(0, h.report_21([I(1, h.MEM, h.WARN, h.pending(1))])))
    given["-v"] = (235, h.NO_ENGINE)  # no version line
    result = check(bin_dir, given)
    assert result.status is Status.WARN and result.code == "dcgm.health.overall"
    assert result.measured["dcgmi_version"] is None and result.measured["writer"].startswith("2.1-2.3")


def test_watches_are_read_on_the_group_the_operator_set_them_on(bin_dir: Path) -> None:
    """Set on -g a only: -g g and -g s say "not enabled"; the result says which group held them."""
    result = check(bin_dir, answers(a=(0, h.report_24([I(2, h.THERMAL, h.WARN, h.thermal(2))]))))
    assert result.status is Status.WARN and result.measured["watch_groups"] == {"a": "all entities"}
    assert result.measured["groups_without_watches"] == ["g", "s"]
    assert "Verify that the cooling" in (result.remediation or "")
    assert dcgmi.calls(bin_dir) == ["health -g g -c -j", "health -g a -c -j", "health -g s -c -j", "-v"]
    assert not any(" -s " in c for c in dcgmi.calls(bin_dir))  # envcheck never sets watches


def test_one_incident_seen_on_two_groups_is_one_finding(bin_dir: Path) -> None:
    doc = h.report_24([I(1, h.NVSWITCH_FATAL, h.FAIL, h.nvswitch_fatal(1), h.FE_SWITCH)])
    result = check(bin_dir, answers(a=(0, doc), s=(0, doc)))
    (only,) = result.measured["incidents"]
    assert only["groups"] == ["a", "s"] and result.code == "dcgm.health.nvswitch_fatal"


def test_no_watches_set_is_a_skip_that_says_how_never_a_fault(bin_dir: Path) -> None:
    """NVIDIA/DCGM#176's answer on every built-in group."""
    result = check(bin_dir, answers())
    assert result.status is Status.SKIP
    assert "dcgmi health -g g -s a" in result.summary and "60 s" in result.summary
    for mode in (ModeName.PROLOG, ModeName.NPD, ModeName.HEALTH):
        assert decide([result], mode).code is OK


def test_a_group_dcgmi_cannot_check_beside_groups_without_watches_still_skips(bin_dir: Path) -> None:
    not_found = (
        "Error: Unable to check health watches. Return: The Group is not found\n"  # Health.cpp CheckWatches
    )
    result = check(bin_dir, answers(s=(253, not_found)))
    assert result.status is Status.SKIP and "The Group is not found" in result.measured["unread"]["s"]


def test_no_group_read_cannot_be_judged(bin_dir: Path) -> None:
    broken = (
        253,
        "Error: Unable to check health watches. Return: Host engine connection invalid/disconnected\n",
    )
    result = check(bin_dir, answers(g=broken, a=broken, s=broken))
    assert (
        result.status is Status.ERROR and result.fault_class is None and result.code == "dcgm.health_unread"
    )
    assert decide([result], ModeName.PROLOG).code is OK


def test_a_dcgmi_that_does_not_answer_names_a_hung_hostengine(bin_dir: Path, hostengine: int) -> None:
    began = time.monotonic()
    result = check(bin_dir, answers(g=dcgmi.HANG), deadline_s=4.0)  # budget: 4 s left minus 2 s of margin
    assert time.monotonic() - began < 4.0
    assert result.status is Status.FAIL and result.code == "dcgm.hostengine_hang"
    assert result.summary.startswith("dcgmi health -g g -c -j did not return within 2 s")
    assert "hostengine" in result.measured  # the daemon's own evidence beside the hang


def test_a_health_failure_stands_when_the_short_diagnostic_passes(bin_dir: Path) -> None:
    """Both run on the node path; the watch saw the last minute and every XID since the host engine started, which
    a short diagnostic cannot: the worse of the two, by class, decides."""
    given = answers(g=(0, h.report_24([I(0, h.DRIVER, h.FAIL, h.recovery_reset(0))])))
    given["diag -r 1 -j"] = (0, diag_docs.ALL_SKIP_3_3)
    health = check(bin_dir, given)
    diag = dcgm_diag(Context(deadline=time.monotonic() + 30)).named("dcgm.diag", 0.0)
    assert diag.status is Status.PASS and health.status is Status.FAIL
    assert decide([health, diag], ModeName.PROLOG).code is NODE_FAULT


def test_no_dcgmi_skips(bin_dir: Path) -> None:
    result = dcgm_health(Context())
    assert result.status is Status.SKIP and result.summary.startswith("dcgmi not installed")
