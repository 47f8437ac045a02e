"""The many-node path's side channel and heartbeat watch: per-rank phases, heartbeats and findings, plus the
verdict, in the c10d TCPStore (never over the backend under test), and the `Monitor` that tells from them which
ranks are done, raised, were stopped, died or stalled (envcheck.collectives.torchrun runs it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PREFIX = "envcheck/"
POLL_S = 0.1
BEAT_S = 0.25  # each rank's main thread bumps its heartbeat counter this often
DEAD_AFTER_S = 1.0  # a rank whose heartbeat is silent this long is dead (its process is gone)
GRACE_S = 3.0  # after a rank died or raised, how long the others get to report


class SideChannel:
    """Per-rank phases, heartbeats and findings, plus the verdict, in the c10d store.

    Watching costs three non-blocking counter reads per rank (`add(key, 0)`); a phase or the findings
    are read only when the counters say they changed.
    """

    FOUND, STOPPED = 1, 2

    def __init__(self, store: Any) -> None:
        self.store = store

    def _key(self, what: str, rank: int | None = None) -> str:
        return f"{PREFIX}{what}" if rank is None else f"{PREFIX}{what}/{rank}"

    def phase(self, rank: int, phase: str) -> None:
        self.store.set(self._key("phase", rank), phase)
        self.store.add(self._key("progress", rank), 1)

    def beat(self, rank: int) -> None:
        self.store.add(self._key("beat", rank), 1)

    def found(self, rank: int, found: dict[str, Any]) -> None:
        self.store.set(self._key("found", rank), json.dumps(found))
        self.store.add(self._key("flags", rank), self.FOUND)

    def stopped(self, rank: int) -> None:
        self.store.add(self._key("flags", rank), self.STOPPED)

    def set_verdict(self, code: int) -> None:
        self.store.set(self._key("verdict"), str(code))

    def ack(self) -> None:
        """This rank read the verdict (rank 0 may now close the store it hosts)."""
        self.store.add(self._key("acked"), 1)

    def acks(self) -> int:
        return int(self.store.add(self._key("acked"), 0))

    def verdict(self) -> int | None:
        return int(self.store.get(self._key("verdict"))) if self.store.check([self._key("verdict")]) else None

    def counters(self, rank: int) -> tuple[int, int, int]:
        """(heartbeats, phases entered, flags) of one rank; never blocks."""
        return (
            int(self.store.add(self._key("beat", rank), 0)),
            int(self.store.add(self._key("progress", rank), 0)),
            int(self.store.add(self._key("flags", rank), 0)),
        )

    def read_phase(self, rank: int) -> str:
        key = self._key("phase", rank)
        return self.store.get(key).decode() if self.store.check([key]) else "not started"

    def read_found(self, rank: int) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.store.get(self._key("found", rank)))
        return found


@dataclass
class RankState:
    """What one rank last showed, and when (this process's monotonic clock) that last changed."""

    beat: int = -1
    progress: int = -1
    beat_at: float = 0.0
    progress_at: float = 0.0
    phase: str = "not started"
    found: dict[str, Any] | None = None
    stopped: bool = False


@dataclass
class Monitor:
    """Every rank's state as seen from one process; decides when to stop waiting."""

    channel: SideChannel
    world: int
    stall_s: float
    now: Callable[[], float] = time.monotonic
    ranks: list[RankState] = field(default_factory=list)
    trouble_at: float | None = None  # when a rank was first seen dead or raising

    def __post_init__(self) -> None:
        began = self.now()
        self.ranks = [RankState(beat_at=began, progress_at=began) for _ in range(self.world)]

    def poll(self, ranks: range | None = None) -> None:
        """Read the state of `ranks` (default: all) from the store."""
        now = self.now()
        for rank in range(self.world) if ranks is None else ranks:
            state = self.ranks[rank]
            beat, progress, flags = self.channel.counters(rank)
            if beat != state.beat:
                state.beat, state.beat_at = beat, now
            if progress != state.progress:
                state.progress, state.progress_at = progress, now
                state.phase = self.channel.read_phase(rank)
            if flags & SideChannel.FOUND and state.found is None:
                state.found = self.channel.read_found(rank)
            state.stopped = bool(flags & SideChannel.STOPPED)
        if self.trouble_at is None and any(self.kind(r) in ("dead", "raised") for r in range(self.world)):
            self.trouble_at = now

    def kind(self, rank: int) -> str:
        """done, raised, stopped (SIGTERM from torchrun), dead (heartbeat silent) or running."""
        state = self.ranks[rank]
        if state.found is not None:
            return "raised" if "error" in state.found else "done"
        if state.stopped:
            return "stopped"
        if state.beat > 0 and self.now() - state.beat_at > DEAD_AFTER_S:  # it beat, then fell silent
            return "dead"
        return "running"

    def all_done(self) -> bool:
        return all(s.found is not None for s in self.ranks)

    def stalled_for(self) -> float:
        """Seconds since any unfinished rank last entered a new phase."""
        return self.now() - max(s.progress_at for s in self.ranks)

    def give_up(self) -> bool:
        """True when waiting longer cannot help: grace after a death or error spent, or no progress."""
        if self.trouble_at is not None and self.now() - self.trouble_at >= GRACE_S:
            return True
        return self.stalled_for() >= self.stall_s

    def describe(self) -> str:
        """One line naming the ranks that died or stalled (the usual cause) first, then the ones that
        raised (often victims: a peer closed the connection or a collective timed out) or were stopped."""
        parts = []
        for rank, state in enumerate(self.ranks):
            if self.kind(rank) == "dead":
                parts.append(
                    f"rank {rank} died (no heartbeat for {self.now() - state.beat_at:.1f}s) "
                    f"after reaching '{state.phase}'"
                )
        running = [r for r in range(self.world) if self.kind(r) == "running"]
        if running:
            least = min(self.ranks[r].progress for r in running)
            behind = [r for r in running if self.ranks[r].progress == least]
            names = ", ".join(str(r) for r in behind)
            verb = "still waiting after" if parts else "stalled after"  # behind a dead rank: its victims
            parts.append(
                f"rank{'s' if len(behind) > 1 else ''} {names} {verb} "
                f"'{self.ranks[behind[0]].phase}' (no progress for {self.stalled_for():.1f}s, "
                f"--timeout {self.stall_s:g}s)"
            )
        for rank, state in enumerate(self.ranks):
            if self.kind(rank) == "raised":
                parts.append(f"rank {rank} raised in '{state.phase}': {(state.found or {}).get('error')}")
        stopped = [str(r) for r in range(self.world) if self.kind(r) == "stopped"]
        if stopped:
            parts.append(
                f"rank{'s' if len(stopped) > 1 else ''} {', '.join(stopped)} stopped by torchrun (SIGTERM)"
            )
        return "; ".join(parts) or "no rank reported"

    def table(self) -> list[dict[str, Any]]:
        return [{"rank": r, "state": self.kind(r), "last_phase": s.phase} for r, s in enumerate(self.ranks)]
