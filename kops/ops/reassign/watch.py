"""``kops reassign list --watch``: the reassignments in flight, whoever started them, and how fast
each broker sends and receives their data, read again every few seconds.

Kafka reports no per-reassignment rate, and kops needs no metrics stack: each refresh asks the
brokers (DescribeLogDirs) how big the new replicas on their destinations are. What a new replica
grew between two refreshes came **in** to its destination and went **out** of the partition's
leader (followers fetch from the leader; a leader that is being replaced keeps serving until the
move ends). :func:`broker_flows` is pure: two samples in, rates per broker out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kops.model import TopicPartition

Replica = tuple[str, int, int]  # topic, partition, broker


@dataclass(frozen=True)
class FlowSample:
    """The new replicas' sizes at one moment, and the leaders serving them."""

    t: float
    #: bytes held by each replica being added (DescribeLogDirs)
    copied: Mapping[Replica, int] = field(default_factory=dict)
    #: the leader of each partition being moved (None: offline)
    leaders: Mapping[TopicPartition, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Flow:
    """Bytes per second a broker receives (as a destination) and sends (as a leader) for moves."""

    in_bps: float = 0.0
    out_bps: float = 0.0


def broker_flows(before: FlowSample, now: FlowSample) -> dict[int, Flow]:
    """Per broker, the rate at which the new replicas grew between two samples: into their
    destinations, out of their partitions' leaders. A replica not in both samples (a move that
    started or ended in between) counts nothing; one that shrank (its log truncated, or deleted
    and started again) counts nothing either."""
    dt = now.t - before.t
    if dt <= 0:
        return {}
    into: dict[int, float] = {}
    out: dict[int, float] = {}
    for key, size in now.copied.items():
        grown = size - before.copied.get(key, size)
        if grown <= 0:
            continue
        topic, partition, broker = key
        into[broker] = into.get(broker, 0.0) + grown / dt
        leader = now.leaders.get((topic, partition))
        if leader is not None:
            out[leader] = out.get(leader, 0.0) + grown / dt
    return {b: Flow(into.get(b, 0.0), out.get(b, 0.0)) for b in sorted(set(into) | set(out))}


def sample(conn, rows: list[dict[str, Any]]) -> FlowSample:
    """The sizes of the replicas ``rows`` (:func:`kops.ops.reassign.list_all`'s reassignments)
    are adding, and their partitions' leaders: one metadata read and one DescribeLogDirs round of
    the destinations, for the topics being moved only."""
    from kops.cluster.topology import ReadOptions, log_dir_usage, read_topology

    t = time.monotonic()
    if not rows:
        return FlowSample(t)
    topics = sorted({r["topic"] for r in rows})
    topo = read_topology(conn, ReadOptions(with_configs=False, with_sizes=False, with_reassignments=False,
                                           topics=tuple(topics)))
    moving = {(r["topic"], r["partition"]): r for r in rows}
    leaders = {p.tp: p.leader for p in topo.partitions() if p.tp in moving}
    adding = {(t_, p, b) for (t_, p), r in moving.items() for b in r["adding"]}
    usage = log_dir_usage(conn, sorted({b for _, _, b in adding}), topics) if adding else None
    sizes = usage.replica_sizes() if usage is not None else {}
    return FlowSample(t, {k: sizes[k] for k in adding if k in sizes}, leaders)


__all__ = ["Flow", "FlowSample", "broker_flows", "sample"]
