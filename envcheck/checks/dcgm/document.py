"""Where the document is in dcgmi's output, and whether it is whole.

dcgmi prints the document with jsoncpp's toStyledString (a '{' opening a line); its stderr shares the stream (the
check reads both) and a log line before or after may hold braces of its own. The document is the first one decoded
from a line that opens it and holding a root key of envcheck.checks.dcgm.diag_json; one that does not decode to its
end is cut off (objects still open at the end of the output) or broken, and never judged.
"""

from __future__ import annotations

import json
import re

from envcheck.checks.dcgm.diag_json import ROOT_KEYS, Diagnostic, Unread, read


def _starts(text: str) -> list[int]:
    """Where a document may open: a '{' that starts a line (dcgmi's jsoncpp output), else any '{'."""
    lines = [m.end() - 1 for m in re.finditer(r"^[ \t]*\{", text, re.M)]
    return lines or [m.start() for m in re.finditer(r"\{", text)][:200]


def _open(text: str) -> int:
    """How many objects and arrays are still open at the end of `text` (strings skipped)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if escaped:
            escaped = False
        elif in_string and ch == "\\":
            escaped = True
        elif ch == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth


def parse(text: str) -> Diagnostic | Unread:
    """The diagnostic in dcgmi's output (text before and after it allowed), or why there is none to judge."""
    decoder, skip_to = json.JSONDecoder(), 0
    for start in _starts(text):
        if start < skip_to:
            continue
        try:
            doc, end = decoder.raw_decode(text, start)
        except ValueError as exc:
            if any(k in text[start:] for k in (*ROOT_KEYS, '"iterations"')):
                cut = "cut off" if _open(text[start:]) > 0 else "broken"
                return Unread(f"dcgmi's JSON document is {cut} ({len(text) - start} characters): {exc}")
            continue
        if isinstance(doc, dict) and (any(k in doc for k in ROOT_KEYS) or "iterations" in doc):
            return read(doc)
        skip_to = end
    return Unread(f"no DCGM document in dcgmi's output: {' '.join(text.split())[:200]!r}")
