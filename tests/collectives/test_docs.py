"""docs/distributed.md states the numbers the code uses (it once said 25 s where the code used 65 s)."""

from __future__ import annotations

import re

from envcheck.collectives import common as checks
from tests.helpers import ROOT

DOC = ROOT / "docs" / "distributed.md"


def _flat() -> str:
    return " ".join(DOC.read_text().split())


def test_doc_states_the_spec_timeout_and_deadlines_the_code_uses() -> None:
    text = _flat()
    deadlines = re.search(r"\((\d+) s gloo, (\d+) s NCCL; the spec timeout is (\d+) s\)", text)
    assert deadlines, "the deadline sentence moved; keep it in sync with checks.py"
    gloo, nccl, spec = (float(x) for x in deadlines.groups())
    assert gloo == checks.CORRECTNESS_DEADLINE_S["gloo"]
    assert nccl == checks.CORRECTNESS_DEADLINE_S["nccl"]
    assert spec == checks.ALL_REDUCE_TIMEOUT_S


def test_doc_states_the_retry_budget_the_code_uses() -> None:
    found = re.search(r"as long as the time budget allows \(≥ (\d+) s\)", _flat())
    assert found and float(found.group(1)) == checks.MIN_RETRY_S


def test_doc_states_the_torchrun_give_up_rules_the_code_uses() -> None:
    # the give-up timings live in the rank watch since torchrun.py was split
    from envcheck.collectives import rank_watch as torchrun

    text = _flat()
    assert f"a rank whose heartbeat stops for {torchrun.DEAD_AFTER_S:g} s is dead" in text
    assert f"after a death or an error the others get {torchrun.GRACE_S:g} s" in text


def test_doc_states_the_pairwise_numbers_the_code_uses() -> None:
    from envcheck.collectives import pair_verdict, pairs
    from envcheck.collectives.timing import MIB

    text = _flat()
    assert f"a pair is slow below {pair_verdict.SLOW_FRACTION:g}× the median" in text
    assert f"({pairs.CPU_PAIR_BYTES // MIB} MiB on CPU, {pairs.GPU_PAIR_BYTES // MIB} MiB on GPU)" in text
    assert f"as many calls as fit in about {pairs.PAIR_BUDGET_S:g} s (at most {pairs.MAX_ITERS};" in text
    assert f"Code `{pair_verdict.SLOW_CODE}`" in text and f"(`{pair_verdict.WRONG_CODE}`)" in text


def _cause_table() -> str:
    text = DOC.read_text()
    start = text.index("| What the user sees without envcheck |")
    return text[start : text.index("\n\n", start)]


def test_the_cause_table_lists_every_cross_node_code_and_no_other() -> None:
    from envcheck.cluster.finding_codes import TABLE

    documented = set(re.findall(r"`(dist\.(?:rendezvous|transport)\.\w+)`", _cause_table()))
    coded = {row.code for row in TABLE if row.code.startswith(("dist.rendezvous.", "dist.transport."))}
    assert documented == coded


def test_the_doc_states_the_roll_calls_waits_the_code_uses() -> None:
    from envcheck.collectives.rollcall import EARLY_S, GATHER_S

    text = _flat()
    assert (
        f"but only {GATHER_S:g} s more once a cause is known; {EARLY_S:g} s after it opened the store" in text
    )
