"""The NVLink5 Xids 144-150 judged by NVIDIA's decode sheet from each record's own fields (checks.gpu_health.nvlink5,
xid_fields), never by the number alone: every verbatim field record found decodes to the sheet row NVIDIA's sheet
gives it, a row that asks for a reset drains its GPU, a row that says IGNORE or XID_154_EVAL does not, and a record the
sheet cannot decode follows the driver's Xid 154 or warns.

Records (verbatim, as the sources print them; cited per record): leptonai/gpud components/accelerator/nvidia/xid/
kmsg_test.go and kmsg_extended_test.go ("production log lines") at 2acd894ad714d367f384bb3e14bb6cd84fdf4565, gpud pull
request #1160, NVIDIA's NVSentinel (fork rupalis-nv/NVSentinel at 0f6073182b2544cf696a81a7b03d37136f199b9e) health-
monitors/syslog-health-monitor/pkg/xid/parser/csv.go and csv_test.go. Staged: the rest of the node (NVML's GPU list).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.nvlink5 import decode, fields
from envcheck.checks.gpu_health.nvlink5_sheet import ROWS
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.checks.gpu_health.xid import parse_xid
from envcheck.checks.gpu_health.xid_fields import judge as judge_fields
from envcheck.core.check import CheckOptions, Context
from envcheck.core.result import Result, Status

HEALTH = Context(options=CheckOptions(node_path=True, cluster_mode="health"))

# (record, the sheet row, its bucket): the decode NVIDIA's 'Xid 144-150 Decode' sheet gives each.
RECORDS = [
    (  # gpud kmsg_test.go (a GB200 incident, dmesg): V1 NETIR_LINK_DOWN, link-down code 33
        "[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        77,
        "RESET_GPU",
    ),
    (
        "[171167.969026] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 00 (0x021405c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        77,
        "RESET_GPU",
    ),
    (
        "[171168.109293] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 15 (0x0215e5c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        77,
        "RESET_GPU",
    ),
    (
        "[171168.409446] NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 14 (0x0215c5c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        77,
        "RESET_GPU",
    ),
    (  # NVSentinel csv_test.go: link-down code 37
        "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 09 (0x025525c6 0x00000000 0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        81,
        "RESET_GPU",
    ),
    (  # NVSentinel csv.go (the V2, >= R575, layout)
        "NVRM: Xid (PCI:0000:3f:00): 145, RLW_SRC_TRACK Nonfatal XC1 i0 Link 10 (0x04082907 0x00000008 0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        31,
        "XID_154_EVAL",
    ),
    (  # gpud kmsg_extended_test.go, production lines
        "NVRM: Xid (PCI:0018:01:00): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001 0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        87,
        "IGNORE",
    ),
    (
        "NVRM: Xid (PCI:0018:01:00): 145, pid=876767, name=ray::WorkerDict, RLW_RXPIPE Nonfatal XC0 i0 Link 13 "
        "(0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
        26,
        "IGNORE",
    ),
    (
        "NVRM: Xid (PCI:0019:01:00): 145, RLW_SRC_TRACK Nonfatal XC1 i0 Link 12 (0x040988e2 0x00000008 0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        31,
        "XID_154_EVAL",
    ),
    (
        "NVRM: Xid (PCI:0008:01:00): 145, pid=11436, name=cache_mgr_main, RLW_SRC_TRACK Nonfatal XC1 i0 Link 03 "
        "(0x040868e2 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
        31,
        "XID_154_EVAL",
    ),
    (  # whitespace collapsed as gpud quotes it
        "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 "
        "0x00000000 0x00000000)",
        64,
        "RESET_GPU",
    ),
    (
        "NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        68,
        "RESET_GPU",
    ),
    (  # gpud pull request #1160: 'Fatal', but the sheet's row says IGNORE (link-down code 38)
        "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 "
        "0x00000000 0x00000000 0x00000000)",
        82,
        "IGNORE",
    ),
]
XID154_DRAIN = (  # gpud kmsg_test.go, right after the first record above
    "[171167.621162] NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and "
    "Reset)"
)
# gpud kmsg_extended_test.go's truncated-line case (TestExtractNVRMXidInfoExtendedShortMatch): the fields are cut.
TRUNCATED = "NVRM: Xid (PCI:0018:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406"


_STAMP = re.compile(r"^\[[ \d.]+\] ")


def kmsg(*texts: str) -> list[str]:
    """/dev/kmsg records of `texts` (a dmesg line without its stamp)."""
    return [f"4,{n},{n * 1000},-;{_STAMP.sub('', t)}" for n, t in enumerate(texts, start=1)]


def gpus(*pci: str) -> list[dict[str, Any]]:
    return [
        {"index": i, "name": "NVIDIA GB200", "pci": f"0000{p.upper()}.0", "persistence": True}
        for i, p in enumerate(pci)
    ]


def judge(*texts: str, on: tuple[str, ...] = ()) -> Result:
    found = scan(kmsg(*texts))
    pcis = on or tuple(dict.fromkeys(e["pci"] for e in found["xid"]))
    data = {
        "nvml_error": None,
        "gpus": gpus(*pcis),
        "pci_gpus": [f"{p}.0" for p in pcis],
        "kernel_log": {
            "source": "/dev/kmsg",
            "error": None,
            **{k: found[k] for k in ("xid", "bus", "driver")},
        },
    }
    return verdict(data, HEALTH)


@pytest.mark.parametrize(
    ("record", "row", "bucket"), RECORDS, ids=[f"row{r[1]}-{i}" for i, r in enumerate(RECORDS)]
)
def test_each_field_record_decodes_to_its_sheet_row(record: str, row: int, bucket: str) -> None:
    event = parse_xid(record)
    assert event is not None
    found = fields(event["text"])
    assert found is not None, event["text"]
    decoded = decode(event["xid"], found)
    assert decoded is not None and (decoded.row.row, decoded.bucket) == (row, bucket)


@pytest.mark.parametrize(
    ("record", "row", "bucket"), RECORDS, ids=[f"row{r[1]}-{i}" for i, r in enumerate(RECORDS)]
)
def test_the_rows_bucket_is_the_verdict_not_the_number(record: str, row: int, bucket: str) -> None:
    result = judge(record)
    if bucket == "RESET_GPU":
        assert result.status is Status.FAIL and result.code.startswith("xid.14"), result.summary
        assert f"row {row}" in result.summary and "link" in result.summary
    else:  # IGNORE, and XID_154_EVAL with no Xid 154: the application restarts, the node is not drained
        assert result.status is Status.PASS, result.summary


def test_a_fatal_flag_the_row_contradicts_is_said_and_the_row_followed() -> None:
    ignored = RECORDS[-1][0]  # 'Fatal', row 82 IGNORE
    found = scan(kmsg(ignored))
    (event,) = found["xid"]
    assert judge(ignored).status is Status.PASS
    said = judge_fields(event, [event])
    assert said is not None and "the line says Fatal, the sheet's row is followed" in said.meaning.meaning


def test_the_gb200_incident_drains_each_gpu_and_names_its_links() -> None:
    result = judge(RECORDS[0][0], XID154_DRAIN, RECORDS[1][0], RECORDS[3][0])
    assert result.status is Status.FAIL
    blamed = {f["gpu"] for f in result.measured["findings"]}
    assert any("0009:01:00" in g for g in blamed) and any("0008:01:00" in g for g in blamed)
    assert "INVESTIGATE_PEER_DEVICE" not in result.remediation  # the bucket's words, not its name
    assert "the peer device took the link down" in result.remediation


def test_records_of_one_gpu_judged_apart_keep_the_worst() -> None:
    """An IGNORE record after a RESET_GPU one on the same GPU does not hide it (the scan keeps them apart)."""
    reset = RECORDS[4][0]
    ber = RECORDS[6][0]
    result = judge(reset, ber)
    assert result.status is Status.FAIL and result.code == "xid.149", result.summary
    assert len([e for e in result.measured["xid"] if e["xid"] == 149]) == 2


def test_a_record_without_its_fields_warns_unless_the_driver_gave_an_action() -> None:
    alone = judge(TRUNCATED)
    assert alone.status is Status.WARN and alone.code == "xid.149.undecoded", alone.summary
    assert "does not carry the fields" in alone.summary and "no Xid 154" in alone.summary
    # The catalogue's 'Xid 154 linkage': the driver's own recovery action on that GPU decides.
    action = XID154_DRAIN.replace("0009:01:00", "0018:01:00")
    with_154 = judge(TRUNCATED, action)
    assert with_154.status is Status.FAIL and with_154.code == "xid.154", with_154.summary
    assert "undecoded" not in " ".join(with_154.measured["codes"])


def test_an_unknown_unit_matches_no_row_and_warns() -> None:
    renamed = RECORDS[4][0].replace("NETIR_LINK_EVT", "NETIR_BER_EVENT")  # the IntrInfo says link-down
    result = judge(renamed)
    assert result.status is Status.WARN and "no row matches unit NETIR_BER_EVENT" in result.summary


def test_xid45_caused_by_an_nvlink5_xid_is_judged_by_that_gpus_own_record() -> None:
    """open-gpu-kernel-modules#1150: 'caused by previous Xid 149'. With the GPU's 149 record in the log, the 45 is
    that record's verdict; without it, a warning (test_kernel_events)."""
    xid45 = (
        "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"
    )
    down = RECORDS[4][0].replace("0018:01:00", "0000:dc:00")  # moved to the 45's GPU
    ber = RECORDS[6][0].replace("0018:01:00", "0000:dc:00")
    assert judge(down, xid45).status is Status.FAIL
    quiet = judge(ber, xid45)
    assert quiet.status is Status.PASS, quiet.summary


