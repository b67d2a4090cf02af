"""Example-based tests of the planner: regressions from other planners' bugs, goals, report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kops.errors import BadInput
from kops.model import Broker, Partition, Topic, Topology
from kops.placement.balancer import (
    Goal,
    plan,
    plan_add_brokers,
    plan_decommission,
    plan_drain_rack,
    plan_move_topics,
    plan_rebalance,
    plan_set_replication_factor,
)
from kops.placement.kafka_assign import assign_replicas_to_brokers
from kops.placement.leaders import balance_leaders, slot_counts
from kops.placement.racks import RackTree, rack_violation

ROOT = Path(__file__).resolve().parents[2]


def topo_of(brokers: dict[int, str | None], topics: dict[str, list[tuple[int, ...]]], sizes=None, dead=()) -> Topology:
    bs = tuple(Broker(b, rack=r, alive=b not in dead) for b, r in brokers.items())
    ts = tuple(
        Topic(
            name,
            tuple(
                Partition(name, i, tuple(r), size_bytes=(sizes[name][i] if sizes else None))
                for i, r in enumerate(parts)
            ),
        )
        for name, parts in topics.items()
    )
    return Topology(brokers=bs, topics=ts)


def counts(assignment, brokers):
    c = dict.fromkeys(brokers, 0)
    for r in assignment.values():
        for b in r:
            if b in c:
                c[b] += 1
    return c


# -- regressions ------------------------------------------------------------------------------
def test_remove_one_of_20_brokers_moves_only_its_replicas():
    """killerwhile's example: --generate proposes new lists for all 10 partitions; 1 suffices."""
    racks = {b: f"az{b % 2}" for b in range(20)}
    # one replica per broker, each partition in both AZs (broker i and 19 - i)
    initial = {i: (i, 19 - i) if i % 2 else (19 - i, i) for i in range(10)}
    topo = topo_of(racks, {"t": [tuple(initial[i]) for i in range(10)]})
    on_19 = sum(19 in r for r in initial.values())
    assert on_19 >= 1
    res = plan_decommission(topo, [19])
    rep = res.report
    assert rep["replicas_moved"] == on_19 == rep["lower_bound"]["moves"]
    # only partitions that had a replica on broker 19 change, each keeping its other replica
    for tp, r in res.changes.items():
        old = res.before[tp]
        assert 19 in old and 19 not in r
        assert len(set(r) & set(old)) == 1
    assert rep["partitions_changed"] == on_19
    kg = rep["kafka_generate"]
    assert kg["available"] and kg["partitions_changed"] == 10
    assert kg["replicas_moved"] > 5 * rep["replicas_moved"]
    assert rep["rack_violations_after"] == 0


def test_broker_twice_in_a_replica_list_is_repaired():
    """kafka-kit #432: a broker listed twice. The plan restores RF distinct rack-safe replicas."""
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    topo = topo_of(racks, {"t": [(0, 0, 2), (1, 3, 5), (2, 4, 0)]})
    res = plan_rebalance(topo)
    r = res.target[("t", 0)]
    assert len(set(r)) == 3 and 0 in r and 2 in r
    tree = RackTree.build(racks)
    assert all(rack_violation(x, tree) is None for x in res.target.values())
    assert res.report["lower_bound"]["replicas_to_replace"] == 1
    assert res.report["replicas_moved"] == 1


def test_never_duplicates_and_kafka_json_lists_only_changes():
    racks = {b: f"r{b % 3}" for b in range(9)}
    topo = topo_of(racks, {"a": [(0, 1, 2)] * 6, "b": [(3, 4, 5)] * 3})
    res = plan_rebalance(topo)
    doc = json.loads(res.plan.to_json())
    assert doc["version"] == 1
    assert {(e["topic"], e["partition"]) for e in doc["partitions"]} == set(res.changes)
    for e in doc["partitions"]:
        assert len(set(e["replicas"])) == len(e["replicas"]) == 3
        assert e["log_dirs"] == ["any"] * 3


