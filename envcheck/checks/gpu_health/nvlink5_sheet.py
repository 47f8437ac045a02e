"""NVIDIA's decode sheet for the NVLink5 Xids 144-150, as data: every row of the "Xid 144-150 Decode" sheet of NVIDIA's
Xid catalogue, in the sheet's order, so it can be compared with its source row by row.

Source: Xid-Catalog.xlsx behind https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (sheet "Xid
144-150 Decode", revision modified 2025-09-30, SHA256 7f70ce9684be0c9d98a367770341ccc1d8bca4465cebe42dab7e23d57df5d5a5,
the copy NVIDIA/NVSentinel embeds in health-monitors/syslog-health-monitor/pkg/common/). Columns, as the sheet's
"Customer User Guide" defines them: the sheet row; the Xid; the unit ("Subcode": V1 name (driver < R575) / V2 name
(>= R575)); the IntrInfo masks for V1 and V2 (32 characters, bit 31 first, "-" not part of the verdict); the Error
Status ("the second register presented in the parentheses"; empty: any); the resolution bucket (Data Center Recovery
Action); the V1 and V2 masks for "Action 2" and Action 2 itself (applies when that mask matches); the investigatory
bucket; the severity ("Link Fatal", "Fatal (GPU)", "Non-fatal"; "*" promotable); HW/SW. The sheet's last column
(local/remote impact) is left out: it is prose, not part of the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = "NVIDIA Xid catalogue, sheet 'Xid 144-150 Decode' (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"

# row|Xid|unit V1/V2|V1 IntrInfo|V2 IntrInfo|Error Status|bucket|V1 action-2 mask|V2 action-2 mask|Action 2|investigatory|severity|HW/SW
_SHEET = """\
2|144|SAW_MVB|------000000----------0000100001|------000000-------------0000001|0x00000001|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW
3|144|SAW_MVB|------000000----------0000100001|------000000-------------0000001|0x00000002|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
4|144|SAW_MVB|------000000----------0000100001|------000000-------------0000001|0x00000004|IGNORE||||IGNORE|Non-fatal|HW
5|144|SAW_MVB|------000000----------0000100001|------000000-------------0000001|0x00000008|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW
6|144|SAW_MVB|------000000----------0000100001|------000000-------------0000001|0x00000010|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
7|144|SAW_MVB|------000000----------0000100001|------000000-------------0000001|0x00000020|IGNORE||||IGNORE|Non-fatal|HW
8|145|RLW_CTRL|------000000----------0001100010|------000000-------------0000011|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
9|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000001|XID_154_EVAL||||CONTACT_SUPPORT|Non-fatal|SW
10|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000002|XID_154_EVAL||||CONTACT_SUPPORT|Non-fatal|SW
11|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000004|XID_154_EVAL||||CHECK_NVLINK_FAILURE_FLOW|Non-fatal|SW
12|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000008|XID_154_EVAL||||CHECK_NVLINK_FAILURE_FLOW|Non-fatal|SW
13|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000010|XID_154_EVAL||||CHECK_NVLINK_FAILURE_FLOW|Non-fatal|SW
14|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000020|XID_154_EVAL||||CHECK_NVLINK_FAILURE_FLOW|Non-fatal|SW
15|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000040|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
16|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000080|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
17|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000100|IGNORE||||IGNORE|Non-fatal|HW
18|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x00000200|IGNORE||||IGNORE|Non-fatal|HW
19|145|RLW_REMAP|------000000----------0010000010|------000000-------------0000100|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
20|145|RLW_RSPCOL|------000000----------0010100010|------000000-------------0000101|0x00000001|IGNORE||||IGNORE|Non-fatal|HW
21|145|RLW_RSPCOL|------000000----------0010100010|------000000-------------0000101|0x00000002|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
22|145|RLW_RSPCOL|------000000----------0010100010|------000000-------------0000101|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
23|145|RLW_RXPIPE|------000000---------00011000010|------000000------------00000110|0x00000001|IGNORE|------000000---------10011000010|------000000------------10000110|RESET_GPU|CONTACT_SUPPORT|Non-fatal*|SW
24|145|RLW_RXPIPE|------000000---------00011000010|------000000------------00000110|0x00000002|IGNORE|------000000---------10011000010|------000000------------10000110|RESET_GPU|CONTACT_SUPPORT|Non-fatal*|SW
25|145|RLW_RXPIPE|------000000---------00011000010|------000000------------00000110|0x00000004|IGNORE|------000000---------10011000010|------000000------------10000110|RESET_GPU|CONTACT_SUPPORT|Non-fatal*|SW
26|145|RLW_RXPIPE|------000000----------0011000010|------000000-------------0000110|0x00000008|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW/SW
27|145|RLW_RXPIPE|------000000----------0011000010|------000000-------------0000110|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
28|145|RLW_SRC_TRACK|------000000----------0011100010|------000000-------------0000111|0x00000001|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
29|145|RLW_SRC_TRACK|------000000----------0011100010|------000000-------------0000111|0x00000002|IGNORE||||IGNORE|Non-fatal|HW
30|145|RLW_SRC_TRACK|------000000----------0011100010|------000000-------------0000111|0x00000004|XID_154_EVAL||||IGNORE|Non-fatal|HW/SW
31|145|RLW_SRC_TRACK|------000000----------0011100010|------000000-------------0000111|0x00000008|XID_154_EVAL||||IGNORE|Non-fatal|HW/SW
32|145|RLW_SRC_TRACK|------000000----------0011100010|------000000-------------0000111|0x00000010|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
33|145|RLW_SRC_TRACK|------000000----------0011100010|------000000-------------0000111|0x00000020|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
34|145|RLW_SRC_TRACK|------000000----------0011100010|------000000-------------0000111|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
35|145|RLW_TAGSTATE|------000000----------0100000010|------000000-------------0001000|0x00000001|IGNORE||||IGNORE|Non-fatal|HW
36|145|RLW_TAGSTATE|------000000----------0100000010|------000000-------------0001000|0x00000002|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
37|145|RLW_TAGSTATE|------000000----------0100000010|------000000-------------0001000|0x00010000|IGNORE||||IGNORE|Non-fatal|HW
38|145|RLW_TAGSTATE|------000000----------0100000010|------000000-------------0001000|0x00020000|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
39|145|RLW_TAGSTATE|------000000----------0100000010|------000000-------------0001000|0x00100000|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
40|145|RLW_TAGSTATE|------000000----------0100000010|------000000-------------0001000|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
41|146|TLW_CTRL|------000000----------0100100011|------000000-------------0001001|0x00000001|IGNORE||||IGNORE|Non-fatal|HW
42|146|TLW_CTRL|------000000----------0100100011|------000000-------------0001001|0x00000002|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW
43|146|TLW_CTRL|------000000----------0100100011|------000000-------------0001001|0x00000004|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
44|146|TLW_CTRL|------000000----------0100100011|------000000-------------0001001|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
45|146|TLW_RX/TLW_RX_PIPE0|------000000----------0101000011|------000000-------------0001010|0x00000001|IGNORE||||IGNORE|Non-fatal|HW
46|146|TLW_RX/TLW_RX_PIPE0|------000000----------0101000011|------000000-------------0001010|0x00000002|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW
47|146|TLW_RX/TLW_RX_PIPE0|------000000----------0101000011|------000000-------------0001010|0x00000004|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
48|146|TLW_RX/TLW_RX_PIPE0|------000000----------0101000011|------000000-------------0001010|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
49|146|TLW_RX/TLW_RX_PIPE1|------000000----------0101000011|------000000-------------0001011|0x00000001|IGNORE||||IGNORE|Non-fatal|HW
50|146|TLW_RX/TLW_RX_PIPE1|------000000----------0101000011|------000000-------------0001011|0x00000002|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW
51|146|TLW_RX/TLW_RX_PIPE1|------000000----------0101000011|------000000-------------0001011|0x00000004|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
52|146|TLW_RX/TLW_RX_PIPE1|------000000----------0101000011|------000000-------------0001011|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
53|146|TLW_TX/TLW_TX_PIPE0|------000000----------0101100011|------000000-------------0001100|0x00000001|IGNORE||||IGNORE|Non-fatal|HW
54|146|TLW_TX/TLW_TX_PIPE0|------000000----------0101100011|------000000-------------0001100|0x00000002|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW
55|146|TLW_TX/TLW_TX_PIPE0|------000000----------0101100011|------000000-------------0001100|0x00000004|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
56|146|TLW_TX/TLW_TX_PIPE0|------000000----------0101100011|------000000-------------0001100|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
57|146|TLW_TX/TLW_TX_PIPE1|------000000----------0101100011|------000000-------------0001101|0x00000001|IGNORE||||IGNORE|Non-fatal|HW
58|146|TLW_TX/TLW_TX_PIPE1|------000000----------0101100011|------000000-------------0001101|0x00000002|IGNORE||||CONTACT_SUPPORT|Non-fatal|HW
59|146|TLW_TX/TLW_TX_PIPE1|------000000----------0101100011|------000000-------------0001101|0x00000004|RESET_GPU||||CONTACT_SUPPORT|Fatal|HW
60|146|TLW_TX/TLW_TX_PIPE1|------000000----------0101100011|------000000-------------0001101|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
61|147|TREX|------000000----------0110000100|------000000-------------0001110|0x00000001|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
62|147|TREX|------000000----------0110000100|------000000-------------0001110|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
63|148|NVLPW_CTRL/NVLPW|------000000----------0000000101|------000000-------------0001111|0x80000000|IGNORE||||CONTACT_SUPPORT|Non-fatal|SW
64|149|NETIR/NETIR_INT|------000000----------0000000110|------000000-------------0011000||RESET_GPU||||SYMPATHETIC_REPORT_SOLO|Link Fatal|HW/SW
65|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------000000----------0111000110|------000000-------------0010001||RESET_GPU||||SYMPATHETIC_REPORT_SOLO|Link Fatal|HW/SW
66|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------000001----------0111000110|------000001-------------0010001||RESET_GPU||||REPORT_ISSUE (if seen >1 per day)|Link Fatal|HW/SW
67|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------000010----------0111000110|------000010-------------0010001||RESET_GPU||||INVESTIGATE_LINK_SI|Link Fatal|HW/SW
68|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------000100----------0111000110|------000100-------------0010001||RESET_GPU||||INVESTIGATE_LINK_SI|Link Fatal|HW
69|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------001010----------0111000110|------001010-------------0010001||RESET_GPU||||INVESTIGATE_LINK_SI|Link Fatal|HW
70|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------001111----------0111000110|------001111-------------0010001||RESET_GPU||||INVESTIGATE_SW_USER|Link Fatal|SW
71|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------010000----------0111000110|------010000-------------0010001||RESET_GPU||||INVESTIGATE_SW_USER_LINK_SI|Link Fatal|SW
72|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------010001----------0111000110|------010001-------------0010001||RESET_GPU||||INVESTIGATE_SW_USER|Link Fatal|SW
73|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------010010----------0111000110|------010010-------------0010001||RESET_GPU||||INVESTIGATE_SW_USER_LINK_SI|Link Fatal|SW
74|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------010101----------0111000110|------010101-------------0010001||RESET_GPU||||INVESTIGATE_PEER_DEVICE|Link Fatal|HW/SW
75|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------010110----------0111000110|------010110-------------0010001||RESET_GPU||||INVESTIGATE_SW_USER|Link Fatal|SW
76|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------100000----------0111000110|------100000-------------0010001||RESET_GPU||||INVESTIGATE_PEER_DEVICE|Link Fatal|HW/SW
77|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------100001----------0111000110|------100001-------------0010001||RESET_GPU||||INVESTIGATE_PEER_DEVICE|Link Fatal|HW/SW
78|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------100010----------0111000110|------100010-------------0010001||RESET_GPU||||INVESTIGATE_PEER_DEVICE|Link Fatal|HW/SW
79|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------100011----------0111000110|------100011-------------0010001||RESET_GPU||||INVESTIGATE_PEER_DEVICE|Link Fatal|HW
80|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------100100----------0111000110|------100100-------------0010001||RESET_GPU||||INVESTIGATE_PEER_DEVICE|Link Fatal|HW/SW
81|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------100101----------0111000110|------100101-------------0010001||RESET_GPU||||INVESTIGATE_PEER_DEVICE|Link Fatal|HW/SW
82|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------100110----------0111000110|------100110-------------0010001||IGNORE||||INVESTIGATE_SW/USER|Link Fatal|HW/SW
83|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------101000----------0111000110|------101000-------------0010001||IGNORE||||INVESTIGATE_HOST|Fatal|SW
84|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------101010----------0111000110|------101010-------------0010001||RESET_GPU||||INVESTIGATE_LINK_SI_AND_CABLES|Link Fatal?|HW
85|149|NETIR_LINK_EVT/NETIR_LINK_DOWN|------101011----------0111000110|------101011-------------0010001||RESET_GPU||||INVESTIGATE_LINK_SI_AND_CABLES|Link Fatal?|HW
86|149|NETIR_BER_EVENT|------000000----------1000100110|------000000-------------0010011|0x00000000|IGNORE||||INVESTIGATE_LINK_SI_AND_CABLES|Non-fatal|HW
87|149|NETIR_BER_EVENT|------000000----------1000100110|------000000-------------0010011|0x00000001|IGNORE||||INVESTIGATE_LINK_SI_AND_CABLES|Non-fatal|HW
88|149|NETIR_BER_EVENT|------000000----------1000100110|------000000-------------0010011|0x00000002|IGNORE||||INVESTIGATE_LINK_SI_AND_CABLES|Non-fatal|HW
89|149|NETIR_BER_EVENT|------000000----------1000100110|------000000-------------0010011|0x00000003|IGNORE||||INVESTIGATE_LINK_SI_AND_CABLES|Non-fatal|HW
90|149|NETIR_MFDE_EVENT|------000000----------1001000110|------000000-------------0010100|0x00000001|RESET_GPU||||CONTACT_SUPPORT|Fatal**|HW/SW
91|149|NETIR_MFDE_EVENT|------000000----------1001000110|------000000-------------0010100|0x00000003|IGNORE||||IGNORE|Non-fatal|NA
92|149|NETIR_MFDE_EVENT|------000000----------1001000110|------000000-------------0010100|0x00000004|RESET_GPU||||CONTACT_SUPPORT|Fatal**|HW/SW
93|149|NETIR_MFDE_EVENT|------000000----------1001000110|------000000-------------0010100|0x00000005|RESET_GPU||||CONTACT_SUPPORT|Fatal**|HW/SW
94|149|NETIR_MFDE_EVENT|------000000----------1001000110|------000000-------------0010100|0x00000007|RESET_GPU||||CONTACT_SUPPORT|Fatal**|HW/SW
95|150|MSE Degraded|------000000----------0000000000|------000000-------------0000000|0x00000000/0xFFFFFFFF|RESET_GPU||||CONTACT_SUPPORT|Fatal|FW
96|150|MSE_WATCHDOG|------000000----------0000000000|------000000-------------0000000|0x00000000|RESET_GPU||||CONTACT_SUPPORT|Fatal|FW
"""


@dataclass(frozen=True)
class Mask:
    """A 32-bit pattern: the bits that count (`care`) and their values (`value`)."""

    care: int
    value: int

    def matches(self, word: int) -> bool:
        return word & self.care == self.value


def mask(text: str) -> Mask | None:
    """The sheet's 32-character mask ('-' not part of the verdict); None for an empty cell."""
    if not text:
        return None
    bits = text.rjust(32, "-")
    care = int("".join("0" if c == "-" else "1" for c in bits), 2)
    return Mask(care, int("".join("1" if c == "1" else "0" for c in bits), 2))


@dataclass(frozen=True)
class Row:
    """One row of the sheet (see the module docstring for each column)."""

    row: int
    xid: int
    units: tuple[str, ...]  # the V1 and V2 names (one when they are the same)
    v1: Mask
    v2: Mask
    status: frozenset[int] | None  # None: any error status
    bucket: str
    action2_v1: Mask | None
    action2_v2: Mask | None
    action2: str
    investigate: str
    severity: str
    hw_sw: str


def _row(cells: list[str]) -> Row:
    status = frozenset(int(s, 16) for s in cells[5].split("/")) if cells[5] else None
    v1, v2 = mask(cells[3]), mask(cells[4])
    assert v1 is not None and v2 is not None  # every row has both masks
    return Row(
        int(cells[0]),
        int(cells[1]),
        tuple(cells[2].split("/")),
        v1,
        v2,
        status,
        cells[6],
        mask(cells[7]),
        mask(cells[8]),
        cells[9],
        cells[10],
        cells[11],
        cells[12],
    )


ROWS: tuple[Row, ...] = tuple(_row(line.split("|")) for line in _SHEET.splitlines())
