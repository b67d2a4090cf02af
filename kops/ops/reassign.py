"""Reassignment orchestration: execute (in waves, throttled, journaled), verify, cancel,
resume, list.

Everything that changes the cluster goes through here (AlterPartitionReassignments via
kafka-python) or :mod:`kops.ops.throttle`; the topology is read only through
:mod:`kops.cluster.topology`; waiting goes through :func:`kops.ops.progress.poll`.

Pure helpers (unit-tested): :func:`next_wave`, :func:`health_problems`,
:func:`partition_statuses`, :func:`settle`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from kops.errors import EXIT_FAILURE, EXIT_NOT_DONE, EXIT_OK, BadInput, ClusterError, KopsError
from kops.model import ReassignmentPlan, Topology, TopicPartition
from kops.ops import failpoints
from kops.ops import journal as J
from kops.ops import throttle as T
from kops.ops.progress import NullReporter, Snapshot, poll
from kops.ops.validate import DEFAULT_DISK_RESERVE_PCT, DiskCheck, Move, check_disk, validate_disk, validate_plan

#: after a submission, a partition that is not reassigning and not at its target yet is given
#: this long before it counts as a mismatch (metadata propagates asynchronously)
SETTLE_S = 15.0

#: a topology read this recently (validation, just before the execution starts) is used for the
#: first wave's health check and throttles instead of reading the whole cluster again
FRESH_S = 5.0

#: how long after the controller finished a move kops keeps re-checking at the wake-up rate
#: (not the poll interval) while broker metadata still shows the old replicas
LAG_RECHECK_S = 5.0
#: while metadata lags: a full check again after this many seconds
LAG_RECHECK_EVERY_S = 0.15
#: between checks, one ListPartitionReassignments every WAKE_S seconds notices finished moves;
#: every WAKE_SOON_S when a move is expected to end soon (less than ENDING_SOON_S of copying
#: left at the throttle, or under 5 % of its bytes, or sizes unknown)
WAKE_S = 0.5
WAKE_SOON_S = 0.1
ENDING_SOON_S = 3.0
#: the throttles of finished moves are lifted at the latest this long after they finished
LIFT_DEFER_MAX_S = 2 * ENDING_SOON_S


@dataclass
class ExecuteOptions:
    throttle: int | None = None
    log_dir_throttle: int | None = None
    max_moves_per_broker: int | None = None
    max_moves_in_flight: int | None = None
    wait: bool = False
    timeout_s: float | None = None
    allow_offline: bool = False
    poll_interval_s: float = 2.0
    #: stop waiting when every move in flight waits on a down broker for this long
    stall_after_s: float = 60.0
    #: "admin" (AlterPartitionReassignments) or "zookeeper" (/admin/reassign_partitions)
    via: str = "admin"
    #: percent of each destination volume the disk check keeps free (None: the default, 5 %)
    disk_reserve_pct: float | None = None
    #: who started the execution, kept in the journal (``rebalance-step``: a cron step's own)
    origin: str | None = None

    @property
    def reserve_pct(self) -> float:
        return DEFAULT_DISK_RESERVE_PCT if self.disk_reserve_pct is None else self.disk_reserve_pct

    def check(self, *, zookeeper: bool) -> None:
        """What can be judged without the cluster (exit 2 before connecting): the way moves
        are submitted. ``zookeeper``: a ZooKeeper connect string was given."""
        if self.via not in ("admin", "zookeeper"):
            raise BadInput(f"--via must be admin or zookeeper, not {self.via!r}")
        if self.via == "zookeeper" and not zookeeper:
            raise BadInput("--via zookeeper needs --zookeeper HOST:PORT (a ZooKeeper-mode cluster)")

    def to_dict(self) -> dict[str, Any]:
        return {
            "via": self.via,
            "throttle": self.throttle,
            "log_dir_throttle": self.log_dir_throttle,
            "max_moves_per_broker": self.max_moves_per_broker,
            "max_moves_in_flight": self.max_moves_in_flight,
            "allow_offline": self.allow_offline,
            "poll_interval_s": self.poll_interval_s,
            "disk_reserve_pct": self.reserve_pct,
            **({"origin": self.origin} if self.origin else {}),
        }

    def with_journal(self, opts: Mapping[str, Any]) -> ExecuteOptions:
        """Options of a resumed execution: the journal's unless given again."""
        return ExecuteOptions(
            throttle=self.throttle if self.throttle is not None else opts.get("throttle"),
            log_dir_throttle=self.log_dir_throttle if self.log_dir_throttle is not None else opts.get("log_dir_throttle"),
            max_moves_per_broker=self.max_moves_per_broker or opts.get("max_moves_per_broker"),
            max_moves_in_flight=self.max_moves_in_flight or opts.get("max_moves_in_flight"),
            wait=self.wait,
            timeout_s=self.timeout_s,
            allow_offline=self.allow_offline or bool(opts.get("allow_offline")),
            poll_interval_s=self.poll_interval_s,
            stall_after_s=self.stall_after_s,
            via=opts.get("via", "admin"),
            disk_reserve_pct=(self.disk_reserve_pct if self.disk_reserve_pct is not None
                              else opts.get("disk_reserve_pct")),
            origin=opts.get("origin", self.origin),
        )


class HealthStop(KopsError):
    """The cluster is not healthy enough to start (more) moves."""

    exit_code = EXIT_FAILURE


#: a data move in flight whose new replicas copy nothing for this long (every broker up; more at a
#: very low throttle) is stuck: when every move in flight is, waiting ends (resume or cancel)
NO_PROGRESS_S = 120.0

#: what halted an execution (``Runner.halted_by``)
HALT_HEALTH = "health check"
HALT_DISK = "disk check"
#: the final removal of an execution's throttles is sent this many times at most while some of
#: it fails on brokers that are up (a slow or lossy link)
LIFT_ATTEMPTS = 3


