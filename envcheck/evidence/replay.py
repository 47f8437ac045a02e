"""`envcheck explain`: replay a bundle through the same pure verdicts the live checks use, one loop over sections.

Nothing here reads the system: the same bundle gives the same verdict on any machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result, errored


def explain_bundle(bundle: Mapping[str, Any], ctx: Context) -> list[Result]:
    """The verdicts `envcheck run` would have given on the captured host for every check a section of the bundle
    replays (sections an older envcheck did not capture are left out)."""
    from envcheck.checks import SECTIONS

    results: list[Result] = []
    for section in SECTIONS:
        part = bundle.get(section.key)
        if isinstance(part, dict) and "capture_error" in part:
            results += [errored(f"could not be captured: {part['capture_error']}").named(name, 0.0)
                        for name in section.checks]
        elif part is not None:
            results += section.replay(part, ctx)
    return results
