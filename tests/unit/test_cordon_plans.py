"""Cordoned brokers in every planner (no cluster): a cordoned broker keeps its replicas and gets
no new one, whatever the goal; a move only a cordoned broker could take is refused with a clear
error; the topology snapshot carries the flag."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kops.errors import BadInput
from kops.placement.repair import OnlyCordonedRoom
from kops.model import Broker, Partition, Topic, Topology
from kops.placement.balancer import Goal, plan
from tests.unit.test_balancer_props import topologies

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _cordon(topo: Topology, ids) -> Topology:
    ids = set(ids)
    return dataclasses.replace(topo, brokers=tuple(dataclasses.replace(b, cordoned=b.id in ids)
                                                   for b in topo.brokers))


def _gained(topo: Topology, target) -> dict[int, list]:
    """Per broker, the partitions the plan gives it a replica of that it did not hold."""
    before = {p.tp: set(p.replicas) for p in topo.partitions()}
    out: dict[int, list] = {}
    for tp, r in target.items():
        for b in set(r) - before[tp]:
            out.setdefault(b, []).append(tp)
    return out


@SETTINGS
@given(topologies(), st.data())
def test_no_plan_gives_a_cordoned_broker_a_new_replica(topo, data):
    ids = [b.id for b in topo.brokers]
    cordoned = data.draw(st.lists(st.sampled_from(ids), max_size=max(1, len(ids) // 2), unique=True))
    kind = data.draw(st.sampled_from(["rebalance", "decommission", "rf"]))
    topo = _cordon(topo, cordoned)
    if kind == "rebalance":
        goal = Goal("rebalance")
    elif kind == "decommission":
        goal = Goal("decommission", brokers=(data.draw(st.sampled_from(ids)),))
    else:
        goal = Goal("set-replication-factor", topics=("t0",), replication_factor=data.draw(st.integers(1, 4)))
    try:
        res = plan(topo, goal, compare_kafka=False, goals=data.draw(st.sampled_from([None, "replicas", "all"])))
    except BadInput as e:
        # refused: never a traceback; when cordons are the cause, the message says so
        assert e.message
        return
    gained = _gained(topo, res.target)
    assert not set(gained) & set(cordoned), {b: gained[b][:3] for b in set(gained) & set(cordoned)}
    leaving = set(goal.brokers) if kind == "decommission" else set()
    expect = sorted(b.id for b in topo.brokers if b.cordoned and b.alive and b.id not in leaving)
    assert res.report.get("cordoned", []) == expect


def _cluster(cordoned=()) -> Topology:
    # three racks of two brokers; broker 0 holds many more replicas than the others
    brokers = tuple(Broker(b, rack=f"r{b // 2}", cordoned=b in cordoned) for b in range(6))
    parts = [Partition("t", i, (0, 2 + (i % 2), 4 + (i // 2) % 2), size_bytes=1000) for i in range(12)]
    parts += [Partition("u", i, ((i % 3) * 2 + 1, ((i + 1) % 3) * 2, ((i + 2) % 3) * 2 + 1), size_bytes=1000)
              for i in range(6)]
    return Topology(brokers=brokers, topics=(Topic("t", tuple(parts[:12])), Topic("u", tuple(parts[12:]))))


def test_a_cordoned_broker_keeps_its_replicas_and_the_others_balance():
    free = plan(_cluster(), Goal("rebalance"), compare_kafka=False)
    assert _gained(_cluster(), free.target).get(1), "the uncordoned plan fills broker 1 (the test's premise)"
    topo = _cluster(cordoned=(1,))
    res = plan(topo, Goal("rebalance"), compare_kafka=False)
    assert 1 not in _gained(topo, res.target)
    held = sum(1 in r for r in (p.replicas for p in topo.partitions()))
    assert sum(1 in r for r in res.target.values()) <= held
    assert res.report["cordoned"] == [1]
    assert res.changes, "the other brokers still balance"


def test_decommission_leaves_a_cordoned_broker_out():
    free = plan(_cluster(), Goal("decommission", brokers=(0,)), compare_kafka=False)
    assert _gained(_cluster(), free.target).get(4), "the uncordoned plan gives broker 4 a replica (premise)"
    topo = _cluster(cordoned=(4,))
    res = plan(topo, Goal("decommission", brokers=(0,)), compare_kafka=False)
    assert all(0 not in r for r in res.target.values())
    assert 4 not in _gained(topo, res.target)


def test_a_move_only_a_cordoned_broker_could_take_is_refused():
    # RF 3 over three racks; rack r0's other broker is cordoned and broker 0 leaves: the new
    # replica of every partition on 0 would have to go to rack r0 to stay rack-safe
    topo = _cluster(cordoned=(1,))
    with pytest.raises(BadInput) as e:
        plan(topo, Goal("decommission", brokers=(0,)), goals="replicas", compare_kafka=False)
    assert "cordoned" in e.value.message and "kops broker uncordon" in e.value.message
    assert isinstance(e.value, OnlyCordonedRoom) and e.value.closed == [1]  # what heal words its own way
    assert f"{e.value.topic}-{e.value.partition} needs a new replica" in e.value.message


def test_add_brokers_refuses_a_cordoned_broker():
    with pytest.raises(BadInput, match="cordoned"):
        plan(_cluster(cordoned=(5,)), Goal("add-brokers", brokers=(5,)), compare_kafka=False)


def test_the_snapshot_carries_the_flag():
    topo = _cluster(cordoned=(3,))
    back = Topology.from_dict(topo.to_dict())
    assert [b.id for b in back.brokers if b.cordoned] == [3]
    assert "cordoned" not in _cluster().to_dict()["brokers"][0]


def test_cordon_level_fills_the_others_to_one_level():
    from kops.placement.goals.measure import cordon_level

    # 12 units over 4 brokers, broker 3 cordoned holding 0: the others 4 each
    share, low = cordon_level(12, [0, 1, 2, 3], {3: 0.0})
    assert share == {0: 4.0, 1: 4.0, 2: 4.0, 3: 0.0} and low == [3]
    # a cordoned broker holding more than the level is not held below it
    assert cordon_level(12, [0, 1, 2, 3], {3: 5.0}) is None
    # two cordoned brokers: the lower is held, the level rises above the other's top, which is held too
    share, low = cordon_level(20, [0, 1, 2, 3], {2: 1.0, 3: 5.0})
    assert low == [2, 3] and share[0] == share[1] == 7.0
    share, low = cordon_level(20, [0, 1, 2, 3], {2: 1.0, 3: 7.0})
    assert low == [2] and share[3] == share[0] == 19 / 3
    # capacities: shares are loads over capacity; every broker cordoned: nothing to say
    share, low = cordon_level(30, [0, 1, 2], {2: 0.0}, {0: 1.0, 1: 2.0, 2: 1.0})
    assert low == [2] and share[0] == share[1] == 10.0
    assert cordon_level(10, [0, 1], {0: 0.0, 1: 0.0}) is None


def _empty_cordoned(racks: int = 4) -> Topology:
    """12 brokers in ``racks`` racks, 400 RF-3 partitions, broker 11 cordoned and holding none of
    them (a broker an operator cordoned before it got any replica)."""
    import random

    rng = random.Random(7)
    brokers = tuple(Broker(b, rack=f"r{b % racks}", cordoned=b == 11) for b in range(12))
    by_rack = {r: [b for b in range(11) if b % racks == r] for r in range(racks)}
    parts = []
    for i in range(400):
        rs = rng.sample(range(racks), 3)
        parts.append(Partition("t", i, tuple(rng.choice(by_rack[r]) for r in rs), size_bytes=rng.randint(1, 1000) << 20))
    return Topology(brokers=brokers, topics=(Topic("t", tuple(parts)),))


def test_an_empty_cordoned_broker_leaves_the_others_balanced_and_the_report_says_why():
    """The cordoned broker holds 0 of everything: the spread over all brokers cannot go below
    what the others hold, and the leader phase may not let the others drift apart because the
    cordoned broker's 0 already makes the spread wide."""
    topo = _empty_cordoned()
    res = plan(topo, Goal("rebalance"), compare_kafka=False)
    assert 11 not in _gained(topo, res.target)
    goals = res.report["goals"]
    for g, slot in (("replicas", None), ("leaders", 0), ("first-followers", 1)):
        v = goals[g]
        counts = {b: 0 for b in range(11)}
        for r in res.target.values():
            for b in (r if slot is None else r[slot:slot + 1]):
                if b != 11:
                    counts[b] += 1
        others = max(counts.values()) - min(counts.values())
        assert others <= 1, (g, counts)
        assert v["status"] == "met" and v["spread_uncordoned"] == others, (g, v)
        assert v["bound"] == v["after"], (g, v)  # (the cordoned broker's 0 is the spread's floor)
        assert v["cordon_bound"] == ["broker 11 is cordoned: at most 0"], (g, v)
    assert goals["disk-usage"]["status"] == "met" and goals["disk-usage"]["bound"] > 0
    assert goals["topic-spread"]["bound"] is None