def test_xid154_is_judged_by_its_code_whatever_its_label() -> None:
    """Newer drivers print 'PF FLR' for action 0x1 (the label quoted in open-gpu-kernel-modules#1353); the code, not
    the label, says a GPU reset."""
    record = "NVRM: Xid (PCI:0000:0d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)"
    result = judge(record)
    assert result.status is Status.FAIL and "PF FLR" in result.summary
    assert "the driver asks for a GPU reset" in result.summary and "or a node reboot" not in result.summary


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"row{r.row}")
def test_every_sheet_row_decodes_from_its_own_masks(row: Any) -> None:
    """Each row's V1 and V2 IntrInfo (its mask's fixed bits, the row's first error status) decodes to that row's
    bucket: the decoder reads the sheet as it is written."""
    status = min(row.status) if row.status else 0
    for version, mask, unit in (("V1", row.v1, row.units[0]), ("V2", row.v2, row.units[-1])):
        text = f"{unit} Fatal XC0 i0 Link 01 (0x{mask.value:08x} 0x{status:08x} 0x00000000 0x00000000)"
        got = fields(text)
        assert got is not None
        decoded = decode(row.xid, got)
        assert decoded is not None and decoded.bucket == row.bucket, (version, row.row, decoded)
    if row.action2_v1 is not None:
        text = f"{row.units[0]} Nonfatal XC0 i0 Link 01 (0x{row.action2_v1.value:08x} 0x{status:08x})"
        got = fields(text)
        assert got is not None and (decoded := decode(row.xid, got)) is not None
        assert decoded.action2 and decoded.bucket == row.action2 == "RESET_GPU"
