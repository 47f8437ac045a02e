"""Silent-correctness bugs of released torch versions that the numerics checks find on a healthy install, each cited:
a failure that matches one on an affected version is that bug (WARN: upgrade to the release that fixed it, or, where
no release fixes it yet, avoid the option), not a fault of this host; any other failure stays a FAIL. Found by the
option-space checks of issue 35 on torch 2.13.0 (CPU) and re-tested on 2.14.1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.core.result import FaultClass, Result, Status, warned
from envcheck.reference.compare import Comparison, comparisons_result


@dataclass(frozen=True)
class KnownBug:
    """One upstream bug: where it is reported, what it breaks, which failures are it, which torch fixed it."""

    url: str
    what: str
    pattern: str  # regex searched in "<comparison label> @<device>" or in a problem line
    fixed_in: str | None  # first torch release with the fix (major.minor); None: no release fixes it yet

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
    KnownBug("https://github.com/pytorch/pytorch/pull/187732",
             "DDP with static_graph=True and no_sync() gradient accumulation asserts (expect_autograd_hooks_) and, "
             "once past that, stops all-reducing gradients (a regression from pytorch#103487)",
             r"static_graph=True.*no_sync_accumulation=2", None),
)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:2])


def affecting(torch_version: str, bugs: Sequence[KnownBug] = KNOWN_BUGS) -> list[KnownBug]:
    """The known bugs present in this torch version."""
    return [b for b in bugs if b.fixed_in is None or _version(torch_version) < _version(b.fixed_in)]


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
    fixes = [b.fixed_in for b in named if b.fixed_in]
    unfixed = [b.url for b in named if not b.fixed_in]
    remedy = "; ".join(([f"pip install 'torch>={max(fixes, key=_version)}' (fixed upstream)"] if fixes else [])
                       + ([f"avoid the affected options (no torch release fixes {', '.join(unfixed)} yet)"]
                          if unfixed else []))
    summary = (f"{what}: torch {torch.__version__} has known bug(s) "
               + "; ".join(f"{b.url} ({b.what})" for b in named)
               + f"; {sum(len(v) for v in known.values())} comparisons show it, everything else within tolerance")
    return warned(summary, remedy,
                  measured=result.measured, expected=result.expected, details="\n".join(
                      line for found in known.values() for line in found), fault_class=FaultClass.IMAGE)