# -- goals --------------------------------------------------------------------------------------
def test_decommission_prefers_same_rack_and_balances():
    racks = {b: f"r{b % 3}" for b in range(9)}
    parts = [tuple(r) for r in assign_replicas_to_brokers(sorted(racks.items()), 30, 3, fixed_start_index=0).values()]
    topo = topo_of(racks, {"t": parts})
    # (the repair's choice, by replica count; balance may move another replica of it too)
    res = plan_decommission(topo, [0], goals="replicas,leaders,first-followers")
    for tp, r in res.changes.items():
        old = res.before[tp]
        if 0 in old:  # in-rack replacement keeps rack spread
            assert any(racks[new] == racks[0] for new in set(r) - set(old)), (old, r)
    # RF 3 over 3 racks: each rack holds one replica of every partition, so rack r0 (now brokers
    # 3 and 6) keeps 30 replicas; balance holds inside every rack
    c = counts(res.target, [b for b in racks if b != 0])
    for rack in ("r0", "r1", "r2"):
        inside = [c[b] for b in c if racks[b] == rack]
        assert max(inside) - min(inside) <= 1
    assert res.report["lower_bound"]["moves_mandatory"] == 10
    # + 2 moves inside racks r1/r2, which Kafka's own layout left at 11/9
    assert res.report["replicas_moved"] == 12
    assert res.report["balance"]["leader_spread_after"] <= 1
    assert res.report["balance"]["first_follower_spread_after"] <= 1


def test_decommission_without_rebalance_moves_only_what_must_move():
    racks = {b: f"az{b % 2}" for b in range(20)}
    start = next(s for s in range(20) if any(19 in r for r in assign_replicas_to_brokers(sorted(racks.items()), 10, 2, fixed_start_index=s).values()))
    initial = assign_replicas_to_brokers(sorted(racks.items()), 10, 2, fixed_start_index=start)
    topo = topo_of(racks, {"t": [tuple(initial[i]) for i in range(10)]})
    on_19 = sum(19 in r for r in initial.values())
    full = plan_decommission(topo, [19])
    only = plan_decommission(topo, [19], rebalance=False)
    assert only.report["replicas_moved"] == on_19 == only.report["lower_bound"]["moves_mandatory"]
    assert full.report["replicas_moved"] == full.report["lower_bound"]["moves"] >= on_19


def test_add_brokers_moves_only_onto_new_brokers():
    racks = {b: f"r{b % 3}" for b in range(9)}
    old = {b: r for b, r in racks.items() if b < 6}
    parts = [tuple(r) for r in assign_replicas_to_brokers(sorted(old.items()), 36, 3, fixed_start_index=0).values()]
    topo = topo_of(racks, {"t": parts})
    res = plan_add_brokers(topo, [6, 7, 8])
    for tp, r in res.changes.items():
        assert set(r) - set(res.before[tp]) <= {6, 7, 8}
    c = counts(res.target, racks)
    assert max(c.values()) - min(c.values()) <= 1
    assert res.report["replicas_moved"] == res.report["lower_bound"]["moves"] == 36


def test_drain_rack_and_infeasible_drain():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    parts = [tuple(r) for r in assign_replicas_to_brokers(sorted(racks.items()), 12, 3, fixed_start_index=0).values()]
    topo = topo_of(racks, {"t": parts})
    res = plan_drain_rack(topo, "c")
    tree = RackTree.build({b: r for b, r in racks.items() if r != "c"})
    for r in res.target.values():
        assert not set(r) & {4, 5}
        assert rack_violation(r, tree) is None  # RF 3 over 2 racks: 2 + 1
    small = topo_of({0: "a", 1: "b", 2: "c"}, {"t": [(0, 1, 2)]})
    with pytest.raises(BadInput) as e:
        plan_drain_rack(small, "c")
    assert "t-0" in " ".join(e.value.details)
    assert "racks a, b" in e.value.message


def test_rf3_with_two_alive_brokers_names_partitions_and_racks():
    topo = topo_of({0: "a", 1: "b", 2: "c"}, {"t": [(0, 1, 2), (1, 2, 0)]}, dead={2})
    with pytest.raises(BadInput) as e:
        plan_rebalance(topo)
    assert e.value.exit_code == 2
    assert "only 2 eligible brokers" in e.value.message and "racks a, b" in e.value.message
    assert e.value.details[:2] == ["t-0: replication factor 3", "t-1: replication factor 3"]


def test_dead_broker_replicas_are_replaced():
    racks = {b: f"r{b % 2}" for b in range(6)}
    topo = topo_of(racks, {"t": [(0, 1), (2, 3), (4, 5), (0, 3)]}, dead={0})
    res = plan_rebalance(topo)
    assert all(0 not in r for r in res.target.values())
    assert res.report["replicas_moved"] == 2


