"""DCGM's health-watch messages: which DCGM_FR_* code wrote each one, recovered from its text.

`dcgmi health -c` prints an incident's message only (`error.msg`), never its DCGM_FR code (dcgmi/Health.cpp at every
tag 2.1.4-4.6.0), so the code is found from the message formats DcgmHealthWatch.cpp fills (the `*_MSG` macros of
dcgmlib/dcgm_errors.h, DCGM 4.6.0, with their 2.x wordings). A message is the format filled in, a space and DCGM's
next step (`*_NEXT`), and for an XID incident " (triggered by XID n: name)" (DcgmError::SetFullError). dcgmi joins
several incidents of one system and entity with ", " (Health::AppendSystemIncidents) and wraps the whole at 54
characters, dropping the separator after each cut (Health::AddErrorMessage): a reader rejoins the chunks with a
space, so the formats below accept a missing '.', ',' or '/' and split a row at each message they recognise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# (code, DCGM_FR name, printf formats: 4.6.0's first, then earlier wordings). Order matters where one format is a
# prefix-free generalisation of another: FIELD_VIOLATION's "Detected %ld %s for GPU %u" comes last.
_FORMATS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (3, "PCI_REPLAY_RATE", ("Detected more than %u PCIe replays per minute for GPU %u : %d",)),
    (4, "VOLATILE_DBE_DETECTED", ("Detected %d volatile double-bit ECC error(s) in GPU %u.",)),
    (6, "PENDING_PAGE_RETIREMENTS", ("A pending retired page has been detected in GPU %u.",)),
    (7, "RETIRED_PAGES_LIMIT", ("%u or more retired pages have been detected in GPU %u.",)),
    (
        8,
        "RETIRED_PAGES_DBE_LIMIT",
        (
            "An excess of %u retired pages due to DBEs have been detected and more than one page has been retired "
            "due to DBEs in the past week in GPU %u.",
        ),
    ),
    (
        80,
        "ROW_REMAP_FAILURE",
        ("GPU %u had uncorrectable memory errors and row remapping failed.", "Row remapping failed."),
    ),
    (
        132,
        "UNCORRECTABLE_ROW_REMAP_LIMIT",
        ("GPU %u exceeded uncorrectable row remap limit with %u remapped rows",),
    ),
    (52, "FAULTY_MEMORY", ("Found %lld faulty memory elements on GPU %u",)),
    (101, "XID_ERROR", ("Detected XID %u for GPU %u",)),
    (81, "UNCONTAINED_ERROR", ("GPU had an uncontained error (XID 95)",)),
    (131, "CONTAINED_ERROR", ("GPU had a contained error.",)),
    (120, "FALLEN_OFF_BUS", ("GPU %d has fallen off the bus",)),
    (9, "CORRUPT_INFOROM", ("A corrupt InfoROM has been detected in GPU %u.",)),
    (
        10,
        "CLOCKS_EVENT_THERMAL",
        (
            "Detected clocks event due to thermal violation in GPU %u.",
            "Detected clock throttling due to thermal violation in GPU %u.",
        ),
    ),
    (11, "POWER_UNREADABLE", ("Cannot reliably read the power usage for GPU %u.",)),
    (
        12,
        "CLOCKS_EVENT_POWER",
        (
            "Detected clocks event due to power violation in GPU %u.",
            "Detected clock throttling due to power violation in GPU %u.",
        ),
    ),
    (
        36,
        "FIELD_THRESHOLD_DBL",
        (
            "Detected %.1f %s for %s:%u which is above the threshold %.1f",
            "Detected %.1f %s for GPU %u which is above the threshold %.1f",
        ),
    ),
    (71, "NVLINK_ERROR_CRITICAL", ("Detected %ld %s NvLink errors on GPU %u's NVLink (should be 0)",)),
    (
        70,
        "NVLINK_CRC_ERROR_THRESHOLD",
        (
            "%.1f %s NvLink errors found occuring per second on GPU %u, exceeding the limit of 100 per second.",
        ),
    ),
    (
        13,
        "NVLINK_ERROR_THRESHOLD",
        ("Detected %ld %s NvLink errors on GPU %u's NVLink which exceeds threshold of %u",),
    ),
    (
        119,
        "NVLINK_EFFECTIVE_BER_THRESHOLD",
        ("Detected effective BER %.2e exceeds minimum threshold on GPU %u's NVLink.",),
    ),
    (
        121,
        "NVLINK_SYMBOL_BER_THRESHOLD",
        ("Detected symbol BER %.2e exceeds minimum threshold on GPU %u's NVLink.",),
    ),
    (14, "NVLINK_DOWN", ("GPU %u's NvLink link %d is currently down",)),
    (123, "FABRIC_PROBE_STATE", ("GPU %u: Fabric State is %s (%lld).",)),
    (122, "IMEX_UNHEALTHY", ("IMEX %s status is %s (%s)",)),
    (
        125,
        "GPU_RECOVERY_RESET",
        ("GPU %u requires a reset to recover from a fault. Recovery action: %ld (GPU_RESET).",),
    ),
    (
        126,
        "GPU_RECOVERY_REBOOT",
        ("GPU %u fault may have left the OS in an inconsistent state. Recovery action: %ld (NODE_REBOOT).",),
    ),
    (
        127,
        "GPU_RECOVERY_DRAIN_P2P",
        ("GPU %u requires peer-to-peer traffic to be quiesced. Recovery action: %ld (DRAIN_P2P).",),
    ),
    (
        128,
        "GPU_RECOVERY_DRAIN_RESET",
        ("GPU %u operating at reduced capacity due to a fault. Recovery action: %ld (DRAIN_AND_RESET).",),
    ),
    (16, "NVSWITCH_NON_FATAL_ERROR", ("Detected nonfatal errors on NvSwitch %u link %u",)),
    (15, "NVSWITCH_FATAL_ERROR", ("Detected fatal errors on NvSwitch %u link %u",)),
    # MonitorConnectX (4.5.3+) writes its own text under FIELD_VIOLATION: "ConnectX entity Id:%u <description>".
    (33, "FIELD_VIOLATION", ("ConnectX entity Id:%u %s", "Detected %ld %s for GPU %u")),
)
_NUMBER = {
    "u": r"-?\d+",
    "d": r"-?\d+",
    "ld": r"-?\d+",
    "lld": r"-?\d+",
    ".1f": r"[-+0-9.]+",
    ".2e": r"[-+0-9.e]+",
}
_TOKEN = re.compile(r"%(lld|ld|u|d|\.1f|\.2e|s)")


def _pattern(fmt: str) -> str:
    """A printf format as a regex; a '.', ',' or '/' may be missing (dcgmi drops the separator at a wrap)."""
    out, at, fmt = [], 0, fmt.rstrip()
    for m in _TOKEN.finditer(fmt):
        out.append(_literal(fmt[at : m.start()]))
        last = m.end() == len(fmt)  # a text that ends the format runs to the next incident (", ") or the end
        out.append(_NUMBER.get(m.group(1), r".+?(?=,\s|$)" if last else r".+?"))
        at = m.end()
    out.append(_literal(fmt[at:]))
    return "".join(out)


def _literal(text: str) -> str:
    return "".join(
        f"{re.escape(ch)}?" if ch in ".,/" else r"\s*" if ch == " " else re.escape(ch) for ch in text
    )


@dataclass(frozen=True)
class Message:
    """One incident's message: its text, DCGM's next step in it, and the DCGM_FR code its format names."""

    text: str
    code: int | None = None
    name: str | None = None
    next_step: str = ""

    @property
    def gpu(self) -> str | None:
        """The GPU id DCGM's own text names ("... in GPU 3."), if it names one."""
        m = re.search(r"\bGPU (\d+)\b", self.text)
        return m.group(1) if m else None

    @property
    def xid(self) -> str | None:
        """The XID behind the incident ("Detected XID 79", "(triggered by XID 79: ...)"), if any."""
        m = re.search(r"\bXID (\d+)\b", self.text)
        return m.group(1) if m else None


