"""``kops reassign generate``: Kafka's ``--generate`` (current + proposed assignment for the
topics to move onto a broker list), with two strategies:

- ``minimal`` (default): the minimal-movement rack-safe planner (:mod:`kops.placement.balancer`);
- ``kafka``: Kafka's own ``assignReplicasToBrokers`` per topic with random start index and
  shift (as ``kafka-reassign-partitions.sh --generate`` does), so almost every replica moves.

Pure (takes a Topology); the CLI reads the topology (live or ``--topology FILE``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kops.errors import BadInput
from kops.model import ReassignmentPlan, TopicPartition, Topology

STRATEGIES = ("minimal", "kafka")


@dataclass
class Generated:
    strategy: str
    current: ReassignmentPlan
    proposed: ReassignmentPlan
    report: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "current": self.current.to_dict(),
            "proposed": self.proposed.to_dict(),
            "report": self.report,
        }


def generate(
    topo: Topology,
    topics: list[str],
    brokers: list[int],
    *,
    strategy: str = "minimal",
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> Generated:
    if strategy not in STRATEGIES:
        raise BadInput(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    problems = []
    missing = [t for t in topics if topo.topic(t) is None]
    if missing:
        problems.append(f"unknown topic{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    unknown = [b for b in brokers if topo.broker(b) is None]
    if unknown:
        problems.append(
            f"--broker-list: unknown broker{'s' if len(unknown) > 1 else ''} {unknown} "
            f"(brokers: {sorted(b.id for b in topo.brokers)})"
        )
    if problems:
        raise BadInput("cannot generate a plan; nothing was changed", details=problems)
    current: dict[TopicPartition, tuple[int, ...]] = {
        p.tp: tuple(p.replicas) for t in topics for p in topo.topic(t).partitions
    }
    if strategy == "kafka":
        proposed = _kafka(topo, topics, brokers, rack_aware=rack_aware, rng=rng or random.Random())
    else:
        if not rack_aware:
            raise BadInput("--disable-rack-aware applies to --strategy kafka only (the minimal planner is always rack-safe)")
        from kops.placement.balancer import plan_move_topics

        res = plan_move_topics(topo, topics, brokers, compare_kafka=False)
        proposed = {tp: tuple(res.target.get(tp, reps)) for tp, reps in current.items()}
    moved = {tp for tp in current if set(proposed[tp]) != set(current[tp])}
    replicas_moved = sum(len(set(proposed[tp]) - set(current[tp])) for tp in current)
    size = {p.tp: p.size_bytes for t in topics for p in topo.topic(t).partitions}
    bytes_moved = None
    if all(size[tp] is not None for tp in moved):
        bytes_moved = sum(size[tp] * len(set(proposed[tp]) - set(current[tp])) for tp in moved)
    report = {
        "partitions": len(current),
        "partitions_changed": sum(1 for tp in current if proposed[tp] != current[tp]),
        "partitions_moving_data": len(moved),
        "replicas_moved": replicas_moved,
        "bytes_moved": bytes_moved,
    }
    return Generated(strategy, ReassignmentPlan.from_assignment(current),
                     ReassignmentPlan.from_assignment(proposed), report)


def _kafka(topo: Topology, topics: list[str], brokers: list[int], *, rack_aware: bool,
           rng: random.Random) -> dict[TopicPartition, tuple[int, ...]]:
    from kops.placement.kafka_assign import assign_topics

    metas = [(b, topo.rack_of(b)) for b in sorted(brokers)]
    if rack_aware and any(r is None for _, r in metas) and any(r is not None for _, r in metas):
        raise BadInput(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to "
            "make replica assignment without rack information."
        )
    out: dict[TopicPartition, tuple[int, ...]] = {}
    partitions = [topo.topic(name).partitions for name in sorted(topics)]
    sizes = ((len(parts), len(parts[0].replicas)) for parts in partitions)  # (read as each topic's turn comes)
    for parts, assignment in zip(partitions, assign_topics(metas, sizes, rack_aware=rack_aware, rng=rng)):
        for p in parts:
            out[p.tp] = tuple(assignment[p.partition])
    return out