def test_set_replication_factor_up_and_down():
    racks = {b: f"r{b % 3}" for b in range(6)}
    topo = topo_of(racks, {"t": [(0, 1), (2, 3), (4, 5)], "u": [(0, 1)]})
    up = plan_set_replication_factor(topo, "t", 3)
    tree = RackTree.build(racks)
    for tp, r in up.target.items():
        assert tp[0] == "t" and len(r) == 3 and rack_violation(r, tree) is None
        assert set(up.before[tp]) <= set(r)  # existing replicas stay: only the new one is copied
    assert up.report["replicas_moved"] == 3 == up.report["lower_bound"]["moves_mandatory"]
    down = plan_set_replication_factor(topo, ["t"], 1)
    assert all(len(r) == 1 for r in down.target.values())
    assert down.report["replicas_moved"] == 0
    assert sorted(r[0] for r in down.target.values()) == sorted(set(r[0] for r in down.target.values()))


def test_move_topics_onto_broker_list():
    racks = {b: f"r{b % 3}" for b in range(9)}
    topo = topo_of(racks, {"t": [(0, 1, 2)] * 4, "u": [(0, 1, 2)] * 2})
    res = plan_move_topics(topo, ["t"], [3, 4, 5, 6, 7, 8])
    for tp, r in res.target.items():
        assert tp[0] == "t" and set(r) <= {3, 4, 5, 6, 7, 8}
    assert all(tp[0] == "t" for tp in res.changes)
    assert res.report["replicas_moved"] == 12


def test_unknown_inputs_are_bad_input():
    topo = topo_of({0: "a", 1: "b"}, {"t": [(0, 1)]})
    for goal in (
        Goal("decommission", brokers=(7,)),
        Goal("drain-rack", rack="zz"),
        Goal("set-replication-factor", topics=("nope",), replication_factor=2),
        Goal("set-replication-factor", topics=("t",), replication_factor=0),
        Goal("move-topics", topics=("t",), brokers=(9,)),
        Goal("bogus"),
    ):
        with pytest.raises(BadInput):
            plan(topo, goal)


def test_multi_level_racks_spread_over_data_centres():
    racks = {0: "/dc1/r1", 1: "/dc1/r2", 2: "/dc1/r1", 3: "/dc2/r1", 4: "/dc2/r2", 5: "/dc2/r1"}
    # all replicas in dc1: unsafe at the top level
    topo = topo_of(racks, {"t": [(0, 1), (1, 2), (0, 2)] * 2})
    res = plan_rebalance(topo)
    tree = RackTree.build(racks)
    assert res.report["rack_violations_before"] == 6
    assert res.report["rack_violations_after"] == 0
    for r in res.target.values():
        assert rack_violation(r, tree) is None
        assert {racks[b][:4] for b in r} == {"/dc1", "/dc2"}
    assert res.report["replicas_moved"] == 6 == res.report["lower_bound"]["moves"]


def test_bytes_mode_balances_bytes_and_reports_duration():
    racks = {b: None for b in range(4)}
    sizes = {"t": [1000, 1000, 10, 10, 500, 500, 20, 20]}
    topo = topo_of(racks, {"t": [(0,), (0,), (1,), (1,), (0,), (1,), (2,), (3,)]}, sizes=sizes)
    res = plan_rebalance(topo, throttle=100, goals="disk-usage,leaders,first-followers")
    rep = res.report
    assert rep["balance_by"] == "bytes"
    assert rep["balance"]["bytes_spread_after"] < rep["balance"]["bytes_spread_before"]
    assert rep["bytes_moved"] == sum(
        sizes["t"][tp[1]] for tp, r in res.changes.items() if set(r) != set(res.before[tp])
    )
    d = rep["duration"]
    assert d["seconds"] == round(rep["bytes_moved"] / 100, 1)
    assert d["seconds_parallel"] <= d["seconds"]