# ------------------------------------------------------------------------------------------
# pure helpers
# ------------------------------------------------------------------------------------------


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
    """
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
        return J.IN_FLIGHT
    p = topo.partition(move.topic, move.partition)
    if p is None:
        return J.MISMATCH
    if tuple(p.replicas) == move.target:
        if move.log_dir_moves and (log_dirs is None or any(v != LOG_DIR_DONE for v in log_dirs.values())):
            return J.IN_FLIGHT
        return J.DONE
    if submitted_at is not None and now - submitted_at < settle_s:
        return J.IN_FLIGHT
    return J.MISMATCH


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
# cluster access (through the one topology reader)
# ------------------------------------------------------------------------------------------


def read(conn, *, topics: Iterable[str] | None = None, sizes: bool | Iterable[str] = False) -> Topology:
    """The cluster (or ``topics``) with configs and reassignments; ``sizes``: with partition
    sizes (DescribeLogDirs) — of every topic read (True) or of the topics named."""
    from kops.cluster.topology import ReadOptions, read_topology

    return read_topology(
        conn,
        ReadOptions(
            with_configs=True,
            with_sizes=bool(sizes),
            size_topics=None if isinstance(sizes, bool) else tuple(sorted(set(sizes))),
            with_reassignments=True,
            topics=tuple(sorted(set(topics))) if topics is not None else None,
        ),
    )


def ongoing(conn) -> dict[TopicPartition, dict[str, list[int]]]:
    from kops.cluster.topology import list_reassignments

    return list_reassignments(conn)


def ongoing_in(topo: Topology) -> dict[TopicPartition, dict[str, list[int]]]:
    """:func:`ongoing` as the read that made ``topo`` found it (:func:`read` asks
    ListPartitionReassignments along with the metadata), for the topics read: no second
    request. A reassignment is in progress while it adds or removes replicas (Kafka's
    ``isBeingReassigned``)."""
    return {
        p.tp: {"replicas": list(p.replicas), "adding_replicas": list(p.adding_replicas),
               "removing_replicas": list(p.removing_replicas)}
        for p in topo.partitions() if p.reassigning
    }


def submit(conn, targets: Mapping[TopicPartition, tuple[int, ...] | None], *,
           chunk_size: int = 500, patience_s: float | None = None) -> dict[TopicPartition, str | None]:
    """AlterPartitionReassignments (None = cancel), the one place kops submits reassignments
    through the Admin API. Returns per-partition error text or None.

    The ZooKeeper controller handles a request partition by partition with synchronous
    ZooKeeper writes, so big requests take minutes on a busy controller: requests go in chunks,
    each with a generous timeout. A controller slower still (found by the fault lab: one on a
    rack with 300 ms of delay and 5 % loss needs seconds per partition) answers
    REQUEST_TIMED_OUT but goes on with the request: kops then asks which of the chunk's
    partitions did start (ListPartitionReassignments), counts those as submitted, and sends the
    rest again in chunks half as big, for up to ``patience_s`` (default 4 request timeouts).
    """
    if not targets:
        return {}
    from kafka.structs import TopicPartition as KTP

    pending = sorted(targets.items())
    total = len(pending)
    timeout_ms = int(max(conn.timeout_s, 60.0) * 1000)
    deadline = time.monotonic() + (patience_s if patience_s is not None else 4 * timeout_ms / 1000)
    size = max(1, chunk_size)
    res: dict = {}
    while pending:
        chunk = pending[:size]
        req = {KTP(t, p): (list(r) if r is not None else None) for (t, p), r in chunk}
        try:
            res.update(conn.kp_controller(
                lambda a, req=req: a.alter_partition_reassignments(req, timeout_ms=timeout_ms)) or {})
            pending = pending[len(chunk):]
            continue
        except ClusterError:
            raise
        except Exception as e:
            if not _timed_out(e) or time.monotonic() > deadline:
                err = conn.map_error(e, "alter partition reassignments")
                err.details.append(f"{total - len(pending)} of {total} partitions were submitted before this request")
                raise err from None
        landed = _landed(conn, dict(chunk))
        for tp in landed:
            res[KTP(*tp)] = None
        rest = [(tp, r) for tp, r in chunk if tp not in landed]
        pending = rest + pending[len(chunk):]
        size = max(1, len(rest) // 2)
    out: dict[TopicPartition, str | None] = {}
    for tp in targets:
        err = res.get(KTP(*tp), "no answer for this partition")
        out[tp] = None if err is None else (err if isinstance(err, str) else getattr(err, "__name__", str(err)))
    return out


def _timed_out(e: BaseException) -> bool:
    return type(e).__name__ in ("RequestTimedOutError", "KafkaTimeoutError")


def _landed(conn, chunk: Mapping[TopicPartition, tuple[int, ...] | None]) -> set[TopicPartition]:
    """The partitions of a timed-out request that the controller did act on: reassigning to
    their target (every target replica among the replicas, nothing added outside it), or, for
    a cancellation, no longer reassigning."""
    from kops.cluster.topology import list_reassignments

    now = list_reassignments(conn)
    landed = set()
    for tp, target in chunk.items():
        cur = now.get(tp)
        if target is None:
            if cur is None:
                landed.add(tp)
        elif cur is not None and set(target) <= set(cur.get("replicas", [])) \
                and set(cur.get("adding_replicas", [])) <= set(target):
            landed.add(tp)
    return landed


ZK_REASSIGN = "/admin/reassign_partitions"
BUSY = "busy"


def zk_reassign_pending(conn) -> list[dict[str, Any]] | None:
    """The partitions listed in /admin/reassign_partitions, or None when it does not exist."""
    import json

    from kazoo.exceptions import NoNodeError

    zk = conn.zk()
    try:
        data, _ = zk.retry(zk.get, ZK_REASSIGN)
    except NoNodeError:
        return None
    try:
        return json.loads(data.decode()).get("partitions", [])
    except ValueError:
        return []


def submit_zk(conn, targets: Mapping[TopicPartition, tuple[int, ...]]) -> dict[TopicPartition, str | None]:
    """Start reassignments the legacy way: create /admin/reassign_partitions (the controller
    only notices a *created* znode, so a wave waits until the previous one's znode is gone:
    the partitions are then reported ``busy`` and stay pending)."""
    import json

    from kazoo.exceptions import NodeExistsError

    if not targets:
        return {}
    doc = {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]}
    zk = conn.zk()
    try:
        zk.retry(zk.create, ZK_REASSIGN, json.dumps(doc, separators=(",", ":")).encode(), makepath=True)
    except NodeExistsError:
        return {tp: BUSY for tp in targets}
    return {tp: None for tp in targets}


def alter_log_dirs(conn, requests: Mapping[tuple[str, int, int], str]) -> dict[tuple[str, int, int], str | None]:
    """AlterReplicaLogDirs; per replica error name or None."""
    if not requests:
        return {}
    try:
        res = conn.kp_admin().alter_replica_log_dirs(dict(requests))
    except Exception as e:
        return {k: f"{type(e).__name__}: {e}" for k in requests}
    out = {}
    for k in requests:
        err = None
        for tpr, e in res.items():
            if (tpr.topic, tpr.partition, tpr.broker_id) == k:
                err = None if getattr(e, "__name__", "") == "NoError" else getattr(e, "__name__", str(e))
        out[k] = err
    return out


# ------------------------------------------------------------------------------------------
# execution
# ------------------------------------------------------------------------------------------


@dataclass
class Prepared:
    topology: Topology
    moves: list[Move]
    #: when ``topology`` was read (time.monotonic): a fresh one serves the first wave too
    read_at: float = field(default_factory=time.monotonic)
    #: the destination disks: figures and what could not be checked
    disk: DiskCheck | None = None

    @property
    def work(self) -> list[Move]:
        return [m for m in self.moves if not m.noop]

    @property
    def bytes_to_move(self) -> int | None:
        if any(m.size_bytes is None for m in self.work if m.moves_data):
            return None
        return sum(m.bytes_to_move for m in self.work)

    def estimated_seconds(self, rate: int | None) -> float | None:
        """Lower bound of the copy time at ``rate``: each destination broker fetches at most
        ``rate`` B/s (follower throttle) and each leader sends at most ``rate`` B/s."""
        if not rate or self.bytes_to_move is None:
            return None
        into: dict[int, int] = {}
        out: dict[int, int] = {}
        for m in self.work:
            p = self.topology.partition(m.topic, m.partition)
            leader = p.leader if p is not None and p.leader is not None else m.original[0]
            for b in m.adding:
                into[b] = into.get(b, 0) + (m.size_bytes or 0)
                out[leader] = out.get(leader, 0) + (m.size_bytes or 0)
        worst = max([*into.values(), *out.values()], default=0)
        return worst / rate

    def brokers(self) -> list[int]:
        return sorted({b for m in self.work for b in (*m.original, *m.target)})


def _alive(topo: Topology, broker: int) -> bool:
    b = topo.broker(broker)
    return b is not None and b.alive


def _warm_up_journal_writer(conn) -> None:
    """Create the journal's producer now: librdkafka connects and obtains its idempotent
    producer id in the background while kops reads and validates, instead of during the first
    journal write (the lock record), which lies on the way to the first submission (0.5-1 s on
    a busy machine). Nothing is written here."""
    try:
        J.TopicStore(conn)._producer()
    except Exception:  # noqa: BLE001 - only an optimisation; the first write reports real errors
        pass


def prepare(conn, plan: ReassignmentPlan, opts: ExecuteOptions) -> Prepared:
    """Read the cluster and validate the whole plan (no writes)."""
    from kops.ops.lock import ClusterLock

    if hasattr(conn, "warm_up"):
        conn.warm_up()  # kafka-python (validation lists reassignments with it): first of all
    _warm_up_journal_writer(conn)
    # the whole cluster (validation and the health check need it), sizes of the plan's topics
    topo = read(conn, sizes={e.topic for e in plan.entries})
    # a second execution is refused first, naming the one in progress
    refuse_if_active(J.JournalStore(conn, _cluster_id(topo)), ClusterLock(conn))
    opts.check(zookeeper=bool(conn.zookeeper))
    if opts.via == "zookeeper":
        legacy = zk_reassign_pending(conn)
        if legacy is not None:
            names = ", ".join(f"{p.get('topic')}-{p.get('partition')}" for p in legacy[:10])
            raise BadInput(
                f"{ZK_REASSIGN} exists: a legacy reassignment is still running ({names or 'empty'}); "
                "wait for it to finish (the controller deletes the znode); nothing was changed"
            )
    # the read above listed the reassignments in progress: the topology carries them
    moves = validate_plan(plan, topo, allow_offline=opts.allow_offline)
    # the read also gave each broker's log dirs with their usable bytes and the sizes of the
    # partitions moving: the whole plan must fit on its destinations (exit 2 otherwise)
    disk = validate_disk(moves, topo, reserve_pct=opts.reserve_pct, on_disk=_in_flight_on_disk(conn, topo, moves))
    if not opts.allow_offline:
        problems = health_problems(topo)
        if problems:
            raise HealthStop(
                "the cluster is not healthy; no reassignment was started (fix it first, or pass "
                "--allow-offline to start anyway)",
                details=problems,
            )
    return Prepared(topo, moves, disk=disk)


def _in_flight_on_disk(conn, topo: Topology, moves: list[Move]) -> dict[tuple[str, int, int], tuple[str | None, int]]:
    """What reassignments already in progress have copied to the plan's destinations so far
    (one DescribeLogDirs round, only when there are such reassignments): the disk check counts
    only the rest of them."""
    from kops.cluster.topology import log_dir_usage

    planned = {m.tp for m in moves}
    dests = {b for m in moves for b in m.adding}
    flights = [p for p in topo.partitions() if p.tp not in planned and set(p.adding_replicas) & dests]
    if not flights:
        return {}
    brokers = {b for p in flights for b in p.adding_replicas if b in dests and _alive(topo, b)}
    usage = log_dir_usage(conn, sorted(brokers), {p.topic for p in flights})
    return usage.on_disk() if usage is not None else {}


@dataclass
class Outcome:
    journal: J.Journal
    finished: bool
    exit_code: int
    message: str
    notes: list[str] = field(default_factory=list)
    bytes_total: int | None = None
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        j = self.journal
        return {
            "execution_id": j.id,
            "state": j.state,
            "finished": self.finished,
            "message": self.message,
            "partitions": len(j.moves),
            "progress": j.counts(),
            "waves": j.waves,
            "bytes_to_move": self.bytes_total,
            "elapsed_s": round(self.elapsed_s, 1),
            "throttles_left": j.throttles.describe(),
            "notes": self.notes,
            "partitions_detail": [
                {"topic": m.topic, "partition": m.partition, "original": list(m.original),
                 "target": list(m.target), "state": j.progress.get(m.name)}
                for m in j.moves
            ],
        }


class Runner:
    """Drives one journaled execution: waves, throttles, progress, journal updates."""

    def __init__(self, conn, store: J.JournalStore, journal: J.Journal, opts: ExecuteOptions,
                 reporter=None, lock=None):
        self.conn = conn
        self.store = store
        self.j = journal
        self.opts = opts
        self.reporter = reporter or NullReporter()
        self.lock = lock
        self.notes: list[str] = []
        self.baseline_offline: set[TopicPartition] = {
            tuple(x) for x in journal.options.get("baseline_offline", [])
        }
        self.topics = sorted({m.topic for m in journal.moves})
        self._stalled_since: float | None = None
        #: per data move in flight: bytes its new replicas held when last seen to change, and when
        self._copied: dict[str, tuple[int, float]] = {}
        self._mismatch_seen: dict[str, float] = {}
        self._last_save = 0.0
        self._log_dirs_started: set[tuple[str, int, int]] = set()
        self.bytes_total = sum(m.bytes_to_move for m in journal.moves if not m.noop) or None
        self.halted_reasons: list[str] = []
        self.halted_by = HALT_HEALTH
        self.stalled = False
        self.stalled_reason = "stalled on down broker(s)"
        self._watch: set[TopicPartition] = set()
        self._lagging: dict[TopicPartition, float] = {}
        #: (topology, time.monotonic() it was read) that the first tick may use instead of reading
        self.fresh: tuple[Topology, float] | None = None
        self._log_dir_states: dict[str, dict[int, str]] = {}
        self._log_dir_failed: dict[tuple[str, int, int], str] = {}
        self._ending_soon = True  # see snapshot() and moves_finished()
        self._all_ending_soon = False  # see snapshot() and tick()
        self._lift_deferred_at: float | None = None  # a lift of finished moves' throttles put off
        self._last_topo: Topology | None = None  # the last tick's read
        self._woke_at = 0.0
        self._ticked_at = 0.0

    # -- helpers ------------------------------------------------------------------------
    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self.reporter.message(text)
            self.j.event(text)

    def save(self, force: bool = True) -> None:
        now = time.monotonic()
        if force or now - self._last_save > 10:
            self.store.save(self.j)
            self._last_save = now

    def _write_ahead(self, records: T.ThrottleState) -> None:
        """Journal every throttle that may be in place before changing any (a kill while they
        are applied must not leave throttles the journal does not know of)."""
        self.j.throttles = records
        self.save()

    def _sync_throttles(self, topo: Topology, in_flight: list[Move], *, save: bool = True) -> list[T.Change]:
        """Bring the throttles to what ``in_flight`` needs. ``save=False``: the caller saves
        the journal soon after (the write-ahead record already names every throttle that may
        be in place, so nothing is lost if kops dies in between)."""
        desired = T.desired_throttles(in_flight, rate=self.opts.throttle, log_dir_rate=self.opts.log_dir_throttle)
        state, notes, changes = T.sync(self.conn, self.j.throttles, desired, topo,
                                       before_apply=self._write_ahead)
        changed = state.to_dict() != self.j.throttles.to_dict()
        self.j.throttles = state
        for n in notes:
            self.note(n)
        if changes or changed:
            self.j.event("throttles: " + "; ".join(str(c) for c in changes))
            if save:
                self.save()
        return changes

    # -- one tick -----------------------------------------------------------------------
    def refresh(self, topo: Topology, reassigning: Mapping[TopicPartition, Any], *,
                mismatch_after_s: float = SETTLE_S) -> bool:
        """Update the states of the moves in flight; True if anything changed.

        Metadata can lag behind the controller (a broker's cache still shows the replica set
        of the reassignment that just finished), so a mismatch only counts once it has been
        seen for ``mismatch_after_s``."""
        now = time.time()
        changed = False
        in_flight = self.j.moves_in(J.IN_FLIGHT)
        self._read_log_dirs(in_flight, topo, reassigning)
        for m in in_flight:
            ld = self._log_dir_states.get(m.name)
            s = settle(m, topo, reassigning, submitted_at=self.j.submitted_at.get(m.name), now=now, log_dirs=ld)
            failed = sorted(b for b, v in (ld or {}).items()
                            if v != LOG_DIR_DONE and (m.topic, m.partition, b) in self._log_dir_failed)
            if s == J.IN_FLIGHT and failed and m.tp not in reassigning:
                s = J.MISMATCH  # the replicas are there, a requested log dir never will be
            if s == J.MISMATCH:
                first = self._mismatch_seen.setdefault(m.name, time.monotonic())
                if time.monotonic() - first < mismatch_after_s:
                    continue
            else:
                self._mismatch_seen.pop(m.name, None)
            if s != J.IN_FLIGHT:
                self.j.progress[m.name] = s
                changed = True
                if s == J.MISMATCH and failed:
                    self.note(
                        f"{m.name}: replicas at the target, but the log dir move failed on broker(s) "
                        + ", ".join(f"{b} ({self._log_dir_failed[(m.topic, m.partition, b)]})" for b in failed)
                    )
                elif s == J.MISMATCH:
                    p = topo.partition(m.topic, m.partition)
                    self.note(
                        f"{m.name}: no longer reassigning, but its replicas are "
                        f"{list(p.replicas) if p else '(gone)'} instead of {list(m.target)} "
                        "(changed or cancelled by someone else?)"
                    )
        return changed

    def _read_log_dirs(self, in_flight: list[Move], topo: Topology,
                       reassigning: Mapping[TopicPartition, Any]) -> None:
        """Where the replicas of log-dir moves live (DescribeLogDirs), once their replicas are
        at the target: :attr:`_log_dir_states` per move (read by :meth:`refresh` and
        :meth:`_log_dirs`)."""
        from kops.cluster.topology import replica_log_dirs

        todo = [m for m in in_flight if m.log_dir_moves and m.tp not in reassigning]
        self._log_dir_states = {k: v for k, v in self._log_dir_states.items()
                                if k in {m.name for m in in_flight}}
        if not todo:
            return
        brokers = sorted({b for m in todo for b in m.log_dir_moves})
        dirs = replica_log_dirs(self.conn, brokers, sorted({m.topic for m in todo}))
        for m in todo:
            self._log_dir_states[m.name] = log_dir_states(m.log_dir_moves, m.topic, m.partition, dirs)

    def tick(self, *, start_waves: bool = True) -> Snapshot:
        # when a wave is about to start, read the whole cluster once (its health check needs
        # it) instead of the execution's topics first and everything again
        wave_likely = start_waves and self.j.state == J.RUNNING and bool(next_wave(
            self.j.moves_in(J.PENDING), self.j.moves_in(J.IN_FLIGHT),
            max_per_broker=self.opts.max_moves_per_broker, max_in_flight=self.opts.max_moves_in_flight,
        ))
        self._ticked_at = time.monotonic()
        fresh, self.fresh = self.fresh, None
        validated = wave_likely and fresh is not None and time.monotonic() - fresh[1] < FRESH_S
        if validated:
            topo = fresh[0]  # validated a moment ago (execute --yes): no second read for wave 1
        else:
            topo = read(self.conn) if wave_likely else read(self.conn, topics=self.topics)
        self._last_topo = topo
        reassigning = ongoing_in(topo)
        changed = self.refresh(topo, reassigning)
        # what wait() watches between ticks: the moves in flight the controller still lists,
        # and those it has finished while the metadata read above still shows the old replicas
        # (brokers learn the outcome a moment after the controller): those are looked at again
        # shortly, not one poll interval later
        self._watch = {m.tp for m in self.j.moves_in(J.IN_FLIGHT) if m.tp in reassigning}
        now_m = time.monotonic()
        lagging = {}
        for m in self.j.moves_in(J.IN_FLIGHT):
            p = topo.partition(m.topic, m.partition)
            if m.tp not in reassigning and (p is None or tuple(p.replicas) != m.target):
                lagging[m.tp] = self._lagging.get(m.tp, now_m)
        self._lagging = lagging
        in_flight = self.j.moves_in(J.IN_FLIGHT)
        pending = self.j.moves_in(J.PENDING)

        if start_waves and pending and self.j.state == J.RUNNING:
            wave = next_wave(
                pending, in_flight,
                max_per_broker=self.opts.max_moves_per_broker,
                max_in_flight=self.opts.max_moves_in_flight,
            )
            if wave:
                full = topo if wave_likely else read(self.conn)
                problems = health_problems(full, baseline_offline=self.baseline_offline)
                if problems and not (self.j.waves == 0 and self.opts.allow_offline):
                    self.halted_reasons = problems
                    self.halted_by = HALT_HEALTH
                    self.j.state = J.HALTED
                    self.note(
                        f"stopped before wave {self.j.waves + 1}: {len(problems)} partition(s) "
                        f"unhealthy, e.g. {problems[0]}; moves in flight continue. Fix the "
                        "cluster, then `kops reassign resume`, or `kops reassign cancel`."
                    )
                    changed = True
                elif not validated and self._disk_halt(full, wave):
                    changed = True  # (a plan validated a moment ago was checked whole)
                else:
                    # _start_wave syncs the throttles for in flight + wave (incl. removals)
                    # and saves the journal
                    self._start_wave(full, in_flight, wave)
                    self._log_dirs(self.j.moves_in(J.IN_FLIGHT))
                    return self.snapshot(full)

        # lift the throttles of finished moves; not while every move left ends within seconds
        # anyway (and no wave waits): they are all lifted together then, saving a round of
        # config changes (each is a change notification every broker processes). A lift put
        # off is done at the next tick that does not put it off, or after LIFT_DEFER_MAX_S.
        if changed or self._lift_deferred_at is not None:
            defer = bool(in_flight) and not pending and self._all_ending_soon
            if defer and self._lift_deferred_at is None:
                self._lift_deferred_at = time.monotonic()
            if not defer or time.monotonic() - self._lift_deferred_at > LIFT_DEFER_MAX_S:
                self._lift_deferred_at = None
                saved = self._last_save
                self._sync_throttles(topo, in_flight)
                changed = self._last_save == saved  # lifting throttles journaled the new states already
        self._log_dirs(in_flight)
        self._check_stall(topo, in_flight)
        self.save(force=changed)
        return self.snapshot(topo)

    def _disk_halt(self, topo: Topology, wave: list[Move]) -> bool:
        """The disk check before a later wave (or the first one of a resumed execution): would
        the wave's new replicas, with what the moves in flight still copy, fit on their
        destinations now? Reads the brokers' usable bytes, the partitions' sizes and what the
        replicas being added hold already (one DescribeLogDirs round). If not, the execution
        halts: nothing new starts, the moves in flight continue (a disk filling up mid-move
        ends here: `cancel` rolls back, `resume` checks again). True when it halted."""
        from kops.cluster.topology import log_dir_usage

        data = [m for m in wave if m.moves_data]
        if not data:
            return False
        dests = {b for m in data for b in m.adding}
        flights = [p for p in topo.partitions() if set(p.adding_replicas) & dests]
        brokers = {b for m in data for b in (*m.original, *m.adding)} | {b for p in flights for b in p.replicas}
        usage = log_dir_usage(self.conn, sorted(b for b in brokers if _alive(topo, b)),
                              {m.topic for m in data} | {p.topic for p in flights})
        if usage is None:
            self.note("disk check skipped before a wave: the brokers' log dirs could not be read "
                      "(DescribeLogDirs)")
            return False
        sizes = usage.partition_sizes()
        now = topo.with_log_dirs(usage.dirs).with_sizes(sizes)
        check = check_disk([replace(m, size_bytes=sizes.get(m.tp, m.size_bytes)) for m in data], now,
                           reserve_pct=self.opts.reserve_pct, on_disk=usage.on_disk())
        for w in check.warnings:
            self.note(f"disk check: {w}")  # said once, not before every wave
        over = check.overflows
        if not over:
            return False
        self.halted_reasons = check.problems()
        self.halted_by = HALT_DISK
        self.j.state = J.HALTED
        brokers_over = ",".join(str(b) for b in sorted({f.broker for f in over}))
        self.note(
            f"stopped before wave {self.j.waves + 1}: its {len(data)} move(s) would not fit on the disk "
            f"of broker(s) {brokers_over} (keeping {self.opts.reserve_pct:g} % free): "
            + "; ".join(self.halted_reasons[:3])
            + ". Moves in flight continue; nothing new is started. Free space, then `kops reassign "
            "resume` (it checks again), or roll back with `kops reassign cancel`."
        )
        return True

    def _start_wave(self, topo: Topology, in_flight: list[Move], wave: list[Move]) -> None:
        # throttles first (as Kafka does), so that no byte moves unthrottled; and, unlike
        # Kafka's tool, only once the brokers have applied them (they learn of config changes
        # asynchronously: a move submitted sooner copies unthrottled at first)
        moving = in_flight + [m for m in wave if m.moves_data]
        changes = self._sync_throttles(topo, moving, save=False)  # saved with the wave below
        if any(c.kind == "broker" and c.value is not None for c in changes):
            desired = T.desired_throttles(moving, rate=self.opts.throttle, log_dir_rate=self.opts.log_dir_throttle)
            wait_s = max(5.0, getattr(self.conn, "timeout_s", 10.0))
            late = T.await_rates(self.conn, desired, topo, timeout_s=wait_s)
            if late:
                self.note(f"broker(s) {late} did not show the throttle rates kops set within {wait_s:.0f} s; "
                          "starting the moves anyway")
        if self.opts.via == "zookeeper":
            results = submit_zk(self.conn, {m.tp: m.target for m in wave})
        else:
            results = submit(self.conn, {m.tp: m.target for m in wave})
        failpoints.reach("wave.submitted")
        if results and all(e == BUSY for e in results.values()):
            self.note("/admin/reassign_partitions still exists: the next wave waits until it is gone")
            self.save()
            return
        now = time.time()
        self.j.waves += 1
        started = []
        for m in wave:
            err = results.get(m.tp)
            if err is None:
                self.j.progress[m.name] = J.IN_FLIGHT
                self.j.submitted_at[m.name] = now
                started.append(m.name)
            else:
                self.j.progress[m.name] = J.REJECTED
                self.note(f"{m.name}: the controller refused the reassignment: {err}")
        self.j.event(f"wave {self.j.waves}: started {len(started)} move(s): {', '.join(started[:20])}")
        self.save()

    def _log_dirs(self, in_flight: list[Move]) -> None:
        """AlterReplicaLogDirs for the log-dir requests of the moves in flight: sent until a
        broker accepts it (a replica not created yet is refused, the broker remembers the dir
        for it), and again if the replica is seen in another dir with nothing moving it (a
        broker restarted before the move began). A broker without that log dir is final."""
        reqs = {}
        for m in in_flight:
            states = self._log_dir_states.get(m.name, {})
            for b, d in m.log_dir_moves.items():
                k = (m.topic, m.partition, b)
                if k in self._log_dir_failed or states.get(b) in (LOG_DIR_DONE, LOG_DIR_MOVING):
                    continue
                if k not in self._log_dirs_started or states.get(b) == LOG_DIR_ELSEWHERE:
                    reqs[k] = d
        if not reqs:
            return
        for k, err in alter_log_dirs(self.conn, reqs).items():
            if err is None:
                if k not in self._log_dirs_started:
                    self.j.event(f"log dir move started: {k[0]}-{k[1]} on broker {k[2]} -> {reqs[k]}")
                self._log_dirs_started.add(k)
            elif "LogDirNotFound" in err:
                self._log_dir_failed[k] = f"broker has no log dir {reqs[k]}: {err}"
                self.note(f"{k[0]}-{k[1]}: broker {k[2]} has no log dir {reqs[k]} ({err})")

    def _check_stall(self, topo: Topology, in_flight: list[Move]) -> None:
        """Stalled: every data move in flight has a down broker among its *target* replicas — a
        destination, or a replica that stays (Kafka completes a reassignment only once every
        target replica is in the ISR, found by the fault lab: a kept replica on a killed broker
        blocks the move as surely as a dead destination)."""
        def is_down(b: int) -> bool:
            return not (topo.broker(b) and topo.broker(b).alive)

        data_moves = [m for m in in_flight if m.moves_data]
        stuck = [m for m in data_moves if any(is_down(b) for b in m.target)]
        if data_moves and len(stuck) == len(data_moves) and not self.j.moves_in(J.PENDING):
            if self._stalled_since is None:
                self._stalled_since = time.monotonic()
                dead = sorted({b for m in stuck for b in m.target if is_down(b)})
                self.note(f"every move in flight waits on down broker(s) {dead}")
            elif time.monotonic() - self._stalled_since > self.opts.stall_after_s:
                self.stalled = True
            return
        self._stalled_since = None
        # every broker up, yet nothing copied: a follower that cannot fetch (seen in the fault
        # lab: a broker holding a stale log of a deleted topic answers INCONSISTENT_TOPIC_ID
        # forever). Without this, --wait with no --timeout waited for good. The window leaves
        # a slow throttle its time: a follower fetches up to 1 MiB at once, throttled to the rate.
        window = max(NO_PROGRESS_S, 3 * (1 << 20) / self.opts.throttle if self.opts.throttle else 0)
        now_m = time.monotonic()
        idle = [m for m in data_moves if m.name in self._copied and now_m - self._copied[m.name][1] > window]
        if data_moves and len(idle) == len(data_moves) and not self.j.moves_in(J.PENDING):
            self.stalled = True
            self.stalled_reason = (f"no data copied for {window:.0f} s by any move in flight, every broker up: "
                                   + ", ".join(m.name for m in idle[:5])
                                   + " (the brokers' logs say why: a follower that cannot fetch)")
            self.note(self.stalled_reason)

    def snapshot(self, topo: Topology | None = None) -> Snapshot:
        done = len(self.j.moves_in(J.DONE, J.MISMATCH, J.REJECTED))
        in_flight = self.j.moves_in(J.IN_FLIGHT)
        bytes_done = None
        # a move in flight may end any moment (for moves_finished): unless the sizes show that
        # each still has more than a few seconds of copying left
        self._ending_soon = True
        self._all_ending_soon = False
        if self.bytes_total:
            bytes_done = sum(m.bytes_to_move for m in self.j.moves_in(J.DONE))
            if in_flight:
                from kops.cluster.topology import replica_sizes

                dests = sorted({b for m in in_flight for b in m.adding})
                sizes = replica_sizes(self.conn, dests, sorted({m.topic for m in in_flight}))
                left = []
                now_m = time.monotonic()
                for m in in_flight:
                    copied = [min(sizes.get((m.topic, m.partition, b), 0), m.size_bytes or 0) for b in m.adding]
                    bytes_done += sum(copied)
                    if sizes:  # (an unanswered read says nothing about progress)
                        seen = self._copied.get(m.name)
                        if seen is None or seen[0] != sum(copied):
                            self._copied[m.name] = (sum(copied), now_m)
                    left.append(max(((m.size_bytes or 0) - c for c in copied), default=0))
                soon = max(ENDING_SOON_S * (self.opts.throttle or 0), 0.05 * max(m.size_bytes or 0 for m in in_flight))
                self._ending_soon = (not sizes) or min(left) <= soon
                self._all_ending_soon = bool(sizes) and max(left) <= soon
        note = "halted" if self.j.state == J.HALTED else ("stalled" if self._stalled_since else "")
        return Snapshot(
            done=done,
            total=len(self.j.moves),
            in_flight=len(in_flight),
            pending=len(self.j.moves_in(J.PENDING)),
            bytes_done=bytes_done,
            bytes_total=self.bytes_total,
            note=note,
        )

    def moves_finished(self) -> bool:
        """Cheap check between ticks (one ListPartitionReassignments): has the controller
        finished one of the moves that were reassigning at the last tick? Then the next tick
        runs at once, to lift throttles, start the next wave or end, without waiting out the
        poll interval."""
        now_m = time.monotonic()
        if any(now_m - t0 < LAG_RECHECK_S for t0 in self._lagging.values()):
            # metadata was behind the controller at the last tick: look again shortly
            return now_m - self._ticked_at >= LAG_RECHECK_EVERY_S
        if not self._watch:
            return False
        if now_m - self._woke_at < (WAKE_SOON_S if self._ending_soon else WAKE_S):
            return False
        self._woke_at = now_m
        now = ongoing(self.conn)
        return any(tp not in now for tp in self._watch)

    # -- end --------------------------------------------------------------------------------
    @property
    def work_left(self) -> bool:
        return bool(self.j.moves_in(J.IN_FLIGHT, J.PENDING))

    def finish(self, *, preserve_throttles: bool = False, final_state: str | None = None) -> None:
        """The work has ended: lift kops' throttles, close the journal, release the lock."""
        records = self.j.throttles  # every broker rate of this execution, lifted or not
        if not preserve_throttles and (records.brokers or not records.empty):
            topo = self._last_topo  # enough to know which brokers are alive
            if not records.empty or topo is None:
                topo = read(self.conn, topics=self.topics)
            if not records.empty:
                state = records
                for attempt in range(1, LIFT_ATTEMPTS + 1):
                    # a removal that failed (a broker slow or cut off) is sent again while the
                    # broker is up: a run that ends well leaves no throttle behind
                    state, notes, changes = T.remove_all(self.conn, state, topo, before_apply=self._write_ahead)
                    self.j.throttles = state
                    if changes:
                        self.j.event("throttles removed: " + "; ".join(str(c) for c in changes))
                    if state.empty or attempt == LIFT_ATTEMPTS or not T.plan_sync(
                            state, T.Desired({}, {}), topo, final=True).changes:
                        for n in notes:
                            self.note(n)
                        break
                    time.sleep(1)
                    try:
                        topo = read(self.conn, topics=self.topics)
                    except ClusterError as e:  # the journal keeps the records: verify/resume lift them
                        for n in notes:
                            self.note(n)
                        self.note(f"could not read the cluster to lift the throttles again: {e.message}")
                        break
                if not state.empty:
                    self.note(
                        "some throttles could not be removed yet (broker down?): "
                        + "; ".join(state.describe())
                        + " — run `kops reassign verify` again when the broker is back"
                    )
            if records.brokers:
                # "removed" means the brokers have applied it, not only that it was written
                wait_s = max(5.0, getattr(self.conn, "timeout_s", 10.0))
                late = T.await_lifted(self.conn, records, topo, timeout_s=wait_s)
                if late:
                    self.note(f"broker(s) {late} still showed a throttle rate kops removed after {wait_s:.0f} s "
                              "(brokers apply config changes asynchronously)")
        if final_state:
            self.j.state = final_state
        elif self.j.moves_in(J.MISMATCH, J.REJECTED):
            self.j.state = J.FAILED
        else:
            self.j.state = J.COMPLETE
        self.j.event(f"execution {self.j.state}")
        self.save()
        if self.lock is not None:
            try:
                self.lock.release(self.j.id)
            except ClusterError as e:
                self.note(f"could not release the cluster lock: {e.message}")

    def run(self) -> Outcome:
        """Tick until done (with ``opts.wait``) or once (without)."""
        t0 = time.monotonic()
        self.reporter.start(len(self.j.moves), self.bytes_total)
        try:
            if self.opts.wait:
                def done(_s: Snapshot) -> bool:
                    return (not self.work_left) or self.j.state == J.HALTED or self.stalled

                def step() -> Snapshot:
                    s = self.tick()
                    self.reporter.update(s)
                    return s

                interval = self.opts.poll_interval_s
                _, finished = poll(step, done, interval_s=interval, timeout_s=self.opts.timeout_s,
                                   wake=self.moves_finished, wake_interval_s=WAKE_SOON_S)
            else:
                self.reporter.update(self.tick())
        except KeyboardInterrupt:
            self.reporter.stop()
            self.reporter.message(
                f"interrupted: execution {self.j.id} continues in the cluster (moves in flight, their "
                "throttles stay); `kops reassign resume` to drive it, `verify` to check, `cancel` to roll back"
            )
            raise
        finally:
            self.reporter.stop()
        elapsed = time.monotonic() - t0
        if not self.work_left and self.j.state in (J.RUNNING, J.HALTED):
            self.finish()
        j = self.j
        if j.finished:
            code = EXIT_OK if j.state == J.COMPLETE else EXIT_FAILURE
            msg = f"execution {j.id} {j.state}: {len(j.moves_in(J.DONE))}/{len(j.moves)} partitions at their target"
            if j.state == J.FAILED:
                bad = [m.name for m in j.moves_in(J.MISMATCH, J.REJECTED)]
                msg += f"; not at target: {', '.join(bad[:20])}"
            return Outcome(j, True, code, msg, self.notes, self.bytes_total, elapsed)
        if j.state == J.HALTED:
            return Outcome(j, False, EXIT_FAILURE,
                           f"execution {j.id} halted by the {self.halted_by}: " + "; ".join(self.halted_reasons[:5])
                           + "; moves in flight continue: `kops reassign resume` once fixed, or `kops reassign cancel`",
                           self.notes, self.bytes_total, elapsed)
        c = j.counts()
        if not self.opts.wait:
            msg = (f"execution {j.id} started: {c.get(J.IN_FLIGHT, 0)} moving, {c.get(J.PENDING, 0)} "
                   "waiting for later waves. Follow it with `kops reassign verify`; "
                   + ("drive the remaining waves with `kops reassign resume`." if c.get(J.PENDING) else
                      "verify removes the throttles once it completes."))
            return Outcome(j, False, EXIT_OK, msg, self.notes, self.bytes_total, elapsed)
        why = self.stalled_reason if self.stalled else "timed out"
        return Outcome(j, False, EXIT_NOT_DONE,
                       f"execution {j.id} not done ({why}): {c}; continue with `kops reassign resume`, "
                       "or `kops reassign cancel`", self.notes, self.bytes_total, elapsed)


