"""What a plan's goal asks for: the brokers replicas may live on, the partitions the plan may
change, and each one's target replication factor (``kops plan rebalance | decommission |
add-brokers | drain-rack | set-replication-factor | move-topics``). Pure; raises
:class:`~kops.errors.BadInput` naming the brokers, racks or topics when a goal is malformed or
cannot be met."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kops.errors import BadInput
from kops.model import Partition, Topology

GOAL_KINDS = ("rebalance", "decommission", "add-brokers", "drain-rack", "set-replication-factor", "move-topics")


@dataclass(frozen=True)
class Goal:
    """What the plan must achieve.

    ``kind`` is one of :data:`GOAL_KINDS`; ``brokers``: brokers to remove (decommission), to fill
    (add-brokers) or the target broker list (move-topics); ``rack``: the rack (or rack-path prefix
    such as ``/dc1``) to drain; ``topics``: topics for set-replication-factor / move-topics.
    """

    kind: str
    brokers: tuple[int, ...] = ()
    rack: str | None = None
    topics: tuple[str, ...] = ()
    replication_factor: int | None = None

    def describe(self) -> str:
        k = self.kind
        if k == "decommission":
            return f"decommission brokers {list(self.brokers)}"
        if k == "add-brokers":
            return f"move load onto new brokers {list(self.brokers)}"
        if k == "drain-rack":
            return f"drain rack {self.rack}"
        if k == "set-replication-factor":
            return f"set replication factor {self.replication_factor} for {', '.join(self.topics)}"
        if k == "move-topics":
            return f"move {', '.join(self.topics)} onto brokers {list(self.brokers)}"
        return "rebalance"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        if self.brokers:
            d["brokers"] = list(self.brokers)
        if self.rack is not None:
            d["rack"] = self.rack
        if self.topics:
            d["topics"] = list(self.topics)
        if self.replication_factor is not None:
            d["replication_factor"] = self.replication_factor
        return d


# ---------------------------------------------------------------------------------------------
# goal resolution
# ---------------------------------------------------------------------------------------------
@dataclass
class Resolved:
    allowed: list[int]  # sorted broker ids replicas may live on
    scope: list[Partition]  # partitions the plan may change, sorted by (topic, partition)
    rf: list[int]  # target replication factor per scope partition
    dest_only: set[int] | None  # balance moves may only go to these (add-brokers)
    notes: list[str]


def _fmt_ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


def _rack_members(topo: Topology, rack: str) -> list[int]:
    out = []
    for b in topo.brokers:
        r = b.rack
        if r is None:
            continue
        if r == rack or (rack.startswith("/") and r.startswith(rack.rstrip("/") + "/")):
            out.append(b.id)
    return sorted(out)


def resolve(topo: Topology, goal: Goal, keep_topic: Callable[[str], bool] | None = None) -> Resolved:
    """What ``goal`` asks of ``topo``. ``keep_topic``: the topics the plan may change (a topic
    filter, ``--topics`` / ``--exclude-topics``); the others are out of scope: not moved, not
    counted, and a goal that empties brokers says which of their replicas stay."""
    if goal.kind not in GOAL_KINDS:
        raise BadInput(f"unknown goal {goal.kind!r}; one of {', '.join(GOAL_KINDS)}")
    known = topo.broker_map
    alive = [b for b in topo.alive_broker_ids]
    notes: list[str] = []
    all_parts = sorted(topo.partitions(), key=lambda p: p.tp)
    dest_only: set[int] | None = None

    def unknown_brokers(ids: Iterable[int]) -> None:
        bad = sorted(set(ids) - set(known))
        if bad:
            raise BadInput(
                f"brokers {bad} are not in the cluster (known brokers: {_fmt_ids(sorted(known))})"
            )

    def topics_of(names: Sequence[str]) -> list[Partition]:
        if not names:
            raise BadInput("no topics given")
        missing = [t for t in names if topo.topic(t) is None]
        if missing:
            raise BadInput(f"topics not found: {', '.join(missing)}")
        wanted = set(names)
        return [p for p in all_parts if p.topic in wanted]

    scope = all_parts
    rf: list[int] | None = None
    if goal.kind == "rebalance":
        allowed = alive
    elif goal.kind == "decommission":
        if not goal.brokers:
            raise BadInput("decommission: no brokers given (--brokers 1,2)")
        unknown_brokers(goal.brokers)
        leaving = set(goal.brokers)
        allowed = [b for b in alive if b not in leaving]
    elif goal.kind == "add-brokers":
        if not goal.brokers:
            raise BadInput("add-brokers: no brokers given (--brokers 7,8)")
        unknown_brokers(goal.brokers)
        dead = sorted(b for b in goal.brokers if not known[b].alive)
        if dead:
            raise BadInput(f"add-brokers: brokers {dead} are not alive; start them first")
        cordoned = sorted(b for b in goal.brokers if known[b].cordoned)
        if cordoned:
            raise BadInput(f"add-brokers: brokers {cordoned} are cordoned and take no new replica; "
                           f"uncordon them first (kops broker uncordon {' '.join(map(str, cordoned))})")
        allowed = alive
        dest_only = set(goal.brokers)
    elif goal.kind == "drain-rack":
        if not goal.rack:
            raise BadInput("drain-rack: no rack given (--rack R)")
        members = _rack_members(topo, goal.rack)
        if not members:
            raise BadInput(f"drain-rack: no broker is in rack {goal.rack!r} (racks: {', '.join(topo.racks)})")
        in_rack = set(members)
        allowed = [b for b in alive if b not in in_rack]
        notes.append(f"rack {goal.rack} holds brokers {_fmt_ids(members)}")
    elif goal.kind == "set-replication-factor":
        n = goal.replication_factor
        if n is None or n < 1:
            raise BadInput(f"set-replication-factor: replication factor must be >= 1 (got {n})")
        scope = topics_of(goal.topics)
        allowed = alive
        rf = [n] * len(scope)
    else:  # move-topics
        if not goal.brokers:
            raise BadInput("move-topics: empty --broker-list")
        unknown_brokers(goal.brokers)
        scope = topics_of(goal.topics)
        dead = sorted(b for b in goal.brokers if not known[b].alive)
        if dead:
            notes.append(f"brokers {dead} in the broker list are not alive and get no replicas")
        allowed = sorted(b for b in set(goal.brokers) if known[b].alive)
    if rf is None:
        rf = [len(p.replicas) for p in scope]
    if keep_topic is not None:
        kept = [keep_topic(p.topic) for p in scope]
        left = [p for p, k in zip(scope, kept) if not k]
        scope, rf = [p for p, k in zip(scope, kept) if k], [n for n, k in zip(rf, kept) if k]
        if goal.kind in ("decommission", "drain-rack"):
            # the brokers this plan empties (not a dead broker the goal does not name)
            emptied = set(goal.brokers) if goal.kind == "decommission" else set(_rack_members(topo, goal.rack))
            stay = [p for p in left if any(b in emptied for b in p.replicas)]
            if stay:
                on = sorted({b for p in stay for b in p.replicas if b in emptied})
                notes.append(f"{len(stay)} partitions of topics left out by the topic filter keep replicas on "
                             f"brokers {_fmt_ids(on)}: they are not empty after this plan "
                             f"(e.g. {', '.join(f'{p.topic}-{p.partition}' for p in stay[:5])})")
    if not allowed:
        raise BadInput(f"{goal.describe()}: no alive broker would be left to hold replicas")
    # feasibility: RF never exceeds the brokers allowed (rack-safety itself is always satisfiable)
    short = [(p, n) for p, n in zip(scope, rf) if n > len(allowed)]
    if short:
        racks = sorted({topo.rack_of(b) or f"<broker {b}>" for b in allowed})
        need = max(n for _, n in short)
        details = [f"{p.topic}-{p.partition}: replication factor {n}" for p, n in short[:50]]
        if len(short) > 50:
            details.append(f"... and {len(short) - 50} more partitions")
        raise BadInput(
            f"{goal.describe()}: cannot be met: {len(short)} partitions need up to {need} distinct "
            f"brokers but only {len(allowed)} eligible brokers remain ({_fmt_ids(allowed)}) "
            f"in racks {', '.join(racks)}",
            details=details,
        )
    # Kafka needs racks on all brokers or none (the rack-aware check of --generate)
    return Resolved(allowed, scope, rf, dest_only, notes)
