"""`envcheck explain`: replay a bundle through the same pure verdicts the live checks use, one loop over sections.

Nothing here reads the system: the same bundle gives the same verdict on any machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.core.check import Context
from envcheck.core.errors import UsageError
from envcheck.core.result import Result, errored


def explain_bundle(bundle: Mapping[str, Any], ctx: Context) -> list[Result]:
    """The verdicts `envcheck run` would have given on the captured host for every check a section of the bundle
    replays (sections an older envcheck did not capture are left out)."""
    from envcheck.checks.check_registry import SECTIONS

    results: list[Result] = []
    for section in SECTIONS:
        part = bundle.get(section.key)
        if isinstance(part, dict) and "capture_error" in part:
            results += [
                errored(f"could not be captured: {part['capture_error']}").named(name, 0.0)
                for name in section.checks
            ]
        elif part is not None:
            try:
                results += section.replay(part, ctx)
            except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
                # The section's validate() passed, yet its verdict met a value it cannot read: the bundle holds a
                # shape no envcheck writes. One line naming the section, exit 2, never a traceback (the
                # validators name the field for every shape tests/fuzz/test_explain_types.py produces).
                raise UsageError(
                    f"bundle's {section.key} section holds a value of the wrong type "
                    f"({type(exc).__name__}: {str(exc)[:120]}); recapture it with "
                    "`envcheck facts --bundle FILE`"
                ) from None
    return results