def _cluster_id(topo: Topology) -> str:
    return topo.cluster_id or "unknown-cluster"


class _ClusterIdOnly:
    def __init__(self, cluster_id):
        self.cluster_id = cluster_id


def cluster_identity(conn):
    """Just the cluster id (DescribeCluster), for commands that start from the journal."""
    admin = conn.admin()
    cluster = conn.wait(admin.describe_cluster(request_timeout=conn.timeout_s), "describe cluster")
    return _ClusterIdOnly(cluster.cluster_id)


def refuse_if_active(store: J.JournalStore, lock) -> None:
    """A second execution is refused with the first one's identity."""
    active = store.unfinished()
    if active:
        j = active[-1]
        raise_held(j, lock)
    holder = lock.holder()
    if holder is not None:
        hid = holder.get("execution_id")
        if not hid:
            return  # taken half-way (no holder record yet): ClusterLock.acquire waits or breaks it
        prev = store.load(hid)
        if prev is not None and prev.finished:
            lock.release(hid)  # a stale lock of an execution that ended
            return
        if prev is None and lock_stale_without_journal(holder):
            # a kops killed between taking the lock and writing the first journal record:
            # that execution never throttled or submitted anything (both come after the record)
            lock.release(hid)
            return
        from kops.ops.lock import LockHeld

        raise LockHeld(holder)


