"""Read a small JSON or YAML document (a compose file, a CDI spec) with one-line errors.

JSON needs nothing; YAML needs PyYAML, which is not a dependency of envcheck: without it a YAML file is refused
with the way round it (`docker compose config --format json`, or `pip install pyyaml`).
"""

from __future__ import annotations

import importlib
import json
import os
import stat
from typing import Any

from envcheck.core.errors import UsageError

MAX_DOCUMENT_BYTES = 4 * 2**20


def read_document(path: str, what: str) -> Any:
    """The parsed document at `path`; UsageError naming `what` for a missing, special, huge or malformed file."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what} {path} is not a regular file")
        if st.st_size > MAX_DOCUMENT_BYTES:
            raise UsageError(
                f"{what} {path} is {st.st_size / 2**20:.1f} MiB; at most "
                f"{MAX_DOCUMENT_BYTES // 2**20} MiB is read"
            )
        with open(path, "rb") as fh:
            text = fh.read(MAX_DOCUMENT_BYTES + 1).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        raise UsageError(f"{what} {path}: nested too deeply") from None
    try:
        yaml = importlib.import_module("yaml")  # optional, and without type stubs here
    except ImportError:
        raise UsageError(
            f"{what} {path} is not JSON, and reading YAML needs PyYAML (pip install pyyaml); or "
            "give JSON (for compose: docker compose config --format json)"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())[:160]
        raise UsageError(f"{what} {path}: not valid YAML ({first})") from None
    except RecursionError:
        raise UsageError(f"{what} {path}: nested too deeply") from None
