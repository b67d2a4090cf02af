"""A broker's disk as the planner sees it: its capacity (a capacity file, else its log dirs'
volumes), its use now, and which brokers share a volume (so that no per-broker figure can be
drawn from it). Pure: model objects in, numbers out."""

from __future__ import annotations

from collections import defaultdict

from kops.model import Topology

__all__ = ["disk_capacity", "disk_used", "shared_disks"]

def shared_disks(topo: Topology) -> set[int]:
    """Brokers whose log dirs are on a volume another broker of the same host uses too (the
    same host and a log dir of the same total size: a local sandbox, several brokers per
    machine). Their measured disk is not theirs alone: no per-broker limit can be drawn from it."""
    seen: dict[tuple[str, int], set[int]] = defaultdict(set)
    for b in topo.brokers:
        for d in b.log_dirs:
            if b.host and d.total_bytes is not None:
                seen[(b.host, d.total_bytes)].add(b.id)
    return {x for ids in seen.values() if len(ids) > 1 for x in ids}


def disk_capacity(broker, shared: set[int] = frozenset()) -> int | None:
    """A broker's disk: its capacity (a capacity file), else what its log dirs' volumes measure
    (not for a broker in ``shared``, see :func:`shared_disks`)."""
    if broker is None:
        return None
    given = broker.capacity.disk_bytes if broker.capacity is not None else None
    if given:
        return given
    return None if broker.id in shared else broker.measured_disk_bytes


def disk_used(broker, held: float, shared: set[int] = frozenset()) -> float:
    """A broker's disk use now: its volumes' total minus usable bytes where every online log dir
    reports them (everything on the disk: other files, deleted segments not yet gone), else
    ``held``, the sizes of the replicas it holds -- always for a broker in ``shared`` (its volume
    holds other brokers' data too: see :func:`shared_disks`)."""
    if broker is not None and broker.id in shared:
        return float(held)
    online = [d for d in broker.log_dirs if not d.offline] if broker is not None else []
    if online and all(d.capacity_known for d in online):
        return float(sum((d.total_bytes or 0) - (d.usable_bytes or 0) for d in online))
    return float(held)