def lock_stale_without_journal(holder: Mapping[str, Any], *, grace_s: float = 60.0) -> bool:
    """A lock whose execution has no journal: stale when its owner process is gone (same host)
    or it was taken longer ago than a live kops needs to write the journal's first record."""
    if _process_gone(holder.get("owner") or {}):
        return True
    try:
        taken = datetime.fromisoformat(str(holder.get("acquired_at")))
    except ValueError:
        return False
    return (datetime.now(timezone.utc) - taken).total_seconds() > grace_s


def raise_held(j: J.Journal, lock=None):
    from kops.ops.lock import LockHeld

    holder = {"execution_id": j.id, "owner": j.owner, "acquired_at": j.created_at}
    err = LockHeld(holder)
    err.details = [f"state {j.state}, progress {j.counts()}, last update {j.updated_at}"]
    raise err


def start(conn, prepared: Prepared, opts: ExecuteOptions, *, reporter=None) -> Outcome:
    """Journal, lock and run an execution of a validated plan."""
    from kops.ops.lock import ClusterLock

    topo = prepared.topology
    store = J.JournalStore(conn, _cluster_id(topo))
    lock = ClusterLock(conn)
    refuse_if_active(store, lock)
    options = opts.to_dict()
    options["baseline_offline"] = sorted([list(p.tp) for p in topo.partitions() if p.offline])
    journal = J.Journal(id=J.new_execution_id(), cluster_id=_cluster_id(topo), moves=prepared.moves, options=options)
    lock.acquire(journal.id, journal.owner)
    failpoints.reach("execute.lock-taken")
    try:
        journal.event(f"execution created by {journal.owner}; journal in {store.where} and {store.local.dir}")
        store.save(journal)
    except Exception:
        lock.release(journal.id)
        raise
    runner = Runner(conn, store, journal, opts, reporter, lock)
    runner.fresh = (topo, prepared.read_at)
    for w in prepared.disk.warnings if prepared.disk is not None else ():
        runner.notes.append(f"disk check: {w}")  # shown before the confirmation already
        journal.event(f"disk check: {w}")
    if not runner.work_left:
        runner.finish()
        return Outcome(journal, True, EXIT_OK, "nothing to do: every partition is already at its target",
                       runner.notes)
    return runner.run()


