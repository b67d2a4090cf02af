"""Brokers' metadata trails the controller: the execution's lag watch (pure).

A move the controller has finished may still show its old replica set in the metadata the
next read gets (UpdateMetadata reaches the brokers a moment later: over 15 s with 4,000 moves
in flight). The lag watch keeps what the engine needs to cope with that and to notice finished
moves between its checks:

- a mismatch (not reassigning, replicas not at the target) counts only once it has been seen
  for a while (:meth:`LagWatch.confirmed`);
- between checks, :meth:`LagWatch.wake` says whether the next check should run at once: the
  controller no longer lists a move that was reassigning at the last check (one cheap
  ListPartitionReassignments, at most every :data:`WAKE_S`, or :data:`WAKE_SOON_S` while a move
  may end soon), or the last check saw a move finished by the controller but not yet by the
  metadata (again every :data:`LAG_RECHECK_EVERY_S`, for :data:`LAG_RECHECK_S`).

Times are ``time.monotonic()`` values passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kops.model import Topology, TopicPartition
from kops.ops.move import Move
from kops.ops.reassign.options import LAG_RECHECK_EVERY_S, LAG_RECHECK_S, WAKE_S, WAKE_SOON_S


class LagWatch:
    def __init__(self) -> None:
        self._mismatch_seen: dict[str, float] = {}  # move -> when its mismatch was first seen
        self._watch: set[TopicPartition] = set()  # in flight and still reassigning at the last check
        self._lagging: dict[TopicPartition, float] = {}  # finished by the controller, not in the metadata
        self._checked_at = 0.0
        self._asked_at = 0.0

    # -- mismatches ------------------------------------------------------------------------
    def confirmed(self, move: str, now: float, after_s: float) -> bool:
        """``move`` shows a mismatch now: has it been showing one for ``after_s``?"""
        first = self._mismatch_seen.setdefault(move, now)
        return now - first >= after_s

    def settled(self, move: str) -> None:
        """``move`` shows no mismatch (any more)."""
        self._mismatch_seen.pop(move, None)

    @property
    def mismatch_pending(self) -> bool:
        """A mismatch was seen and not confirmed yet (a second read may clear it)."""
        return bool(self._mismatch_seen)

    # -- between checks --------------------------------------------------------------------
    def checking(self, now: float) -> None:
        """A full check starts now."""
        self._checked_at = now

    def saw(self, in_flight: Sequence[Move], topo: Topology, reassigning: Collection[TopicPartition],
            now: float) -> None:
        """What the check read: the moves in flight the controller still lists are watched; those
        it has finished while the metadata still shows other replicas are lagging (since when)."""
        self._watch = {m.tp for m in in_flight if m.tp in reassigning}
        lagging = {}
        for m in in_flight:
            p = topo.partition(m.topic, m.partition)
            if m.tp not in reassigning and (p is None or tuple(p.replicas) != m.target):
                lagging[m.tp] = self._lagging.get(m.tp, now)
        self._lagging = lagging

    def wake(self, now: float, ongoing: Callable[[], Mapping[TopicPartition, Any]], *,
             ending_soon: bool) -> bool:
        """Should the next check run now? ``ongoing`` asks the controller for the reassignments
        in progress (called only when due); ``ending_soon``: a move in flight may end any moment."""
        if any(now - t0 < LAG_RECHECK_S for t0 in self._lagging.values()):
            # metadata was behind the controller at the last check: look again shortly
            return now - self._checked_at >= LAG_RECHECK_EVERY_S
        if not self._watch:
            return False
        if now - self._asked_at < (WAKE_SOON_S if ending_soon else WAKE_S):
            return False
        self._asked_at = now
        still = ongoing()
        return any(tp not in still for tp in self._watch)