_COMPILED = tuple(
    (code, name, re.compile("|".join(f"(?:{_pattern(f)})" for f in formats)))
    for code, name, formats in _FORMATS
)


def _matches(text: str) -> list[tuple[int, int, int, str]]:
    """Every recognised message start in `text`, earliest first, none overlapping the one before."""
    found = sorted(
        (m.start(), m.end(), code, name)
        for code, name, pattern in _COMPILED
        for m in pattern.finditer(text)
        if m.end() > m.start()
    )
    chosen: list[tuple[int, int, int, str]] = []
    for start, end, code, name in found:
        if not chosen or start >= chosen[-1][1]:
            chosen.append((start, end, code, name))
    return chosen


def split(text: str) -> list[Message]:
    """The incidents in one system row's (rejoined) text: each recognised message with its code and next step;
    text no format recognises stays one message without a code."""
    text = " ".join(text.split())
    found = _matches(text)
    if not found:
        return [Message(text)] if text else []
    out: list[Message] = []
    if found[0][0] > 0:
        out.append(Message(text[: found[0][0]].rstrip(" ,")))
    for i, (start, end, code, name) in enumerate(found):
        stop = found[i + 1][0] if i + 1 < len(found) else len(text)
        whole = text[start:stop].rstrip(" ,")
        rest = text[end:stop].strip(" ,")
        step = re.sub(r"\(triggered by XID \d+:.*\)\s*$", "", rest).strip()
        out.append(Message(whole, code, name, step))
    return [m for m in out if m.text]