def find_journal(store: J.JournalStore, *, execution_id: str | None = None,
                 plan: ReassignmentPlan | None = None, unfinished_only: bool = False) -> J.Journal | None:
    if execution_id:
        j = store.load(execution_id)
        if j is None:
            raise BadInput(f"no journal for execution {execution_id!r} on this cluster")
        return j
    journals = store.all()
    if unfinished_only:
        journals = [j for j in journals if not j.finished]
    if plan is not None:
        want = {e.tp: e.replicas for e in plan.entries}
        journals = [j for j in journals if {m.tp: m.target for m in j.moves} == want] or [
            j for j in journals if not j.finished and {m.tp for m in j.moves} & set(want)
        ]
    if not journals:
        return None
    unfinished = [j for j in journals if not j.finished]
    return (unfinished or journals)[-1]


def _process_gone(owner: Mapping[str, Any]) -> bool:
    """True when ``owner`` (host, pid) is another process on this host that no longer exists."""
    pid = owner.get("pid")
    if owner.get("host") != socket.gethostname() or not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def _owner_alive(j: J.Journal, interval_s: float) -> bool:
    o = j.owner or {}
    if o.get("host") == socket.gethostname() and isinstance(o.get("pid"), int):
        if o["pid"] == os.getpid() or _process_gone(o):
            return False
        # the pid exists: alive only if it also wrote recently (pids are reused)
        return time.time() - j.heartbeat < max(30.0, 5 * interval_s)
    return time.time() - j.heartbeat < max(60.0, 10 * interval_s)


