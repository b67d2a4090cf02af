"""A corpus of realistic clusters for the planner (pure: topologies in memory, no cluster).

Topics are placed the way Kafka places them when they are created (its own rack-aware algorithm,
:func:`kops.placement.kafka_assign.assign_replicas_to_brokers`, with a seeded random start), then
the cluster drifts as real ones do: a topic stacked on a few brokers by hand, a hot topic, brokers
added empty, a broker dead, disks of different sizes. Mixed topic sizes and counts (a few big
topics, many small ones, Kafka's internal topics), RF 1 to 4, 3 to 50 racks, multi-level racks.

``CASES`` names each cluster with the plan it is asked for; ``live-mixed-stacked`` is issue 39's
live case, a snapshot of the sandbox (``kops cluster describe --output json``: a dozen topics of
mixed sizes placed by Kafka plus one topic stacked on brokers 0, 2 and 4).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kops.model import Broker, Capacity, Partition, Topic, Topology
from kops.placement.balancer import Goal
from kops.placement.kafka_assign import assign_replicas_to_brokers

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
DATA = Path(__file__).resolve().parent / "data"


def _place(rng: random.Random, brokers: list[tuple[int, str | None]], name: str, parts: int, rf: int,
           size: Callable[[], int] | None, rate: Callable[[], float] | None = None) -> Topic:
    """A topic as Kafka creates it: its placement algorithm with a random start."""
    lists = assign_replicas_to_brokers(brokers, parts, rf, rng=rng)
    return Topic(name, tuple(Partition(name, p, tuple(lists[p]), size_bytes=size() if size else None,
                                       bytes_in_per_s=rate() if rate else None) for p in range(parts)))


def _stacked(name: str, parts: int, on: list[int], size: int | None, rate: float | None = None) -> Topic:
    """A topic placed by hand on ``on`` only (its replica lists rotate through them)."""
    rf = min(3, len(on))
    lists = [tuple((on[(p + i) % len(on)]) for i in range(rf)) for p in range(parts)]
    return Topic(name, tuple(Partition(name, p, r, size_bytes=size, bytes_in_per_s=rate) for p, r in enumerate(lists)))


def _loguniform(rng: random.Random, lo: float, hi: float) -> Callable[[], int]:
    return lambda: int(lo * (hi / lo) ** rng.random())


def _internal(rng: random.Random, brokers: list[tuple[int, str | None]], sizes: bool, rates: bool) -> list[Topic]:
    """Kafka's and the usual tools' own topics: many small partitions."""
    small = _loguniform(rng, 10 * KIB, 5 * MIB) if sizes else None
    slow = (lambda: rng.uniform(1, 200)) if rates else None
    rf = min(3, len(brokers))
    return [_place(rng, brokers, "__consumer_offsets", 50, rf, small, slow),
            _place(rng, brokers, "__transaction_state", 50, rf, (lambda: 0) if sizes else None,
                   (lambda: 0.0) if rates else None),
            _place(rng, brokers, "_schemas", 1, rf, small, slow)]


def mixed(n_brokers: int, racks: list[str | None], *, seed: int, sizes: bool = True, rates: bool = False,
          big: int = 3, small: int = 30, rfs: tuple[int, ...] = (2, 3), alive: Callable[[int], bool] = lambda b: True,
          capacity: Callable[[int], Capacity | None] = lambda b: None, extra: Callable[..., list[Topic]] | None = None
          ) -> Topology:
    """A few big topics, many small ones and the internal topics, placed by Kafka over
    ``n_brokers`` (broker ``b`` in ``racks[b % len(racks)]``); ``extra(rng, placed)`` adds the
    cluster's drift (stacked or hot topics)."""
    rng = random.Random(seed)
    ids = [(b, racks[b % len(racks)]) for b in range(n_brokers)]
    topics = _internal(rng, ids, sizes, rates)
    for i in range(big):
        topics.append(_place(rng, ids, f"big-{i}", rng.choice([12, 24, 32]), rng.choice(rfs),
                             _loguniform(rng, 1 * GIB, 8 * GIB) if sizes else None,
                             (lambda: rng.uniform(200 * KIB, 2 * MIB)) if rates else None))
    for i in range(small):
        topics.append(_place(rng, ids, f"app-{i:02d}", rng.choice([1, 1, 2, 3, 4, 6, 8, 12]), rng.choice(rfs),
                             _loguniform(rng, 1 * KIB, 200 * MIB) if sizes else None,
                             (lambda: rng.uniform(0, 50 * KIB)) if rates else None))
    if extra is not None:
        topics += extra(rng, ids)
    brokers = tuple(Broker(b, r, alive=alive(b), capacity=capacity(b)) for b, r in ids)
    return Topology(brokers=brokers, topics=tuple(topics))


