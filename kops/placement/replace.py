"""1:1 broker replacement: every replica of ``old`` moves to ``new`` at the same position.

Keeping the position keeps preferred leadership and first followers where they were, so the
cluster's balance is exactly what it was, and nothing else moves. The new broker must be in
the old one's rack (so every partition stays as rack-safe as it was) and hold none of the
partitions ``old`` holds. ``old`` may be down for good: then it is no longer in the metadata
and its rack is unknown, and the new broker must not crowd a rack of any partition it joins.
"""

from __future__ import annotations

from kops.errors import BadInput
from kops.model import Partition, TopicPartition, Topology
from kops.placement.racks import RackTree, rack_violation


def replace_broker(topo: Topology, old: int, new: int) -> dict[TopicPartition, tuple[int, ...]]:
    """The changed partitions' new replica lists (only partitions with a replica on ``old``)."""
    problems = []
    b_old, b_new = topo.broker(old), topo.broker(new)
    if b_old is None:
        problems.append(f"broker {old} (to replace) is not in the cluster")
    if b_new is None:
        problems.append(f"broker {new} (the replacement) is not in the cluster")
    elif not b_new.alive:
        problems.append(f"broker {new} (the replacement) is down")
    if old == new:
        problems.append("old and new broker are the same")
    if b_old is not None and b_new is not None and b_old.rack != b_new.rack and b_old.rack is not None:
        problems.append(
            f"broker {new} is in rack {b_new.rack!r}, broker {old} in rack {b_old.rack!r}: a 1:1 "
            "replacement stays in the same rack (use decommission to move replicas across racks)"
        )
    if b_old is not None and b_new is not None and b_old.rack is None and b_new.rack is not None:
        crowded = _crowded_by(topo, old, new)
        if crowded:
            problems.append(
                f"broker {old} is down and gone from the cluster metadata, so its rack is unknown; broker "
                f"{new} (rack {b_new.rack!r}) would leave {len(crowded)} partitions rack-unsafe, e.g. "
                + ", ".join(f"{p.topic}-{p.partition} {list(p.replicas)}" for p in crowded[:5])
                + f": the replacement belongs in the rack broker {old} was in"
            )
    clash = [p for p in topo.partitions() if old in p.replicas and new in p.replicas]
    if clash:
        problems.append(
            f"broker {new} already holds {len(clash)} partitions that broker {old} holds, e.g. "
            + ", ".join(f"{p.topic}-{p.partition}" for p in clash[:5])
        )
    if problems:
        raise BadInput(f"cannot replace broker {old} by {new}", details=problems)
    return {
        p.tp: tuple(new if r == old else r for r in p.replicas)
        for p in topo.partitions()
        if old in p.replicas
    }


def _crowded_by(topo: Topology, old: int, new: int) -> list[Partition]:
    """Partitions of ``old`` whose other replicas are rack-safe among themselves but would not
    be with ``new`` in place of ``old`` (the rack check when ``old``'s rack is unknown: a dead
    broker is no longer in the metadata)."""
    known = {b.id: b.rack for b in topo.brokers if b.rack is not None}
    if new not in known:
        return []
    tree = RackTree.build(known)
    out = []
    for p in topo.partitions():
        if old not in p.replicas:
            continue
        others = [r for r in p.replicas if r != old and r in known]
        if rack_violation(others, tree) is None and rack_violation([*others, new], tree) is not None:
            out.append(p)
    return out