def test_bounded_plan_forces_progress_and_reports_incomplete():
    racks = {b: f"r{b % 2}" for b in range(8)}
    parts = [tuple(r) for r in assign_replicas_to_brokers(sorted(racks.items()), 16, 2, fixed_start_index=0).values()]
    topo = topo_of(racks, {"t": parts})
    res = plan_decommission(topo, [0], max_moves=1)
    assert res.report["replicas_moved"] == 1
    assert not res.complete and not res.report["bounded"]["complete"]
    # a partition with both replicas on removed brokers needs 2 moves at once: a budget of 1
    # still makes progress (force), so cron runs converge
    both = [tp for tp, r in res.before.items() if set(r) <= {0, 1}]
    assert both
    forced = plan_decommission(topo, [0, 1], max_moves=1)
    assert forced.report["replicas_moved"] == 2 and forced.report["bounded"]["forced_over_budget"]
    # max-moves 0: leadership only, no data
    zero = plan_decommission(topo, [0, 1], max_moves=0)
    assert zero.report["replicas_moved"] == 0 and not zero.complete


# -- leaders ------------------------------------------------------------------------------------
def test_balance_leaders_reorders_only_and_balances_first_followers():
    racks = {b: f"r{b % 3}" for b in range(6)}
    # every partition led by broker 0, first follower 1
    assignment = {("t", i): (0, 1, 2 + i % 4) for i in range(12)}
    out = balance_leaders(assignment)
    for tp, r in out.items():
        assert sorted(r) == sorted(assignment[tp])
    lead = slot_counts(out.values(), range(6), 0)
    assert max(lead.values()) - min(lead.values()) <= 2  # 12 partitions: 0,1 and 2..5 (3 each)
    # brokers 2..5 sit in 3 partitions each and lead 2 of them: at most 1 first-follower slot
    # each, so 0 and 1 take 4 each -- the best possible with leaders balanced
    fol = slot_counts(out.values(), range(6), 1)
    assert sorted(fol.values()) == [1, 1, 1, 1, 4, 4]
    assert balance_leaders(out) == out  # stable: nothing left to improve
    del racks


def test_balance_leaders_exact_on_full_replication():
    assignment = {("t", i): (0, 1, 2) for i in range(10)}
    out = balance_leaders(assignment)
    lead = slot_counts(out.values(), range(3), 0)
    fol = slot_counts(out.values(), range(3), 1)
    assert max(lead.values()) - min(lead.values()) <= 1
    assert max(fol.values()) - min(fol.values()) <= 1


# -- determinism across processes (hash seeds) ---------------------------------------------------
def test_output_is_identical_across_hash_seeds(tmp_path):
    racks = {b: f"rack-{b % 4}" for b in range(12)}
    parts = {f"topic-{c}": [tuple(r) for r in assign_replicas_to_brokers(sorted(racks.items()), 7, 3, fixed_start_index=k).values()] for k, c in enumerate("qwertyu")}
    topo = topo_of(racks, parts)
    f = tmp_path / "t.json"
    f.write_text(topo.to_json())
    code = (
        "import json,sys;from kops.model import Topology;from kops.placement.balancer import plan_decommission;"
        f"t=Topology.from_dict(json.load(open({str(f)!r})));r=plan_decommission(t,[5]);"
        "print(r.plan.to_json());print(json.dumps(r.report))"
    )
    outs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        outs.append(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert outs[0] == outs[1]


def test_balance_goes_through_a_broker_when_no_replica_can_move_directly():
    """Found by hypothesis (test_bounded_steps_are_safe_monotone_and_converge): broker 7 (rack
    r1) holds 5 replicas, broker 8 (r2) 3, every other 4, and no partition of 7 can take 8 rack-
    safely. One replica goes from 7 to another broker and one of that broker's on to 8."""
    reps = [(3, 4, 2, 6), (4, 3, 2, 1), (1, 8, 7, 3), (2, 5, 4, 6), (8, 7, 4, 3), (5, 2, 0, 7), (7, 1, 0, 8),
            (0, 6, 5, 1), (6, 0, 7, 5)]
    topo = Topology(brokers=tuple(Broker(b, rack=f"r{b % 3}") for b in range(9)),
                    topics=(Topic("t0", tuple(Partition("t0", p, r) for p, r in enumerate(reps))),))
    res = plan_rebalance(topo, compare_kafka=False)
    assert res.report["balance"]["replica_spread_before"] == 2
    assert res.report["balance"]["replica_spread_after"] == 0
    assert res.report["replicas_moved"] == 2 and res.report["rack_violations_after"] == 0
    # a bounded run of one move takes the two as its one step over budget
    step = plan_rebalance(topo, compare_kafka=False, max_moves=1)
    assert step.report["replicas_moved"] == 2 and step.report["bounded"]["forced_over_budget"]
