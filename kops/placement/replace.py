"""1:1 broker replacement: every replica of ``old`` moves to ``new`` at the same position.

Keeping the position keeps preferred leadership and first followers where they were, so the
cluster's balance is exactly what it was, and nothing else moves. The new broker must be in
the old one's rack (so every partition stays as rack-safe as it was) and hold none of the
partitions ``old`` holds.
"""

from __future__ import annotations

from kops.errors import BadInput
from kops.model import TopicPartition, Topology


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
