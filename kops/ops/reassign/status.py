"""Pure helpers (unit-tested, no cluster): which wave starts next, cluster health during a
move, log-dir states, when a move counts as settled, how far the moves in flight have copied,
and per-partition status for verify."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kops.errors import EXIT_FAILURE, EXIT_NOT_DONE, EXIT_OK
from kops.model import Topology, TopicPartition
from kops.ops import journal
from kops.ops.move import Move
from kops.ops.reassign.options import ENDING_SOON_S, SETTLE_S

def next_wave(
    pending: Iterable[Move],
    in_flight: Iterable[Move],
    *,
    max_per_broker: int | None = None,
    max_in_flight: int | None = None,
) -> list[Move]:
    """The pending moves to start now, in order, within the limits.

    A move that copies data uses one slot on each broker it adds a replica to or removes one
    from (:attr:`Move.involved`) and one cluster-wide slot; moves that copy nothing (reorders,
    replica removals) are free. If nothing is in flight the first move always starts, so a
    plan never deadlocks on a limit smaller than one move.

    Disk stages (:func:`kops.ops.disk_fit.stage_moves`): a move starts only once every move of an earlier
    stage has ended (none is pending or in flight).
    """
    pending, in_flight = list(pending), list(in_flight)
    stage = min((m.stage for m in (*pending, *in_flight)), default=0)
    pending = [m for m in pending if m.stage <= stage]
    load: dict[int, int] = {}
    n = 0
    for m in in_flight:
        if m.moves_data:
            n += 1
            for b in m.involved:
                load[b] = load.get(b, 0) + 1
    wave: list[Move] = []
    for m in pending:
        if not m.moves_data:
            wave.append(m)
            continue
        fits = (max_in_flight is None or n < max_in_flight) and (
            max_per_broker is None or all(load.get(b, 0) < max_per_broker for b in m.involved)
        )
        if not fits and (n > 0):
            continue
        wave.append(m)
        n += 1
        for b in m.involved:
            load[b] = load.get(b, 0) + 1
    return wave


def alive(topo: Topology, broker: int) -> bool:
    b = topo.broker(broker)
    return b is not None and b.alive


def health_problems(topo: Topology, *, baseline_offline: Iterable[TopicPartition] = ()) -> list[str]:
    """What must stop a new wave: partitions under min.insync.replicas, and partitions offline
    that were not offline when the execution started."""
    known = set(baseline_offline)
    out = []
    for t in topo.topics:
        min_isr = t.min_insync_replicas(1)
        for p in t.partitions:
            if p.offline:
                if p.tp not in known:
                    out.append(f"{p.topic}-{p.partition}: offline (no leader)")
            elif len(p.isr) < min_isr:
                out.append(
                    f"{p.topic}-{p.partition}: under min ISR (ISR {list(p.isr)}, "
                    f"min.insync.replicas={min_isr})"
                )
    return out


#: per-replica states of a log-dir move (AlterReplicaLogDirs)
LOG_DIR_DONE = "done"  # the replica lives in the requested dir, no future replica is left
LOG_DIR_MOVING = "moving"  # a future replica in the requested dir is catching up
LOG_DIR_WAITING = "waiting"  # the replica is not on the broker yet, or its dirs are unknown
LOG_DIR_ELSEWHERE = "elsewhere"  # the replica is in another dir and nothing moves it


def _same_dir(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and os.path.normpath(a) == os.path.normpath(b)


def log_dir_states(
    wanted: Mapping[int, str],
    topic: str,
    partition: int,
    dirs: Mapping[tuple[str, int, int], Mapping[str, str | None]] | None,
) -> dict[int, str]:
    """Per broker with a requested log dir (:attr:`Move.log_dir_moves`): done, moving, waiting
    or elsewhere, from DescribeLogDirs (:func:`kops.cluster.topology.replica_log_dirs`; None =
    the brokers could not be asked, so nothing counts as done)."""
    out = {}
    for b, d in wanted.items():
        rec = None if dirs is None else dirs.get((topic, partition, b))
        if rec is None or (rec.get("dir") is None and rec.get("future") is None):
            out[b] = LOG_DIR_WAITING
        elif rec.get("future") is not None:
            out[b] = LOG_DIR_MOVING if _same_dir(rec["future"], d) else LOG_DIR_ELSEWHERE
        elif _same_dir(rec.get("dir"), d):
            out[b] = LOG_DIR_DONE
        else:
            out[b] = LOG_DIR_ELSEWHERE
    return out


def settle(
    move: Move,
    topo: Topology,
    reassigning: Mapping[TopicPartition, Any],
    *,
    submitted_at: float | None,
    now: float,
    settle_s: float = SETTLE_S,
    log_dirs: Mapping[int, str] | None = None,
) -> str:
    """The state of a submitted move: in_flight, done or mismatch.

    ``log_dirs`` are the states of the move's log-dir requests (:func:`log_dir_states`): a move
    with log dirs is done only once its replicas are at the target *and* every replica lives in
    its requested dir (a log-dir move goes on after the reassignment itself has completed)."""
    if move.tp in reassigning:
        return journal.IN_FLIGHT
    p = topo.partition(move.topic, move.partition)
    if p is None:
        return journal.MISMATCH
    if tuple(p.replicas) == move.target:
        if move.log_dir_moves and (log_dirs is None or any(v != LOG_DIR_DONE for v in log_dirs.values())):
            return journal.IN_FLIGHT
        return journal.DONE
    if submitted_at is not None and now - submitted_at < settle_s:
        return journal.IN_FLIGHT
    if tuple(p.replicas) == moving_replicas(move):
        # the controller has finished, the metadata of the broker that answered still shows the
        # reassignment under way (its UpdateMetadata lags: over 15 s with 4,000 moves in flight);
        # a cancelled or changed move shows another set
        return journal.IN_FLIGHT
    return journal.MISMATCH


def moving_replicas(move: Move) -> tuple[int, ...]:
    """The replica set Kafka shows while ``move`` is under way: the target, then the replicas
    being removed (KIP-455)."""
    return tuple(dict.fromkeys((*move.target, *move.original)))


@dataclass(frozen=True)
class Copying:
    """How far the moves in flight have copied, from their new replicas' sizes."""

    #: per move: what its new replicas hold (each counted up to the partition's size)
    copied: Mapping[str, int]
    #: a move may end any moment (so it is looked at more often between checks)
    ending_soon: bool = True
    #: every move in flight ends within seconds
    all_ending_soon: bool = False


