"""``kops leader balance-plan``: a reorder-only plan (replica sets unchanged, no data moves)
that balances preferred leaders and first followers (:func:`kops.placement.leaders.balance_leaders`),
with the counts before and after for the report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kops.model import ReassignmentPlan, TopicPartition, Topology
from kops.placement.leaders import balance_leaders, slot_counts
from kops.placement.topic_filter import TopicFilter

__all__ = ["LeaderPlan", "leader_balance_plan"]


@dataclass(frozen=True)
class LeaderPlan:
    plan: ReassignmentPlan
    reordered: int  # partitions whose order changes
    considered: int  # partitions of the topics asked for (and kept by the filter)
    before: dict[str, Any]
    after: dict[str, Any]
    topics_left_out: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "partitions_reordered": self.reordered, "replica_set_changes": 0,
                "before": self.before, "after": self.after,
                **({"topics_left_out": self.topics_left_out} if self.topics_left_out is not None else {})}


def leader_balance_plan(topo: Topology, *, topics: Sequence[str] = (), scope: TopicFilter | None = None,
                        followers: bool = True) -> LeaderPlan:
    """The plan over ``topics`` (default every topic) kept by ``scope`` (``--topics`` /
    ``--exclude-topics``; BadInput when it keeps none or leaves out a topic named), among the
    live brokers; ``followers=False`` balances preferred leaders only."""
    left_out = None
    if scope is not None:
        scope.check_named(topics, "--topic")
        left_out = scope.left_out(topo)
    current = {p.tp: p.replicas for p in topo.partitions()
               if (not topics or p.topic in topics) and (scope is None or scope.keeps(p.topic))}
    brokers = topo.alive_broker_ids
    balanced = balance_leaders(current, brokers=brokers, followers=followers)
    changed = {tp: r for tp, r in balanced.items() if tuple(r) != tuple(current[tp])}
    assert all(sorted(changed[tp]) == sorted(current[tp]) for tp in changed)  # reorder only
    return LeaderPlan(ReassignmentPlan.from_assignment(changed), len(changed), len(current),
                      _counts(topo, current, brokers), _counts(topo, balanced, brokers), left_out)


def _counts(topo: Topology, asg: Mapping[TopicPartition, Sequence[int]], brokers) -> dict[str, Any]:
    lead = slot_counts(asg.values(), brokers, 0)
    foll = slot_counts(asg.values(), brokers, 1)
    racks: dict[str, int] = {}
    for b, n in lead.items():
        r = topo.rack_of(b) or "-"
        racks[r] = racks.get(r, 0) + n

    def spread(d: Mapping[Any, int]) -> int:
        return (max(d.values()) - min(d.values())) if d else 0

    return {"preferred_leaders": {str(k): v for k, v in lead.items()},
            "first_followers": {str(k): v for k, v in foll.items()},
            "preferred_leaders_per_rack": racks,
            "leader_spread": spread(lead), "follower_spread": spread(foll), "rack_spread": spread(racks)}
