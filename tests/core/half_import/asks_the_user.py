"""Registers itself, then asks getpass for the user name at import (KeyError for a uid with no passwd entry and
USER/LOGNAME unset; fine elsewhere)."""

from __future__ import annotations

import getpass

from tests.core.half_import.registry import register

register("precompile_user")
USER = getpass.getuser()