def live_mixed_stacked() -> Topology:
    return Topology.from_dict(json.loads((DATA / "live_mixed_stacked.json").read_text()))


def _stack_and_hot(stack_on: list[int], hot_on: list[int], sizes: bool = True, rates: bool = False):
    def extra(rng: random.Random, ids) -> list[Topic]:
        out = [_stacked("stacked", 24, stack_on, 300 * MIB if sizes else None, 10 * KIB if rates else None)]
        if hot_on:  # RF 1, its 12 partitions all on the first of hot_on, none on its rack-mate
            out.append(Topic("hot", tuple(Partition("hot", p, (hot_on[0],), size_bytes=2 * GIB if sizes else None,
                                                    bytes_in_per_s=3 * MIB if rates else None) for p in range(12))))
        return out
    return extra


def _with_empty_brokers(topo: Topology, new: list[tuple[int, str]]) -> Topology:
    return replace(topo, brokers=topo.brokers + tuple(Broker(b, r) for b, r in new))


def _hetero(b: int) -> Capacity:
    # rack a's brokers (0, 3, 6) have small disks; every fourth broker twice the network
    disk = 3_000 * GIB if b % 3 == 0 else 12_000 * GIB
    nw = (100 if b % 4 else 200) * MIB
    return Capacity(disk_bytes=disk, nw_in_bytes_per_s=nw, nw_out_bytes_per_s=2 * nw)


def cases() -> dict[str, tuple[Topology, Goal]]:
    """Each cluster of the corpus and the plan asked of it (by name, in a fixed order)."""
    abc = ["a", "b", "c"]
    rebalance = Goal("rebalance")
    out: dict[str, tuple[Topology, Goal]] = {}
    out["live-mixed-stacked"] = (live_mixed_stacked(), rebalance)
    m12 = mixed(12, abc, seed=1, extra=_stack_and_hot([0, 4, 8], [], sizes=True))
    out["mixed-12-stacked"] = (m12, rebalance)
    out["mixed-12-decommission"] = (m12, Goal("decommission", brokers=(5,)))
    out["mixed-12-no-sizes"] = (mixed(12, abc, seed=2, sizes=False, extra=_stack_and_hot([1, 5, 9], [], sizes=False)),
                                rebalance)
    out["hetero-disks-hot-topic"] = (mixed(9, abc, seed=3, rates=True, capacity=_hetero,
                                           extra=_stack_and_hot([1, 2, 4], [3, 6], rates=True)), rebalance)
    out["rates-12"] = (mixed(12, ["a", "b", "c", "d"], seed=4, rates=True,
                             capacity=lambda b: Capacity(disk_bytes=8_000 * GIB, nw_in_bytes_per_s=200 * MIB,
                                                         nw_out_bytes_per_s=400 * MIB),
                             extra=_stack_and_hot([0, 1, 2], [4, 8], rates=True)), rebalance)
    out["rf-1-to-4-unequal-racks"] = (mixed(8, ["a", "a", "a", "b", "b", "b", "c", "c"], seed=5, rfs=(1, 2, 3, 4),
                                            big=2, small=24), rebalance)
    out["rf-4-on-4-racks"] = (mixed(8, ["a", "b", "c", "d"], seed=6, rfs=(3, 4), big=2, small=20,
                                    extra=_stack_and_hot([0, 1, 2, 3], [])), rebalance)
    out["50-racks"] = (mixed(100, [f"r{i:02d}" for i in range(50)], seed=7, big=4, small=60,
                             extra=_stack_and_hot([0, 1, 2, 3, 4, 5], [10, 60])), rebalance)
    out["multi-level-racks"] = (mixed(12, ["/dc1/r1", "/dc1/r2", "/dc1/r3", "/dc2/r4", "/dc2/r5", "/dc2/r6"],
                                      seed=8, rfs=(2, 3, 4), extra=_stack_and_hot([0, 1, 3], [])), rebalance)
    out["dead-broker"] = (mixed(9, abc, seed=9, alive=lambda b: b != 4), rebalance)
    out["add-brokers"] = (_with_empty_brokers(mixed(9, abc, seed=10), [(9, "a"), (10, "b"), (11, "c")]),
                          Goal("add-brokers", brokers=(9, 10, 11)))
    out["drain-rack"] = (mixed(12, ["a", "b", "c", "d"], seed=11), Goal("drain-rack", rack="d"))
    out["no-racks"] = (mixed(7, [None], seed=12, extra=_stack_and_hot([0, 1, 2], [3, 4])), rebalance)
    out["three-brokers"] = (mixed(3, abc, seed=13, big=1, small=8), rebalance)
    return out