def test_restore_orders_keeps_the_others_spread_when_a_held_broker_is_low():
    from kops.placement.leaders import restore_orders

    # brokers 0, 1, 2 lead 2, 2 and 3 partitions, broker 3 (held) none: putting partition 0's
    # natural order back (1 leading) takes broker 0 to 1 and broker 1 to 3 -- no wider over all
    # four (3 - 0), wider over the others (1 -> 2)
    reps = [[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1], [2, 0]]
    natural = {0: [1, 0]}
    wide = [list(r) for r in reps]
    assert restore_orders(wide, natural, [0, 1, 2, 3], followers=False) == 1 and wide[0] == [1, 0]
    kept = [list(r) for r in reps]
    assert restore_orders(kept, natural, [0, 1, 2, 3], followers=False, held=[3]) == 0
    assert kept == reps


def test_disk_use_balances_around_the_level_the_cordoned_brokers_leave():
    """Two empty cordoned brokers of twelve: the others' common level is a fifth above the mean
    over all twelve, so a band around that mean has every other broker above it and the disk-use
    pass moved nothing (others 124-176 GiB). Around the others' level they balance into the band."""
    import random
    from collections import Counter

    rng = random.Random(7)
    brokers = tuple(Broker(b, rack=f"r{b % 4}", cordoned=b >= 10) for b in range(12))
    by_rack = {r: [b for b in range(10) if b % 4 == r] for r in range(4)}
    parts = []
    for i in range(400):
        reps = tuple(rng.choice(by_rack[r]) for r in rng.sample(range(4), 3))
        big = 0 in reps or 1 in reps  # (brokers 0 and 1 hold the large partitions)
        parts.append(Partition(f"t{i % 7}", i // 7, reps, size_bytes=rng.randint(1, 1000) << (22 if big else 20)))
    topo = Topology(brokers=brokers, topics=tuple(Topic(f"t{t}", tuple(p for p in parts if p.topic == f"t{t}"))
                                                  for t in range(7)))
    res = plan(topo, Goal("rebalance"), compare_kafka=False)
    size = {p.tp: p.size_bytes for p in topo.partitions()}
    held = Counter()
    for tp, r in res.target.items():
        for b in r:
            held[b] += size[tp] / 2**20
    v = res.report["goals"]["disk-usage"]
    lo, hi = v["band"]
    level = sum(held.values()) / 10
    assert lo < level < hi  # (the band is around the others' level)
    assert all(lo <= held[b] <= hi for b in range(10)), [round(held[b]) for b in range(10)]
    assert held[10] == held[11] == 0 and v["status"] == "met"
    assert v["cordon_bound"] == ["broker 10 is cordoned: at most 0.0", "broker 11 is cordoned: at most 0.0"]