def resume(conn, opts: ExecuteOptions, *, execution_id: str | None = None, reporter=None,
           force: bool = False) -> Outcome:
    """Continue an interrupted (killed, timed-out or halted) execution from its journal."""
    from kops.ops.lock import ClusterLock, LockHeld

    topo = cluster_identity(conn)
    store = J.JournalStore(conn, _cluster_id(topo))
    j = find_journal(store, execution_id=execution_id, unfinished_only=execution_id is None)
    if j is None:
        raise BadInput("nothing to resume: no unfinished kops execution on this cluster")
    lock = ClusterLock(conn)
    if j.finished:
        if not j.throttles.empty:
            runner = Runner(conn, store, j, opts.with_journal(j.options), reporter, lock)
            runner.finish(final_state=j.state)
            return Outcome(j, True, EXIT_OK, f"execution {j.id} was already {j.state}; leftover throttles removed",
                           runner.notes)
        return Outcome(j, True, EXIT_OK, f"execution {j.id} is already {j.state}")
    if not force and _owner_alive(j, opts.poll_interval_s):
        raise LockHeld({"execution_id": j.id, "owner": j.owner, "acquired_at": j.created_at})
    holder = lock.holder()
    if holder is not None and holder.get("execution_id") not in (None, j.id):
        raise LockHeld(holder)
    me = J.owner_identity()
    prev = j.owner
    j.owner = me
    if holder is None:
        lock.acquire(j.id, me)
    else:
        lock.update_owner(j.id, me)
    if j.state == J.HALTED:
        j.state = J.RUNNING
    j.event(f"resumed by {me} (previous owner {prev})")
    store.save(j)
    runner = Runner(conn, store, j, opts.with_journal(j.options), reporter, lock)
    return runner.run()


