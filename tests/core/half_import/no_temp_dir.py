"""Registers itself, then meets a temp dir it cannot use (tempfile's own error, as in a read-only container)."""

from __future__ import annotations

import errno

from tests.core.half_import.registry import register

register("precompile")
raise FileNotFoundError(
    errno.ENOENT, "No usable temporary directory found in ['/tmp', '/var/tmp', '/usr/tmp', '/']"
)
