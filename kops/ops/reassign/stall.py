"""When waiting for the moves in flight is pointless: the execution's stall watch (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kops.model import Topology
from kops.ops.move import Move
from kops.ops.reassign.options import NO_PROGRESS_S

#: the window of no copying grows at a very low throttle: a follower's 1 MiB fetch at the rate,
#: three times over
FETCH_BYTES = 1 << 20


class StallWatch:
    """Decides when ``execute --wait`` stops waiting (exit 3, resumable), in two cases:

    - every data move in flight has a down broker among its *target* replicas — a destination,
      or a replica that stays (Kafka completes a reassignment only once every target replica is
      in the ISR, found by the fault lab: a kept replica on a killed broker blocks the move as
      surely as a dead destination) — for ``stall_after_s``;
    - every broker is up, yet no move in flight has copied a byte and none has finished for the
      window (:data:`NO_PROGRESS_S`, longer at a very low throttle): a follower that cannot fetch
      (fault lab: a stale log of a deleted topic answers INCONSISTENT_TOPIC_ID forever). Finished
      moves are progress (scale bench: 4,003 small moves copied at once, then completed by the
      controller ~10 a second, each long idle by bytes).

    Times are ``time.monotonic()`` values passed in by the caller."""

    def __init__(self, *, stall_after_s: float, throttle: int | None):
        self.stall_after_s = stall_after_s
        self.window_s = max(NO_PROGRESS_S, 3 * FETCH_BYTES / throttle if throttle else 0)
        #: set once the wait should end, and why
        self.stalled = False
        self.reason = "stalled on down broker(s)"
        self._down_since: float | None = None
        #: per data move in flight: bytes its new replicas held when last seen to change, and when
        self._copied: dict[str, tuple[int, float]] = {}
        self._finished = (-1, 0.0)  # moves finished at the last check, and since when

    @property
    def waiting_on_down(self) -> bool:
        """Every move in flight waits on a down broker (the progress line says "stalled")."""
        return self._down_since is not None

    def copied(self, per_move: Mapping[str, int], now: float) -> None:
        """What the new replicas of each move in flight hold now (from their sizes)."""
        for name, nbytes in per_move.items():
            seen = self._copied.get(name)
            if seen is None or seen[0] != nbytes:
                self._copied[name] = (nbytes, now)

    def check(self, topo: Topology, in_flight: Sequence[Move], *, pending: bool, finished: int,
              now: float) -> list[str]:
        """Look at the moves in flight (``pending``: moves wait for later waves; ``finished``:
        how many moves have ended so far); returns what to tell the operator."""

        def is_down(b: int) -> bool:
            return not (topo.broker(b) and topo.broker(b).alive)

        data_moves = [m for m in in_flight if m.moves_data]
        stuck = [m for m in data_moves if any(is_down(b) for b in m.target)]
        if data_moves and len(stuck) == len(data_moves) and not pending:
            if self._down_since is None:
                self._down_since = now
                dead = sorted({b for m in stuck for b in m.target if is_down(b)})
                return [f"every move in flight waits on down broker(s) {dead}"]
            if now - self._down_since > self.stall_after_s:
                self.stalled = True
            return []
        self._down_since = None
        if finished != self._finished[0]:
            self._finished = (finished, now)
        idle = [m for m in data_moves
                if m.name in self._copied and now - self._copied[m.name][1] > self.window_s]
        if (data_moves and len(idle) == len(data_moves) and not pending
                and now - self._finished[1] > self.window_s):
            self.stalled = True
            self.reason = (f"no data copied for {self.window_s:.0f} s by any move in flight, every broker up: "
                           + ", ".join(m.name for m in idle[:5])
                           + " (the brokers' logs say why: a follower that cannot fetch)")
            return [self.reason]
        return []