# ------------------------------------------------------------------------------------------
# verify / cancel / list
# ------------------------------------------------------------------------------------------


@dataclass
class VerifyResult:
    statuses: list[PartitionStatus]
    exit_code: int
    journal: J.Journal | None
    notes: list[str]
    throttles_removed: list[str]
    throttles_present: list[str]

    def to_dict(self) -> dict[str, Any]:
        states: dict[str, int] = {}
        for s in self.statuses:
            states[s.state] = states.get(s.state, 0) + 1
        return {
            "result": {0: "complete", 3: "in_progress", 1: "mismatch"}[self.exit_code],
            "summary": states,
            "execution_id": self.journal.id if self.journal else None,
            "execution_state": self.journal.state if self.journal else None,
            "partitions": [s.to_dict() for s in self.statuses],
            "throttles_removed": self.throttles_removed,
            "throttles_present": self.throttles_present,
            "notes": self.notes,
        }


def verify(conn, plan: ReassignmentPlan | None, *, preserve_throttles: bool = False,
           execution_id: str | None = None) -> VerifyResult:
    """Per-partition states of ``plan`` (or of kops' latest execution); finishes kops'
    execution (lifts its throttles) when nothing of it is moving any more."""
    topo0 = cluster_identity(conn)
    store = J.JournalStore(conn, _cluster_id(topo0))
    j = find_journal(store, execution_id=execution_id, plan=plan)
    if plan is None and j is None:
        raise BadInput("nothing to verify: give --reassignment-json-file, or run it after a kops execution")
    targets = [(e.tp, tuple(e.replicas)) for e in plan.entries] if plan else [(m.tp, m.target) for m in j.moves]
    topics = sorted({tp[0] for tp, _ in targets} | ({m.topic for m in j.moves} if j else set()))
    notes: list[str] = []
    removed: list[str] = []
    if j is not None:
        runner = Runner(conn, store, j, ExecuteOptions().with_journal(j.options), None, None)
        from kops.ops.lock import ClusterLock

        runner.lock = ClusterLock(conn)
        topo = read(conn, topics=topics)
        reassigning = ongoing_in(topo)
        if not j.finished:
            runner.refresh(topo, reassigning, mismatch_after_s=3600)
            if runner._mismatch_seen:  # confirm with a second read (metadata may lag)
                time.sleep(2.5)
                topo = read(conn, topics=topics)
                reassigning = ongoing_in(topo)
                runner.refresh(topo, reassigning, mismatch_after_s=2.0)
            in_flight = j.moves_in(J.IN_FLIGHT)
            if not preserve_throttles and in_flight:
                before = j.throttles.describe()
                runner._sync_throttles(topo, in_flight)  # lift throttles of finished moves
                removed = sorted(set(before) - set(j.throttles.describe()))
            if not runner.work_left:
                before = j.throttles.describe()
                runner.finish(preserve_throttles=preserve_throttles)
                removed = sorted(set(removed) | (set(before) - set(j.throttles.describe())))
            else:
                runner.save()
        elif not preserve_throttles and not j.throttles.empty:
            before = j.throttles.describe()
            runner.finish(final_state=j.state)
            removed = sorted(set(before) - set(j.throttles.describe()))
        notes.extend(runner.notes)
        pending = [m.tp for m in j.moves_in(J.PENDING)]
    else:
        pending = []
    # requested log dirs (plan entries or the execution's moves): verified with DescribeLogDirs
    wanted = ({e.tp: {b: d for b, d in zip(e.replicas, e.log_dirs) if d != "any"} for e in plan.entries
               if e.log_dirs} if plan else {m.tp: m.log_dir_moves for m in j.moves})
    wanted = {tp: w for tp, w in wanted.items() if w}
    driving = [m.tp for m in j.moves_in(J.IN_FLIGHT)] if j is not None and not j.finished else []

    def statuses_now() -> tuple[Topology, list[PartitionStatus]]:
        topo = read(conn, topics=topics)
        reassigning = ongoing_in(topo)
        states = None
        if wanted:
            from kops.cluster.topology import replica_log_dirs

            dirs = replica_log_dirs(conn, sorted({b for w in wanted.values() for b in w}),
                                    sorted({t for t, _ in wanted}))
            states = {tp: log_dir_states(w, tp[0], tp[1], dirs) for tp, w in wanted.items()}
        return topo, partition_statuses(targets, topo, reassigning, pending=pending, log_dirs=states,
                                        driving=driving)

    topo, statuses = statuses_now()
    if any(s.state == "mismatch" for s in statuses):  # confirm: metadata may lag a moment
        time.sleep(2.5)
        topo, statuses = statuses_now()
    present = T.throttles_in(topo, topics)
    if j is not None and pending and j.state in (J.RUNNING, J.HALTED):
        notes.append(f"{len(pending)} partition(s) wait for later waves of execution {j.id}: run "
                     "`kops reassign resume` to start them")
    if j is None and present:
        notes.append("throttles are set that kops did not set; kops leaves them alone: " + "; ".join(present[:10]))
    return VerifyResult(statuses, status_exit_code(statuses), j, notes, removed, present)


