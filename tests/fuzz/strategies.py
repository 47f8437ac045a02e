"""Hypothesis strategies for hostile text: C0/C1 controls, ESC/CSI/OSC sequences, bidi marks, surrogateescape'd
bytes (what os.environ and os.listdir carry for bytes that are not UTF-8), mixed with ordinary text."""

from __future__ import annotations

from hypothesis import strategies as st

CONTROLS = st.sampled_from([chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))])
SEQUENCES = st.sampled_from(
    [
        "\x1b[2J",
        "\x1b[31m",
        "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
        "\x9b31m",
        "\x1b]0;title\x07",
        "\u202eevil\u202c",
        "\u2066x\u2069",
        "\ufffe",
        "\uffff",
    ]
)
UNDECODABLE = st.binary(min_size=1, max_size=4).map(
    lambda b: bytes(x | 0x80 for x in b).decode("utf-8", "surrogateescape")
)
ORDINARY = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
HOSTILE = st.lists(st.one_of(CONTROLS, SEQUENCES, UNDECODABLE, ORDINARY), min_size=1, max_size=8).map("".join)
