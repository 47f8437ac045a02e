"""Kernel-log records in every form the field writes them, read back into the printk records they were.

One printk is one record. Its text may hold embedded newlines (the NVIDIA driver prints "fallen off the bus" and
"API mismatch" as one printk of three and five lines). Each way of saving the log writes that differently, and each
is read here from the writer's own rules:
- /dev/kmsg (the kernel's Documentation/ABI/testing/dev-kmsg; kernel/printk/printk.c, msg_add_ext_text): one record
  as `prio,seq,usec,flags[,caller=...];text`, every byte below 0x20 or from 0x7f, and the backslash, escaped as
  `\\xNN` (a newline is `\\x0a`), then dictionary lines that start with a space (` SUBSYSTEM=pci`,
  ` DEVICE=+pci:0000:b3:00.0`). Flag `+` marks a fragment that continues the record before it (KERN_CONT).
- util-linux `dmesg` (sys-utils/dmesg.c): `[    5.123456] text`; with `-T` `[Tue Mar  5 10:11:12 2024] text`;
  with `--time-format iso` `2024-03-05T10:11:12,123456+00:00 text`; with `-x` `kern  :err   : ` before the text;
  with `-r` `<3>` first. A record's further lines are printed indented, without a stamp.
- The kernel's syslog(2) and console text (printk.c, record_print_text), as busybox `dmesg`, klogd and rsyslog's
  imklog read it: the stamp is repeated on every line of a record, so one printk reads as several lines with the
  same stamp (joined again by `messages()`).
- journalctl (`short`, `short-precise`, `short-iso`, `short-monotonic`): `Mar 05 10:11:12 host kernel: text`, a
  record's further lines indented under its text.
- rsyslog files (/var/log/syslog, messages, kern.log): the syslog stamp and `host kernel: `, often the kernel's own
  `[  12.345678] ` after it; control characters escaped on receive as `#` and three octal digits (`#012` is a
  newline: $EscapeControlCharactersOnReceive).
- `dmesg -H` / `--reltime`: `[Mar 5 10:11] text`, then `[  +0.009910] text` (time since the line before).
- talosctl dmesg (siderolabs/talos, the kmsg reader's text): `[node: ]kern:    info: [2023-09-14T03:08:37.389Z]: text`,
  with /dev/kmsg's `\x0a` escapes and dictionary lines kept.
- Plain text: a log pasted or filtered through grep, without any stamp.
Pure: no I/O (probe.kernel_log reads /dev/kmsg).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

_KMSG = re.compile(r"^(\d{1,3}),(\d+),(\d+),([^;,]*)(?:,[^;]*)?;(.*)$")
_DICT = re.compile(r"^ ([A-Z0-9_]+)=(.*)$")
_ESCAPED = re.compile(r"\\x([0-9a-fA-F]{2})")
_OCTAL = re.compile(r"#([0-3][0-7]{2})")  # rsyslog's control-character escape: #012 is "\n", #011 a tab
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_PRIO = re.compile(r"^<(\d{1,3})>")
_FACILITY = re.compile(
    r"^(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|res\d|local[0-7])\s*:"
    r"\s*(?:emerg|alert|crit|err|warn|notice|info|debug)\s*:\s?"
)
_MONO = re.compile(r"^\[\s*(\d+\.\d+)\]\s?")
_RELATIVE = re.compile(r"^\[\s*(\+\s*\d+\.\d+|" + _MONTH + r" ?\d{1,2} \d\d:\d\d(?::\d\d)?)\]\s?")  # dmesg -H
_TALOS = re.compile(
    r"^(?:\S+: )?kern:\s*(?:emerg|alert|crit|err|warning|notice|info|debug)\s*:\s*\[([^\]]+)\]:\s?"
)
_CTIME = re.compile(r"^\[((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _MONTH + r" [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?")
_ISO = re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+")
_SYSLOG = re.compile(r"^(" + _MONTH + r" +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?)\s+")
_HOST_KERNEL = re.compile(r"^(?:\S+\s+)?kernel(?:\[\d+\])?:\s?")
# Lines that begin a message of their own: never the continuation of a driver message printed line by line.
_HEAD = re.compile(
    r"^NVRM: (?:Xid |GPU[ \d]|GPU at |loading |The NVIDIA |API mismatch|This PCI|RmInitAdapter|rm_init_adapter|"
    r"No NVIDIA|None of the|Rate limiting|nvidia-|\w+: )"
)
_NVRM = "NVRM: "
# The kernel's limit on one printk record's text (kernel/printk/printk.c, LOG_LINE_MAX: 1024 less the prefix): lines
# that would make a longer message are not one printk.
RECORD_MAX = 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # escaped bytes that are no text: never passed on


@dataclass(frozen=True)
class Record:
    """One printk as it was logged: its text with real newlines, and what the form kept of its time and origin."""

    text: str
    seq: int | None = None  # /dev/kmsg's sequence number
    boot_s: float | None = (
        None  # seconds since boot (/dev/kmsg, dmesg, short-monotonic, a syslog's kernel stamp)
    )
    stamp: str = ""  # a wall-clock stamp as written (dmesg -T, journal, syslog, ISO); '' without one
    device: str | None = None  # the PCI address the /dev/kmsg dictionary names (DEVICE=+pci:...)
    form: str = "plain"  # kmsg | dmesg | journal | syslog | plain

    @property
    def when(self) -> float | str | None:
        """What tells two records' moments apart: the time since boot, else the wall stamp, else None."""
        return self.boot_s if self.boot_s is not None else (self.stamp or None)

    @property
    def flat(self) -> str:
        """The text on one line: each further line without its 'NVRM: ' prefix, whitespace collapsed."""
        lines = self.text.split("\n")
        rest = [line.strip().removeprefix(_NVRM).strip() for line in lines[1:]]
        return " ".join(" ".join([lines[0], *rest]).split())