@dataclass
class CancelResult:
    cancelled: list[str]
    not_active: list[str]
    dropped: list[str]
    reordered: list[str]
    errors: list[str]
    journal: J.Journal | None
    notes: list[str]
    throttles_removed: list[str]

    @property
    def exit_code(self) -> int:
        return EXIT_FAILURE if self.errors else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "cancelled": self.cancelled,
            "dropped_pending": self.dropped,
            "not_active": self.not_active,
            "order_restored": self.reordered,
            "errors": self.errors,
            "execution_id": self.journal.id if self.journal else None,
            "execution_state": self.journal.state if self.journal else None,
            "throttles_removed": self.throttles_removed,
            "notes": self.notes,
        }


def cancel(conn, plan: ReassignmentPlan | None, *, preserve_throttles: bool = False,
           execution_id: str | None = None, timeout_s: float = 60.0) -> CancelResult:
    """KIP-455 cancel (rollback to the original replicas) of what kops started — or of the
    plan's partitions — including reassignments that only add replicas."""
    topo0 = cluster_identity(conn)
    store = J.JournalStore(conn, _cluster_id(topo0))
    j = find_journal(store, execution_id=execution_id, plan=plan, unfinished_only=True)
    if j is None and plan is None:
        raise BadInput("nothing to cancel: no unfinished kops execution; give --reassignment-json-file "
                       "to cancel the reassignments of a plan")
    if j is not None:
        tps = [m.tp for m in j.moves]
    else:
        tps = [e.tp for e in plan.entries]
    reassigning = ongoing(conn)
    # Scala semantics (2.6-3.6): reassigning = adding or removing non-empty
    active = [tp for tp in tps if tp in reassigning and (
        reassigning[tp].get("adding_replicas") or reassigning[tp].get("removing_replicas"))]
    results = submit(conn, {tp: None for tp in active})
    cancelled = sorted(f"{t}-{p}" for (t, p), e in results.items() if e is None or "NoReassignmentInProgress" in e)
    errors = sorted(f"{t}-{p}: {e}" for (t, p), e in results.items() if e is not None and "NoReassignmentInProgress" not in e)
    not_active = sorted(f"{t}-{p}" for t, p in tps if (t, p) not in set(active))

    def settled() -> bool:
        now = ongoing(conn)
        return not any(tp in now for tp in active)

    if active:
        poll(settled, bool, interval_s=0.5, timeout_s=timeout_s)
    notes: list[str] = []
    dropped: list[str] = []
    reordered: list[str] = []
    removed: list[str] = []
    if j is not None:
        from kops.ops.lock import ClusterLock

        runner = Runner(conn, store, j, ExecuteOptions().with_journal(j.options), None, ClusterLock(conn))
        for m in j.moves:
            st = j.progress.get(m.name)
            if st == J.PENDING:
                j.progress[m.name] = J.DROPPED
                dropped.append(m.name)
            elif st == J.IN_FLIGHT and m.name in cancelled:
                j.progress[m.name] = J.ROLLED_BACK
        # KIP-455 cancel restores the original replica *set*; put back the original order too
        topo = read(conn, topics=sorted({m.topic for m in j.moves}))
        fix = {}
        for m in j.moves:
            if j.progress.get(m.name) != J.ROLLED_BACK:
                continue
            p = topo.partition(m.topic, m.partition)
            if p and tuple(p.replicas) != m.original and set(p.replicas) == set(m.original):
                fix[m.tp] = m.original
        if fix:
            res = submit(conn, fix)
            reordered = sorted(f"{t}-{p}" for (t, p), e in res.items() if e is None)
            poll(lambda: not any(tp in ongoing(conn) for tp in fix), bool, interval_s=0.5, timeout_s=timeout_s)
        before = j.throttles.describe()
        j.event(f"cancelled: {len(cancelled)} rolled back, {len(dropped)} pending dropped")
        runner.finish(preserve_throttles=preserve_throttles, final_state=J.CANCELLED)
        removed = sorted(set(before) - set(j.throttles.describe()))
        notes.extend(runner.notes)
    return CancelResult(cancelled, not_active, dropped, reordered, errors, j, notes, removed)


def list_all(conn) -> dict[str, Any]:
    """Ongoing reassignments, marked with the kops execution that started them."""
    topo0 = cluster_identity(conn)
    store = J.JournalStore(conn, _cluster_id(topo0))
    active = store.unfinished()
    by_tp = {}
    for j in active:
        for m in j.moves_in(J.IN_FLIGHT):
            by_tp[m.tp] = j.id
    rows = []
    for (t, p), r in sorted(ongoing(conn).items()):
        rows.append({
            "topic": t, "partition": p,
            "replicas": list(r.get("replicas", [])),
            "adding": list(r.get("adding_replicas", [])),
            "removing": list(r.get("removing_replicas", [])),
            "kops_execution": by_tp.get((t, p)),
        })
    return {
        "reassignments": rows,
        "kops_executions": [j.summary() for j in active],
        "warnings": store.warnings,
    }
