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
