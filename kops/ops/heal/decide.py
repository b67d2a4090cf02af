"""What ``kops heal step`` does about the anomalies it sees (pure: no I/O).

:func:`decide` sets each current anomaly's state -- in grace, fixing, refused (and why) -- and
picks at most one fix per run:

- an anomaly younger than its grace (``--broker-grace``) is left alone: nothing is moved for a
  broker that comes back within it;
- too much down at once (``too_much_down``) is an outage or a maintenance: reported (exit 3),
  nothing is moved for any broker; a pause of kops' cron jobs (an operator's, or a playbook run's)
  or another execution in progress: reported, nothing moved (exit 0);
- partitions without an in-sync replica are never "fixed" by moving data (exit 3, the runbook
  named: :data:`NO_ISR_RUNBOOK`);
- a kind not in ``--fix`` is reported only; outside ``--window`` only the urgent kinds
  (a broker failure) are fixed, the others wait for the window;
- otherwise, in this order: dead brokers past their grace -> their replicas re-created on live
  brokers by the decommission planner (:func:`kops.placement.balancer.plan`, the goal
  ``decommission`` of the dead brokers, forced moves only: own rack first, rack-safe, within
  the disk limit); rack-unsafe partitions -> the planner's rack repairs; new empty brokers ->
  the add-brokers planner. Bounded by the step's bounds (the caller's planning,
  :func:`kops.ops.replica_rebalance.plan_step`).

:func:`planning_topology` is what the planner is given: the dead brokers with the racks they had
(so their replicas go to their own rack first), without the partitions that must wait (a replica
on a dead broker still in its grace, no in-sync replica).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kops.errors import EXIT_NOT_DONE, EXIT_OK
from kops.model import Topology
from kops.ops.heal.anomalies import (
    BROKER_FAILURE,
    DISK_OVER,
    DEFAULT_FIX,
    LOG_DIR_FAILURE,
    FIXING,
    IN_GRACE,
    NEW_BROKER,
    NO_ISR,
    RACK_UNSAFE,
    REFUSED,
    TOO_MUCH_DOWN,
    UNBALANCED,
    URGENT,
    Anomaly,
    iso,
)
from kops.placement.scope import Goal

#: the documented way back for partitions without an in-sync replica
NO_ISR_RUNBOOK = "docs/self-healing.md#partitions-without-an-in-sync-replica (an unclean election: `kops leader elect --election-type unclean`, which can lose acknowledged writes)"
DEFAULT_BROKER_GRACE_S = 30 * 60.0
DEFAULT_MAX_DEAD_BROKERS = 1
#: which fix goes first when several could (one fix per run)
FIX_ORDER = (BROKER_FAILURE, LOG_DIR_FAILURE, DISK_OVER, RACK_UNSAFE, NEW_BROKER, UNBALANCED)
#: a failed log dir's replicas are planned as if they were on a dead broker of this id plus the
#: broker's own (the decommission planner re-creates them, own rack first, while the broker keeps
#: its other replicas and is closed to new ones for the fix); far above any broker id in use
OFFLINE_REPLICA_ID_BASE = 2_000_000_000


@dataclass(frozen=True)
class Settings:
    broker_grace_s: float = DEFAULT_BROKER_GRACE_S
    max_dead_brokers: int = DEFAULT_MAX_DEAD_BROKERS
    fix: frozenset[str] = frozenset(DEFAULT_FIX)
    #: a share of a broker's disk: above it, ``disk_over_threshold`` (None: disks not looked at);
    #: the plans of every fix keep each destination under it, as ``plan --disk-threshold``
    disk_threshold: float | None = None

    def grace(self, kind: str) -> float:
        """How long an anomaly of ``kind`` is watched before heal acts on it (an outage and
        partitions without ISR are reported at once)."""
        return 0.0 if kind in (TOO_MUCH_DOWN, NO_ISR) else self.broker_grace_s

    def to_dict(self) -> dict[str, Any]:
        return {"broker_grace_s": self.broker_grace_s, "max_dead_brokers": self.max_dead_brokers,
                "fix": sorted(self.fix),
                "disk_threshold_pct": None if self.disk_threshold is None else round(self.disk_threshold * 100, 3)}


@dataclass(frozen=True)
class Fix:
    """The one fix of a run: the planner's goal and the anomalies it mends."""

    kind: str
    goal: Goal
    keys: tuple[str, ...]
    #: balancing moves allowed (filling new brokers); False: only the moves the goal forces
    rebalance: bool = False
    #: the planner's goals (None: its default set); forced moves only: no leadership goal, so
    #: that no other partition's replica order (its preferred leader) changes
    goals: tuple[str, ...] | None = None

    def describe(self) -> str:
        if self.kind == BROKER_FAILURE:
            return f"re-create the replicas of dead brokers {list(self.goal.brokers)} on live brokers"
        if self.kind == LOG_DIR_FAILURE:
            failed = [b - OFFLINE_REPLICA_ID_BASE for b in self.goal.brokers]
            return f"re-create the replicas of the failed log dirs of brokers {failed} on other brokers"
        if self.kind == NEW_BROKER:
            return f"fill new brokers {list(self.goal.brokers)}"
        if self.kind == DISK_OVER:
            over = ", ".join(k.rpartition("/")[2] for k in self.keys)
            return f"move data off brokers {over}, over the disk threshold (a bounded step of the disk-use balance)"
        if self.kind == UNBALANCED:
            return "a bounded rebalance step (replica counts, preferred leaders and the rest of the default goal set)"
        return "repair rack-unsafe partitions"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "goal": self.goal.to_dict(), "anomalies": list(self.keys),
                "rebalance": self.rebalance, "goals": None if self.goals is None else list(self.goals),
                "what": self.describe()}


