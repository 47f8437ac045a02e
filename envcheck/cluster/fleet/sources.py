"""Read envcheck reports from files, folders (their *.json, sorted) and stdin (one document, a JSON array, JSON Lines
or documents back to back). A source that is not JSON, too large, or not a regular file is named and skipped; a path
that does not exist at all is the user's mistake (FleetInputError, one line, exit 2)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

MAX_BYTES = 32 << 20  # a run report of an 8-GPU node is tens of KB; a bench report with plots' data a few MB


class FleetInputError(Exception):
    """Bad input as a whole (no such path, nothing readable): one line, exit 2."""


@dataclass
class Loaded:
    """Documents read (source name, parsed JSON) and sources skipped (source name, why), in input order."""

    documents: list[tuple[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    sources: int = 0


def _files(path: str) -> Iterator[str]:
    """`path` itself, or a folder's *.json files in name order."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise FleetInputError(
            f"{path}: {exc.strerror}; give report files, folders of them, or - for stdin"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        found = sorted(str(p) for p in Path(path).iterdir() if p.suffix == ".json")
        if not found:
            raise FleetInputError(f"{path}: no *.json report in this folder")
        yield from found
    else:
        yield path


def _read_file(path: str) -> tuple[bytes | None, str]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file (a FIFO or device is never read: it can block)"
        if st.st_size > MAX_BYTES:
            return (
                None,
                f"{st.st_size / 2**20:.0f} MiB: larger than {MAX_BYTES >> 20} MiB, not an envcheck report",
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_BYTES + 1), ""
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror})"
    finally:
        os.close(fd)


def _parse(data: bytes) -> tuple[Any, str]:
    try:
        return json.loads(data.decode("utf-8")), ""
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at line {exc.lineno})"


def split_stream(text: str) -> Iterator[tuple[int, Any, str]]:
    """(index, document, problem) for every JSON document in `text`: a JSON array's elements, one document per
    line, or documents back to back; after a broken one, reading resumes at the next line that starts with '{'."""
    decoder = json.JSONDecoder()
    pos, index = 0, 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            return
        index += 1
        try:
            doc, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            line = text.count("\n", 0, exc.pos) + 1
            yield index, None, f"not JSON ({exc.msg} at line {line})"
            nxt = text.find("\n{", exc.pos)
            if nxt < 0:
                return
            pos = nxt + 1
            continue
        pos = end
        if isinstance(doc, list) and index == 1 and text[pos:].strip() == "":
            for n, item in enumerate(doc, 1):
                yield n, item, ""
            return
        yield index, doc, ""


def read_stream(stream: BinaryIO, loaded: Loaded) -> None:
    """Every document on `stream` (stdin), named `stdin #N`."""
    data = stream.read(MAX_BYTES * 64 + 1)
    if len(data) > MAX_BYTES * 64:
        raise FleetInputError(
            f"stdin: more than {MAX_BYTES * 64 >> 30} GiB; give a folder of report files instead"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise FleetInputError("stdin: not UTF-8 text; pipe envcheck --json reports into it") from None
    if not text.strip():
        raise FleetInputError(
            "stdin is empty; pipe envcheck --json reports into it (e.g. cat reports/*.json | ...)"
        )
    for index, doc, problem in split_stream(text):
        loaded.sources += 1
        name = f"stdin #{index}"
        if problem:
            loaded.skipped.append((name, problem))
        else:
            loaded.documents.append((name, doc))


def load(paths: Sequence[str], stdin: BinaryIO | None = None) -> Loaded:
    """Every document of `paths` ('-' is stdin); FleetInputError when a path does not exist or nothing was given."""
    if not paths:
        raise FleetInputError("no reports given; pass report files, folders of them, or - for stdin")
    loaded = Loaded()
    for path in paths:
        if path == "-":
            read_stream(stdin if stdin is not None else sys.stdin.buffer, loaded)
            continue
        for name in _files(path):
            loaded.sources += 1
            data, problem = _read_file(name)
            doc, problem = _parse(data) if data is not None else (None, problem)
            if problem:
                loaded.skipped.append((name, problem))
            else:
                loaded.documents.append((name, doc))
    return loaded
