"""What an execution starts from: the plan checked against the live cluster (:func:`prepare`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kops.errors import BadInput
from kops.model import ReassignmentPlan, Topology
from kops.ops import journal
from kops.ops.disk_fit import DiskCheck, plan_disk
from kops.ops.move import Move
from kops.ops.validate import validate_plan
from kops.ops.reassign import admin
from kops.ops.reassign.guard import cluster_id_of, refuse_if_active
from kops.ops.reassign.options import ExecuteOptions, HealthStop
from kops.ops.reassign.status import alive, health_problems

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


def _warm_up_journal_writer(conn) -> None:
    """Create the journal's producer now: librdkafka connects and obtains its idempotent
    producer id in the background while kops reads and validates, instead of during the first
    journal write (the lock record), which lies on the way to the first submission (0.5-1 s on
    a busy machine). Nothing is written here."""
    try:
        journal.TopicStore(conn)._producer()
    except Exception:  # noqa: BLE001 - only an optimisation; the first write reports real errors
        pass


def prepare(conn, plan: ReassignmentPlan, opts: ExecuteOptions) -> Prepared:
    """Read the cluster and validate the whole plan (no writes)."""
    from kops.ops.lock import ClusterLock

    if hasattr(conn, "warm_up"):
        conn.warm_up()  # kafka-python (validation lists reassignments with it): first of all
    _warm_up_journal_writer(conn)
    # the whole cluster (validation and the health check need it), sizes of the plan's topics
    topo = admin.read(conn, sizes={e.topic for e in plan.entries})
    # a second execution is refused first, naming the one in progress
    refuse_if_active(journal.JournalStore(conn, cluster_id_of(topo)), ClusterLock(conn))
    opts.check(zookeeper=bool(conn.zookeeper))
    if opts.via == "zookeeper":
        legacy = admin.zk_reassign_pending(conn)
        if legacy is not None:
            names = ", ".join(f"{p.get('topic')}-{p.get('partition')}" for p in legacy[:10])
            raise BadInput(
                f"{admin.ZK_REASSIGN} exists: a legacy reassignment is still running ({names or 'empty'}); "
                "wait for it to finish (the controller deletes the znode); nothing was changed"
            )
    # the read above listed the reassignments in progress: the topology carries them
    moves = validate_plan(plan, topo, allow_offline=opts.allow_offline)
    # the read also gave each broker's log dirs with their usable bytes and the sizes of the
    # partitions moving: the whole plan must fit on its destinations (exit 2 otherwise)
    # (in disk stages when only an order that frees space first fits)
    moves, disk = plan_disk(moves, topo, reserve_pct=opts.reserve_pct, threshold_pct=opts.threshold_pct,
                            on_disk=_in_flight_on_disk(conn, topo, moves))
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
    brokers = {b for p in flights for b in p.adding_replicas if b in dests and alive(topo, b)}
    usage = log_dir_usage(conn, sorted(brokers), {p.topic for p in flights})
    return usage.on_disk() if usage is not None else {}
