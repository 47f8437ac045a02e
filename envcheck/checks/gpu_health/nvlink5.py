"""The NVLink5 Xids 144-150 judged from the message's own fields by NVIDIA's decode sheet (nvlink5_sheet), not by
their number: the catalogue sends all seven to the "WORKFLOW_NVLINK5_ERR" bucket, which says "<intrInfo>,
<errorStatus> must be decoded and evaluated using "XID 144-150 Decode" to derive the final resolution".

The message, as the catalogue gives its format ("Resolution Buckets", WORKFLOW_NVLINK5_ERR) and the driver prints it
(an NVIDIA RM source's NVLINK_MSE_LEGACY_XID_MESSAGE_FMT, "%s %s XC%01u i%01u Link %02d (0x%08x 0x%08x 0x%08x 0x%08x
0x%08x 0x%08x)", with " Fatal  " or "Nonfatal" as the second field): `<unit> <Fatal|Nonfatal> XC<cross-contain>
i<injected> Link <link, -1: not link-specific> (<intrInfo> <errorStatus> <debug data>...)`, e.g.
`NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 ...)` (leptonai/gpud, components/accelerator/nvidia/
xid/kmsg_test.go, a GB200 incident). Quoted lines often have their spaces collapsed: any run of spaces is accepted.

A row matches when its Xid, its error status (none: any) and its IntrInfo mask agree with the record, and the unit the
record prints is that version's name for the row (the sheet: "This is also presented in plain text in the Xid
message"). Both masks are tried, V1 (drivers before R575) and V2: the unit name says which one the record is, so the
driver's version is not needed (NVSentinel picks by driver version instead). The row's "Action 2" applies when its
action-2 mask matches (RLW_RXPIPE's promotable errors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envcheck.checks.gpu_health.nvlink5_sheet import ROWS, Mask, Row

NVLINK5 = range(144, 151)
_LINE = re.compile(
    r"^(?P<unit>[A-Za-z][\w ]*?)\s+(?P<fatal>Fatal|Nonfatal)\s+XC(?P<xc>\d)\s+i(?P<injected>\d)\s+"
    r"Link\s+(?P<link>-?\d+)\s*\(\s*(?P<intr>0x[0-9a-fA-F]+)[\s,]+(?P<status>0x[0-9a-fA-F]+)"
)


@dataclass(frozen=True)
class Fields:
    """What one NVLink5 Xid record carries."""

    unit: str
    fatal: bool  # the record's own Fatal/Nonfatal tag
    cross_contain: bool
    injected: bool
    link: int  # -1: not link-specific
    intrinfo: int
    status: int

    def where(self) -> str:
        return f"link {self.link}" if self.link >= 0 else "no single link"


def fields(text: str) -> Fields | None:
    """The fields of an NVLink5 Xid's message (the text after the Xid number and any pid/name); None if it has
    none of the catalogue's format (a truncated or reworded record)."""
    found = _LINE.match(text.strip())
    if found is None:
        return None
    return Fields(
        found["unit"].strip(),
        found["fatal"] == "Fatal",
        found["xc"] == "1",
        found["injected"] == "1",
        int(found["link"]),
        int(found["intr"], 16),
        int(found["status"], 16),
    )


@dataclass(frozen=True)
class Decoded:
    """The sheet's verdict on one record: its row, the mask version that matched, and the bucket that applies."""

    row: Row
    version: str  # "V1" (drivers before R575) or "V2"
    bucket: str  # the row's resolution bucket, or its Action 2 when the action-2 mask matched
    action2: bool


def decode(xid: int, f: Fields) -> Decoded | None:
    """The first row of the sheet that matches the record; None when none does (a unit or IntrInfo the sheet does
    not list)."""
    unit = " ".join(f.unit.split()).casefold()
    for row in ROWS:
        if row.xid != xid or (row.status is not None and f.status not in row.status):
            continue
        versions: tuple[tuple[str, Mask, Mask | None, str], ...] = (
            ("V1", row.v1, row.action2_v1, row.units[0]),
            ("V2", row.v2, row.action2_v2, row.units[-1]),
        )
        for version, base, action2, name in versions:
            if name.casefold() != unit:
                continue
            if action2 is not None and action2.matches(f.intrinfo):
                return Decoded(row, version, row.action2, True)
            if base.matches(f.intrinfo):
                return Decoded(row, version, row.bucket, False)
    return None


def link_down_reason(f: Fields) -> int:
    """IntrInfo bits 25:20: the code that selects an Xid 149 NETIR_LINK_DOWN row (000000 for every other unit)."""
    return (f.intrinfo >> 20) & 0x3F
