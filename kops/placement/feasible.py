"""The replica counts rack safety allows: each broker's feasible share, and the racks that force it.

Rack safety (:func:`kops.placement.racks.rack_violation`) fixes, for every partition, how few and
how many of its replicas each rack may hold: level by level from the top, a domain's replicas are
spread over its children as evenly as their brokers allow. With racks ``a, a, b, b, c`` (two
brokers in a and in b, one in c) every RF-3 partition has exactly one replica in each rack, so
c's only broker holds all of them while the four others hold half each: 20, 20, 20, 20, 40 for
40 partitions is the best any rack-safe placement can do, not a spread of 20 to be fixed.

:func:`count_band` sums those per-partition bounds into each rack's least and most replicas and
fills the brokers to one common level as far as their racks allow (water-filling): the brokers
of a rack that must hold more (or may hold less) than the level get their rack's bound instead.
The result is each broker's feasible share, the least spread a rack-safe placement can have, and
the racks whose bound set it. It is a relaxation (a bound per rack, not per partition jointly), so
the spread it gives can be below what is reachable, never above it: a plan within it is as even
as rack safety allows. Pure.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kops.placement.racks import RackTree, domains_under

__all__ = ["CountBand", "child_bounds", "count_band", "leaf_bounds"]


def child_bounds(caps: Sequence[int], r: int) -> list[tuple[int, int]]:
    """The least and most of ``r`` replicas each child (of ``caps[i]`` brokers) holds over every
    spread that is even as far as the children's brokers allow (the rule of
    :func:`~kops.placement.racks.rack_violation` at one level). Such a spread has a level ``h``
    (its largest count): every child holds ``min(cap, h - 1)`` or ``min(cap, h)``."""
    if r <= 0:
        return [(0, 0)] * len(caps)
    if r >= sum(caps):
        return [(k, k) for k in caps]
    lo = [math.inf] * len(caps)
    hi = [-math.inf] * len(caps)
    for h in range(1, r + 1):
        base = sum(min(k, h - 1) for k in caps)
        if not base <= r <= sum(min(k, h) for k in caps):
            continue
        extra = r - base  # children that can hold h each take one more than h - 1, `extra` of them
        room = sum(1 for k in caps if k >= h)
        for i, k in enumerate(caps):
            a, b = (h - 1 + max(0, extra - (room - 1)), h - 1 + min(1, extra)) if k >= h else (k, k)
            lo[i], hi[i] = min(lo[i], a), max(hi[i], b)
    return [(int(a), int(b)) for a, b in zip(lo, hi)]


def leaf_bounds(tree: RackTree, rf: int) -> dict[tuple[str, ...], tuple[int, int]]:
    """Per rack (a leaf domain of ``tree``), the least and most replicas of one rack-safe
    partition of ``rf`` replicas it holds, level by level from the top."""
    bounds: dict[tuple[str, ...], tuple[int, int]] = {(): (rf, rf)}
    for level in range(tree.depth):
        cap = tree.capacity[level]
        nxt: dict[tuple[str, ...], tuple[int, int]] = {}
        for parent, children in domains_under(tree, level + 1).items():
            a, b = bounds[parent]
            caps = [cap[c] for c in children]
            for r in range(a, b + 1):
                for c, (x, y) in zip(children, child_bounds(caps, r)):
                    old = nxt.get(c)
                    nxt[c] = (x, y) if old is None else (min(old[0], x), max(old[1], y))
        bounds = nxt
    return bounds


@dataclass(frozen=True)
class CountBand:
    """Each broker's feasible replica count (``share``, fractional), the least spread a rack-safe
    placement can have (``bound``) and the racks whose bound keeps their brokers off the common
    level (``forcing``: one line each, e.g. ``rack c (1 broker) holds at least 40``)."""

    share: Mapping[int, float]
    bound: int
    forcing: tuple[str, ...]


def count_band(tree: RackTree, brokers: Sequence[int], rfs: Mapping[int, int]) -> CountBand:
    """:class:`CountBand` of ``brokers`` (every one in ``tree``) for partitions of the replication
    factors ``rfs`` (RF -> how many partitions)."""
    leaf = tree.level_of[tree.depth - 1]
    members = Counter(leaf[b] for b in brokers)
    least: dict[tuple[str, ...], int] = dict.fromkeys(members, 0)
    most: dict[tuple[str, ...], int] = dict.fromkeys(members, 0)
    for rf, n in rfs.items():
        for rack, (x, y) in leaf_bounds(tree, rf).items():
            if rack in members:
                least[rack] += n * x
                most[rack] += n * y
    total = sum(rf * n for rf, n in rfs.items())

    def fill(level: float) -> float:
        return sum(min(max(k * level, least[r]), most[r]) for r, k in members.items())

    lo, hi = 0.0, float(sum(rfs.values())) + 1.0  # a broker holds at most one replica per partition
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fill(mid) < total else (lo, mid)
    level = hi
    mean = total / sum(members.values()) if members else 0.0
    if abs(fill(mean) - total) < 1e-6:  # every level in a range fills it: the mean, if it is one
        level = mean
    share: dict[int, float] = {}
    forcing: list[str] = []
    of_rack: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for b in brokers:
        of_rack[leaf[b]].append(b)
    for rack, k in sorted(members.items()):
        x = k * level
        held = min(max(x, least[rack]), most[rack])
        name = "/" + "/".join(rack) if tree.paths else rack[-1]
        brokers_ = f"{k} broker{'s' if k != 1 else ''}"
        if least[rack] > x + 1e-6:
            forcing.append(f"rack {name} ({brokers_}) holds at least {least[rack]}")
        elif most[rack] < x - 1e-6:
            forcing.append(f"rack {name} ({brokers_}) holds at most {most[rack]}")
        for b in of_rack[rack]:
            share[b] = held / k
    if not share:
        return CountBand({}, 0, ())
    eps = 1e-6
    bound = max(0, math.ceil(max(share.values()) - eps) - math.floor(min(share.values()) + eps))
    if total % len(share):  # the common level is fractional: someone holds one more
        bound = max(bound, 1)
    return CountBand(share, bound, tuple(forcing) if bound > 1 else ())
