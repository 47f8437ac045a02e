"""The one rule for text from outside envcheck (environment, interface names, files, bundles, subprocess output).

Every renderer passes such text through one of these before it leaves the process:
- `visible()` for a terminal: C0 controls (ESC, NUL...), DEL, C1 controls (CSI, OSC as 0x9b/0x9d), bidi overrides
  and isolates, Unicode non-characters and lone surrogates become visible escapes (`\\x1b`, `\\u202e`); bytes that
  were not UTF-8 (carried as `surrogateescape` surrogates, as os.environ and os.listdir carry them) show as `\\xff`.
  Newline and tab stay (a table cell may span lines); nothing else that can steer a terminal reaches it.
- `xml_text()` for JUnit: the same escapes, so the file holds only XML 1.0 characters (Char, section 2.2) and
  nothing a CI page would interpret; newline and tab stay (a raw CR would be read back as a newline).
- `label_value()` for Prometheus label values: the same escapes with newline escaped too; prometheus_client then
  applies the exposition format's own escaping (backslash, double quote, newline).
JSON keeps the exact value (json escapes every control character and lone surrogate itself).
Every one of them, JSON included, first applies envcheck.core.redact (token-shaped values, URL credentials).
"""

from __future__ import annotations

import re
from typing import Any

from envcheck.core.redact import redact_value

# Bidi embedding/override/isolate marks: they reorder what a reader sees (CVE-2021-42574, "Trojan Source").
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI}\ud800-\udfff\ufffe\uffff]")


def _escape(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the undecodable byte itself
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _escaped(text: str, keep: str) -> str:
    text = redact_value(text)  # tokens and URL credentials never reach any output (envcheck.core.redact)
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)


def visible(value: Any) -> str:
    """Text safe for a terminal: every control, bidi mark and undecodable byte shown as an escape, never raw."""
    return _escaped(value if isinstance(value, str) else str(value), "\n\t")


def one_line(value: Any) -> str:
    """Like visible(), with newline, tab and CR escaped too (a label value, a message on one line)."""
    return _escaped(value if isinstance(value, str) else str(value), "")


def xml_text(value: Any) -> str:
    """Text that holds only XML 1.0 characters (the rest shown as escapes, as visible() does)."""
    return _escaped(value if isinstance(value, str) else str(value), "\n\t")


def xml_attribute(value: Any) -> str:
    """An XML attribute value: xml_text() on one line (a parser turns a raw newline or tab there into a space)."""
    return one_line(value)


def label_value(value: Any) -> str:
    """A Prometheus label value: one line, every control character escaped (prometheus_client adds the
    exposition format's backslash, quote and newline escaping)."""
    return one_line(value)
