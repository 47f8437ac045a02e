"""The runtime profile: what a hardened container (read-only, arbitrary uid, low limits) takes from a PyTorch job."""

from __future__ import annotations

from envcheck.checks.runtime.profile import CHECKS as CHECKS
