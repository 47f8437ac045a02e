"""The `dcgmi health -c -j` reader and the message recogniser, on the verbatim field record (NVIDIA/DCGM#263) and on
documents rendered by DCGM's writers re-implemented in tests/checks/dcgm/health_documents.py (staged: no DCGM here;
no public record of an unhealthy `dcgmi health` document was found, so the writer is the source)."""

from __future__ import annotations

import pytest

from envcheck.checks.dcgm import health_doc
from envcheck.checks.dcgm.diag_json import Unread
from envcheck.checks.dcgm.health_messages import split
from tests.checks.dcgm import health_documents as h


def test_the_writer_renders_the_field_record_byte_for_byte() -> None:
    """The re-implemented writer (Health.cpp + DcgmiOutput + jsoncpp) against NVIDIA/DCGM#263's healthy output."""
    assert h.report_24([]) == h.HEALTHY_263
    assert h.report_21([]) == h.HEALTHY_263  # 2.1.4/2.3.4 print the same healthy document


def test_the_writer_wraps_as_dcgms_own_unit_test_pins() -> None:
    """dcgmi/tests/HealthTests.cpp@v4.6.0, SCENARIO "Health::GenerateOutputFromResponse": its CHECKed rows."""
    assert h.wrap_24("The car is red? Are you sure because that doesn't seem like the color I ordered.") == [
        "The car is red? Are you sure because that doesn't seem",
        "like the color I ordered.",
    ]
    assert h.wrap_24(
        "Green can be emerald and beautiful, but there are shades of green which are sure to disappoint."
    ) == [
        "Green can be emerald and beautiful, but there are",
        "shades of green which are sure to disappoint.",
    ]
    assert h.wrap_24("The guards wear Kholin blue because otherwise they'd be lame.") == [
        "The guards wear Kholin blue because otherwise they'd be",
        "lame.",
    ]


def test_the_healthy_record_reads_healthy_with_no_entity() -> None:
    got = health_doc.find(h.HEALTHY_263)
    assert isinstance(got, health_doc.HealthDocument)
    assert got.overall == "Healthy" and got.entities == ()


def test_each_system_row_is_read_with_its_word_and_its_rejoined_message() -> None:
    text = h.report_24(
        [h.Incident(0, h.MEM, h.WARN, h.pending(0)), h.Incident(0, h.DRIVER, h.FAIL, h.recovery_reset(0))]
    )
    assert '"Recovery action: 1 (GPU_RESET). Terminate all GPU",' in text  # wrapped into overflow chunks
    got = health_doc.find(text)
    assert isinstance(got, health_doc.HealthDocument) and got.overall == "Failure"
    (gpu,) = got.entities
    assert (gpu.group, gpu.key, gpu.health) == ("GPU", "0", "Failure")
    rows = {r.label: r for r in gpu.systems}
    assert rows["Driver"].health == "Failure" and rows["Driver"].text == h.recovery_reset(0)
    assert rows["Memory system"].health == "Warning" and rows["Memory system"].text == h.pending(0)


def test_the_2x_writer_keys_entities_by_health_and_drops_the_last_system() -> None:
    """Health::CheckWatches@v2.3.4: GPU 1's one incident prints no row ("Errors" : null) under key "10"; GPU 3's
    first system is printed under key "20", its last one (Thermal) never."""
    text = h.report_21(
        [
            h.Incident(1, h.MEM, h.WARN, h.pending(1)),
            h.Incident(3, h.MEM, h.FAIL, h.dbe(3)),
            h.Incident(3, h.THERMAL, h.WARN, h.thermal_2x(3)),
        ]
    )
    assert '"Errors" : null' in text
    got = health_doc.find(text)
    assert isinstance(got, health_doc.HealthDocument)
    keys = {e.key: e for e in got.entities}
    assert set(keys) == {"10", "20"} and keys["10"].errors_null
    assert [r.label for r in keys["20"].systems] == ["Memory system"]


def test_text_around_the_document_is_allowed_and_a_cut_off_one_is_not_read() -> None:
    text = h.report_24([h.Incident(2, h.THERMAL, h.WARN, h.thermal(2))])
    wrapped = "log: {not json} starting\n" + text + "trailing {\n"
    assert isinstance(health_doc.find(wrapped), health_doc.HealthDocument)
    cut = health_doc.find(text[: len(text) // 2])
    assert isinstance(cut, Unread) and "does not decode" in cut.why
    assert isinstance(health_doc.find(h.NOT_ENABLED_176), Unread)


@pytest.mark.parametrize(
    "message, code",
    [
        (h.dbe(2), 4),
        (h.pending(3), 6),
        (h.recovery_reset(0), 125),
        (h.drain_p2p(0), 127),
        (h.nvlink_down(1, 3), 14),
        (h.nvlink_critical(1), 71),
        (h.fabric_in_progress(2), 123),
        (h.pcie_replays(4), 3),
        (h.thermal(2), 10),
        (h.thermal_2x(2), 10),
        (h.power(6), 12),
        (h.inforom(7), 9),
        (h.nvswitch_nonfatal(1), 16),
        (h.nvswitch_fatal(1), 15),
        (h.fallen_off_xid79(5), 120),
        (h.imex_down(), 122),
        (h.connectx_fatal(0), 33),
    ],
)
def test_every_message_format_gives_its_code_after_the_wrap(message: str, code: int) -> None:
    """Each message as dcgmi prints it (wrapped, the separator at each cut dropped, rejoined) names its code."""
    rejoined = " ".join(h.wrap_24(message))
    (got,) = split(rejoined)
    assert got.code == code, rejoined
    assert not got.next_step.startswith("(triggered")


def test_a_cut_that_drops_punctuation_still_recognises_the_message() -> None:
    """The IMEX message's comma after "daemon status" falls at a cut and is dropped (the wrap's behaviour)."""
    chunks = h.wrap_24(h.imex_down())
    assert chunks[1].endswith("daemon status") and chunks[2].startswith("and network")
    (got,) = split(" ".join(chunks))
    assert got.code == 122 and got.next_step.startswith("Check IMEX installation")


def test_incidents_dcgmi_joined_in_one_row_are_split_again() -> None:
    """AppendSystemIncidents joins one entity's incidents of one system with ", "."""
    got = split(", ".join([h.nvlink_down(1, 3), h.nvlink_critical(1), h.nvlink_down(1, 4)]))
    assert [m.code for m in got] == [14, 71, 14]
    assert got[1].text.startswith("Detected 3 Replay NvLink errors") and got[2].gpu == "1"


def test_text_no_format_knows_stays_one_message_without_a_code() -> None:
    (got,) = split("Something DCGM 9 may say")
    assert got.code is None and got.text == "Something DCGM 9 may say"
