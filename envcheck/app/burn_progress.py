"""`envcheck burn`'s progress on stderr: the budget as a bar, and per device its rounds, its throughput of the headline
workload and its wrong results so far. Redrawn in place on a terminal; elsewhere (a job's log) printed every tenth of
the budget, at least 10 s apart. Names from the workers pass through one_line: nothing steers the terminal."""

from __future__ import annotations

import contextlib
from typing import TextIO

from envcheck.burn import corruption
from envcheck.burn.catalogue import every_workload
from envcheck.burn.coordinator import Progress
from envcheck.burn.measures import SCALE, headline, label, units
from envcheck.burn.plan import Plan
from envcheck.burn.records import Tally
from envcheck.core.text import one_line

BAR = 24
TOLERANCES = {w.name: w.tolerance for w in every_workload()}


def lines(plan: Plan, tally: Tally, elapsed: float) -> list[str]:
    """The bar, then one line per device."""
    done = min(1.0, elapsed / plan.budget_s) if plan.budget_s else 1.0
    ready = sum(1 for w in tally.workers.values() if w.workloads)
    bar = "#" * int(done * BAR) + "." * (BAR - int(done * BAR))
    state = "" if ready == len(plan.slots) else f"  starting: {ready} of {len(plan.slots)} ready"
    out = [f"burn [{bar}] {elapsed:5.0f}/{plan.budget_s:g} s  {len(plan.slots)} {plan.kind} device(s){state}"]
    name = headline(tally)
    unit = units(tally).get(name or "", "")
    wrong: dict[int, int] = {}
    for w in corruption.judge(tally, TOLERANCES).wrong:
        wrong[w.worker] = wrong.get(w.worker, 0) + w.count
    for i, worker in sorted(tally.workers.items()):
        rate = worker.throughput(name) if name else None
        figure = f"{one_line(name)} {rate * SCALE.get(unit, 1.0):9.4g} {unit}" if rate else "no result yet"
        out.append(
            f"  {one_line(label(tally, i, True)):<14} rounds {worker.rounds:>6}  {figure}  wrong {wrong.get(i, 0)}"
        )
    return out


def progress_printer(plan: Plan, stream: TextIO) -> Progress:
    """The progress display for `plan` on `stream`."""
    tty = stream.isatty()
    every = max(10.0, plan.budget_s / 10)
    state = {"last": 0.0, "drawn": 0}

    def show(tally: Tally, elapsed: float) -> None:
        with contextlib.suppress(OSError, ValueError):
            text = lines(plan, tally, elapsed)
            if tty:
                up = f"\x1b[{state['drawn']}F" if state["drawn"] else ""
                stream.write(up + "".join(f"\x1b[K{line}\n" for line in text))
                stream.flush()
                state["drawn"] = len(text)
            elif elapsed - state["last"] >= every:
                state["last"] = elapsed
                print("\n".join(text), file=stream, flush=True)

    return show