def copying(in_flight: Iterable[Move], sizes: Mapping[tuple[str, int, int], int], *,
            throttle: int | None) -> Copying:
    """``sizes``: replica ``(topic, partition, broker)`` -> bytes (DescribeLogDirs; empty when
    unanswered, which says nothing about progress: every move may then end any moment). A move
    ends soon when it has less than :data:`ENDING_SOON_S` of copying left at the throttle, or
    under 5 % of the largest move's bytes."""
    in_flight = list(in_flight)
    if not in_flight:
        return Copying({})
    copied, left = {}, []
    for m in in_flight:
        each = [min(sizes.get((m.topic, m.partition, b), 0), m.size_bytes or 0) for b in m.adding]
        copied[m.name] = sum(each)
        left.append(max(((m.size_bytes or 0) - c for c in each), default=0))
    soon = max(ENDING_SOON_S * (throttle or 0), 0.05 * max(m.size_bytes or 0 for m in in_flight))
    return Copying(copied, ending_soon=(not sizes) or min(left) <= soon,
                   all_ending_soon=bool(sizes) and max(left) <= soon)


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    state: str  # complete | in_progress | pending | mismatch
    current: tuple[int, ...]
    target: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    #: states of the requested log dirs, broker -> done | moving | waiting | elsewhere
    log_dirs: Mapping[int, str] | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _log_dir_text(self) -> str:
        return ", ".join(f"broker {b} {v}" for b, v in sorted((self.log_dirs or {}).items()) if v != LOG_DIR_DONE)

    def message(self) -> str:
        if self.state == "complete":
            return f"Reassignment of partition {self.name} is completed."
        if self.state == "in_progress":
            if self.current == self.target and self._log_dir_text():
                return (f"Reassignment of partition {self.name} is still in progress "
                        f"(log dir moves: {self._log_dir_text()}).")
            return f"Reassignment of partition {self.name} is still in progress."
        if self.state == "pending":
            return f"Reassignment of partition {self.name} is waiting for a later wave."
        if self.current == self.target and self._log_dir_text():
            return (f"There is no active reassignment of partition {self.name} and its replicas are at "
                    f"the target, but not in the requested log dirs ({self._log_dir_text()}).")
        cur = ",".join(map(str, self.current)) if self.current else "(partition not found)"
        return (
            f"There is no active reassignment of partition {self.name}, but replica set is "
            f"{cur} rather than {','.join(map(str, self.target))}."
        )

    def to_dict(self) -> dict[str, Any]:
        d = {
            "topic": self.topic,
            "partition": self.partition,
            "state": self.state,
            "replicas": list(self.current),
            "target": list(self.target),
        }
        if self.adding:
            d["adding"] = list(self.adding)
        if self.removing:
            d["removing"] = list(self.removing)
        if self.log_dirs:
            d["log_dirs"] = {str(b): v for b, v in sorted(self.log_dirs.items())}
        return d


