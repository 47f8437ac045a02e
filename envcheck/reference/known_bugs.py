"""Silent-correctness bugs of released torch versions that the numerics checks find on a healthy install, each cited:
a failure that matches one on an affected version is that bug (WARN, fix: the torch version that fixed it), not a
fault of this host; any other failure stays a FAIL. A bug that no released torch fixes yet is reported in `measured`
only (nothing to act on). Found by the option-space checks of issue 35 on torch 2.13.0 (CPU) and re-tested on 2.14.1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.core.result import Result, Status, warned
from envcheck.reference.compare import Comparison, comparisons_result


@dataclass(frozen=True)
class KnownBug:
    """One upstream bug: where it is reported, what it breaks, which failures are it, which torch fixed it."""

    url: str
    what: str
    pattern: str  # regex searched in "<comparison label> @<device>" or in a problem line
    fixed_in: str  # first torch release with the fix (major.minor)

    def matches(self, text: str) -> bool:
        """Whether a failure's text is this bug."""
        return re.search(self.pattern, text) is not None


KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug("https://github.com/pytorch/pytorch/issues/191763",
             "fused SGD on CPU skips the vectorized part of fp16/bf16 parameter updates and writes garbage into the "
             "momentum buffer", r"^SGD\(.*fused=True.*\) (bfloat16|float16) cpu->cpu", "2.14"),
    KnownBug("https://github.com/pytorch/pytorch/issues/190063",
             "embedding_bag's CPU backward scales gradients by the wrong index count with scale_grad_by_freq",
             r"embedding_bag\(.*scale_grad_by_freq=True.*@cpu$", "2.14"),
)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:2])


def affecting(torch_version: str, bugs: Sequence[KnownBug] = KNOWN_BUGS) -> list[KnownBug]:
    """The known bugs present in this torch version."""
    return [b for b in bugs if _version(torch_version) < _version(b.fixed_in)]


def judge_with_known_bugs(what: str, comparisons: Sequence[Comparison], *, tolerances: dict[str, Any],
                          remediation: str, extra: dict[str, Any] | None = None, problems: Iterable[str] = (),
                          torch_version: str | None = None) -> Result:
    """comparisons_result, except that failures which are all known bugs of this torch give a WARN naming them."""
    import torch

    bugs = affecting(torch_version or torch.__version__)
    known: dict[str, list[str]] = {}

    def which(text: str) -> KnownBug | None:
        return next((b for b in bugs if b.matches(text)), None)

    kept: list[Comparison] = []
    for c in comparisons:
        bug = None if c.ok else which(f"{c.op} @{c.device}")
        if bug is None:
            kept.append(c)
        else:
            known.setdefault(bug.url, []).append(c.describe())
    other: list[str] = []
    for p in problems:
        bug = which(p)
        if bug is None:
            other.append(p)
        else:
            known.setdefault(bug.url, []).append(p)
    measured_extra = dict(extra or {})
    if known:
        measured_extra["known_upstream_bugs"] = {url: found[:5] + ([f"... {len(found) - 5} more"] if len(found) > 5
                                                                   else []) for url, found in known.items()}
    result = comparisons_result(what, kept, tolerances=tolerances, remediation=remediation, extra=measured_extra,
                                problems=other)
    if not known or result.status is not Status.PASS:
        return result
    named = [b for b in bugs if b.url in known]
    fixed = max((b.fixed_in for b in named), key=_version)
    summary = (f"{what}: torch {torch.__version__} has known bug(s) "
               + "; ".join(f"{b.url} ({b.what})" for b in named)
               + f"; {sum(len(v) for v in known.values())} comparisons show it, everything else within tolerance")
    return warned(summary, f"pip install 'torch>={fixed}' (fixed upstream), or avoid the affected option",
                  measured=result.measured, expected=result.expected, details="\n".join(
                      line for found in known.values() for line in found), fault_class="image")
