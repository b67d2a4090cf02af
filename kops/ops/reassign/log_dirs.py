"""Moves between log dirs (a plan's ``log_dirs``): the execution's log-dir tracker.

After a reassignment is submitted, each requested replica is sent AlterReplicaLogDirs until
its broker accepts it (a replica not created yet is refused, the broker remembers the dir for
it), and again if the replica is seen in another dir with nothing moving it (a broker restarted
before the move began). A broker without that log dir is final: the move ends as a mismatch.
Where the replicas live is read with DescribeLogDirs once a move's replicas are at the target.

The cluster is reached only through the two functions given (``describe`` and ``alter``), so
the tracker is tested without one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from kops.model import TopicPartition
from kops.ops.move import Move
from kops.ops.reassign.status import LOG_DIR_DONE, LOG_DIR_ELSEWHERE, LOG_DIR_MOVING, log_dir_states

Replica = tuple[str, int, int]  # (topic, partition, broker)
#: DescribeLogDirs of (brokers, topics): replica -> {"dir", "future"}, None when unanswered
Describe = Callable[[list[int], list[str]], Mapping[Replica, Mapping[str, str | None]] | None]
#: AlterReplicaLogDirs of {replica: dir}: replica -> error text or None
Alter = Callable[[Mapping[Replica, str]], Mapping[Replica, str | None]]


class LogDirMoves:
    def __init__(self, describe: Describe, alter: Alter):
        self._describe = describe
        self._alter = alter
        self._states: dict[str, dict[int, str]] = {}  # move -> broker -> done | moving | ...
        self._started: set[Replica] = set()  # accepted by the broker
        self._failed: dict[Replica, str] = {}  # final: why

    def read(self, in_flight: Sequence[Move], reassigning: Collection[TopicPartition]) -> None:
        """Where the replicas of the log-dir moves in flight live, for those whose replicas are
        at the target (one DescribeLogDirs round, none when there are none)."""
        todo = [m for m in in_flight if m.log_dir_moves and m.tp not in reassigning]
        names = {m.name for m in in_flight}
        self._states = {k: v for k, v in self._states.items() if k in names}
        if not todo:
            return
        brokers = sorted({b for m in todo for b in m.log_dir_moves})
        dirs = self._describe(brokers, sorted({m.topic for m in todo}))
        for m in todo:
            self._states[m.name] = log_dir_states(m.log_dir_moves, m.topic, m.partition, dirs)

    def states(self, move: Move) -> dict[int, str] | None:
        """Per broker with a requested dir, as last read (None: not read)."""
        return self._states.get(move.name)

    def failed(self, move: Move) -> list[str]:
        """The move's requested dirs that will never be reached, each with its broker and why."""
        return [f"{b} ({self._failed[(move.topic, move.partition, b)]})"
                for b, v in sorted((self.states(move) or {}).items())
                if v != LOG_DIR_DONE and (move.topic, move.partition, b) in self._failed]

    def drive(self, in_flight: Sequence[Move], record) -> None:
        """Send the requests due for the moves in flight; ``record`` hears what happened
        (``event``: a move started; ``note``: a broker lacks the dir)."""
        reqs = {}
        for m in in_flight:
            states = self._states.get(m.name, {})
            for b, d in m.log_dir_moves.items():
                k = (m.topic, m.partition, b)
                if k in self._failed or states.get(b) in (LOG_DIR_DONE, LOG_DIR_MOVING):
                    continue
                if k not in self._started or states.get(b) == LOG_DIR_ELSEWHERE:
                    reqs[k] = d
        if not reqs:
            return
        for k, err in self._alter(reqs).items():
            if err is None:
                if k not in self._started:
                    record.event(f"log dir move started: {k[0]}-{k[1]} on broker {k[2]} -> {reqs[k]}")
                self._started.add(k)
            elif "LogDirNotFound" in err:
                self._failed[k] = f"broker has no log dir {reqs[k]}: {err}"
                record.note(f"{k[0]}-{k[1]}: broker {k[2]} has no log dir {reqs[k]} ({err})")
