"""Minimal-movement, rack-safe replica planner (``kops plan rebalance | decommission | ...``): the
public entry points.

Pure: takes a :class:`~kops.model.Topology` and a :class:`Goal`, returns a :class:`PlanResult`
(target assignment, Kafka reassignment plan of the partitions that change, report). No I/O.
See ``docs/planner.md`` for the algorithm, the guarantees and how the lower bound is computed.

The work is done on a :class:`~kops.placement.state.PlacementState` by the
:class:`~kops.placement.optimizer.Optimizer`, which runs the goals (:mod:`kops.placement.goals`)
in priority order: the forced moves (:mod:`~kops.placement.repair`), phase 2's balance
(:mod:`~kops.placement.balance`), each later goal without making an earlier one worse, then
leadership by reordering. :mod:`kops.placement.metrics` reports the plan.

Bounded mode (``max_moves`` / ``max_bytes``): the moves stop once the budget is used; a
partition's repair is all-or-nothing, every single move keeps its list rack-safe and brings the
cluster closer to the target, so each partial plan is safe on its own and repeated runs converge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kops.errors import BadInput
from kops.model import ReassignmentPlan, TopicPartition, Topology
from kops.placement import metrics
from kops.placement.collector import paused
from kops.placement.goals import BAND, DEFAULT_THRESHOLD, select_goals
from kops.placement.optimizer import FORCED, Optimizer
from kops.placement.scope import GOAL_KINDS, Goal, resolve  # noqa: F401 (GOAL_KINDS: public)
from kops.placement.state import PlacementState
from kops.placement.topic_filter import TopicFilter

__all__ = [
    "GOAL_KINDS",
    "Goal",
    "PlanResult",
    "plan",
    "plan_rebalance",
    "plan_decommission",
    "plan_add_brokers",
    "plan_drain_rack",
    "plan_set_replication_factor",
    "plan_move_topics",
    "KAFKA_SEED",
]


#: seed of the ``random.Random`` used for "what Kafka's --generate would propose" (Kafka draws
#: its start index and shift at random; kops fixes the draws so its reports are reproducible)
KAFKA_SEED = 0


@dataclass
class PlanResult:
    goal: Goal
    #: full target assignment of the partitions in scope (tp -> replicas, preferred leader first)
    target: dict[TopicPartition, tuple[int, ...]]
    #: only the partitions whose replica list changes (set or order)
    changes: dict[TopicPartition, tuple[int, ...]]
    #: the report (JSON-ready, deterministic); see docs/planner.md
    report: dict[str, Any]
    #: True when this plan reaches the goal (False: a bounded step; run again after it)
    complete: bool = True
    before: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    @property
    def plan(self) -> ReassignmentPlan:
        return ReassignmentPlan.from_assignment(self.changes)

    def topology_after(self, topology: Topology) -> Topology:
        return topology.with_assignment(self.changes)


# ---------------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------------
#: default hard limit of a broker's disk use a plan may reach (issue 21's disk capacity goal)
DISK_THRESHOLD = 0.80


def plan(
    topology: Topology,
    goal: Goal,
    *,
    max_moves: int | None = None,
    max_bytes: int | None = None,
    throttle: int | None = None,
    compare_kafka: bool = True,
    kafka_seed: int = KAFKA_SEED,
    balance_followers: bool = True,
    rebalance: bool = True,
    disk_threshold: float = DISK_THRESHOLD,
    goals: Sequence[str] | str | None = None,
    band: float = BAND,
    topics: TopicFilter | None = None,
) -> PlanResult:
    """Compute a minimal-movement, rack-safe, balanced plan for ``goal``.

    ``disk_threshold`` (a share of a broker's disk, default 80 %) is a hard limit where disk
    capacities and sizes are known: no move of the plan takes a destination past it, counting
    data in flight (a destination holds its new replicas before any source lets go of one).
    A move the goal forces (a removed broker's replicas) that fits nowhere still goes where it
    is most even, and the report's ``disk-capacity`` goal names the brokers past the limit.

    ``goals``: the goals to optimise, in priority order (``--goals``; default
    :data:`kops.placement.goals.DEFAULT_GOALS`, ``"all"`` every goal): hard goals are always
    kept; phase 2 balances the first balance goal whose data is known (disk use, network-in use,
    replica counts) and the optimizer (:mod:`kops.placement.optimizer`) the later ones, each without making an
    earlier one worse. The network-in limit (80 % of NW_IN) is hard where capacities and rates
    are known.

    ``band``: the balance goals' band (disk use, network-in use, leaders' bytes-in): a broker
    within this share of the mean (or within its largest partition of it) is balanced.

    ``topics``: the topics the plan may change (``--topics`` / ``--exclude-topics``); the
    others keep their replicas and are left out of every measure and goal (the balance is that
    of the topics kept), and the report's ``topics_left_out`` says what was left out. BadInput
    when the filter keeps no topic or leaves out a topic the goal names.

    Cordoned brokers (``Broker.cordoned``) keep their replicas and get no new one; a forced
    move that only a cordoned broker could take is refused (BadInput).

    ``rebalance=False``: only the moves the goal forces (replicas off removed brokers, RF
    changes, rack repairs) plus leadership reordering; no balancing moves.

    Raises :class:`BadInput` when the goal is malformed or cannot be met (naming the partitions,
    brokers and racks in conflict). Deterministic: the same topology and goal give the same plan.
    """
    if max_moves is not None and max_moves < 0:
        raise BadInput(f"--max-moves must be >= 0 (got {max_moves})")
    if max_bytes is not None and max_bytes < 0:
        raise BadInput(f"--max-bytes must be >= 0 (got {max_bytes})")
    if throttle is not None and throttle <= 0:
        raise BadInput(f"--throttle must be > 0 bytes/s (got {throttle})")
    if not 0 <= band <= 10:
        raise BadInput(f"the balance band must be between 0 and 1000 % of the mean (got {band:.0%})")
    if not 0 < disk_threshold <= 1:
        raise BadInput(f"the disk threshold must be above 0 and at most 100 % (got {disk_threshold:.0%})")
    chosen = select_goals(goals)
    left_out = None
    if topics is not None:
        topics.check_named(goal.topics, goal.kind)
        left_out = topics.left_out(topology)
    # the plan's passes allocate millions of small containers, none in a reference cycle: the
    # cyclic garbage collector is paused while they run (:mod:`kops.placement.collector`)
    with paused():
        keep_topic = None if topics is None else topics.keeps
        st = PlacementState(topology, goal, resolve(topology, goal, keep_topic), max_moves, max_bytes, band)
        optimizer = Optimizer(st, chosen, followers=balance_followers, rebalance=rebalance)
        st.limits.limit_disks(st, disk_threshold)
        st.limits.limit_network(st, DEFAULT_THRESHOLD)
        # cordoned brokers keep their replicas and get no new one (``kops broker cordon``)
        cordoned = sorted(b.id for b in topology.brokers if b.cordoned and b.id in st.allowed_set)
        st.limits.close(cordoned)
        before = {tp: tuple(r) for tp, r in zip(st.parts.tps, st.parts.orig)}
        done = optimizer.run()
        lower = metrics.lower_bound(st, done.prepared.counts)
        kafka = metrics.kafka_generate(st, kafka_seed) if compare_kafka else None
        report = metrics.build_report(st, before, done.target, done.changes, lower, kafka, throttle, done.complete)
        report["goals_optimised"] = {"order": list(chosen), "phase2": st.loads.primary, "moves_per_goal": done.moves_per_goal,
                                     "capacity_shares": st.loads.capw is not None, "without_data": done.without_data,
                                     "stages": [{"stage": goal.kind if what == FORCED else what, "replicas_moved": n,
                                                 "off_band": {g: round(x, 1) for g, x in off.items()}}
                                                for what, n, off in done.stages]}
        report["goals"] = metrics.goals_report(st, report, done, chosen)
    if cordoned:
        report["cordoned"] = cordoned
        many = len(cordoned) > 1
        report["notes"] = [*report.get("notes", []),
                           f"broker{'s' if many else ''} {', '.join(map(str, cordoned))} cordoned: "
                           f"{'they keep the replicas they hold and get' if many else 'it keeps the replicas it holds and gets'}"
                           " no new one (kops broker cordons)"]
    if left_out is not None:
        report["topics_left_out"] = left_out
    return PlanResult(goal, done.target, done.changes, report, done.complete, before)


def plan_rebalance(topology: Topology, **kw: Any) -> PlanResult:
    return plan(topology, Goal("rebalance"), **kw)


def plan_decommission(topology: Topology, brokers: Iterable[int], **kw: Any) -> PlanResult:
    return plan(topology, Goal("decommission", brokers=tuple(brokers)), **kw)


def plan_add_brokers(topology: Topology, brokers: Iterable[int], **kw: Any) -> PlanResult:
    return plan(topology, Goal("add-brokers", brokers=tuple(brokers)), **kw)


def plan_drain_rack(topology: Topology, rack: str, **kw: Any) -> PlanResult:
    return plan(topology, Goal("drain-rack", rack=rack), **kw)


def plan_set_replication_factor(
    topology: Topology, topics: Iterable[str] | str, replication_factor: int, **kw: Any
) -> PlanResult:
    names = (topics,) if isinstance(topics, str) else tuple(topics)
    return plan(topology, Goal("set-replication-factor", topics=names, replication_factor=replication_factor), **kw)


def plan_move_topics(topology: Topology, topics: Iterable[str], brokers: Iterable[int], **kw: Any) -> PlanResult:
    return plan(topology, Goal("move-topics", topics=tuple(topics), brokers=tuple(brokers)), **kw)