def _unescape_kmsg(text: str) -> str:
    """/dev/kmsg's \\xNN escapes undone: newlines and tabs back, UTF-8 sequences put together, and any other
    control byte (a process name can carry ESC) replaced, so nothing of it reaches a terminal or a report."""
    raw = _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)
    try:  # bytes from 0x80 were escaped one by one: put UTF-8 sequences back together
        raw = raw.encode("latin-1").decode("utf-8", "replace")
    except UnicodeEncodeError:
        pass
    return _CONTROL.sub("?", raw)


def _unescape_octal(text: str) -> str:
    return _CONTROL.sub(
        "?", _OCTAL.sub(lambda m: chr(int(m.group(1), 8)) if int(m.group(1), 8) < 0o40 else m.group(0), text)
    )


def _stamped(line: str) -> Record | None:
    """A line that begins a record in one of the text forms (None: a continuation or a plain line)."""
    talos = _TALOS.match(line)
    if talos:
        return Record(_unescape_kmsg(line[talos.end() :]).rstrip(), stamp=talos.group(1), form="kmsg")
    rest, boot_s, stamp, form = _PRIO.sub("", line), None, "", ""
    rest = _FACILITY.sub("", rest)
    kinds = ((_MONO, "mono"), (_RELATIVE, "relative"), (_CTIME, "ctime"), (_ISO, "iso"), (_SYSLOG, "syslog"))
    for pattern, kind in kinds:
        found = pattern.match(rest)
        if found:
            rest = rest[found.end() :]
            if kind == "mono":
                boot_s, form = float(found.group(1)), "dmesg"
            elif kind == "relative":  # a delta has no moment of its own: only a stamp that tells lines apart
                stamp, form = found.group(1).replace(" ", ""), "dmesg"
            else:
                stamp, form = found.group(1), "dmesg" if kind == "ctime" else "journal"
            break
    else:
        return None
    kernel = _HOST_KERNEL.match(rest)
    if kernel and (form == "journal" or boot_s is not None):
        rest, form = rest[kernel.end() :], "journal"
        inner = _MONO.match(rest)  # a syslog line that kept the kernel's own stamp
        if inner:
            rest, boot_s = rest[inner.end() :], float(inner.group(1))
    if "#0" in rest:
        form = "syslog" if form == "journal" else form
    rest = _unescape_octal(rest)
    return Record(rest.rstrip(), boot_s=boot_s, stamp=stamp, form=form)


def parse_records(lines: Iterable[str]) -> list[Record]:
    """The records in kernel-log lines of any form above, in order; lines of several forms may be mixed."""
    out: list[Record] = []
    last_kmsg = False
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        kmsg = _KMSG.match(line)
        if kmsg:
            text = _unescape_kmsg(kmsg.group(5))
            record = Record(
                text.rstrip("\n"), seq=int(kmsg.group(2)), boot_s=int(kmsg.group(3)) / 1e6, form="kmsg"
            )
            if (
                "+" in kmsg.group(4) and out and out[-1].form == "kmsg"
            ):  # a fragment continuing the last record
                out[-1] = replace(out[-1], text=out[-1].text + record.text)
            else:
                out.append(record)
            last_kmsg = True
            continue
        if out and (entry := _DICT.match(line)) and (last_kmsg or out[-1].form == "kmsg"):
            if entry.group(1) == "DEVICE" and entry.group(2).startswith("+pci:"):
                out[-1] = replace(out[-1], device=_unescape_kmsg(entry.group(2)[5:]))
            continue
        last_kmsg = False
        stamped = _stamped(line)
        if stamped is not None and "\\x" in stamped.text:  # a text form that kept /dev/kmsg's escapes
            stamped = replace(stamped, text=_unescape_kmsg(stamped.text))
        if stamped is not None:
            out.append(stamped)
        elif line[:1].isspace() and out:  # a record's further line, indented under its text
            out[-1] = replace(out[-1], text=f"{out[-1].text}\n{_unescape_octal(line.strip())}")
        else:
            out.append(Record(_unescape_octal(line.strip())))
    return out


def messages(records: Iterable[Record]) -> list[Record]:
    """Records with a driver message printed one line per record put back together: an 'NVRM: ' line that does
    not end a sentence, followed at the same moment by an 'NVRM: ' line that begins no message of its own (the
    syslog(2) and console forms repeat the stamp on each line of one printk; a grep keeps the lines apart)."""
    out: list[Record] = []
    for record in records:
        if out and _continues(out[-1], record):
            out[-1] = replace(out[-1], text=f"{out[-1].text}\n{record.text}")
        else:
            out.append(record)
    return out


def _continues(before: Record, record: Record) -> bool:
    last = before.text.split("\n")[-1].strip()
    return (
        len(before.text) + len(record.text) < RECORD_MAX
        and record.text.startswith(_NVRM)
        and last.startswith(_NVRM)
        and not last.endswith((".", "!"))
        and not _HEAD.match(record.text)
        and _same_moment(before, record)
    )


def _same_moment(a: Record, b: Record) -> bool:
    """The same stamp, or times since boot within a millisecond: a driver that prints a message line by line (old
    releases did) logs its lines microseconds apart."""
    if a.boot_s is not None and b.boot_s is not None:
        return abs(b.boot_s - a.boot_s) < 1e-3
    return a.when == b.when