@dataclass
class Decision:
    anomalies: list[Anomaly]
    fix: Fix | None = None
    exit_code: int = EXIT_OK
    #: why nothing is moved this run (an outage, a pause, another execution), when that is so
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def _duration(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def decide(anomalies: Sequence[Anomaly], *, settings: Settings, now: float, blocked: str | None = None,
           closed: str | None = None) -> Decision:
    """The states of ``anomalies`` (copies; see the module doc) and the run's fix. ``blocked``:
    why no kops cron job may move anything now (a pause, another execution or reassignment);
    ``closed``: why the non-urgent fixes wait (outside the maintenance window), urgent ones
    (:data:`~kops.ops.heal.anomalies.URGENT`) go on."""
    out = [replace(a, fixes=list(a.fixes)) for a in anomalies]
    kinds = {a.kind for a in out}
    outage = next((a for a in out if a.kind == TOO_MUCH_DOWN), None)
    exit_code = EXIT_OK
    reason = None
    candidates: dict[str, list[Anomaly]] = {}
    for a in out:
        grace = settings.grace(a.kind)
        if a.kind == TOO_MUCH_DOWN:
            a.state, a.why = REFUSED, f"{a.detail}: an outage or a maintenance, not a job for automation; nothing is moved"
            exit_code, reason = EXIT_NOT_DONE, a.why
        elif a.kind == NO_ISR:
            a.state, a.why = REFUSED, f"moving data cannot bring back a partition without an in-sync replica; see {NO_ISR_RUNBOOK}"
            exit_code = EXIT_NOT_DONE
        elif a.age(now) < grace:
            a.state = IN_GRACE
            # no age in it: the record stays the same from run to run (its age is in age_s)
            a.why = f"grace {_duration(grace)}: heal acts after {iso(a.first_seen + grace)} if it is still there"
        elif outage is not None:
            a.state, a.why = REFUSED, f"too much down at once ({outage.detail}): nothing is moved"
        elif blocked is not None:
            a.state, a.why = REFUSED, f"waits: {blocked}"
        elif a.kind not in settings.fix:
            a.state, a.why = REFUSED, f"not in --fix ({', '.join(sorted(settings.fix)) or 'nothing'}): reported only"
        elif closed is not None and a.kind not in URGENT:
            a.state, a.why = REFUSED, f"waits: {closed}"
        elif a.kind == LOG_DIR_FAILURE and not a.count:
            a.state, a.why = REFUSED, ("nothing to re-create: no replica is on the failed dir (now); replace the disk and "
                                       "restart the broker to bring the dir back")
        elif a.kind == NEW_BROKER and BROKER_FAILURE in kinds:
            a.state, a.why = REFUSED, "waits: new brokers are filled once no broker is down"
        else:
            candidates.setdefault(a.kind, []).append(a)
    if blocked is not None and reason is None:
        reason = blocked
    if closed is not None and reason is None and any(a.why == f"waits: {closed}" for a in out):
        reason = closed
    fix = None
    for kind in FIX_ORDER:
        chosen = candidates.pop(kind, None)
        if not chosen:
            continue
        if fix is None:
            fix = _fix(kind, chosen)
            for a in chosen:
                a.state, a.why = FIXING, fix.describe()
        else:
            for a in chosen:
                a.state, a.why = REFUSED, f"waits: one fix per run, this one: {fix.describe()}"
    return Decision(out, fix, exit_code, reason)


#: goals that only reorder replica lists (preferred leaders, first followers)
LEADERSHIP_GOALS = ("leaders", "first-followers", "leader-bytes-in")


def forced_goals() -> tuple[str, ...]:
    """The planner's goals for a fix of forced moves: every goal but the leadership ones (they
    would reorder partitions the fix does not need to touch)."""
    from kops.placement.goals import DEFAULT_GOALS

    return tuple(g for g in DEFAULT_GOALS if g not in LEADERSHIP_GOALS)


def _fix(kind: str, chosen: Sequence[Anomaly]) -> Fix:
    keys = tuple(a.key for a in chosen)
    brokers = tuple(sorted({b for a in chosen for b in a.brokers}))
    if kind == BROKER_FAILURE:
        return Fix(kind, Goal("decommission", brokers=brokers), keys, goals=forced_goals())
    if kind == LOG_DIR_FAILURE:
        return Fix(kind, Goal("decommission", brokers=tuple(OFFLINE_REPLICA_ID_BASE + b for b in brokers)), keys,
                   goals=forced_goals())
    if kind == NEW_BROKER:
        return Fix(kind, Goal("add-brokers", brokers=brokers), keys, rebalance=True)
    if kind == DISK_OVER:  # a bounded step of `plan rebalance --goals disk-usage` (hard goals kept)
        return Fix(kind, Goal("rebalance"), keys, rebalance=True, goals=("disk-usage",))
    if kind == UNBALANCED:  # a bounded step of `plan rebalance` with the default goal set
        return Fix(kind, Goal("rebalance"), keys, rebalance=True)
    return Fix(kind, Goal("rebalance"), keys, goals=forced_goals())


@dataclass(frozen=True)
class Scope:
    """What the planner is given (:func:`planning_topology`) and what waits."""

    topology: Topology
    #: partitions left out, and why (``topic-p: why``)
    held_back: tuple[str, ...] = ()


def planning_topology(topo: Topology, racks: Mapping[int, str | None], fix: Fix) -> Scope:
    """The topology the fix is planned on: dead brokers carry the racks they had while
    registered (their replicas go to their own rack first); partitions with a replica on a dead
    broker the fix does not cover (still in its grace) wait, as do partitions without an
    in-sync replica or leader (nothing can copy them)."""
    if fix.kind == LOG_DIR_FAILURE:
        topo = _offline_on_stand_ins(topo, {b - OFFLINE_REPLICA_ID_BASE for b in fix.goal.brokers})
    alive = {b.id for b in topo.brokers if b.alive}
    covered = set(fix.goal.brokers) if fix.kind in (BROKER_FAILURE, LOG_DIR_FAILURE) else set()
    held: list[str] = []
    topics = []
    for t in topo.topics:
        keep = []
        for p in t.partitions:
            waiting = [b for b in p.replicas if b not in alive and b not in covered]
            if waiting:
                held.append(f"{p.topic}-{p.partition}: a replica on broker {waiting[0]}, down but not past its grace")
            elif not p.isr or p.offline:
                held.append(f"{p.topic}-{p.partition}: no in-sync replica or leader to copy from")
            else:
                keep.append(p)
        topics.append(replace(t, partitions=tuple(keep)))
    brokers = tuple(replace(b, rack=racks.get(b.id)) if not b.alive and b.rack is None else b for b in topo.brokers)
    return Scope(replace(topo, brokers=brokers, topics=tuple(topics)), tuple(held))


def _offline_on_stand_ins(topo: Topology, failed: set[int]) -> Topology:
    """The topology with each offline replica of a broker in ``failed`` on a dead stand-in broker
    (:data:`OFFLINE_REPLICA_ID_BASE` + its id, in its rack) and those brokers closed to new
    replicas: the decommission of the stand-ins moves exactly the replicas the failed dirs held,
    own rack first, never back onto the broker whose disk failed, and the planner counts the
    broker's other replicas where they are."""
    from kops.model import Broker

    stand_in = {b: OFFLINE_REPLICA_ID_BASE + b for b in failed}
    topics = []
    for t in topo.topics:
        parts = []
        for p in t.partitions:
            off = set(p.offline_replicas) & failed
            if off:
                p = replace(p, replicas=tuple(stand_in[r] if r in off else r for r in p.replicas),
                            isr=tuple(r for r in p.isr if r not in off), offline_replicas=())
            parts.append(p)
        topics.append(replace(t, partitions=tuple(parts)))
    brokers = [replace(b, cordoned=True) if b.id in failed else b for b in topo.brokers]
    rack = {b.id: b.rack for b in topo.brokers}
    brokers += [Broker(id=stand_in[b], rack=rack.get(b), alive=False) for b in sorted(failed)]
    return replace(topo, brokers=tuple(brokers), topics=tuple(topics))
