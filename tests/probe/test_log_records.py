"""probe.log_records: one printk is one record in every form the kernel log is saved in. The texts are the driver's
real messages (open-gpu-kernel-modules' format strings; the field corpus's excerpts, cited in
tests/checks/gpu_health/field_records/SOURCES.md); the forms follow their writers (the kernel's
Documentation/ABI/testing/dev-kmsg, util-linux dmesg, journalctl, rsyslog). Nothing is staged: pure text in, records
out."""

from __future__ import annotations

import pytest

from envcheck.probe.log_records import messages, parse_records

FELL = (
    "NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus and is "
    "not responding to commands."
)
# osapi.c's three lines, as each tool writes one record of them (NVSentinel#155 is the record's text).
FORMS = {
    "kmsg, with its dictionary": [
        "4,1311,1843308145,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) installed in this "
        "system has\\x0aNVRM: fallen off the bus and is not responding to commands.",
        " SUBSYSTEM=pci",
        " DEVICE=+pci:0000:b3:00.0",
    ],
    "kmsg with a caller field (CONFIG_PRINTK_CALLER)": [
        "4,1311,1843308145,c,caller=T412;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) installed "
        "in this system has\\x0aNVRM: fallen off the bus and is not responding to commands."
    ],
    "dmesg": [
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "               NVRM: fallen off the bus and is not responding to commands.",
    ],
    "dmesg -T": [
        "[Tue Mar  5 10:11:12 2024] NVRM: The NVIDIA GPU 0000:b3:00.0",
        "                           NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "                           NVRM: fallen off the bus and is not responding to commands.",
    ],
    "dmesg -x -r": [
        "<4>[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
        "                  NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "                  NVRM: fallen off the bus and is not responding to commands.",
    ],
    "syslog(2) and the console: the stamp on every line": [
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
        "[ 1843.308145] NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "[ 1843.308145] NVRM: fallen off the bus and is not responding to commands.",
    ],
    "journalctl": [
        "Mar 05 10:11:12 gpu-17 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0",
        "                               NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "                               NVRM: fallen off the bus and is not responding to commands.",
    ],
    "rsyslog with #012 and the kernel's stamp": [
        "Mar  5 10:11:12 gpu-17 kernel: [ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0#012NVRM: (PCI ID: "
        "10de:26b5) installed in this system has#012NVRM: fallen off the bus and is not responding to commands."
    ],
    "journalctl -o short-iso": [
        "2024-03-05T10:11:12+0000 gpu-17 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0",
        "                                        NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "                                        NVRM: fallen off the bus and is not responding to commands.",
    ],
    "talosctl dmesg": [
        "kern: warning: [2023-09-14T03:08:37.411164757Z]: NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: "
        "10de:26b5) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands."
    ],
    "a grep of the lines, no stamp": [
        "NVRM: The NVIDIA GPU 0000:b3:00.0",
        "NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "NVRM: fallen off the bus and is not responding to commands.",
    ],
}


@pytest.mark.parametrize("form", FORMS)
def test_the_driver_three_line_printk_is_one_message_in_every_form(form: str) -> None:
    (record,) = messages(parse_records(FORMS[form]))
    assert record.flat == FELL


def test_kmsg_gives_sequence_time_and_the_dictionary_device() -> None:
    (record,) = parse_records(FORMS["kmsg, with its dictionary"])
    assert (record.seq, record.boot_s, record.device, record.form) == (
        1311,
        1843.308145,
        "0000:b3:00.0",
        "kmsg",
    )
    assert record.text.count("\n") == 2  # \x0a back to newlines


def test_a_kmsg_fragment_continues_its_record() -> None:
    """flag '+' (dev-kmsg: a fragment of a line continued): one record, not two."""
    (record,) = parse_records(
        ["6,10,100,c;NVRM: GPU 0000:01:00.0: Tried to get IRQ 16, but another driver", "6,11,101,+; has it."]
    )
    assert record.text.endswith("another driver has it.")


def test_utf8_bytes_escaped_one_by_one_come_back_as_text() -> None:
    (record,) = parse_records(["6,1,1,-;host caf\\xc3\\xa9 \\x5c path"])
    assert record.text == "host café \\ path"


def test_records_of_different_moments_or_new_messages_stay_apart() -> None:
    lines = [
        "[  5.1] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=python, Graphics SM Warp Exception",
        "[  5.1] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=python, Graphics Exception: ESR 0x504648",
        "[  5.2] NVRM: The NVIDIA GPU 0000:b3:00.0",
        "[  5.3] NVRM: (PCI ID: 10de:26b5) installed in this system has",
    ]
    assert len(messages(parse_records(lines))) == 4  # an Xid begins its own message; other moments are apart


def test_dmesg_human_and_relative_stamps_are_read() -> None:
    records = parse_records(
        ["[Mar 5 10:11] NVRM: loading NVIDIA UNIX Open Kernel Module", "[  +0.009910] NVRM: x"]
    )
    assert [r.form for r in records] == ["dmesg", "dmesg"] and records[1].text == "NVRM: x"
