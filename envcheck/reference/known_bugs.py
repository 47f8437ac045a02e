"""Silent-correctness bugs of released torch versions that the numerics checks find on a healthy install, each cited:
a failure that matches one on an affected version is that bug (WARN: upgrade to the release that fixed it, or, where
no release fixes it yet, avoid the option), not a fault of this host; any other failure stays a FAIL. Found by the
option-space checks on torch 2.13.0 (CPU) and re-tested on 2.14.1.
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
    # The bug reads memory it never wrote (garbage): whether a run meets it depends on what the allocator hands out,
    # so on what ran before in the process. On an affected torch every comparison it matches is the bug, passed or
    # not, so that the verdict (WARN naming it) never depends on the order the checks ran in.
    intermittent: bool = False

    def matches(self, text: str) -> bool:
        """Whether a failure's text is this bug."""
        return re.search(self.pattern, text) is not None


KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        "https://github.com/pytorch/pytorch/issues/191763",
        "fused SGD on CPU skips the vectorized part of fp16/bf16 parameter updates and writes garbage into the "
        "momentum buffer",
        r"^SGD\(.*fused=True.*\) (bfloat16|float16) cpu->cpu",
        "2.14",
        intermittent=True,
    ),
    KnownBug(
        "https://github.com/pytorch/pytorch/issues/190063",
        "embedding_bag's CPU backward scales gradients by the wrong index count with scale_grad_by_freq",
        r"embedding_bag\(.*scale_grad_by_freq=True.*@cpu$",
        "2.14",
    ),
    KnownBug(
        "https://github.com/pytorch/pytorch/pull/187732",
        "DDP with static_graph=True and no_sync() gradient accumulation asserts (expect_autograd_hooks_) and, "
        "once past that, stops all-reducing gradients (a regression from pytorch#103487)",
        r"static_graph=True.*no_sync_accumulation=2",
        None,
    ),
    KnownBug(
        "https://github.com/pytorch/pytorch/issues/53712",
        "Adagrad initializes its state in __init__ only, so a group added with add_param_group has none and "
        "step() raises KeyError: 'sum' (measured on torch 2.11.0; 2.12 initializes it in step)",
        r"^Adagrad\(.*: KeyError: '(sum|step)'",
        "2.12",
    ),
    # The two below were found by the GPU proof (bench/gpu_proof.sh) on an H100, torch 2.11.0+cu130, with no
    # upstream report found; each cites the CUDA source of the op, and
    # docs/gpu-evidence/2026-11-24-nvidia-h100-80gb-hbm3/call-3/ holds the measurement
    # (diag.py.txt, the script; diag.txt, its output).
    KnownBug(
        "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/ForeachTernaryOp.cu",
        "on CUDA, _foreach_lerp_ with a scalar or scalar-list weight changes its tensors without bumping their "
        "version counters (the tensor-weight overload and lerp_ do), so autograd does not refuse a saved "
        "tensor it modified (measured: version 0 -> 0, values changed)",
        r"^_foreach_lerp_ on cuda",
        None,
    ),
    KnownBug(
        "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/Embedding.cu",
        "on CUDA, embedding's max_norm renorm (embedding_renorm_) leaves rows whose norm exceeds max_norm "
        "unchanged for norm_type other than 1 and 2 (measured: inf and 3), where the CPU kernel renorms them",
        r"^embedding(_bag)?\(.*norm_type=inf.*@cuda",
        None,
    ),
)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:2])


def affecting(torch_version: str, bugs: Sequence[KnownBug] = KNOWN_BUGS) -> list[KnownBug]:
    """The known bugs present in this torch version."""
    return [b for b in bugs if b.fixed_in is None or _version(torch_version) < _version(b.fixed_in)]


def _bug_for(text: str, bugs: Sequence[KnownBug]) -> KnownBug | None:
    return next((b for b in bugs if b.matches(text)), None)


def split_known(
    texts: Iterable[str], torch_version: str | None = None
) -> tuple[dict[str, list[str]], list[str]]:
    """Failure lines that are a known bug of this torch, by bug URL, and the rest, in order."""
    import torch

    bugs = affecting(torch_version or torch.__version__)
    known: dict[str, list[str]] = {}
    other: list[str] = []
    for text in texts:
        bug = _bug_for(text, bugs)
        if bug is None:
            other.append(text)
        else:
            known.setdefault(bug.url, []).append(text)
    return known, other


def known_bugs_measured(known: dict[str, list[str]]) -> dict[str, list[str]]:
    """What `measured["known_upstream_bugs"]` holds: up to five failures per bug URL."""
    return {
        url: found[:5] + ([f"... {len(found) - 5} more"] if len(found) > 5 else [])
        for url, found in known.items()
    }


def known_bugs_warning(
    what: str, known: dict[str, list[str]], *, measured: dict[str, Any], expected: dict[str, Any]
) -> Result:
    """The WARN for failures that are all known bugs of this torch: it names each bug and its fix or workaround."""
    import torch

    named = [b for b in KNOWN_BUGS if b.url in known]
    fixes = [b.fixed_in for b in named if b.fixed_in]
    unfixed = [b.url for b in named if not b.fixed_in]
    remedy = "; ".join(
        ([f"pip install 'torch>={max(fixes, key=_version)}' (fixed upstream)"] if fixes else [])
        + (
            [f"avoid the affected options (no torch release fixes {', '.join(unfixed)} yet)"]
            if unfixed
            else []
        )
    )
    summary = (
        f"{what}: torch {torch.__version__} has known bug(s) "
        + "; ".join(f"{b.url} ({b.what})" for b in named)
        + f"; {sum(len(v) for v in known.values())} failures show it, everything else as expected"
    )
    return warned(
        summary,
        remedy,
        measured={**measured, "known_upstream_bugs": known_bugs_measured(known)},
        expected=expected,
        details="\n".join(line for found in known.values() for line in found),
        fault_class=FaultClass.IMAGE,
    )


def judge_with_known_bugs(
    what: str,
    comparisons: Sequence[Comparison],
    *,
    tolerances: dict[str, Any],
    remediation: str,
    extra: dict[str, Any] | None = None,
    problems: Iterable[str] = (),
    torch_version: str | None = None,
) -> Result:
    """comparisons_result, except that failures which are all known bugs of this torch give a WARN naming them."""
    import torch

    bugs = affecting(torch_version or torch.__version__)
    known: dict[str, list[str]] = {}
    kept: list[Comparison] = []
    for c in comparisons:
        bug = _bug_for(f"{c.op} @{c.device}", bugs)
        if bug is None or not (bug.intermittent or not c.ok):
            kept.append(c)
        else:
            known.setdefault(bug.url, []).append(
                c.describe() if not c.ok else f"{c.op} @{c.device}: not judged (met by chance, {bug.url})"
            )
    known_problems, other = split_known(problems, torch_version)
    for url, found in known_problems.items():
        known.setdefault(url, []).extend(found)
    measured_extra = dict(extra or {})
    if known:
        measured_extra["known_upstream_bugs"] = known_bugs_measured(known)
    result = comparisons_result(
        what, kept, tolerances=tolerances, remediation=remediation, extra=measured_extra, problems=other
    )
    if not known or result.status is not Status.PASS:
        return result
    return known_bugs_warning(what, known, measured=result.measured, expected=result.expected)
