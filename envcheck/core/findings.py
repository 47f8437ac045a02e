"""The finding model: one `Finding` (what is wrong, the fix, who must act, its stable code) that every check's pure
verdict returns, and `Code`, one row of the finding-code table (envcheck.checks.finding_codes).

A domain that must say more about a finding (the CUDA layer it broke, the GPU it was seen on, whether it stops torch)
extends `Finding` with keyword-only fields; the four fields every finding has are defined here, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.core.result import FaultClass


@dataclass(frozen=True)
class Finding:
    """One cause: the problem in one line, the concrete fix, who must act, and its stable code ('' : the check's
    default `<check>.<status>`)."""

    problem: str
    fix: str
    fault_class: FaultClass
    code: str = ""


@dataclass(frozen=True)
class Code:
    """One finding code as the codes reference lists it: the code (a family writes its variable part as `<n>`),
    what it means, who must act (None: it depends on where it is seen, as `meaning` says) and the usual fix."""

    code: str
    meaning: str
    fault_class: FaultClass | None
    fix: str
