"""Validation of a reassignment plan against a topology, before the first write (pure, no I/O).

Every problem is collected and reported at once (exit 2, nothing changed): unknown topics and
partitions, unknown or down brokers, duplicate replicas, inconsistent ``log_dirs``, and
conflicts with reassignments already in progress. Whether the data fits on the destination
brokers' disks is :mod:`kops.ops.disk_fit`'s question.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kops.errors import BadInput
from kops.model import PlanEntry, ReassignmentPlan, Topology, TopicPartition
from kops.ops.move import Move


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


def validate_plan(
    plan: ReassignmentPlan,
    topo: Topology,
    *,
    allow_offline: bool = False,
    in_progress: Mapping[TopicPartition, Mapping[str, Any]] | None = None,
    source: str = "reassignment plan",
) -> list[Move]:
    """Check ``plan`` against ``topo``; return one :class:`Move` per entry (plan order).

    ``in_progress`` is the cluster's ongoing reassignments (ListPartitionReassignments); the
    topology's own adding/removing replicas count too. Raises :class:`BadInput` naming every
    offending entry.
    """
    problems = plan_problems(plan, topo, allow_offline=allow_offline, in_progress=in_progress)
    if problems:
        n = len(problems)
        raise BadInput(
            f"{source}: {n} problem{'s' if n != 1 else ''}; nothing was changed",
            details=problems,
        )
    moves = []
    for e in plan.entries:
        p = topo.partition(e.topic, e.partition)
        assert p is not None
        moves.append(
            Move(e.topic, e.partition, tuple(p.replicas), tuple(e.replicas), e.log_dirs, p.size_bytes)
        )
    return moves


def plan_problems(
    plan: ReassignmentPlan,
    topo: Topology,
    *,
    allow_offline: bool = False,
    in_progress: Mapping[TopicPartition, Mapping[str, Any]] | None = None,
) -> list[str]:
    """Every problem of ``plan`` against ``topo``, one readable line each (empty = fine)."""
    problems: list[str] = []
    if not plan.entries:
        return ["the plan has no partitions (\"partitions\": [] )"]
    known = topo.broker_map
    known_ids = sorted(b for b, br in known.items() if br.alive or _holds_replicas(topo, b))
    registered = sorted(b.id for b in topo.brokers if b.alive)
    ongoing = dict(in_progress or {})
    seen: set[TopicPartition] = set()
    for e in plan.entries:
        where = f"{e.topic}-{e.partition}"
        if e.tp in seen:
            problems.append(f"{where}: listed more than once")
            continue
        seen.add(e.tp)
        p, missing = _lookup(e, topo, known_ids)
        if p is None:
            problems.extend(missing)
            continue
        problems.extend(_entry_problems(e, where))
        problems.extend(missing)
        down = [b for b in e.replicas if b in known and not known[b].alive]
        # a replica that stays on a down broker is not new work; only new replicas on down
        # brokers make the move impossible to finish
        down_new = [b for b in down if b not in p.replicas]
        if down_new and not allow_offline:
            problems.append(
                f"{where}: broker{'s' if len(down_new) > 1 else ''} {_ids(down_new)} "
                f"{'are' if len(down_new) > 1 else 'is'} down (alive: {_ids(registered)}); "
                "use --allow-offline to start it anyway"
            )
        r = ongoing.get(e.tp)
        adding = tuple(r.get("adding_replicas", ())) if r else p.adding_replicas
        removing = tuple(r.get("removing_replicas", ())) if r else p.removing_replicas
        if r is not None or p.reassigning:
            problems.append(
                f"{where}: a reassignment is already in progress (replicas "
                f"{_ids(r.get('replicas', p.replicas) if r else p.replicas)}, adding "
                f"[{_ids(adding)}], removing [{_ids(removing)}]); wait for it, or cancel it first"
            )
    return problems


def reference_problems(entries: Iterable[PlanEntry], topo: Topology) -> list[str]:
    """What only a topology shows about entries read from a file: topics, partitions and
    brokers that do not exist (for a file whose other problems were found without it)."""
    known_ids = sorted(b for b, br in topo.broker_map.items() if br.alive or _holds_replicas(topo, b))
    return [problem for e in entries for problem in _lookup(e, topo, known_ids)[1]]


def _lookup(e: PlanEntry, topo: Topology, known_ids: list[int]) -> tuple[Any, list[str]]:
    """The partition of ``e`` (None when it does not exist) and what does not exist."""
    where = f"{e.topic}-{e.partition}"
    t = topo.topic(e.topic)
    if t is None:
        return None, [f"{where}: topic {e.topic!r} does not exist"]
    p = topo.partition(e.topic, e.partition)
    if p is None:
        n = len(t.partitions)
        return None, [f"{where}: partition {e.partition} does not exist (topic {e.topic} has {n} "
                      f"partition{'s' if n != 1 else ''}: 0..{n - 1})"]
    unknown = [b for b in e.replicas if b not in topo.broker_map]
    if unknown:
        return p, [f"{where}: unknown broker{'s' if len(unknown) > 1 else ''} {_ids(unknown)} "
                   f"(brokers in the cluster: {_ids(known_ids)})"]
    return p, []


def _holds_replicas(topo: Topology, broker: int) -> bool:
    return any(broker in p.replicas for p in topo.partitions())


def _entry_problems(e: PlanEntry, where: str) -> list[str]:
    """Format checks that the JSON parser also does, repeated for plans built in code."""
    out = []
    if not e.replicas:
        out.append(f"{where}: empty replica list")
    if len(set(e.replicas)) != len(e.replicas):
        dups = sorted({b for b in e.replicas if e.replicas.count(b) > 1})
        out.append(f"{where}: duplicate replicas {_ids(dups)} in [{_ids(e.replicas)}]")
    if e.log_dirs is not None:
        if len(e.log_dirs) != len(e.replicas):
            out.append(
                f"{where}: {len(e.log_dirs)} log_dirs for {len(e.replicas)} replicas (must be equal)"
            )
        bad = [d for d in e.log_dirs if d != "any" and not d.startswith("/")]
        if bad:
            out.append(f"{where}: log_dirs must be \"any\" or absolute paths, not {bad}")
    return out