def partition_statuses(
    targets: Iterable[tuple[TopicPartition, tuple[int, ...]]],
    topo: Topology,
    reassigning: Mapping[TopicPartition, Mapping[str, Any]],
    *,
    pending: Iterable[TopicPartition] = (),
    log_dirs: Mapping[TopicPartition, Mapping[int, str]] | None = None,
    driving: Iterable[TopicPartition] = (),
) -> list[PartitionStatus]:
    """Per partition: complete, in_progress (reassigning now), pending (a later kops wave),
    or mismatch (nothing running, replicas differ from the target). Sorted like Kafka's.

    ``log_dirs`` holds, for partitions with requested log dirs, their states
    (:func:`log_dir_states`): such a partition is complete only when every replica lives in its
    requested dir; while a future replica catches up (``moving``), or a kops execution still
    drives the partition (``driving``: it sends AlterReplicaLogDirs), it is in progress; a
    replica left in another dir with nothing moving it is a mismatch."""
    waiting = set(pending)
    driven = set(driving)
    out = []
    for (t, p), target in targets:
        part = topo.partition(t, p)
        current = tuple(part.replicas) if part else ()
        r = reassigning.get((t, p))
        if r is not None:
            out.append(PartitionStatus(
                t, p, "in_progress", tuple(r.get("replicas", current)), target,
                tuple(r.get("adding_replicas", ())), tuple(r.get("removing_replicas", ())),
            ))
        elif current == tuple(target):
            ld = (log_dirs or {}).get((t, p))
            if not ld or all(v == LOG_DIR_DONE for v in ld.values()):
                out.append(PartitionStatus(t, p, "complete", current, target, log_dirs=ld or None))
            elif (t, p) in waiting:
                out.append(PartitionStatus(t, p, "pending", current, target, log_dirs=ld))
            elif (t, p) in driven or all(v in (LOG_DIR_DONE, LOG_DIR_MOVING, LOG_DIR_WAITING) for v in ld.values()):
                out.append(PartitionStatus(t, p, "in_progress", current, target, log_dirs=ld))
            else:
                out.append(PartitionStatus(t, p, "mismatch", current, target, log_dirs=ld))
        elif (t, p) in waiting:
            out.append(PartitionStatus(t, p, "pending", current, target))
        else:
            out.append(PartitionStatus(t, p, "mismatch", current, target))
    return sorted(out, key=lambda s: (s.topic, s.partition))


def status_exit_code(statuses: Iterable[PartitionStatus]) -> int:
    states = {s.state for s in statuses}
    if "mismatch" in states:
        return EXIT_FAILURE
    if states & {"in_progress", "pending"}:
        return EXIT_NOT_DONE
    return EXIT_OK


# ------------------------------------------------------------------------------------------
