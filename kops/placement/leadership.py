"""Leadership planning (pure): leader imbalance exactly as Kafka's ZooKeeper-mode controller
computes it, the partitions a preferred election should touch, and reorder-only plans that move
leadership off brokers (demote) and give it back (restore) without moving data.

No I/O: everything here takes a :class:`kops.model.Topology` and returns plain data.

Leader imbalance (``leader.imbalance.per.broker.percentage``)
    Reproduces ``KafkaController.checkAndTriggerAutoLeaderRebalance`` (Kafka 2.x - 3.9, ZooKeeper
    mode):

    1. group every partition by its *preferred replica* ``B = assignment.head`` (the full
       replica list; during a reassignment that is ``target ++ origin``, which is what the
       Admin API metadata reports as ``replicas``);
    2. ``notPreferred(B)`` = those partitions whose leader is not ``B`` -- an offline partition
       (leader -1) counts, because its leadership info exists and ``-1 != B``;
    3. ``ratio(B) = len(notPreferred) / len(partitions preferring B)`` (a double);
    4. if ``ratio > percentage / 100`` (strictly greater, both doubles) the controller elects the
       preferred replica for every partition of ``notPreferred(B)`` whose preferred replica is
       live and in the ISR (``canPreferredReplicaBeLeader``); the others are left alone (the
       controller's ISR is current; the one kops reads may lag, so a live preferred replica out
       of the ISR as read is asked for too, see :meth:`ImbalanceReport.out_of_isr`);
    5. brokers at or under the threshold are not touched at all, even if some of their
       partitions could be elected.

    Brokers that are preferred for no partition do not appear (Kafka's ``groupBy`` has no group
    for them). What kops cannot see through the Admin API: topics queued for deletion (the
    controller skips them) and replicas on offline log dirs (the controller counts them as not
    live). Both are rare; ``leader_imbalance`` takes ``deleting_topics`` for the first.

    KRaft controllers ignore ``leader.imbalance.per.broker.percentage``: they elect every
    partition whose leader is not ``replicas[0]`` (up to 1000 per round). ``mode="kraft"``
    reproduces that (all brokers "over the threshold").

Demote / restore
    A demotion moves the demoted brokers to the end of each affected replica list, keeping the
    relative order of the others, so the new preferred replica is the old first follower (Kafka's
    assignment already spreads first followers evenly, so leadership lands evenly). If that
    replica is down or out of the ISR, the first non-demoted in-sync live replica is put first
    instead. A partition is never demoted when no non-demoted replica is live and in the ISR
    (it would be left without an in-sync leader); it is reported with the reason. Restoring
    returns each partition to the order it had before the first demotion (kept in a small state
    record by the caller), re-applying any demotions still in force.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kops.model import Partition, ReassignmentPlan, Topology, TopicPartition

DEFAULT_IMBALANCE_PCT = 10.0


def tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


# ------------------------------------------------------------------------------------------
# Leader imbalance as the ZooKeeper controller computes it
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocked:
    """A partition whose preferred replica cannot be elected, and why."""

    tp: TopicPartition
    preferred: int
    leader: int | None
    reason: str
    #: the preferred replica is live and only out of the ISR *as read*: metadata from one broker
    #: can lag the controller (right after a reassignment), so the controller is asked anyway
    preferred_live: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.tp[0],
            "partition": self.tp[1],
            "preferred": self.preferred,
            "leader": self.leader,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class BrokerImbalance:
    broker: int
    rack: str | None
    alive: bool
    preferred: int  # partitions whose preferred replica is this broker (the denominator)
    not_preferred: int  # ... of which led by another broker or offline (the numerator)
    ratio: float
    over_threshold: bool
    candidates: tuple[TopicPartition, ...]  # electable now (preferred live and in the ISR)
    blocked: tuple[Blocked, ...]  # not electable, with the reason

    @property
    def percent(self) -> float:
        return 100.0 * self.ratio

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker": self.broker,
            "rack": self.rack,
            "alive": self.alive,
            "preferred_partitions": self.preferred,
            "not_preferred_leader": self.not_preferred,
            "imbalance_ratio": self.ratio,
            "imbalance_percent": round(self.percent, 4),
            "over_threshold": self.over_threshold,
            "electable": len(self.candidates),
            "blocked": len(self.blocked),
        }


@dataclass(frozen=True)
class ImbalanceReport:
    threshold_pct: float
    mode: str  # "zookeeper" (per-broker threshold) or "kraft" (every non-preferred leader)
    brokers: tuple[BrokerImbalance, ...]
    partitions: int

    @property
    def over_threshold(self) -> list[BrokerImbalance]:
        return [b for b in self.brokers if b.over_threshold]

    @property
    def balanced(self) -> bool:
        """What the controller would conclude: no broker over the threshold."""
        return not self.over_threshold

    @property
    def not_preferred_total(self) -> int:
        return sum(b.not_preferred for b in self.brokers)

    def candidates(self, max_elections: int | None = None) -> list[TopicPartition]:
        """The partitions the controller would elect, in a deterministic order.

        Brokers with the highest ratio first; with ``max_elections`` the partitions are taken
        round-robin across those brokers so that a capped run helps every broker.
        """
        return self._round_robin(lambda b: b.candidates, max_elections)

    def _round_robin(self, pick: Callable[[BrokerImbalance], Iterable[TopicPartition]],
                     cap: int | None) -> list[TopicPartition]:
        queues = [list(pick(b)) for b in sorted(self.over_threshold, key=lambda b: (-b.ratio, b.broker))]
        out: list[TopicPartition] = []
        longest = max((len(q) for q in queues), default=0)
        for i in range(longest):
            for q in queues:
                if i < len(q):
                    out.append(q[i])
            if cap is not None and len(out) >= cap:
                break
        return out[:cap] if cap is not None else out

    @property
    def blocked(self) -> list[Blocked]:
        """Partitions of over-threshold brokers that cannot be elected now."""
        return [x for b in self.over_threshold for x in b.blocked]

    def out_of_isr(self, max_elections: int | None = None) -> list[TopicPartition]:
        """Blocked partitions of over-threshold brokers whose preferred replica is live and only
        out of the ISR as read, in the order of :meth:`candidates`.

        The metadata kops reads comes from one broker and can lag the controller by seconds
        (partitions completed by a reassignment still show its ISR). Kafka's own tool sends every
        partition and lets the controller refuse (PREFERRED_LEADER_NOT_AVAILABLE); the rebalance
        asks the controller for these after the candidates.
        """
        return self._round_robin(lambda b: (x.tp for x in b.blocked if x.preferred_live), max_elections)

    def unreachable(self, elected: Iterable[TopicPartition] | None = None) -> list[BrokerImbalance]:
        """Brokers still over the threshold after electing ``elected`` (default: every candidate).

        That is the rebalance "could not reach balance" condition: what remains not led by the
        preferred replica (blocked, failed or capped) still exceeds the threshold.
        """
        done = set(self.candidates() if elected is None else elected)
        out = []
        for b in self.over_threshold:
            left = b.not_preferred - sum(1 for tp in b.candidates if tp in done)
            left -= sum(1 for x in b.blocked if x.tp in done)
            if self.mode == "kraft":
                if left > 0:
                    out.append(b)
            elif b.preferred and left / b.preferred > self.threshold_pct / 100:
                out.append(b)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold_percent": self.threshold_pct,
            "mode": self.mode,
            "partitions": self.partitions,
            "balanced": self.balanced,
            "not_preferred_leader": self.not_preferred_total,
            "brokers": [b.to_dict() for b in self.brokers],
        }


def preferred_blocker(p: Partition, alive: set[int]) -> str | None:
    """Why the preferred replica of ``p`` cannot become leader now (None if it can).

    Kafka's ``preferredReplicaPartitionLeaderElection``: ``assignment.head`` must be live and in
    the ISR.
    """
    pref = p.preferred_leader
    if pref is None:
        return "no replicas"
    if pref not in alive:
        return f"preferred replica {pref} is down"
    if pref not in p.isr:
        return f"preferred replica {pref} is not in the ISR {list(p.isr)}"
    return None


def leader_imbalance(
    topo: Topology,
    threshold_pct: float = DEFAULT_IMBALANCE_PCT,
    *,
    mode: str = "zookeeper",
    deleting_topics: Iterable[str] = (),
    topics: Iterable[str] | None = None,
) -> ImbalanceReport:
    """Per-broker leader imbalance and the partitions to elect, as the controller decides."""
    if mode not in ("zookeeper", "kraft"):
        raise ValueError(f"mode must be zookeeper or kraft, not {mode!r}")
    skip = set(deleting_topics)
    only = set(topics) if topics is not None else None
    alive = {b.id for b in topo.brokers if b.alive}
    limit = threshold_pct / 100  # Kafka: config.leaderImbalancePerBrokerPercentage.toDouble / 100

    by_pref: dict[int, list[Partition]] = defaultdict(list)
    n = 0
    for t in topo.topics:
        if t.name in skip or (only is not None and t.name not in only):
            continue
        for p in t.partitions:
            if not p.replicas:
                continue
            by_pref[p.replicas[0]].append(p)
            n += 1

    brokers = []
    for b in sorted(by_pref):
        parts = by_pref[b]
        not_pref = [p for p in parts if (p.leader if p.leader is not None else -1) != b]
        ratio = len(not_pref) / len(parts)
        over = (len(not_pref) > 0) if mode == "kraft" else ratio > limit
        cands, blocked = [], []
        for p in sorted(not_pref, key=lambda p: p.tp):
            why = preferred_blocker(p, alive)
            if why is None:
                cands.append(p.tp)
            else:
                blocked.append(Blocked(p.tp, b, p.leader, why, preferred_live=b in alive))
        brokers.append(
            BrokerImbalance(
                broker=b,
                rack=topo.rack_of(b),
                alive=b in alive,
                preferred=len(parts),
                not_preferred=len(not_pref),
                ratio=ratio,
                over_threshold=over,
                candidates=tuple(cands),
                blocked=tuple(blocked),
            )
        )
    return ImbalanceReport(threshold_pct=threshold_pct, mode=mode, brokers=tuple(brokers), partitions=n)


# ------------------------------------------------------------------------------------------
# Which partitions need an election at all (for ``kops leader elect``)
# ------------------------------------------------------------------------------------------


def election_needed(p: Partition, election_type: str, alive: set[int]) -> bool:
    """Kafka's ``ELECTION_NOT_NEEDED`` test, as both controllers apply it.

    preferred: the leader is not ``replicas[0]``; unclean: no leader, or the leader is not live.
    """
    if election_type == "preferred":
        return p.leader != p.preferred_leader
    return p.leader is None or p.leader not in alive


# ------------------------------------------------------------------------------------------
# Demote / restore: reorder-only plans
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unmovable:
    tp: TopicPartition
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.tp[0],
            "partition": self.tp[1],
            "leader": self.leader,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class LeadershipMove:
    """Reorders (no replica-set change) and preferred elections that move leadership."""

    brokers: tuple[int, ...]  # the brokers being demoted (or restored)
    reorder: Mapping[TopicPartition, tuple[int, ...]]  # new replica order per partition
    original: Mapping[TopicPartition, tuple[int, ...]]  # order before this move
    elect: tuple[TopicPartition, ...]  # preferred elections to run after the reorders
    unmovable: tuple[Unmovable, ...] = ()
    untouched: int = 0  # partitions already fine
    notes: tuple[str, ...] = field(default=())

    def plan(self) -> ReassignmentPlan:
        return ReassignmentPlan.from_assignment(self.reorder)

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokers": list(self.brokers),
            "reorders": [
                {"topic": t, "partition": p, "from": list(self.original[(t, p)]), "to": list(r)}
                for (t, p), r in sorted(self.reorder.items())
            ],
            "elections": [{"topic": t, "partition": p} for t, p in self.elect],
            "unmovable": [u.to_dict() for u in self.unmovable],
            "untouched": self.untouched,
            "notes": list(self.notes),
        }


def demoted_order(
    replicas: Sequence[int], demoted: set[int], isr: Iterable[int] = (), alive: Iterable[int] | None = None
) -> tuple[int, ...] | None:
    """``replicas`` with the demoted brokers moved to the end (stable), such that the first
    replica is live and in the ISR. ``None`` when no non-demoted replica is live and in sync.

    With ``alive=None`` the ISR/liveness check is skipped (used when restoring to an order
    computed earlier).
    """
    keep = [r for r in replicas if r not in demoted]
    tail = [r for r in replicas if r in demoted]
    if alive is None:
        return tuple(keep + tail)
    ok = set(isr) & set(alive)
    head = next((r for r in keep if r in ok), None)
    if head is None:
        return None
    return tuple([head] + [r for r in keep if r != head] + tail)


def _why_unmovable(p: Partition, demoted: set[int], alive: set[int]) -> str:
    others = [r for r in p.replicas if r not in demoted]
    if not others:
        if len(p.replicas) == 1:
            return f"replication factor 1: the only replica is on broker {p.replicas[0]}"
        return f"every replica {list(p.replicas)} is on the brokers being demoted"
    down = [r for r in others if r not in alive]
    out_of_isr = [r for r in others if r in alive and r not in p.isr]
    parts = []
    if down:
        parts.append(f"down: {down}")
    if out_of_isr:
        parts.append(f"not in the ISR {list(p.isr)}: {out_of_isr}")
    return "no other live in-sync replica (" + "; ".join(parts) + ")"


def plan_demote(
    topo: Topology,
    brokers: Iterable[int],
    *,
    already_demoted: Mapping[TopicPartition, tuple[tuple[int, ...], set[int]]] | None = None,
) -> LeadershipMove:
    """Move leadership (and preferred leadership) off ``brokers``.

    ``already_demoted`` maps a partition to (its original order, the brokers already demoted
    on it) from an earlier demotion; the new order then demotes the union, starting from the
    original order, so that restores compose.
    """
    demote = set(brokers)
    prior = already_demoted or {}
    alive = {b.id for b in topo.brokers if b.alive}
    reorder: dict[TopicPartition, tuple[int, ...]] = {}
    original: dict[TopicPartition, tuple[int, ...]] = {}
    elect: list[TopicPartition] = []
    unmovable: list[Unmovable] = []
    untouched = 0
    for p in topo.partitions():
        involved = demote & set(p.replicas)
        if not involved:
            continue
        affects = p.preferred_leader in demote or (p.leader in demote)
        base, was = prior.get(p.tp, (p.replicas, set()))
        if not affects and not was:
            untouched += 1
            continue
        if p.reassigning:
            unmovable.append(Unmovable(p.tp, p.leader, p.replicas, p.isr,
                                       "being reassigned (adding "
                                       f"{list(p.adding_replicas)}, removing {list(p.removing_replicas)})"))
            continue
        if sorted(base) != sorted(p.replicas):  # replica set changed since the earlier demotion
            base, was = p.replicas, set()
        head = p.replicas[0]
        if head not in demote | was and head in alive and head in p.isr:
            target = p.replicas  # the preferred replica is fine: an election is enough
        else:
            target = demoted_order(base, demote | was, p.isr, alive)
        if target is None:
            if p.leader in demote or p.preferred_leader in demote:
                unmovable.append(Unmovable(p.tp, p.leader, p.replicas, p.isr,
                                           _why_unmovable(p, demote | was, alive)))
            else:
                untouched += 1
            continue
        if target != p.replicas:
            reorder[p.tp] = target
            original[p.tp] = p.replicas
        if p.leader != target[0]:
            elect.append(p.tp)
        elif target == p.replicas:
            untouched += 1
    return LeadershipMove(
        brokers=tuple(sorted(demote)),
        reorder=reorder,
        original=original,
        elect=tuple(sorted(elect)),
        unmovable=tuple(sorted(unmovable, key=lambda u: u.tp)),
        untouched=untouched,
    )


@dataclass(frozen=True)
class DemotionRecord:
    """One partition in the demotion state record."""

    original: tuple[int, ...]  # order before the first demotion
    demoted: tuple[int, ...]  # order kops set
    brokers: frozenset[int]  # brokers demoted on this partition

    def to_dict(self) -> dict[str, Any]:
        return {"original": list(self.original), "demoted": list(self.demoted), "brokers": sorted(self.brokers)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DemotionRecord:
        return cls(tuple(d["original"]), tuple(d["demoted"]), frozenset(d["brokers"]))


def plan_restore(
    topo: Topology,
    brokers: Iterable[int],
    records: Mapping[TopicPartition, DemotionRecord],
) -> tuple[LeadershipMove, dict[TopicPartition, DemotionRecord | None]]:
    """Give leadership back to ``brokers``.

    Returns the move and the record updates (``None`` = drop the entry). A partition goes back
    to its original order when none of its demoted brokers remain demoted, otherwise to the
    original order with the still-demoted brokers at the end. A partition whose current order
    is neither what kops set nor the restore target was changed by someone else since: it is
    left alone and reported. Partitions with no record whose preferred replica is one of
    ``brokers`` but that are led by another broker get a preferred election (a broker that
    simply restarted).
    """
    restore = set(brokers)
    alive = {b.id for b in topo.brokers if b.alive}
    reorder: dict[TopicPartition, tuple[int, ...]] = {}
    original: dict[TopicPartition, tuple[int, ...]] = {}
    elect: list[TopicPartition] = []
    unmovable: list[Unmovable] = []
    updates: dict[TopicPartition, DemotionRecord | None] = {}
    notes: list[str] = []
    untouched = 0
    parts = {p.tp: p for p in topo.partitions()}
    for tp, rec in sorted(records.items()):
        if not (rec.brokers & restore):
            continue
        p = parts.get(tp)
        if p is None:
            updates[tp] = None
            notes.append(f"{tp_str(tp)} no longer exists; dropped from the record")
            continue
        still = set(rec.brokers - restore)
        target = demoted_order(rec.original, still) if still else rec.original
        if p.replicas not in (rec.demoted, target):
            unmovable.append(Unmovable(tp, p.leader, p.replicas, p.isr,
                                       f"replica order changed since the demotion (kops set {list(rec.demoted)}); "
                                       "left as is"))
            updates[tp] = None
            continue
        if p.reassigning:
            unmovable.append(Unmovable(tp, p.leader, p.replicas, p.isr, "being reassigned"))
            continue
        if p.replicas != target:
            reorder[tp] = target
            original[tp] = p.replicas
        updates[tp] = DemotionRecord(rec.original, target, frozenset(still)) if still else None
        if p.leader != target[0]:
            why = preferred_blocker(Partition(p.topic, p.partition, target, p.isr, p.leader), alive)
            if why is None:
                elect.append(tp)
            else:
                unmovable.append(Unmovable(tp, p.leader, target, p.isr, why + "; run restore (or rebalance) again later"))
        else:
            untouched += 1
    for tp, p in sorted(parts.items()):
        if tp in updates or tp in records and records[tp].brokers & restore:
            continue
        if p.preferred_leader in restore and p.leader != p.preferred_leader:
            why = preferred_blocker(p, alive)
            if why is None:
                elect.append(tp)
            else:
                unmovable.append(Unmovable(tp, p.leader, p.replicas, p.isr, why))
    return (
        LeadershipMove(
            brokers=tuple(sorted(restore)),
            reorder=reorder,
            original=original,
            elect=tuple(sorted(elect)),
            unmovable=tuple(sorted(unmovable, key=lambda u: u.tp)),
            untouched=untouched,
            notes=tuple(notes),
        ),
        updates,
    )


def leaders_per_broker(topo: Topology) -> dict[int, int]:
    out: dict[int, int] = {b.id: 0 for b in topo.brokers}
    for p in topo.partitions():
        if p.leader is not None and p.leader >= 0:
            out[p.leader] = out.get(p.leader, 0) + 1
    return out

