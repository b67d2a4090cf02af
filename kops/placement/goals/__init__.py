"""The planning goals, registered in one place (:data:`REGISTRY`), in their priority order.

Hard goals first (rack safety; disk capacity threshold, counting data in flight: during a move
source and destination both hold the partition; network-in and network-out capacity thresholds),
then soft ones: replica counts, disk use (bytes where disks are unknown), preferred leaders,
first followers, topic spread (each topic's replicas and leaders per broker within ±1 where the
brokers allow: its leaders can only move inside the leader balance, so it comes after it),
network-in use and leaders' bytes-in (where rates are known). That order is
the default goal set of every planner (:data:`DEFAULT_GOALS`): no plan leaves one of them
further from its band than it found it unless a goal before it forced that, and the report says
which (:func:`kops.placement.metrics.goals_report`).

Each goal is one class (:class:`~kops.placement.goals.base.PlanGoal`): it measures itself on an
assignment for the report (:func:`evaluate`), and an instance tracks it over a plan in progress
(its band, whether a move keeps it, the moves it proposes) for the optimizer
(:mod:`kops.placement.optimizer`). Adding a goal is one class, registered here.

A goal needs data: sizes (``Partition.size_bytes``) for the disk goals, sampled rates
(``Partition.bytes_in_per_s``) for the network and leader-bytes-in goals, capacities
(``Broker.capacity``) for thresholds and percentages. A goal without its data is reported as
``unknown`` with what it needs, never as met. Pure: model objects in, dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kops.model import Topology
from kops.placement.capacity import disk_capacity, disk_used, shared_disks
from kops.placement.goals.base import BAND, DEFAULT_FANOUT, DEFAULT_THRESHOLD, PlanGoal, band
from kops.placement.goals.hard import DiskCapacityGoal, NwInCapacityGoal, NwOutCapacityGoal, RackGoal
from kops.placement.goals.leadership import FirstFollowersGoal, LeaderBytesInGoal, LeadersGoal
from kops.placement.goals.loads import DiskUsageGoal, NwInUsageGoal, ReplicasGoal
from kops.placement.goals.measure import Assignment, Evaluation, count_bound, figures
from kops.placement.goals.topic_spread import TopicSpreadGoal

__all__ = ["BAND", "DEFAULT_FANOUT", "DEFAULT_GOALS", "DEFAULT_THRESHOLD", "GOALS", "HARD", "REGISTRY", "band",
           "by_name", "count_bound", "disk_capacity", "disk_used", "evaluate", "figures", "select_goals",
           "shared_disks"]

#: every goal, hard first, then soft in the default priority order: the one place a goal is added
REGISTRY: tuple[type[PlanGoal], ...] = (
    RackGoal, DiskCapacityGoal, NwInCapacityGoal, NwOutCapacityGoal,
    ReplicasGoal, DiskUsageGoal, LeadersGoal, FirstFollowersGoal, TopicSpreadGoal, NwInUsageGoal, LeaderBytesInGoal,
)
GOALS = tuple(g.name for g in REGISTRY)
HARD = frozenset(g.name for g in REGISTRY if g.hard)
_BY_NAME = {g.name: g for g in REGISTRY}

#: the goals every planner optimises unless ``--goals`` says otherwise (``plan rebalance`` and
#: friends, ``rebalance step``, the playbooks): every goal, in the order above. A goal whose data
#: is missing (sizes, rates) is reported as such and optimises nothing
DEFAULT_GOALS = GOALS



def by_name(name: str) -> type[PlanGoal]:
    return _BY_NAME[name]


def select_goals(goals: Sequence[str] | str | None) -> tuple[str, ...]:
    """The goals a plan optimises, in priority order: hard goals first (always on: a plan never
    breaks them, named or not), then the soft goals named, in the order named. ``None``: the
    default (:data:`DEFAULT_GOALS`); ``"all"`` (or ``["all"]``): every goal in the default order.
    Raises :class:`~kops.errors.BadInput` on an unknown or repeated goal."""
    from kops.errors import BadInput

    if goals is None:
        return DEFAULT_GOALS
    names = [g.strip() for g in (goals.split(",") if isinstance(goals, str) else goals)]
    names = [g for g in names if g]
    if names == ["all"]:
        return GOALS
    bad = [g for g in names if g not in GOALS]
    dup = sorted({g for g in names if names.count(g) > 1})
    if bad or dup or not names:
        why = ("no goal given" if not names else
               f"unknown goal{'s' if len(bad) > 1 else ''} {', '.join(bad)}" if bad else f"{', '.join(dup)} given twice")
        raise BadInput(f"--goals: {why}; goals are {', '.join(GOALS)} (hard: {', '.join(g for g in GOALS if g in HARD)}, "
                       "always on), or all")
    soft = [g for g in names if g not in HARD]
    return tuple(g for g in GOALS if g in HARD) + tuple(soft)


def evaluate(topo: Topology, before: Assignment, after: Assignment, *, brokers: Sequence[int] | None = None,
             threshold: float = DEFAULT_THRESHOLD, fanout: float = DEFAULT_FANOUT, nw_threshold: float | None = None,
             goals: Sequence[str] = GOALS, known: Mapping[str, dict[str, Any]] | None = None,
             band_share: float = BAND, scope: set | None = None,
             counted: Mapping[tuple[str, int | None], Mapping[int, int]] | None = None,
             summed: Mapping[str, Mapping[int, int]] | None = None) -> dict[str, dict[str, Any]]:
    """Each goal of ``goals``: ``{"hard", "unit", "before", "after", "bound", "status", ...}``;
    ``bound`` is what no placement can beat (the mean use for a capacity goal, the least spread
    for a balance goal; None where not computed), ``status`` met / not met (with ``blockers``:
    the brokers or topics that stop it) / reported (a balance figure) / unknown (with ``needs``);
    for a balance goal how far off its band it is (``off_band_before`` / ``_after``, in the unit
    of its figure) and its ``verdict`` (:func:`verdict`).

    ``brokers``: the brokers balanced over (default: the alive ones). ``before`` / ``after``: the
    replica lists of every partition (a plan's whole target, not only its changes); the balance
    goals are measured over the partitions of ``scope`` (default: all; a plan's partitions in
    scope), the capacity goals over all of them. ``known``: goals a caller has measured already
    (the planner's report), taken as they are. ``band_share``: the balance band (:func:`band`).
    ``counted``: per ``(when, slot)`` counts a caller has made already (:meth:`Evaluation.counts`:
    the partitions balanced per broker, at least over ``brokers``), not counted again; ``summed``:
    per ``when``, the bytes per broker over every partition, summed by a caller from sizes that are
    all integers (:meth:`Evaluation.summed`), not summed again."""
    ids = sorted(brokers if brokers is not None else topo.alive_broker_ids)
    ev = Evaluation(topo, before, after, ids, threshold, fanout, nw_threshold, HARD, band_share, scope)
    for (when, slot), c in (counted or {}).items():
        ev.counted(when, slot, c)
    for when, c in (summed or {}).items():
        ev.summed(when, c)
    out: dict[str, dict[str, Any]] = {}
    for goal in goals:
        if known and goal in known:
            out[goal] = dict(known[goal])
        else:
            out[goal] = v = _BY_NAME[goal].measure(ev)
            if "off_band_before" in v:
                v["verdict"] = verdict(v["off_band_before"], v["off_band_after"])
    return out


def verdict(before: float, after: float) -> str:
    """``better``, ``unchanged`` or ``worse``: how far off its band a goal ends against where it began."""
    tol = 1e-9 * max(1.0, abs(before))
    return "worse" if after > before + tol else "better" if after < before - tol else "unchanged"
